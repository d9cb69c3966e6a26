import { spawn, type ChildProcess } from 'node:child_process'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import type { ImageBuildStatus } from '../../shared/api/types'
import { sandboxResourcesDir } from './paths'

const MAX_LINES = 200

/**
 * Builds Corral's default sandbox image from the app: runs the image recipe
 * (resources/sandbox/build-image.sh: debootstrap once, cached, then `docker import`) as a child
 * process and keeps its progress lines. One build at a time (a second start joins the first).
 * The recipe needs root for a cold root filesystem; without it the build fails with the recipe's
 * own reason in the lines. dispose() stops a running build.
 */
export class SandboxImageBuild {
  private status: ImageBuildStatus
  private child?: ChildProcess
  private done?: Promise<ImageBuildStatus>

  constructor(private readonly params: { image: () => string; env?: NodeJS.ProcessEnv; onFinished?: (s: ImageBuildStatus) => void }) {
    this.status = { state: 'idle', image: params.image(), lines: [], exit_code: null, started_at: null, finished_at: null }
  }

  current(): ImageBuildStatus {
    return { ...this.status, image: this.status.state === 'idle' ? this.params.image() : this.status.image, lines: [...this.status.lines] }
  }

  /** Starts a build unless one is running; resolves at once with the status (`building`). `finished()` waits for the end. */
  start(): ImageBuildStatus {
    if (this.status.state === 'building') return this.current()
    const image = this.params.image()
    this.status = { state: 'building', image, lines: [], exit_code: null, started_at: new Date().toISOString(), finished_at: null }
    const env = { ...(this.params.env ?? process.env) }
    // The recipe names the image <repo>:<hash of itself>; the repository part is ours to choose.
    env.CORRAL_SANDBOX_IMAGE_REPO = image.slice(0, image.lastIndexOf(':'))
    const child = spawn('bash', [join(sandboxResourcesDir(), 'build-image.sh')], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    this.child = child
    const add = (line: string) => {
      this.status.lines.push(line)
      if (this.status.lines.length > MAX_LINES) this.status.lines.splice(0, this.status.lines.length - MAX_LINES)
    }
    createInterface({ input: child.stdout! }).on('line', add)
    createInterface({ input: child.stderr! }).on('line', add)
    this.done = new Promise((resolve) => {
      const finish = (code: number | null, reason?: string) => {
        if (this.status.state !== 'building') return
        if (reason) add(reason)
        this.status.state = code === 0 ? 'succeeded' : 'failed'
        this.status.exit_code = code
        this.status.finished_at = new Date().toISOString()
        this.child = undefined
        this.params.onFinished?.(this.current())
        resolve(this.current())
      }
      child.on('error', (err) => finish(null, `the image build could not start: ${err.message}`))
      child.on('close', (code, signal) => finish(code, code === 0 ? undefined : signal ? `the image build was stopped (${signal})` : `the image build exited with status ${code}`))
    })
    return this.current()
  }

  /** Resolves when the current build ends (at once when none runs). */
  finished(): Promise<ImageBuildStatus> {
    return this.status.state === 'building' && this.done ? this.done : Promise.resolve(this.current())
  }

  async dispose(): Promise<void> {
    if (this.child) {
      this.child.kill('SIGTERM')
      await this.done
    }
  }
}
