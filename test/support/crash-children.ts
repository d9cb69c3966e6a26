import { spawn, type ChildProcess } from 'node:child_process'
import { join, resolve } from 'node:path'

/**
 * The engine processes of a crash test: each runs `test/support/harness-crash-child.ts` (or the
 * script given) over one data directory, prints a line once it serves, and is killed with
 * SIGKILL at the instant the test picks. One place for how such a child is started, waited for
 * and killed, so the crash tests (harness, threads, advisor, workflow runs) differ only in what
 * they check.
 */
export interface CrashChildrenOptions {
  /** The child's script (TypeScript); default test/support/harness-crash-child.ts. */
  script?: string
  /** Where the bundled child is written (a temporary folder of the test). */
  dir: string
  /** Copy the children's stderr to this process's (also on with CORRAL_CRASH_DEBUG=1). */
  echoStderr?: boolean
}

export class CrashChildren {
  private readonly live = new Set<ChildProcess>()
  private readonly script: string
  private command?: Promise<string[]>

  constructor(private readonly options: CrashChildrenOptions) {
    this.script = options.script ?? resolve(__dirname, 'harness-crash-child.ts')
  }

  /**
   * The node arguments that run the child: bundled once with esbuild (each restart then costs
   * ~0.4 s instead of tsx's ~1.4 s), or through tsx when esbuild is not there.
   */
  private commandLine(): Promise<string[]> {
    this.command ??= (async () => {
      try {
        const { build } = await import('esbuild')
        const out = join(this.options.dir, 'crash-child.cjs')
        await build({ entryPoints: [this.script], bundle: true, platform: 'node', format: 'cjs', packages: 'external', outfile: out, logLevel: 'warning' })
        return [out]
      } catch {
        return ['--import', 'tsx', this.script]
      }
    })()
    return this.command
  }

  /** Starts a child with `args` after the script and resolves once it printed its first line (or rejects with its stderr). */
  async start(args: string[]): Promise<ChildProcess> {
    const cmd = await this.commandLine()
    const child = spawn(process.execPath, [...cmd, ...args], {
      env: { ...process.env, NODE_PATH: resolve(__dirname, '../../node_modules') },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    this.live.add(child)
    child.on('exit', () => this.live.delete(child))
    let err = ''
    const echo = this.options.echoStderr || !!process.env.CORRAL_CRASH_DEBUG
    child.stderr!.on('data', (b: Buffer) => {
      err += b.toString()
      if (echo) process.stderr.write(b)
    })
    return new Promise((res, rej) => {
      const timer = setTimeout(() => rej(new Error(`child did not start:\n${err}`)), 30_000)
      child.stdout!.once('data', () => {
        clearTimeout(timer)
        res(child)
      })
      child.once('exit', (code, signal) => {
        clearTimeout(timer)
        rej(new Error(`child exited (${code ?? signal}) before it was ready:\n${err}`))
      })
    })
  }

  /** SIGKILL, resolved once the child is gone. */
  kill(child: ChildProcess): Promise<void> {
    return new Promise<void>((res) => {
      if (child.exitCode !== null || child.signalCode !== null) return res()
      child.once('exit', () => res())
      child.kill('SIGKILL')
    })
  }

  /** Kills every child still running (afterAll). */
  dispose(): void {
    for (const c of this.live) c.kill('SIGKILL')
  }
}
