/**
 * Webhooks (spec resources.md §12; docs/webhooks.md): the endpoints Corral posts events to, and
 * what it posts. The hosted API configures session-event endpoints in the Console, which has no
 * SDK route; Corral has no Console, so the SDK's organization endpoints
 * (`client.beta.organization.webhooks`, `/v1/organizations/webhooks`) are where a local endpoint is
 * made, and they may take every event type of the SDK's BetaWebhookEventData (docs/webhooks.md).
 * Deliveries are signed as Standard Webhooks; `client.beta.webhooks.unwrap` verifies them.
 */
import type { BetaWebhookEvent, BetaWebhookEventData } from '@anthropic-ai/sdk/resources/beta/webhooks'
import type { BetaOrganizationWebhookEndpoint } from '@anthropic-ai/sdk/resources/beta/organization/webhooks'

export type WebhookEventType = BetaWebhookEventData['type']
export type WebhookPayload = BetaWebhookEvent

/** The endpoint as the API answers it (enabled_events widened to every type Corral takes). */
export type WebhookEndpoint = Omit<BetaOrganizationWebhookEndpoint, 'enabled_events'> & { enabled_events: WebhookEventType[] }
export type NewWebhookEndpoint = WebhookEndpoint & { signing_secret: string }

/** Event types Corral sends: each is derived from a session's log (webhookTypesOf) or from a session's archive and deletion. */
export const SENT_WEBHOOK_EVENTS = [
  'session.created',
  'session.running',
  'session.idled',
  'session.requires_action',
  'session.budget_reached',
  'session.updated',
  'session.archived',
  'session.deleted',
  'session.status_run_started',
  'session.status_idled',
  'session.status_rescheduled',
  'session.status_terminated',
  'session.thread_created',
  'session.thread_idled',
  'session.thread_terminated',
  'session.outcome_evaluation_ended',
  'agent.created',
  'agent.updated',
  'agent.archived',
  'environment.created',
  'environment.updated',
  'environment.archived',
  'environment.deleted',
  'memory_store.created',
  'memory_store.archived',
  'memory_store.deleted',
  'vault.created',
  'vault.archived',
  'vault.deleted',
  'vault_credential.created',
  'vault_credential.archived',
  'vault_credential.deleted',
  'deployment.created',
  'deployment.updated',
  'deployment.archived',
  'deployment.paused',
  'deployment.unpaused',
  'deployment_run.started',
  'deployment_run.succeeded',
  'deployment_run.failed',
  'vault_credential.refresh_failed',
] as const satisfies readonly WebhookEventType[]

/** Every type of the SDK's BetaWebhookEventData: an endpoint may list any (those Corral never sends just never arrive). */
export const WEBHOOK_EVENT_TYPES = [
  ...SENT_WEBHOOK_EVENTS,
  'session.pending',
  'agent.deleted',
  'deployment.deleted',
  'external_key.failed',
  'external_key.recovered',
  'external_storage.failed',
  'external_storage.recovered',
  'user_profile.enforcement_action_opened',
  'user_profile.enforcement_action_resolved',
  'user_profile.program_status_updated',
] as const satisfies readonly WebhookEventType[]

// every type of the SDK's union is listed (a type the SDK adds fails the build here)
type Unlisted = Exclude<WebhookEventType, (typeof WEBHOOK_EVENT_TYPES)[number]>
const _allListed: Unlisted extends never ? true : Unlisted = true
void _allListed

/** Endpoints at most (the hosted API's limit for organization endpoints). */
export const MAX_WEBHOOK_ENDPOINTS = 32
/** The beta the SDK sends on these routes (Corral accepts the routes with or without it). */
export const WEBHOOKS_BETA = 'webhooks-2026-10-07'
/** What the payload names as organization and workspace: Corral is one local workspace. */
export const LOCAL_ORGANIZATION_ID = 'local'
export const LOCAL_WORKSPACE_ID = 'local'

/**
 * The waits before each retry of a delivery that failed (no answer, or not 2xx): then the delivery
 * is given up (`failed`). About a day and a half in all, so a receiver that was down overnight
 * still gets what it missed.
 */
export const WEBHOOK_RETRY_DELAYS_MS = [5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 7_200_000, 14_400_000, 28_800_000, 43_200_000, 86_400_000] as const
/** A delivery's request gives up after this long without a whole answer. */
export const WEBHOOK_TIMEOUT_MS = 15_000

/** One delivery of an event to an endpoint, as Corral's `/v1/corral/webhooks/{id}/deliveries` lists it. */
export interface WebhookDelivery {
  /** The event's id (the payload's `id` and the `webhook-id` header). */
  id: string
  event_type: WebhookEventType
  /** The session (or other resource) the event is about. */
  resource_id: string
  created_at: string
  status: 'pending' | 'delivered' | 'failed'
  attempts: number
  /** When the next attempt is due (pending ones), RFC 3339. */
  next_attempt_at: string | null
  delivered_at: string | null
  /** The last attempt's HTTP status, or null when it got no answer. */
  last_status: number | null
  /** Why the last attempt failed ("connection refused", "answered 500: …"), or null. */
  last_error: string | null
}

/**
 * The webhook types a session's log event stands for (none for most events). Session-level status
 * events only: a child thread's own status is `session.thread_status_*`, which becomes
 * `session.thread_idled` / `session.thread_terminated` with its thread's id.
 */
export function webhookTypesOf(event: { type: string; stop_reason?: unknown }): WebhookEventType[] {
  switch (event.type) {
    case 'session.status_running':
      return ['session.status_run_started', 'session.running']
    case 'session.status_idle': {
      const why = (event.stop_reason as { type?: unknown } | null | undefined)?.type
      const also: WebhookEventType[] = why === 'requires_action' ? ['session.requires_action'] : why === 'budget_reached' ? ['session.budget_reached'] : []
      return ['session.status_idled', 'session.idled', ...also]
    }
    case 'session.status_rescheduled':
      return ['session.status_rescheduled']
    case 'session.status_terminated':
      return ['session.status_terminated']
    case 'session.thread_created':
      return ['session.thread_created']
    case 'session.thread_status_idle':
      return ['session.thread_idled']
    case 'session.thread_status_terminated':
      return ['session.thread_terminated']
    case 'span.outcome_evaluation_end':
      return ['session.outcome_evaluation_ended']
    case 'session.updated':
      return ['session.updated']
    default:
      return []
  }
}

/** Log event types webhookTypesOf maps (a cheap test before it). */
export const WEBHOOK_SOURCE_EVENTS: ReadonlySet<string> = new Set([
  'session.status_running',
  'session.status_idle',
  'session.status_rescheduled',
  'session.status_terminated',
  'session.thread_created',
  'session.thread_status_idle',
  'session.thread_status_terminated',
  'span.outcome_evaluation_end',
  'session.updated',
])
