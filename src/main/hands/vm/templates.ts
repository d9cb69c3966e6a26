import { createHash } from 'node:crypto'
import { createWriteStream, existsSync } from 'node:fs'
import { chmod, chown, mkdir, mkdtemp, rename, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { CorralError } from '../../../shared/errors'
import type { QemuUser } from './hardening'
import type { VmImage } from './image'
import type { VmAccel } from './qemu-args'
import { QmpClient } from './qmp'
import { launchVm, type VmProcess } from './vm-process'

/** What a template VM is made of; VMs of one shape restore from one saved state. */
export interface VmShape {
  image: VmImage
  accel: VmAccel
  memoryMb: number
  vcpus: number
  runnerEnv: Readonly<Record<string, string>>
  /** qemu's version line: another qemu cannot load this one's state. */
  qemuVersion: string
  hardening: readonly string[]
}

export function shapeKey(s: VmShape): string {
  return createHash('sha256')
    .update(JSON.stringify({ image: s.image.key, accel: s.accel, memoryMb: s.memoryMb, vcpus: s.vcpus, env: Object.entries(s.runnerEnv).sort(), qemu: s.qemuVersion, hardening: s.hardening }))
    .digest('hex')
    .slice(0, 16)
}

/**
 * Runs the calls every restored VM makes first (the cd into its workspace, a bash command, a
 * write and a read) in the template before it is saved, so that the runner's JavaScript for them
 * is compiled in the saved state: V8 compiles a function the first time it runs, which under TCG
 * costs a restored VM hundreds of ms otherwise. The files go under the template's /workspace,
 * in guest RAM beneath the mount point a restore mounts the session's workspace on, and are
 * removed. A failure is logged; the template is saved all the same.
 */
async function warmUp(vm: VmProcess, log: (m: string) => void): Promise<void> {
  const id = (what: string) => `toolu_corral_vm_template_${what}`
  const file = '/workspace/.corral-template-warmup'
  const calls = [
    { name: 'bash', input: { command: 'cd /workspace && unset OLDPWD' } },
    { name: 'bash', input: { command: 'true' } },
    { name: 'write', input: { file_path: file, content: 'warm-up\n' } },
    { name: 'read', input: { file_path: file } },
    { name: 'bash', input: { command: `rm -f ${file}` } },
  ]
  try {
    for (const [i, c] of calls.entries()) {
      const r = await vm.connection.call({ toolUseId: id(String(i)), ...c })
      if (r.isError) throw new Error(`${c.name}: ${r.content.slice(0, 200)}`)
    }
  } catch (err) {
    log(`vm: the template's warm-up calls failed (${(err as Error).message}); saving it as it is`)
  }
}

export interface VmTemplatesOptions {
  /** Where saved states live (`<dir>/<shape key>.state`, read-only once written). */
  dir: string
  /** Where the template VMs' run directories go. */
  runRoot: string
  bootTimeoutMs: number
  log: (message: string) => void
}

/**
 * Template VMs: per shape, one cold boot (workspace not mounted: a mounted 9p share blocks
 * migration) until the runner says hello, then QMP `migrate` to a unix socket whose bytes the host
 * writes to `<shape key>.state` (0444), and the template is killed. Every sandbox of the shape is
 * then a restore of that file (`-incoming fd:3`). One boot per shape at a time; a state file
 * already on disk (an earlier run of this data directory) is used as is.
 */
export class VmTemplates {
  private readonly flights = new Map<string, Promise<string>>()

  constructor(private readonly o: VmTemplatesOptions) {}

  /** Whether `shape`'s template is saved already (a restore needs no cold boot first). */
  saved(shape: VmShape): boolean {
    return existsSync(join(this.o.dir, `${shapeKey(shape)}.state`))
  }

  /** The saved state of `shape`, booting and saving its template first when there is none. */
  stateFile(shape: VmShape, runAs?: QemuUser): Promise<string> {
    const key = shapeKey(shape)
    const file = join(this.o.dir, `${key}.state`)
    if (existsSync(file)) return Promise.resolve(file)
    let flight = this.flights.get(key)
    if (!flight) {
      flight = this.build(shape, key, file, runAs).finally(() => this.flights.delete(key))
      this.flights.set(key, flight)
    }
    return flight
  }

  private async build(shape: VmShape, key: string, file: string, runAs: QemuUser | undefined): Promise<string> {
    await mkdir(this.o.dir, { recursive: true, mode: 0o700 })
    const started = Date.now()
    this.o.log(`vm: booting the template ${key} (${shape.accel}, ${shape.memoryMb} MB, ${shape.vcpus} vCPU)`)
    const emptyWs = join(this.o.dir, `${key}.ws`)
    await mkdir(emptyWs, { recursive: true })
    const vm = await launchVm({ ...shape, runRoot: this.o.runRoot, prefix: `template-${key}`, workspaceDir: emptyWs, helloTimeoutMs: this.o.bootTimeoutMs })
    const booted = Date.now()
    await warmUp(vm, this.o.log)
    const tmp = `${file}.tmp-${process.pid}`
    // qemu connects to the migration socket after it dropped to its -runas user, who cannot enter
    // the 0700 run directory: the socket gets a 0700 directory of that user's own.
    const sockDir = await mkdtemp(join(tmpdir(), 'corral-vm-migrate-'))
    if (runAs) await chown(sockDir, runAs.uid, runAs.gid)
    const sock = join(sockDir, 'migrate.sock')
    let qmp: QmpClient | undefined
    const server = createServer()
    try {
      const received = new Promise<void>((resolve, reject) => {
        server.once('connection', (conn) => {
          const out = createWriteStream(tmp, { mode: 0o600 })
          conn.pipe(out)
          out.on('finish', resolve)
          out.on('error', reject)
          conn.on('error', reject)
        })
      })
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject)
        server.listen(sock, resolve)
      })
      if (runAs) await chown(sock, runAs.uid, runAs.gid)
      qmp = await QmpClient.connect(join(vm.runDir, 'qmp.sock'))
      await qmp.execute('migrate', { uri: `unix:${sock}` })
      for (;;) {
        const status = (await qmp.execute('query-migrate')) as { status?: string; 'error-desc'?: string }
        if (status.status === 'completed') break
        if (status.status === 'failed' || status.status === 'cancelled') throw new CorralError('sandbox_error', `saving the VM template failed: ${status['error-desc'] ?? status.status}`)
        await new Promise((r) => setTimeout(r, 50))
      }
      qmp.dispose()
      qmp = undefined
      await vm.kill()
      // (the timer goes with the race: a pending one would keep a CLI process alive 30 s after its work)
      let timer: NodeJS.Timeout | undefined
      try {
        await Promise.race([received, new Promise((_, reject) => (timer = setTimeout(() => reject(new CorralError('sandbox_error', 'the VM template\'s state did not arrive')), 30_000)))])
      } finally {
        clearTimeout(timer)
      }
      await chmod(tmp, 0o444)
      await rename(tmp, file)
      this.o.log(`vm: template ${key} booted in ${((booted - started) / 1000).toFixed(1)} s, saved in ${((Date.now() - booted) / 1000).toFixed(1)} s`)
      return file
    } catch (err) {
      await rm(tmp, { force: true })
      throw err
    } finally {
      qmp?.dispose()
      server.close()
      await rm(sockDir, { recursive: true, force: true })
      await vm.kill()
      await rm(emptyWs, { recursive: true, force: true })
    }
  }
}
