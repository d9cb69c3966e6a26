/**
 * The contract's types, taken from the official SDK's definitions (@anthropic-ai/sdk 1.14.0,
 * resources/beta). Import from here, never retype a shape the SDK defines.
 */
export type {
  BetaManagedAgentsAgent as Agent,
  AgentCreateParams,
  AgentUpdateParams,
  AgentListParams,
  BetaManagedAgentsAgentReference as AgentReference,
  BetaManagedAgentsExecutionIdentity as ExecutionIdentity,
  BetaManagedAgentsSessionThreadAgent as SessionThreadAgent,
} from '@anthropic-ai/sdk/resources/beta/agents/agents'
export type { BetaSkill as Skill } from '@anthropic-ai/sdk/resources/beta/skills/skills'
export type { BetaSkillVersion as SkillVersion } from '@anthropic-ai/sdk/resources/beta/skills/versions'
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
  BetaManagedAgentsMultiagent as Multiagent,
  BetaManagedAgentsSessionMultiagent as SessionMultiagent,
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
  BetaManagedAgentsMemoryStore as MemoryStore,
  BetaManagedAgentsDeletedMemoryStore as DeletedMemoryStore,
} from '@anthropic-ai/sdk/resources/beta/memory-stores/memory-stores'
export type {
  BetaManagedAgentsMemory as Memory,
  BetaManagedAgentsMemoryPrefix as MemoryPrefix,
  BetaManagedAgentsMemoryListItem as MemoryListItem,
  BetaManagedAgentsDeletedMemory as DeletedMemory,
} from '@anthropic-ai/sdk/resources/beta/memory-stores/memories'
export type {
  BetaManagedAgentsMemoryVersion as MemoryVersion,
  BetaManagedAgentsActor as MemoryActor,
  BetaManagedAgentsMemoryVersionOperation as MemoryVersionOperation,
} from '@anthropic-ai/sdk/resources/beta/memory-stores/memory-versions'
export type { BetaManagedAgentsMemoryStoreResource as MemoryStoreResource } from '@anthropic-ai/sdk/resources/beta/sessions/resources'
export type {
  BetaManagedAgentsCredential as Credential,
  CredentialCreateParams,
  CredentialUpdateParams,
} from '@anthropic-ai/sdk/resources/beta/vaults/credentials'

export type { BetaDream as Dream, BetaDreamStatus as DreamStatus, BetaDreamUsage as DreamUsage } from '@anthropic-ai/sdk/resources/beta/dreams'

export type {
  BetaManagedAgentsDeployment as Deployment,
  BetaManagedAgentsDeploymentPausedReason as DeploymentPausedReason,
  BetaManagedAgentsDeploymentPausedReasonErrorObject as DeploymentPausedReasonError,
  BetaManagedAgentsCronSchedule as DeploymentCronSchedule,
} from '@anthropic-ai/sdk/resources/beta/deployments'
export type {
  BetaManagedAgentsDeploymentRun as DeploymentRun,
  BetaManagedAgentsTriggerContext as DeploymentRunTrigger,
} from '@anthropic-ai/sdk/resources/beta/deployment-runs'

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

/** The sandbox backends as the app's banner shows them, and the default image. */
export interface SandboxStatusView {
  backends: { backend: string; ok: boolean; reason: string | null }[]
  /** Whether any backend can run a session. */
  usable: boolean
  docker: { ok: boolean; reason: string | null; image: string; image_present: boolean | null }
  /** What to do on this platform when Docker is down or missing (null when it works). */
  fix: string | null
  image_build: ImageBuildStatus
}

/** Settings as the API shows them: no secret, only whether the API key is set and where from. */
export interface CorralSettingsView {
  model: { base_url: string | null; compatibility_mode: boolean; default_model: string | null }
  sandbox_backend: 'auto' | 'docker' | 'vm' | 'bubblewrap'
  /** The user's entries of the advisor tier table (model id → tier), laid over the built-in one; {} when none. */
  advisor_tiers: Record<string, number>
  /** The largest file an upload (`POST /v1/files`) takes, in bytes: the user's setting or the default. */
  max_file_bytes: number
  /** The budget the desktop's new-session dialog starts with, or null (no default budget). */
  default_budget: { type: 'limit'; max_list_cost: { amount: string; currency: 'USD' } } | null
  /** How long a dream may run, in minutes from its creation: the user's setting or the default (60). */
  dream_time_limit_minutes: number
  api_key: { set: boolean; source: 'environment' | 'keychain' | null }
  /**
   * The endpoint in effect (ANTHROPIC_BASE_URL over the settings; null: Anthropic's), where it
   * comes from, the environment's URL (what an empty settings field means; null when unset) and
   * whether brains run (a key or a URL is set).
   */
  endpoint: { base_url: string | null; source: 'environment' | 'settings' | 'default'; environment_base_url: string | null; configured: boolean }
  /** The last Test connection of this engine (kept in memory), or null before the first. */
  model_check: ModelCheckView | null
  /** Whether the OS keychain answers; when it does not, what is missing and how to fix it. */
  keychain: { available: boolean; backend: string | null; problem: string | null }
}

/** One Test connection: the endpoint's status and error text (never the key), and where the key came from. */
export interface ModelCheckView {
  ok: boolean
  status: number | null
  message: string
  base_url: string
  model: string
  answered_model: string | null
  elapsed_ms: number
  key_source: 'environment' | 'keychain' | 'request' | 'none'
  checked_at: string
}
