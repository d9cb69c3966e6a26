import { CorralError, isCorralError } from '../../../shared/errors'
import { placeResources } from './resources'
import { RunnerClosedError, RunnerMalformedError, type RunnerConnection } from './connection'
import type { PackageProgress, Sandbox, SandboxEgress, SandboxFileList, SandboxProvisionParams, SandboxToolCall, ToolOutcome, ToolRecovery } from '../sandbox'
import { type SandboxSettings, WORKSPACE } from '../settings'

/** How much of a file one read_file request asks for (its base64 stays under the runner's 8 MiB line). */
const READ_CHUNK_BYTES = 4 * 1024 * 1024

/** A started runner: the backend's handle (container, process) and the connection to it. */
export interface LiveRunner {
  connection: RunnerConnection
  /** Whether session resources still need placing (false for a reused, already provisioned runner). */
  fresh: boolean
  /** The session's egress this runner's sandbox mounts; the runner is given its env and bridge at provision. */
  egress?: SandboxEgress
}

/**
 * A start that takes longer than this is shown to the calls waiting for it (their live output):
 * what is being started, each step the backend reports, and when it was ready.
 */
export const START_NOTE_AFTER_MS = 300

/** What a backend found out about a runner whose connection closed. */
export interface RunnerDeath {
  /** Human sentence: "the sandbox container exited (exit 137, killed: out of memory (OOM))". */
  message: string
  exitCode?: number | null
}

/**
 * The part every runner-based backend shares: lazy single-flight provisioning, placing session
 * resources, turning a dead runner into an `isError` result that says what happened, and a
 * fresh runner (same workspace) for the next call. Backends supply start/diagnose/stop.
 */
export abstract class RunnerSandbox<L extends LiveRunner> implements Sandbox {
  abstract readonly backend: string
  protected live: L | undefined
  private provisioning: Promise<L> | undefined
  protected disposed = false
  /** The live output of the calls waiting for a start in progress (startStep writes to them). */
  private readonly waiting = new Set<(line: string) => void>()
  /** The steps of the start in progress so far, for a call that begins to wait in the middle of it. */
  private steps: string[] = []

  protected constructor(
    readonly params: SandboxProvisionParams,
    readonly settings: SandboxSettings,
  ) {}

  /** Starts (or re-attaches to) the session's runner. Throws CorralError sandbox_error. */
  protected abstract start(): Promise<L>
  /** Explains why `live`'s connection closed (waits briefly for the backend to know). */
  protected abstract diagnose(live: L): Promise<RunnerDeath>
  /** Stops the runner; removes the workspace when asked. */
  protected abstract stop(live: L | undefined, removeWorkspace: boolean): Promise<void>
  /**
   * Ends a runner that may still run but is no longer trusted (it answered malformed data, or its
   * connection closed while its process lives on), so the next start makes a new one; the
   * workspace stays.
   */
  protected abstract discardRunner(live: L): Promise<void>

  async provision(): Promise<void> {
    await this.ensureLive()
  }

  /** What a start of this backend makes, for the note a waiting call shows ("a Docker container"). */
  protected describeStart(): string {
    return `a ${this.backend} sandbox`
  }

  /**
   * A backend's start reports a step that may take a while ("booting a template VM first …"):
   * the calls waiting for the start show it as a `status` line of their live output, `[corral] …`.
   */
  protected startStep(line: string): void {
    this.steps.push(line)
    for (const w of this.waiting) w(line)
  }

  /**
   * The environment's package progress as this start sees it: an install that starts now (its
   * packages not cached yet) and its end are steps of the start; every event still goes on to
   * `progress` (the environment's own install status).
   */
  protected packageSteps(progress: PackageProgress | undefined): PackageProgress {
    return (event) => {
      if (event.kind === 'start') this.startStep(`installing the environment's packages first (${event.summary}): once per environment, its later sandboxes reuse them`)
      else if (event.kind === 'ready') this.startStep("the environment's packages are installed")
      progress?.(event)
    }
  }

  /**
   * Waits for the runner like ensureLive; a call with live output that waits longer than
   * START_NOTE_AFTER_MS is told what is being started, each step, and when it is ready, so a slow
   * first start (a VM under software emulation, a container image pulled) is not a silent wait.
   */
  private liveFor(call: SandboxToolCall): Promise<L> {
    const ready = this.ensureLive()
    const out = call.onOutput
    if (!out || this.live?.connection.open) return ready
    const note = (line: string) => out(`[corral] ${line}\n`, 'status')
    const started = Date.now()
    let shown = false
    const timer = setTimeout(() => {
      shown = true
      note(`starting ${this.describeStart()} for this session…`)
      for (const line of this.steps) note(line)
      this.waiting.add(note)
    }, START_NOTE_AFTER_MS)
    const done = () => {
      clearTimeout(timer)
      this.waiting.delete(note)
    }
    return ready.then(
      (live) => {
        done()
        if (shown) note(`the sandbox is ready (${((Date.now() - started) / 1000).toFixed(1)} s)`)
        return live
      },
      (err: unknown) => {
        done()
        throw err
      },
    )
  }

