/**
 * The Webhooks section's form, as pure functions (features/settings/WebhooksSection.tsx): the URL
 * checked before it is sent (the API checks it again and names what is wrong), and the event
 * types Corral sends, grouped and labelled for people (docs/webhooks.md).
 */
import { SENT_WEBHOOK_EVENTS, type WebhookEventType } from '../../../../shared/api/webhooks'

/** An endpoint's URL as typed: the trimmed URL, or what is wrong with it. */
export function parseWebhookUrl(text: string): { url: string } | { error: string } {
  const t = text.trim()
  if (!t) return { error: 'Type the URL your program listens on, e.g. http://127.0.0.1:8787/hooks.' }
  const shown = t.length > 60 ? `${t.slice(0, 60)}…` : t
  const withScheme = /^https?:\/\//i.test(t)
  let u: URL
  try {
    u = new URL(t)
  } catch {
    return {
      error: withScheme
        ? `${shown} is not a URL: after ${t.slice(0, t.indexOf('//') + 2)} comes a host name without spaces, e.g. 127.0.0.1:8787 or hooks.example.com.`
        : `${shown} is not a whole URL: start it with http:// or https://.`,
    }
  }
  // "localhost:8787/hooks" parses, with "localhost" as its scheme: it is a URL without one
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(t) && u.protocol !== 'http:' && u.protocol !== 'https:') return { error: `${shown} is not a whole URL: start it with http:// or https://.` }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return { error: `Webhooks go over http or https, not ${u.protocol.replace(/:$/, '')}.` }
  if (u.username || u.password) return { error: 'Leave the user name and password out of the URL: your program checks the signature instead.' }
  if (t.length > 2048) return { error: 'The URL is longer than 2048 characters.' }
  return { url: t }
}

/** What a person picks for a new endpoint unless they change it: "tell me when my agent stops or needs me". */
export const DEFAULT_WEBHOOK_EVENTS: readonly WebhookEventType[] = ['session.status_idled', 'session.requires_action', 'session.status_terminated']

const LABELS: Record<(typeof SENT_WEBHOOK_EVENTS)[number], string> = {
  'session.created': 'created',
  'session.running': 'running (status)',
  'session.idled': 'idle (status)',
  'session.requires_action': 'needs you (a confirmation or a tool result)',
  'session.budget_reached': 'stopped at its budget',
  'session.updated': 'changed (title, metadata, budget, tools)',
  'session.archived': 'archived',
  'session.deleted': 'deleted',
  'session.status_run_started': 'starts running',
  'session.status_idled': 'goes idle',
  'session.status_rescheduled': 'retries a failed model request',
  'session.status_terminated': 'ends for good',
  'session.thread_created': 'a subagent thread starts',
  'session.thread_idled': 'a subagent thread goes idle',
  'session.thread_terminated': 'a subagent thread ends',
  'session.outcome_evaluation_ended': 'an outcome was graded',
  'agent.created': 'created',
  'agent.updated': 'new version',
  'agent.archived': 'archived',
  'environment.created': 'created',
  'environment.updated': 'changed',
  'environment.archived': 'archived',
  'environment.deleted': 'deleted',
  'memory_store.created': 'created',
  'memory_store.archived': 'archived',
  'memory_store.deleted': 'deleted',
  'vault.created': 'vault created',
  'vault.archived': 'vault archived',
  'vault.deleted': 'vault deleted',
  'vault_credential.created': 'credential added',
  'vault_credential.archived': 'credential archived',
  'vault_credential.deleted': 'credential deleted',
  'vault_credential.refresh_failed': 'a credential could not be refreshed (sign in again)',
  'deployment.created': 'created',
  'deployment.updated': 'changed',
  'deployment.archived': 'archived',
  'deployment.paused': 'paused',
  'deployment.unpaused': 'unpaused',
  'deployment_run.started': 'a run starts',
  'deployment_run.succeeded': 'a run started its session',
  'deployment_run.failed': 'a run failed',
}

/** A type's label ("goes idle"), or the type itself for one Corral does not send. */
export function webhookEventLabel(type: string): string {
  return (LABELS as Record<string, string>)[type] ?? type
}

export interface WebhookEventGroup {
  title: string
  types: WebhookEventType[]
}

/** The types Corral sends, by what they are about, in the order of SENT_WEBHOOK_EVENTS. */
export function webhookEventGroups(): WebhookEventGroup[] {
  const groups: [string, (t: string) => boolean][] = [
    ['Sessions', (t) => t.startsWith('session.') && !t.startsWith('session.thread_')],
    ['Subagent threads', (t) => t.startsWith('session.thread_')],
    ['Agents', (t) => t.startsWith('agent.')],
    ['Environments', (t) => t.startsWith('environment.')],
    ['Memory stores', (t) => t.startsWith('memory_store.')],
    ['Vaults', (t) => t.startsWith('vault')],
    ['Schedules (deployments)', (t) => t.startsWith('deployment')],
  ]
  return groups.map(([title, test]) => ({ title, types: SENT_WEBHOOK_EVENTS.filter(test) }))
}

/** The endpoint's event types as a short phrase for its row ("goes idle, needs you … and 2 more"). */
export function webhookEventsSummary(types: readonly string[], shown = 3): string {
  const labels = types.map((t) => `${t.split('.')[0].replace('_', ' ')}: ${webhookEventLabel(t)}`)
  return labels.length <= shown ? labels.join(', ') : `${labels.slice(0, shown).join(', ')} and ${labels.length - shown} more`
}

/**
 * When a pending delivery is tried next, for its row: "retry in 40s", "retry in 5m", "retry in 2h",
 * or "retry due" once that time has come (the delivery loop takes it on its next pass).
 * (relativeTime reads only the past: a time ahead of now would say "just now".)
 */
export function retryText(nextAttemptAt: string, now = Date.now()): string {
  const s = Math.round((Date.parse(nextAttemptAt) - now) / 1000)
  if (Number.isNaN(s)) return ''
  if (s <= 0) return 'retry due'
  if (s < 60) return `retry in ${s}s`
  const m = Math.round(s / 60)
  if (m < 60) return `retry in ${m}m`
  return `retry in ${Math.round(m / 60)}h`
}
