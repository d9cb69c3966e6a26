import { z } from 'zod'
import { CorralError } from '../../shared/errors'

/**
 * Corral's optional additions to an environment's `config`, under `config.corral`. They never
 * change a shared field's meaning: a `cloud` config the official SDK sends runs on the default
 * local backend with these defaults.
 */
export const CorralSandboxConfigSchema = z
  .object({
    /** Which backend runs the environment's sandboxes; default (or `auto`): docker where an engine answers, else bubblewrap. */
    backend: z.enum(['docker', 'bubblewrap', 'auto']).optional(),
    /** A Docker image to use instead of the default corral-sandbox image (it must contain node and the runner's tools). */
    image: z.string().min(1).optional(),
    /** Docker runtime, e.g. `runsc` for gVisor. */
    runtime: z.string().regex(/^[A-Za-z0-9_.-]+$/, 'a runtime name (letters, digits, _ . -)').optional(),
    memory_mb: z.number().int().min(32).max(1024 * 1024).optional(),
    cpus: z.number().positive().max(1024).optional(),
    pids: z.number().int().min(16).max(1_000_000).optional(),
    /** Warm containers kept ready for this environment (0 turns the pool off). */
    pool_size: z.number().int().min(0).max(16).optional(),
    /** The API schema's name for pool_size (src/shared/api/schemas.ts corralSandboxSchema); pool_size wins when both are given. */
    warm_pool: z.number().int().min(0).max(16).optional(),
    /** Cap on one tool result's text, in bytes; longer output is truncated and saved in the sandbox. */
    output_cap_bytes: z.number().int().min(1024).max(64 * 1024 * 1024).optional(),
    /** Default timeout of a bash call, in ms. */
    bash_timeout_ms: z.number().int().min(100).max(3_600_000).optional(),
    /** Absolute in-sandbox directories besides /workspace that file tools may use (e.g. /tmp). */
    extra_roots: z.array(z.string().regex(/^\/[^\0:]*$/, 'an absolute path without ":"')).max(16).optional(),
  })
  .strict()

export type CorralSandboxConfig = z.infer<typeof CorralSandboxConfigSchema>

/** Everything a backend needs to build one sandbox, defaults applied. */
export interface SandboxSettings {
  backend?: 'docker' | 'bubblewrap'
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

/** The runner's environment variables for these settings. */
export function runnerEnv(s: SandboxSettings): Record<string, string> {
  return {
    CORRAL_WORKSPACE: WORKSPACE,
    CORRAL_ROOTS: s.extraRoots.join(':'),
    CORRAL_OUTPUT_CAP: String(s.outputCapBytes),
    CORRAL_BASH_TIMEOUT_MS: String(s.bashTimeoutMs),
  }
}