  protected ensureLive(): Promise<L> {
    if (this.disposed) return Promise.reject(new CorralError('sandbox_error', `the sandbox of session ${this.params.sessionId} was released`))
    if (this.live?.connection.open) return Promise.resolve(this.live)
    if (!this.provisioning) {
      const stale = this.live
      this.live = undefined
      this.steps = []
      this.provisioning = (async () => {
        // A runner whose connection closed while it was idle (it wrote off-protocol data) may still run.
        if (stale) await this.discardRunner(stale).catch(() => undefined)
        const live = await this.start()
        try {
          // Idempotent: a re-attached runner keeps its bridge and shell.
          if (live.egress) await live.connection.egress({ env: live.egress.env, socket: live.egress.bridge.socket, port: live.egress.bridge.port })
          if (live.fresh) await placeResources(live.connection, { resources: this.params.resources, egressRepositories: live.egress?.repositories })
        } catch (err) {
          // A workspace without its resources (or its way out) is not ready; the next call tries again.
          live.connection.close('resources could not be placed')
          throw err
        }
        this.live = live
        return live
      })().finally(() => {
        this.provisioning = undefined
      })
    }
    return this.provisioning
  }

  async execute(call: SandboxToolCall): Promise<ToolOutcome> {
    const started = Date.now()
    let live: L
    try {
      live = await this.liveFor(call)
    } catch (err) {
      return { content: `${call.name}: the sandbox is not available: ${(err as Error).message}`, isError: true, durationMs: Date.now() - started }
    }
    try {
      return await live.connection.call({ ...call, cap: this.settings.outputCapBytes })
    } catch (err) {
      if (!(err instanceof RunnerClosedError)) {
        return { content: `${call.name}: ${isCorralError(err) ? err.message : String(err)}`, isError: true, durationMs: Date.now() - started }
      }
      if (this.live === live) this.live = undefined
      if (err instanceof RunnerMalformedError || live.connection.malformedReply !== undefined) {
        // Whatever runs in the sandbox may have written it: the runner is replaced, never believed.
        if (!this.disposed) await this.discardRunner(live).catch(() => undefined)
        return {
          content: `${call.name}: the sandbox's runner answered malformed data (${live.connection.malformedReply ?? (err as RunnerMalformedError).detail}) and was replaced; the call's outcome is lost. The next call gets a fresh sandbox with the same ${WORKSPACE}.`,
          isError: true,
          durationMs: Date.now() - started,
        }
      }
      const death = this.disposed ? { message: 'the sandbox was released during the call' } : await this.diagnose(live)
      return {
        content: `${call.name}: ${death.message} during the call; its outcome is lost. The next call gets a fresh sandbox with the same ${WORKSPACE}.`,
        isError: true,
        exitCode: death.exitCode,
        durationMs: Date.now() - started,
      }
    }
  }

  async recover(toolUseId: string): Promise<ToolRecovery> {
    try {
      const live = await this.ensureLive()
      const r = await live.connection.recover(toolUseId, { cap: this.settings.outputCapBytes })
      return r.state === 'finished' ? { state: 'finished', outcome: r.result } : r
    } catch {
      return { state: 'unknown' }
    }
  }

  async listFiles(dir: string, options?: { max?: number }): Promise<SandboxFileList> {
    const live = this.live?.connection.open ? this.live : undefined
    if (!live) return { files: [], skipped: [], truncated: false }
    return live.connection.listFiles(dir, options)
  }

  async readFile(path: string, options: { maxBytes: number }): Promise<{ bytes: Buffer; sig: string } | undefined> {
    const live = this.live?.connection.open ? this.live : undefined
    if (!live) return undefined
    const chunks: Buffer[] = []
    let offset = 0
    let sig: string | undefined
    for (;;) {
      const c = await live.connection.readFileChunk({ path, offset, length: READ_CHUNK_BYTES })
      if (sig !== undefined && c.sig !== sig) return undefined
      sig = c.sig
      if (c.size > options.maxBytes) return undefined
      chunks.push(c.bytes)
      offset += c.bytes.length
      if (c.bytes.length === 0 || offset >= c.size) break
    }
    return { bytes: Buffer.concat(chunks), sig }
  }

  async dispose(options?: { removeWorkspace?: boolean }): Promise<void> {
    this.disposed = true
    await this.provisioning?.catch(() => undefined)
    const live = this.live
    this.live = undefined
    live?.connection.close('the sandbox was released')
    try {
      await this.stop(live, options?.removeWorkspace === true)
    } finally {
      await this.params.egress?.release().catch(() => undefined)
    }
  }
}
