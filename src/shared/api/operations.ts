/**
 * The contract's operations as one table: the HTTP method and path of every Managed Agents API
 * operation the renderer uses. The renderer's HTTP client and the Electron IPC adapter both read
 * it, so the two transports can never disagree on what an operation is (DESIGN invariant 6).
 * Plain TypeScript: no node:, no DOM, no electron.
 */
import type { SessionEvent } from './types'

export type HttpMethod = 'GET' | 'POST' | 'DELETE'

export interface OperationSpec {
  method: HttpMethod
  /** Path with `:name` placeholders, filled from the call's path parameters. */
  path: string
  /** For GET operations: query keys that are arrays (sent as `key[]=v`). */
  arrayKeys?: readonly string[]
}

export const OPERATIONS = {
  'agents.list': { method: 'GET', path: '/v1/agents' },
  'agents.create': { method: 'POST', path: '/v1/agents' },
  'agents.retrieve': { method: 'GET', path: '/v1/agents/:id' },
  'agents.update': { method: 'POST', path: '/v1/agents/:id' },
  'agents.archive': { method: 'POST', path: '/v1/agents/:id/archive' },
  'agents.versions': { method: 'GET', path: '/v1/agents/:id/versions' },

  'environments.list': { method: 'GET', path: '/v1/environments' },
  'environments.create': { method: 'POST', path: '/v1/environments' },
  'environments.retrieve': { method: 'GET', path: '/v1/environments/:id' },
  'environments.update': { method: 'POST', path: '/v1/environments/:id' },
  'environments.archive': { method: 'POST', path: '/v1/environments/:id/archive' },
  'environments.delete': { method: 'DELETE', path: '/v1/environments/:id' },

  'sessions.list': { method: 'GET', path: '/v1/sessions', arrayKeys: ['statuses'] },
  'sessions.create': { method: 'POST', path: '/v1/sessions' },
  'sessions.retrieve': { method: 'GET', path: '/v1/sessions/:id' },
  'sessions.update': { method: 'POST', path: '/v1/sessions/:id' },
  'sessions.archive': { method: 'POST', path: '/v1/sessions/:id/archive' },
  'sessions.delete': { method: 'DELETE', path: '/v1/sessions/:id' },

  'events.list': { method: 'GET', path: '/v1/sessions/:id/events', arrayKeys: ['types'] },
  'events.send': { method: 'POST', path: '/v1/sessions/:id/events' },
  'threads.list': { method: 'GET', path: '/v1/sessions/:id/threads', arrayKeys: ['statuses'] },
  'threads.retrieve': { method: 'GET', path: '/v1/sessions/:id/threads/:threadId' },
  'threads.events': { method: 'GET', path: '/v1/sessions/:id/threads/:threadId/events', arrayKeys: ['types'] },
  'threads.archive': { method: 'POST', path: '/v1/sessions/:id/threads/:threadId/archive' },

  'deployments.list': { method: 'GET', path: '/v1/deployments' },
  'deployments.create': { method: 'POST', path: '/v1/deployments' },
  'deployments.retrieve': { method: 'GET', path: '/v1/deployments/:id' },
  'deployments.update': { method: 'POST', path: '/v1/deployments/:id' },
  'deployments.archive': { method: 'POST', path: '/v1/deployments/:id/archive' },
  'deployments.pause': { method: 'POST', path: '/v1/deployments/:id/pause' },
  'deployments.unpause': { method: 'POST', path: '/v1/deployments/:id/unpause' },
  'deployments.run': { method: 'POST', path: '/v1/deployments/:id/run' },
  'deploymentRuns.list': { method: 'GET', path: '/v1/deployment_runs' },
  'deploymentRuns.retrieve': { method: 'GET', path: '/v1/deployment_runs/:id' },

  'vaults.list': { method: 'GET', path: '/v1/vaults' },
  'vaults.create': { method: 'POST', path: '/v1/vaults' },
  'vaults.update': { method: 'POST', path: '/v1/vaults/:id' },
  'vaults.archive': { method: 'POST', path: '/v1/vaults/:id/archive' },
  'vaults.delete': { method: 'DELETE', path: '/v1/vaults/:id' },
  'credentials.list': { method: 'GET', path: '/v1/vaults/:id/credentials' },
  'credentials.create': { method: 'POST', path: '/v1/vaults/:id/credentials' },
  'credentials.update': { method: 'POST', path: '/v1/vaults/:id/credentials/:credentialId' },
  'credentials.archive': { method: 'POST', path: '/v1/vaults/:id/credentials/:credentialId/archive' },
  'credentials.delete': { method: 'DELETE', path: '/v1/vaults/:id/credentials/:credentialId' },
  'credentials.mcpOAuthValidate': { method: 'POST', path: '/v1/vaults/:id/credentials/:credentialId/mcp_oauth_validate' },

  'skills.list': { method: 'GET', path: '/v1/skills' },
  'skills.retrieve': { method: 'GET', path: '/v1/skills/:id' },
  'skills.delete': { method: 'DELETE', path: '/v1/skills/:id' },
  'skills.versions.list': { method: 'GET', path: '/v1/skills/:id/versions' },
  'skills.versions.delete': { method: 'DELETE', path: '/v1/skills/:id/versions/:versionId' },

  // Corral additions (not in the Managed Agents API): the app's settings and `corral doctor`.
  // The renderer treats a 404 as "this engine does not offer it yet".
  'settings.retrieve': { method: 'GET', path: '/v1/corral/settings' },
  'settings.update': { method: 'POST', path: '/v1/corral/settings' },
  'doctor.run': { method: 'GET', path: '/v1/corral/doctor' },
  'model.test': { method: 'POST', path: '/v1/corral/model/test' },
  'sandbox.retrieve': { method: 'GET', path: '/v1/corral/sandbox' },
  'sandbox.image.build': { method: 'POST', path: '/v1/corral/sandbox/image/build' },
  'sessions.sandbox': { method: 'GET', path: '/v1/corral/sessions/:id/sandbox' },
  'environments.packages.retrieve': { method: 'GET', path: '/v1/corral/environments/:id/packages' },
  'environments.packages.prepare': { method: 'POST', path: '/v1/corral/environments/:id/packages/prepare' },
  'environments.keys.list': { method: 'GET', path: '/v1/corral/environments/:id/keys' },
  'environments.keys.create': { method: 'POST', path: '/v1/corral/environments/:id/keys' },
  'environments.keys.revoke': { method: 'POST', path: '/v1/corral/environments/:id/keys/:keyId/revoke' },
  'environments.work.stats': { method: 'GET', path: '/v1/environments/:id/work/stats' },
  'changes.list': { method: 'GET', path: '/v1/corral/sessions/:id/changes' },
  'messages.search': { method: 'GET', path: '/v1/corral/search' },
  'changes.revert': { method: 'POST', path: '/v1/corral/sessions/:id/changes/revert' },
  'files.list': { method: 'GET', path: '/v1/corral/sessions/:id/files' },
  'files.read': { method: 'GET', path: '/v1/corral/sessions/:id/files/read' },
  // The skill uploads as JSON (base64 files): the API's own are multipart, which IPC cannot carry.
  'skills.upload': { method: 'POST', path: '/v1/corral/skills' },
  'skills.versions.upload': { method: 'POST', path: '/v1/corral/skills/:id/versions' },
  'webhooks.list': { method: 'GET', path: '/v1/organizations/webhooks' },
  'webhooks.create': { method: 'POST', path: '/v1/organizations/webhooks' },
  'webhooks.retrieve': { method: 'GET', path: '/v1/organizations/webhooks/:id' },
  'webhooks.update': { method: 'POST', path: '/v1/organizations/webhooks/:id' },
  'webhooks.delete': { method: 'DELETE', path: '/v1/organizations/webhooks/:id' },
  'webhooks.regenerateSigningSecret': { method: 'POST', path: '/v1/organizations/webhooks/:id/regenerate_signing_secret' },
  // Corral's own: an endpoint's recent deliveries (docs/webhooks.md)
  'webhooks.deliveries': { method: 'GET', path: '/v1/corral/webhooks/:id/deliveries' },
  'sessionResources.add': { method: 'POST', path: '/v1/sessions/:id/resources' },
  'sessionResources.list': { method: 'GET', path: '/v1/sessions/:id/resources' },

  'memoryStores.list': { method: 'GET', path: '/v1/memory_stores' },
  'memoryStores.retrieve': { method: 'GET', path: '/v1/memory_stores/:id' },
  'memories.list': { method: 'GET', path: '/v1/memory_stores/:id/memories' },
  'memories.create': { method: 'POST', path: '/v1/memory_stores/:id/memories' },
  'memories.retrieve': { method: 'GET', path: '/v1/memory_stores/:id/memories/:memoryId' },
  'memories.update': { method: 'POST', path: '/v1/memory_stores/:id/memories/:memoryId' },
  'memoryVersions.list': { method: 'GET', path: '/v1/memory_stores/:id/memory_versions' },
  'memoryVersions.retrieve': { method: 'GET', path: '/v1/memory_stores/:id/memory_versions/:versionId' },
  'memoryVersions.redact': { method: 'POST', path: '/v1/memory_stores/:id/memory_versions/:versionId/redact' },
  'dreams.list': { method: 'GET', path: '/v1/dreams', arrayKeys: ['statuses'] },
  'dreams.create': { method: 'POST', path: '/v1/dreams' },
  'dreams.retrieve': { method: 'GET', path: '/v1/dreams/:id' },
  'dreams.cancel': { method: 'POST', path: '/v1/dreams/:id/cancel' },
  'dreams.archive': { method: 'POST', path: '/v1/dreams/:id/archive' },
  /** The files API's list (`/v1/files`; `files.list` above is a session folder's listing). */
  'apiFiles.list': { method: 'GET', path: '/v1/files', arrayKeys: ['ids'] },
  /** A file's bytes as base64 JSON (Corral addition: the one download both transports can carry). */
  'apiFiles.read': { method: 'GET', path: '/v1/corral/files/:id/read' },
  /** A session's workflow runs, one run with its agents, a run's log lines (Corral additions: docs/workflows.md). */
  'workflowRuns.list': { method: 'GET', path: '/v1/corral/sessions/:id/workflow_runs' },
  'workflowRuns.retrieve': { method: 'GET', path: '/v1/corral/sessions/:id/workflow_runs/:runId' },
  'workflowRuns.logs': { method: 'GET', path: '/v1/corral/sessions/:id/workflow_runs/:runId/logs' },
} as const satisfies Record<string, OperationSpec>

