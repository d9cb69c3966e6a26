import type { ChangesRevertParams, ChangesRevertResponse, SessionChangesResponse, WorkspaceListing } from '../../shared/api/workspace'
import type { CorralSettingsView, ModelCheckView, PackageStatus, SandboxStatusView } from '../../shared/api/types'
import type { NewWebhookEndpoint, WebhookDelivery, WebhookEndpoint } from '../../shared/api/webhooks'
import type { WebhookEndpointCreateInput, WebhookEndpointUpdateInput, WebhookListParams } from '../session/webhook-store'
export type { CorralSettingsView, ModelCheckView, SandboxStatusView } from '../../shared/api/types'
import type { AgentStore } from '../session/agent-store'
import type { EnvironmentStore } from '../session/environment-store'
import type { SessionStore } from '../session/session-store'
import type { EventLog } from '../session/event-log'
import type { MessageSearchHit, MessageSearchParams } from '../session/message-search'
import type { VaultStore } from '../session/vault-store'
import type { BetaManagedAgentsCredentialValidation } from '@anthropic-ai/sdk/resources/beta/vaults/credentials'
import type { ThreadStore } from '../session/thread-store'
import type { MemoryStore } from '../session/memory-store'
import type { FileStore } from '../session/file-store'
import type { SkillStore } from '../session/skill-store'
import type { SessionResourceStore } from '../session/session-resources'
import type { WorkStore } from '../session/work-store'
import type { DeploymentStore } from '../session/deployment-store'
import type { DreamStore } from '../session/dream-store'
import type { WorkflowStore } from '../session/workflow-store'

/**
 * What the transports (HTTP, IPC, CLI) reach: the same service methods for all of them.
 * Built by the composition root (src/main/engine.ts).
 */
export interface ApiServices {
  log: EventLog
  agents: AgentStore
  environments: EnvironmentStore
  sessions: SessionStore
  /** Session threads, derived from the log. */
  threads: ThreadStore
  /** Vaults and credentials (metadata; secrets go to its SecretSink). */
  vaults: VaultStore
  /**
   * `credentials.mcpOAuthValidate`: probes an mcp_oauth credential against its MCP server with the
   * secrets the keychain holds (hands/mcp/client.ts). Absent in an engine without a keychain, which
   * keeps no secret to probe with.
   */
  validateMcpOAuth?: (vaultId: string, credentialId: string) => Promise<BetaManagedAgentsCredentialValidation>
  /** Memory stores, memories and their versions (`/v1/memory_stores`). */
  memory: MemoryStore
  /** Messages whose text contains a query, across sessions, newest first (`/v1/corral/search`). */
  searchMessages(params: MessageSearchParams): { data: MessageSearchHit[]; next_page: string | null }
  /** The work queues of self_hosted environments, environment keys, sessions tokens (spec resources.md §2–§3). */
  work?: WorkStore
  /** A live session's resources (`/v1/sessions/{id}/resources`). */
  sessionResources?: SessionResourceStore
  /** Deployments and their runs (`/v1/deployments`, `/v1/deployment_runs`). */
  deployments: DeploymentStore
  /** Dreams (`/v1/dreams`); absent in engines built without them (answered 404 naming that). */
  dreams?: DreamStore
  /** Files (`/v1/files`) and the user's upload cap; absent in engines opened without a data directory. */
  files?: { store: FileStore; maxBytes(): number }
  /** Skills and their versions (`/v1/skills`); absent in engines opened without a data directory. */
  skills?: SkillStore
  /** The workflow runs' journal (their agents' answers, their log lines): Corral's `/v1/corral/sessions/{id}/workflow_runs` routes. */
  workflows?: WorkflowStore
  /** Webhook endpoints and their deliveries (`/v1/organizations/webhooks`); absent without a keychain. */
  webhooks?: WebhookServices
  /** Preview (`event_start` / `event_delta`) events: streamed to subscribers, never stored. */
  previews: PreviewBus
  /** Corral's own operations (settings, doctor); absent in engines built without them. */
  admin?: AdminServices
  /** A session's host folders: changes, revert, file browser (Corral additions); absent without local hands. */
  workspace?: WorkspaceServices
  /**
   * Checks an environment's `config.corral.image` on save: the problem (the image is not in
   * the local Docker engine), or undefined. Absent: not checked (no local hands).
   */
  checkImage?: (image: string) => Promise<string | undefined>
}

