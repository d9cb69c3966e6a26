import { z } from 'zod'
import { corralSandboxSchema } from '../../shared/api/schemas'
import { CorralError } from '../../shared/errors'
import { SKILLS_DIR } from '../../shared/api/skills'
import { MEMORY_DIR } from '../../shared/api/memory-schemas'

/**
 * Corral's optional additions to an environment's `config`, under `config.corral`. They never
 * change a shared field's meaning: a `cloud` config the official SDK sends runs on the default
 * local backend with these defaults. One definition, the API boundary's, serves both.
 */
export const CorralSandboxConfigSchema = corralSandboxSchema

export type CorralSandboxConfig = z.infer<typeof CorralSandboxConfigSchema>

/** Everything a backend needs to build one sandbox, defaults applied. */
export interface SandboxSettings {
  backend?: 'docker' | 'vm' | 'bubblewrap'
  image?: string
  runtime?: string
  memoryMb: number
  cpus: number
  pids: number
  poolSize: number
  outputCapBytes: number
  bashTimeoutMs: number
  extraRoots: string[]
  /** The API's `networking.type`; sandboxes get no network until the egress proxy exists (vault issue). */
  networking: string
}

export const SANDBOX_DEFAULTS = {
  memoryMb: 2048,
  cpus: 2,
  pids: 512,
  poolSize: 1,
  outputCapBytes: 256 * 1024,
  bashTimeoutMs: 120_000,
} as const

/** In-sandbox roots every sandbox has: the workspace volume and the session's resource mounts. */
export const WORKSPACE = '/workspace'
export const SESSION_MOUNT = '/mnt/session'
/**
 * Where the session's own workspace (the runner's `.corral` bookkeeping) goes when a host folder
 * is mounted at /workspace itself: out of the user's folder, and out of the file tools' roots.
 */
export const STATE_MOUNT = '/opt/corral/state'

/**
 * Reads an environment `config` (as stored) into SandboxSettings.
 * Throws CorralError invalid_request_error naming the field when `config.corral` breaks a rule.
 */
export function sandboxSettings(config: Record<string, unknown> | undefined): SandboxSettings {
  const raw = (config ?? {}).corral
  const parsed = CorralSandboxConfigSchema.safeParse(raw ?? {})
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    throw new CorralError('invalid_request_error', `config.corral.${issue.path.join('.') || '(root)'}: ${issue.message}`, { cause: parsed.error })
  }
  const c = parsed.data
  const networking = (config?.networking as { type?: unknown } | undefined)?.type
  return {
    backend: c.backend === 'auto' ? undefined : c.backend,
    image: c.image,
    runtime: c.runtime,
    memoryMb: c.memory_mb ?? SANDBOX_DEFAULTS.memoryMb,
    cpus: c.cpus ?? SANDBOX_DEFAULTS.cpus,
    pids: c.pids ?? SANDBOX_DEFAULTS.pids,
    poolSize: c.pool_size ?? c.warm_pool ?? SANDBOX_DEFAULTS.poolSize,
    outputCapBytes: c.output_cap_bytes ?? SANDBOX_DEFAULTS.outputCapBytes,
    bashTimeoutMs: c.bash_timeout_ms ?? SANDBOX_DEFAULTS.bashTimeoutMs,
    extraRoots: [SESSION_MOUNT, ...(c.extra_roots ?? []).filter((r) => r !== SESSION_MOUNT && r !== WORKSPACE)],
    networking: typeof networking === 'string' ? networking : 'none',
  }
}

/**
 * The runner's environment variables for these settings. `stateDir`: where the runner keeps its
 * call records when the workspace is a host folder (default: /workspace/.corral).
 */
export function runnerEnv(s: SandboxSettings, stateDir?: string): Record<string, string> {
  return {
    CORRAL_WORKSPACE: WORKSPACE,
    ...(stateDir ? { CORRAL_STATE_DIR: stateDir } : {}),
    // the skills and memory folders are roots of the file tools (read, write, edit, glob, grep)
    // wherever they are bound (a read-only bind still refuses writes)
    CORRAL_ROOTS: [...s.extraRoots, SKILLS_DIR, MEMORY_DIR].join(':'),
    CORRAL_OUTPUT_CAP: String(s.outputCapBytes),
    CORRAL_BASH_TIMEOUT_MS: String(s.bashTimeoutMs),
  }
}
