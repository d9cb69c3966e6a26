import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { chmod, mkdir, open, readdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import type { Duplex } from 'node:stream'
import { CorralError } from '../../../shared/errors'
import type { RunnerConnection } from '../runner/connection'
import { startRunner } from '../runner/start'
import { qemuArgs, type QemuArgsParams, VM_FOLDER_SLOTS } from './qemu-args'

/** The qemu binary; CORRAL_QEMU overrides (tests of a missing qemu). */
export const qemuBinary = (): string => process.env.CORRAL_QEMU || 'qemu-system-x86_64'

/** A running VM: its qemu process, the runner's connection on its stdio, and its control channel. */
export interface VmProcess {
  child: ChildProcess
  connection: RunnerConnection
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  /** The VM's private run directory (QMP socket, console log, pid file, egress socket). */
  runDir: string
  /** The guest's control line channel (vm-init.sh's control loop). */
  control: VmControl
  /** The runner's pid in the guest (its hello's), which the heartbeat's ping names. */
  runnerPid: number
  /** The last characters qemu wrote to stderr. */
  stderr: () => string
  /** SIGKILLs qemu and waits (≤ 2 s) for it to exit; removes the run directory. */
  kill(): Promise<void>
}

/**
 * The host's end of the guest's control port: one line out, one line back (`ok` or `error
 * <reason>`), in order. A closed channel or no answer within the timeout is a CorralError.
 */
export class VmControl {
  private buffer = ''
  private readonly waiting: { resolve: (line: string) => void; reject: (e: Error) => void }[] = []
  private closed: string | undefined

  constructor(private readonly socket: Duplex) {
    socket.setEncoding('utf8')
    socket.on('data', (d: string) => {
      this.buffer += d
      let nl: number
      while ((nl = this.buffer.indexOf('\n')) >= 0) {
        const line = this.buffer.slice(0, nl)
        this.buffer = this.buffer.slice(nl + 1)
        this.waiting.shift()?.resolve(line)
      }
    })
    const end = (why: string) => {
      this.closed ??= why
      for (const w of this.waiting.splice(0)) w.reject(new CorralError('sandbox_error', `the VM's control channel closed (${why})`))
    }
    socket.on('error', (e) => end(e.message))
    socket.on('close', () => end('closed'))
  }

  /** Sends `line` (ending in a newline) and resolves when the guest answers ok; throws with its error. */
  async send(line: string, timeoutMs: number): Promise<void> {
    const reply = await this.ask(line, timeoutMs)
    if (reply.trim() !== 'ok') throw new CorralError('sandbox_error', `the VM refused its start line: ${reply.replace(/^error /, '').slice(0, 500)}`)
  }

  /** Sends `line` and resolves with the guest's answer (`ok` or `error <reason>`); throws when the channel closes or no answer comes in time. */
  ask(line: string, timeoutMs: number): Promise<string> {
    if (this.closed) return Promise.reject(new CorralError('sandbox_error', `the VM's control channel closed (${this.closed})`))
    return new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new CorralError('sandbox_error', `the VM did not answer its control line within ${timeoutMs} ms`)), timeoutMs)
      this.waiting.push({
        resolve: (l) => {
          clearTimeout(timer)
          resolve(l)
        },
        reject: (e) => {
          clearTimeout(timer)
          reject(e)
        },
      })
      this.socket.write(line)
    })
  }

  dispose(): void {
    this.socket.destroy()
  }
}

export interface LaunchVmParams extends Omit<QemuArgsParams, 'runDir' | 'incoming' | 'folderDirs'> {
  /** Where run directories live (`<runRoot>/<prefix>-<random>`). */
  runRoot: string
  /** Names the run directory (the session key, or `template-<key>`): release and sweep find VMs by it. */
  prefix: string
  /** The saved state to restore (a template's); absent: a cold boot. */
  stateFile?: string
  /** Host folders for the slots (the rest point at an empty directory). */
  folderDirs?: readonly string[]
  /** How long to wait for the runner's hello (a cold boot under TCG on a loaded host takes tens of seconds). */
  helloTimeoutMs: number
}

/**
 * Starts one VM (a cold boot, or a restore of `stateFile` on fd 3) and waits for its runner's
 * hello. The run directory is made 0700 and removed when the VM is killed. qemu is started under
 * `setpriv --pdeathsig KILL` where the host has it, so a VM does not outlive a crashed host.
 * Throws CorralError sandbox_error with qemu's stderr when the runner does not answer.
 */
