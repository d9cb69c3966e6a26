/**
 * The contract's types, taken from the official SDK's definitions (@anthropic-ai/sdk 1.14.0,
 * resources/beta). Import from here, never retype a shape the SDK defines.
 */
export type {
  BetaManagedAgentsAgent as Agent,
  AgentCreateParams,
  AgentUpdateParams,
  AgentListParams,
} from '@anthropic-ai/sdk/resources/beta/agents/agents'
export type {
  BetaEnvironment as Environment,
  EnvironmentCreateParams,
  EnvironmentUpdateParams,
  EnvironmentListParams,
} from '@anthropic-ai/sdk/resources/beta/environments/environments'
export type {
  BetaManagedAgentsSession as Session,
  SessionCreateParams,
  SessionUpdateParams,
  SessionListParams,
  BetaManagedAgentsSessionUsage as SessionUsage,
} from '@anthropic-ai/sdk/resources/beta/sessions/sessions'
export type {
  BetaManagedAgentsSessionEvent as SessionEvent,
  BetaManagedAgentsSessionEventType as SessionEventType,
  BetaManagedAgentsEventParams as EventParams,
  EventListParams,
  EventSendParams,
} from '@anthropic-ai/sdk/resources/beta/sessions/events'
export type {
  BetaManagedAgentsVault as Vault,
  VaultCreateParams,
  VaultUpdateParams,
} from '@anthropic-ai/sdk/resources/beta/vaults/vaults'
export type {
  BetaManagedAgentsCredential as Credential,
  CredentialCreateParams,
  CredentialUpdateParams,
} from '@anthropic-ai/sdk/resources/beta/vaults/credentials'

// ---------- Corral additions ----------

/**
 * Where an environment's packages stand, as `GET /v1/corral/environments/{id}/packages` shows it (a Corral addition):
 * `none` (it lists none), `missing` (not installed yet: the next sandbox installs them),
 * `installing`, `ready` (cached), `failed` (the last install failed; the next try starts over).
 */
export type PackageState = 'none' | 'missing' | 'installing' | 'ready' | 'failed'

export interface PackageStatus {
  environment_id: string
  state: PackageState
  backend?: string
  /** "apt: jq; npm: left-pad" */
  summary?: string
  started_at?: string
  finished_at?: string
  /** The install's latest progress lines (at most 20). */
  progress: string[]
  /** Why the last install failed (the package manager's last lines). */
  error?: string
}

/** Where a build of the default sandbox image stands (the app's "Build the image" button). */
export interface ImageBuildStatus {
  state: 'idle' | 'building' | 'succeeded' | 'failed'
  /** The image being (or last) built. */
  image: string
  /** The build's last progress lines (at most 200), oldest first. */
  lines: string[]
  exit_code: number | null
  started_at: string | null
  finished_at: string | null
}

/**
 * A session's failing model requests (a Corral addition: `corral.model_error` on the session
 * object, a projection of its log; null when none): `retrying` while a failed model request is
 * being retried, `failed` when the last turn ended on `retries_exhausted`. `attempt` /
 * `max_attempts` are the last failed attempt of the episode and how many it may have.
 */
export interface SessionModelError {
  state: 'retrying' | 'failed'
  type: string
  message: string
  attempt: number | null
  max_attempts: number | null
}

/** Corral's additions on a session object, under `corral` (never a field the API defines). */
export interface SessionCorralFields {
  model_error: SessionModelError | null
}