export type OperationName = keyof typeof OPERATIONS

export const OPERATION_NAMES = Object.keys(OPERATIONS) as OperationName[]

export function isOperationName(v: unknown): v is OperationName {
  return typeof v === 'string' && Object.prototype.hasOwnProperty.call(OPERATIONS, v)
}

/** A path parameter is an API id: letters, digits and `_` only, so it can never change the path. */
export const PATH_PARAM_PATTERN = /^[A-Za-z0-9_]{1,128}$/

/**
 * The concrete path of an operation. Throws an Error naming the parameter when one is missing
 * or is not an id (so `../` or `?x=` can never be smuggled into a path).
 */
export function operationPath(op: OperationName, params: Readonly<Record<string, string>> = {}): string {
  return OPERATIONS[op].path.replace(/:([A-Za-z]+)/g, (_m, name: string) => {
    const v = params[name]
    if (v === undefined) throw new Error(`${op}: path parameter ${name} is required`)
    if (!PATH_PARAM_PATTERN.test(v)) throw new Error(`${op}: path parameter ${name} must be an id (letters, digits, _), got ${JSON.stringify(v)}`)
    return v
  })
}

export type QueryValue = string | number | boolean | null | undefined | readonly (string | number | boolean)[]

/**
 * A query string the way the official SDK writes it: arrays as `key[]=v`, undefined/null
 * skipped. Returns '' or a string starting with '?'.
 */