export async function launchVm(p: LaunchVmParams): Promise<VmProcess> {
  const runDir = join(p.runRoot, `${p.prefix}-${randomBytes(4).toString('hex')}`)
  await mkdir(runDir, { recursive: true, mode: 0o700 })
  await chmod(runDir, 0o700)
  const empty = join(runDir, 'empty')
  await mkdir(empty, { mode: 0o555 })
  const folderDirs = Array.from({ length: VM_FOLDER_SLOTS }, (_, i) => p.folderDirs?.[i] ?? empty)
  const args = qemuArgs({ ...p, runDir, folderDirs, incoming: p.stateFile !== undefined })
  const state = p.stateFile ? await open(p.stateFile, 'r') : undefined
  const [file, ...argv] = existsSync('/usr/bin/setpriv') ? ['/usr/bin/setpriv', '--pdeathsig', 'KILL', '--', qemuBinary(), ...args] : [qemuBinary(), ...args]
  let child: ChildProcess
  try {
    child = spawn(file!, argv, { stdio: ['pipe', 'pipe', 'pipe', state?.fd ?? 'ignore', 'pipe'], env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } })
  } finally {
    await state?.close()
  }
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal }))
    child.on('error', () => resolve({ code: null, signal: null }))
  })
  const control = new VmControl(child.stdio[4] as Duplex)
  const kill = async () => {
    child.kill('SIGKILL')
    await Promise.race([exited, new Promise((r) => setTimeout(r, 2000))])
    control.dispose()
    await rm(runDir, { recursive: true, force: true }).catch(() => undefined)
  }
  try {
    const { connection, stderr, hello } = await startRunner({
      input: child.stdin!,
      output: child.stdout!,
      stderr: child.stderr!,
      start: (connection) => {
        child.on('error', (err) => connection.close(`qemu could not start: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? `${qemuBinary()} is not installed` : err.message}`))
        void exited.then(({ code, signal }) => connection.close(`qemu exited (${signal ? `signal ${signal}` : `exit ${code}`})`))
      },
      helloTimeoutMs: p.helloTimeoutMs,
      failure: p.stateFile ? 'the VM sandbox did not come back from its snapshot' : 'the VM sandbox did not boot',
      stderrLabel: 'qemu said',
      abort: () => child.kill('SIGKILL'),
    })
    return { child, connection, exited, runDir, control, runnerPid: hello.pid, stderr, kill }
  } catch (err) {
    await kill()
    throw err
  }
}

/** A run directory's qemu, when it still runs (its pid file names a process whose command line holds the directory). */
function runningQemu(runDir: string): number | undefined {
  try {
    const pid = Number(readFileSync(join(runDir, 'qemu.pid'), 'utf8').trim())
    if (!Number.isInteger(pid) || pid <= 1) return undefined
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(runDir) ? pid : undefined
  } catch {
    return undefined
  }
}

/**
 * Kills the VMs whose run directories under `runRoot` match `select` (by name) and removes the
 * directories: release of a session this process has no Sandbox for, and the start-up sweep.
 * `claimedBy`: the session key a warm VM's directory was claimed for (its `session` file).
 * `except`: run directories of this process's own live VMs. Returns how many VMs were killed.
 */
export async function killRunDirs(runRoot: string, select: (name: string, claimedBy: string | undefined) => boolean, except: ReadonlySet<string> = new Set()): Promise<number> {
  let names: string[]
  try {
    names = await readdir(runRoot)
  } catch {
    return 0
  }
  let killed = 0
  for (const name of names) {
    const dir = join(runRoot, name)
    let claimedBy: string | undefined
    try {
      claimedBy = readFileSync(join(dir, 'session'), 'utf8').trim()
    } catch {
      claimedBy = undefined
    }
    if (!select(name, claimedBy) || except.has(dir)) continue
    const pid = runningQemu(dir)
    if (pid) {
      try {
        process.kill(pid, 'SIGKILL')
        killed++
        for (let i = 0; i < 100 && existsSync(`/proc/${pid}`) && !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z '); i++) await new Promise((r) => setTimeout(r, 20))
      } catch {
        // gone meanwhile
      }
    }
    await rm(dir, { recursive: true, force: true }).catch(() => undefined)
  }
  return killed
}