/** What the webhook routes reach (orchestrator/webhooks.ts WebhookService). */
export interface WebhookServices {
  create(input: WebhookEndpointCreateInput): Promise<NewWebhookEndpoint>
  retrieve(id: string): WebhookEndpoint
  list(params: WebhookListParams): { data: WebhookEndpoint[]; has_more: boolean; first_id: string | null; last_id: string | null }
  update(id: string, input: WebhookEndpointUpdateInput): WebhookEndpoint
  delete(id: string): Promise<{ id: string; type: 'webhook_endpoint_deleted' }>
  regenerateSigningSecret(id: string): Promise<{ signing_secret: string }>
  deliveries(id: string, params: { limit?: number }): { data: WebhookDelivery[] }
}

/** What `/v1/corral/sessions/{id}/changes` and `/files` answer (hands/changes/session-changes.ts). */
export interface WorkspaceServices {
  list(sessionId: string): Promise<SessionChangesResponse>
  revert(sessionId: string, params: ChangesRevertParams): Promise<ChangesRevertResponse>
  listFiles(sessionId: string, path?: string): Promise<WorkspaceListing>
  /** The host path of a file inside a mounted folder (checked to resolve inside it), for download. */
  filePath(sessionId: string, path: string): Promise<{ host: string; name: string }>
}




/** Corral additions beyond the Managed Agents API (`/v1/corral/*`). */
export interface AdminServices {
  getSettings(): Promise<CorralSettingsView>
  updateSettings(input: import('zod').infer<typeof import('../../shared/api/schemas').corralSettingsUpdateSchema>): Promise<CorralSettingsView>
  doctor(): Promise<{ area: string; ok: boolean; detail: string }[]>
  /** Test connection: one real minimal model request with the given (or saved) endpoint and key. */
  testModel(input: import('zod').infer<typeof import('../../shared/api/schemas').corralModelTestSchema>): Promise<ModelCheckView>
  /** The sandbox backends, the default image and its build; absent when this engine has no local hands. */
  sandbox?: {
    status(): Promise<SandboxStatusView>
    /** Starts building the default image (202); the status's image_build shows progress. */
    buildImage(): Promise<SandboxStatusView>
    /** The backend a session's sandbox runs on, once it has one. */
    sessionBackend(sessionId: string): Promise<{ backend: string; runtime: string | null; label: string } | null>
  }
  /** An environment's packages on the local sandboxes; absent when this engine has no local hands. */
  packages?: {
    status(environmentId: string): Promise<PackageStatus>
    prepare(environmentId: string): Promise<PackageStatus>
  }
}

/** A stream-only preview of an event being generated (never stored). */
export interface PreviewEvent {
  type: 'event_start' | 'event_delta'
  [field: string]: unknown
}

/** Fan-out of preview events per session, for SSE subscribers that opted in. */
export class PreviewBus {
  private readonly listeners = new Map<string, Set<(e: PreviewEvent) => void>>()

  publish(sessionId: string, event: PreviewEvent): void {
    const set = this.listeners.get(sessionId)
    if (!set) return
    for (const l of [...set]) {
      try {
        l(event)
      } catch (err) {
        // A subscriber's failure is its own: the publisher (the harness mid-stream) and the
        // other subscribers carry on.
        console.error('[corral] preview subscriber threw:', err)
      }
    }
  }

  subscribe(sessionId: string, listener: (e: PreviewEvent) => void): () => void {
    let set = this.listeners.get(sessionId)
    if (!set) this.listeners.set(sessionId, (set = new Set()))
    set.add(listener)
    return () => {
      set.delete(listener)
      if (set.size === 0) this.listeners.delete(sessionId)
    }
  }
}
