import { createHash } from 'node:crypto'
import { mkdirSync } from 'node:fs'
import { hostname } from 'node:os'
import { join, resolve } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { ToolError } from '@anthropic-ai/sdk/lib/tools/ToolError'
import type { BetaRunnableTool } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool'
import { BubblewrapSandboxProvider, DockerSandboxProvider, parseToolsetInput, TOOLSET_DEFINITIONS, VmSandboxProvider, type Sandbox, type SandboxProvider } from '../hands'
import { WORKER_TOOLSET } from '../../shared/api/worker-toolset'

/**
 * `corral worker`: hands on another machine. It runs the official SDK's EnvironmentWorker
 * against a Corral (or the hosted service) — polling the environment's queue with its key, the
 * lease, the session's event stream, one answer per call — and executes each session's toolset
 * calls in a Corral sandbox of this machine (one per session: the hardened Docker, bubblewrap or
 * QEMU VM hands, no network, nothing secret inside). The worker only dials out; the engine never needs to
 * reach it. SIGTERM or SIGINT stops it cleanly: running items are stopped and their sandboxes
 * released.
 */
export interface CorralWorkerOptions {
  /** The Corral (or API) base URL, e.g. http://127.0.0.1:4610. */
  url: string
  environmentId: string
  /** The environment key (from `corral worker`'s --key-file; never the API token). */
  environmentKey: string
  backend: WorkerBackend
  /** Where this worker keeps its sandboxes' workspaces (bubblewrap, vm: its templates too) and names its Docker scope. */
  dataDir: string
  /** Progress lines (each claimed session, each call, each end). */
  log: (line: string) => void
  signal: AbortSignal
  /** A worker id for `workers_polling` (default: host name + pid). */
  workerId?: string
  /** How long a session runner waits after an end_turn idle before it lets the item go (SDK default 60 s). */
  maxIdleMs?: number
}

/** The sandbox backends a worker runs its sessions in. */
export const WORKER_BACKENDS = ['docker', 'bubblewrap', 'vm'] as const
export type WorkerBackend = (typeof WORKER_BACKENDS)[number]

function providerFor(o: CorralWorkerOptions): SandboxProvider {
  if (o.backend === 'docker') {
    const scope = 'w' + createHash('sha256').update(resolve(o.dataDir)).digest('hex').slice(0, 16)
    return new DockerSandboxProvider({ scope, log: o.log })
  }
  // a VM per session, restored from this worker's template (booted once, on its first session)
  if (o.backend === 'vm') return new VmSandboxProvider({ dataDir: join(o.dataDir, 'vm'), log: o.log })
  const dir = join(o.dataDir, 'sandboxes')
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  return new BubblewrapSandboxProvider({ dataDir: dir, log: o.log })
}

/** The sandbox-backed tools of one session: the worker toolset, run by the sandbox's runner. */
function sessionTools(sandbox: Sandbox, sessionId: string, log: (line: string) => void): BetaRunnableTool[] {
  let closed = false
  return [...WORKER_TOOLSET].map((name, i) => {
    const def = TOOLSET_DEFINITIONS[name]
    const tool: BetaRunnableTool<Record<string, unknown>> = {
      type: 'custom',
      name,
      description: def.description,
      input_schema: def.input_schema as Anthropic.Beta.BetaTool['input_schema'],
      parse: (content: unknown) => {
        const parsed = parseToolsetInput(name, content)
        if (!parsed.ok) throw new ToolError(parsed.message)
        return parsed.input
      },
      run: async (input, context) => {
        const toolUseId = context?.toolUse.id ?? `${name}-${Date.now()}`
        const started = Date.now()
        const out = await sandbox.execute({ toolUseId, name, input, signal: context?.signal ?? undefined })
        log(`${sessionId} ${name} ${toolUseId}: ${out.isError ? 'error' : 'ok'} in ${Date.now() - started} ms`)
        if (out.isError) throw new ToolError(out.content)
        return out.content
      },
    } as BetaRunnableTool<Record<string, unknown>>
    // the session runner closes every tool when it stops; the sandbox goes with the first close (its workspace stays for a later item of the session)
    if (i === 0) {
      tool.close = async () => {
        if (closed) return
        closed = true
        await sandbox.dispose().catch((err: unknown) => log(`${sessionId}: could not release its sandbox: ${(err as Error).message}`))
        log(`${sessionId}: sandbox released`)
      }
    }
    return tool
  })
}

/** Runs until `signal` aborts (then stops cleanly) or the worker fails (a revoked key: 401). */
export async function runCorralWorker(o: CorralWorkerOptions): Promise<void> {
  const provider = providerFor(o)
  const available = await provider.available()
  if (!available.ok) throw new Error(`the ${o.backend} backend is not available on this machine: ${available.reason ?? 'unknown reason'}`)
  const client = new Anthropic({
    baseURL: o.url,
    apiKey: null,
    authToken: null,
    logLevel: 'info',
    logger: {
      debug: () => {},
      // the SDK's per-request lines ("[log_…] get … succeeded") are noise in a worker's log; its own events stay
      info: (m: string, extra?: unknown) => (/^\[log_[0-9a-f]+\]/.test(m) ? undefined : o.log(`${m}${extra ? ' ' + JSON.stringify(extra) : ''}`)),
      warn: (m: string, extra?: unknown) => o.log(`warning: ${m}${extra ? ' ' + JSON.stringify(extra) : ''}`),
      error: (m: string, extra?: unknown) => o.log(`error: ${m}${extra ? ' ' + JSON.stringify(extra) : ''}`),
    },
  })
  const sandboxes = new Set<Sandbox>()
  const worker = client.beta.environments.work.worker({
    environmentId: o.environmentId,
    environmentKey: o.environmentKey,
    workdir: join(o.dataDir, 'workdir'),
    workerId: o.workerId ?? `${hostname()}-${process.pid}`,
    maxIdleMs: o.maxIdleMs,
    // memory stores are mounted by the SDK on this host's disk, which the sandbox does not see: off until Corral mounts them itself
    memorySyncIntervalMs: null,
    tools: (ctx) => {
      const sessionId = ctx.sessionId ?? ctx.session?.id
      // one sandbox per session: without the session's id there is nothing to key it by
      if (!sessionId) throw new Error('the SDK worker gave no session id for a claimed item')
      o.log(`${sessionId}: claimed; starting its ${o.backend} sandbox`)
      const sandbox = provider.create({ sessionId, environmentId: o.environmentId, config: { type: 'cloud', corral: { backend: o.backend, pool_size: 0 } } })
      sandboxes.add(sandbox)
      return sessionTools(sandbox, sessionId, o.log)
    },
  })
  o.log(`polling ${o.url} for environment ${o.environmentId} (${o.backend} sandboxes)`)
  try {
    await worker.run(o.signal)
  } finally {
    await Promise.all([...sandboxes].map((s) => s.dispose().catch(() => {})))
    await provider.dispose()
    o.log('stopped')
  }
}