export function toQueryString(query: Readonly<Record<string, QueryValue>> | undefined): string {
  if (!query) return ''
  const sp = new URLSearchParams()
  for (const [k, v] of Object.entries(query)) {
    if (v === undefined || v === null) continue
    if (Array.isArray(v)) for (const item of v) sp.append(`${k}[]`, String(item))
    else sp.append(k, String(v))
  }
  const s = sp.toString()
  return s ? `?${s}` : ''
}

// ---------- the Electron IPC surface (preload ⇄ main) ----------

/** IPC channel names. The preload exposes exactly these operations, nothing more. */
export const IPC_CHANNELS = {
  /** invoke(op, pathParams, payload) → IpcResult */
  call: 'corral:call',
  /** invoke(StreamSubscribeParams) → IpcResult<{ subscription: string }> */
  subscribe: 'corral:subscribe',
  /** invoke(subscriptionId) */
  unsubscribe: 'corral:unsubscribe',
  /** main → renderer: (subscriptionId, StreamMessage) */
  streamMessage: 'corral:stream',
  /** invoke() → { version, platform } */
  info: 'corral:info',
  /** invoke() → IpcResult<string | null>: a folder the person chose in the system's dialog (desktop only) */
  pickFolder: 'corral:pick-folder',
  /** invoke({ name, type, bytes }) → IpcResult<file metadata>: one file to the files API (POST /v1/files) */
  uploadFile: 'corral:upload-file',
} as const

export interface ApiErrorBody {
  type: string
  message: string
}

/** What an IPC call answers: the data, or the API's error (the same type and message HTTP would give). */
export type IpcResult<T = unknown> = { ok: true; data: T } | { ok: false; status: number; error: ApiErrorBody }

export interface StreamSubscribeParams {
  sessionId: string
  /**
   * A thread's stream (its `sthr_` id), as `GET …/threads/{tid}/stream` shows it: a child's full
   * activity. Default: the session's stream (the primary's events and its children's
   * primary-visible ones, isPrimaryVisible).
   */
  thread?: string
  /** Resume after this seq (0 = from the beginning); default: only events appended from now on. */
  after?: number
  /** Also deliver never-stored `event_start` / `event_delta` previews of agent.message, agent.thinking and (Corral) a running tool call's agent.tool_result output. */
  previews?: boolean
}

/** One message on a live session stream: a stored event with its seq, or a preview. */
export type StreamMessage =
  | { kind: 'event'; seq: number; event: SessionEvent }
  | { kind: 'preview'; preview: { type: 'event_start' | 'event_delta'; [field: string]: unknown } }
