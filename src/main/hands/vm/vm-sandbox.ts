import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { copyFile, mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'
import { CorralError } from '../../../shared/errors'
import { bubblewrapKey } from '../bubblewrap/bubblewrap-sandbox'
import { packagePlan } from '../packages/plan'
import { type LiveRunner, type RunnerDeath, RunnerSandbox } from '../runner/runner-sandbox'
import type { Sandbox, SandboxProvider, SandboxProvisionParams, SandboxToolCall, ToolOutcome } from '../sandbox'
import { runnerEnv, type SandboxSettings, sandboxSettings, STATE_MOUNT, WORKSPACE } from '../settings'
import { acceleratorCacheFile, chooseAccelerator } from './accel'
import { connectVmEgressBridge, type VmEgressBridge } from './egress-bridge'
import { grantToQemuUser, qemuHardening, qemuUser, type QemuUser } from './hardening'
import { findVmImage, vmCacheDir, type VmImage } from './image'
import { vmDoctorDetails } from './vm-doctor'
import { folderTag, pingLine, startLine, type VmAccel, VM_FOLDER_SLOTS, WORKSPACE_TAG } from './qemu-args'
import { shapeKey, type VmShape, VmTemplates } from './templates'
import { killRunDirs, launchVm, qemuBinary, type VmProcess } from './vm-process'

const run = promisify(execFile)

/**
 * VM sandboxes: each session's runner in a QEMU virtual machine of its own (a kernel of its own,
 * no network device), restored from a template's saved state in a fraction of a second, with the
 * session's workspace `<dataDir>/workspaces/<session>` on virtio-9p (kept when the VM is
 * replaced, like Docker's volume). See src/main/hands/README.md, "VM sandboxes".
 */
export interface VmSandboxProviderOptions {
  /** Where the backend keeps workspaces, template states and VM run directories. */
  dataDir: string
  log?: (message: string) => void
  /** The accelerator; default: accel.ts's probe (KVM when a probe boot under it works, cached per host), else TCG. */
  accel?: () => Promise<VmAccel>
  /**
   * qemu's own hardening arguments; default hardening.ts's qemuHardening (the seccomp filter when
   * qemu has it, `-runas nobody` when Corral is root: the VM's shares are then handed to that user).
   */
  hardening?: () => Promise<string[]>
  /** How long a template's cold boot may take (default 180 s: TCG on a loaded host). */
  bootTimeoutMs?: number
  /** How long a restore may take to its runner's hello and its start line (default 30 s). */
  restoreTimeoutMs?: number
  /** A VM whose runner does not answer a heartbeat within this during a call is hung: killed and replaced (default 2000 ms). */
  hangTimeoutMs?: number
}

interface VmLive extends LiveRunner {
  vm: VmProcess
  /** The session's egress over the corral.egress port, when it has one. */
  bridge?: VmEgressBridge
  /** Set by the watchdog when it killed the VM: why (no heartbeat, or the runner stopped). */
  hung?: string
}

/** One ready VM of a warm pool: restored, its runner answering, its workspace share an unclaimed directory. */
interface WarmVm {
  vm: VmProcess
  workspaceDir: string
}

/** A shape's warm VMs (restored, not started: no clock set, nothing mounted), waiting for a session. */
class VmWarmPool {
  private readonly ready: WarmVm[] = []
  private inflight = 0
  private disposed = false

  constructor(private readonly o: { size: number; launch: () => Promise<WarmVm>; log: (m: string) => void }) {}

  get size(): number {
    return this.ready.length
  }

  owns(runDir: string): boolean {
    return this.ready.some((w) => w.vm.runDir === runDir)
  }

  fill(): void {
    while (!this.disposed && this.ready.length + this.inflight < this.o.size) {
      this.inflight++
      void this.o
        .launch()
        .then(async (w) => {
          if (this.disposed) return discardWarm(w)
          w.vm.connection.onClosed(() => {
            const i = this.ready.indexOf(w)
            if (i >= 0) this.ready.splice(i, 1)
          })
          this.ready.push(w)
        })
        .catch((err) => this.o.log(`vm warm pool: ${(err as Error).message}`))
        .finally(() => this.inflight--)
    }
  }

  claim(): WarmVm | undefined {
    let w: WarmVm | undefined
    while ((w = this.ready.shift()) && !w.vm.connection.open) void discardWarm(w)
    this.fill()
    return w
  }

  async waitReady(timeoutMs: number): Promise<number> {
    const deadline = Date.now() + timeoutMs
    this.fill()
    while (this.ready.length < this.o.size && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    return this.ready.length
  }

  async dispose(): Promise<void> {
    this.disposed = true
    while (this.inflight > 0) await new Promise((r) => setTimeout(r, 50))
    await Promise.all(this.ready.splice(0).map(discardWarm))
  }
}

async function discardWarm(w: WarmVm): Promise<void> {
  w.vm.connection.close('discarded')
  await w.vm.kill()
  await rm(w.workspaceDir, { recursive: true, force: true })
}

/** What a VmSandbox asks its provider for. */
interface VmSandboxOptions {
  params: SandboxProvisionParams
  settings: SandboxSettings
  provider: VmSandboxProvider
  hangTimeoutMs: number
}

export class VmSandbox extends RunnerSandbox<VmLive> {
  readonly backend = 'vm'
  private inFlight = 0
  private watchdog: NodeJS.Timeout | undefined

  constructor(private readonly o: VmSandboxOptions) {
    super(o.params, o.settings)
  }

  get workspaceDir(): string {
    return this.o.provider.workspaceDir(this.params.sessionId)
  }

  protected start(): Promise<VmLive> {
    return this.o.provider.startVm(this.params, this.settings, (line) => this.startStep(line))
  }

  protected override describeStart(): string {
    return 'a QEMU virtual machine'
  }

  /**
   * Runs the call with a watchdog: while a call is in flight the guest's init is pinged on the
   * control port every hangTimeoutMs / 4 (builtins of PID 1: it answers however busy the
   * runner's channel is, a 3 MB request or result included), naming the runner's pid. A ping
   * unanswered for hangTimeoutMs is a hung guest (or qemu); an answer that the runner is stopped
   * (SIGSTOP) or gone is a hung runner: SIGKILL, the call becomes a tool error, and a fresh VM is
   * restored on the same workspace at once (the next call finds it ready or on its way).
   */
  override async execute(call: SandboxToolCall): Promise<ToolOutcome> {
    if (this.inFlight++ === 0) this.watchdog = setInterval(() => this.heartbeat(), Math.max(50, Math.floor(this.o.hangTimeoutMs / 4)))
    const before = this.live
    try {
      return await super.execute(call)
    } finally {
      if (--this.inFlight === 0) {
        clearInterval(this.watchdog)
        this.watchdog = undefined
      }
      // The call's VM died (the watchdog killed it, or qemu exited): its replacement starts now.
      if (before && !before.connection.open && this.live !== before && !this.disposed) void this.provision().catch(() => undefined)
    }
  }

  private pinging: VmLive | undefined

  private heartbeat(): void {
    const live = this.live
    if (!live || !live.connection.open || this.pinging === live) return
    this.pinging = live
    const hung = (why: string) => {
      if (!live.connection.open || this.live !== live) return
      live.hung = why
      void live.vm.kill()
    }
    live.vm.control.ask(pingLine(live.vm.runnerPid), this.o.hangTimeoutMs).then(
      (reply) => {
        if (this.pinging === live) this.pinging = undefined
        if (reply.trim() !== 'ok') hung(`its runner stopped answering: ${reply.replace(/^error /, '').trim().slice(0, 200)}`)
      },
      () => {
        if (this.pinging === live) this.pinging = undefined
        hung(`the VM stopped answering (no heartbeat within ${this.o.hangTimeoutMs} ms: a hung guest)`)
      },
    )
  }

  protected async diagnose(live: VmLive): Promise<RunnerDeath> {
    const result = await Promise.race([live.vm.exited, new Promise<undefined>((r) => setTimeout(() => r(undefined), 1500))])
    if (live.hung !== undefined) return { message: `${live.hung} and was killed (SIGKILL)`, exitCode: 137 }
    if (!result) {
      await live.vm.kill()
      return { message: 'the VM\'s runner stopped answering (the VM was killed and will be replaced)' }
    }
    const code = result.code ?? (result.signal === 'SIGKILL' ? 137 : null)
    const said = live.vm.stderr().trim().slice(-300)
    return { message: `the VM exited (${result.signal ? `signal ${result.signal}` : `exit ${result.code}`}${said ? `: ${said}` : ''})`, exitCode: code }
  }

  protected async discardRunner(live: VmLive): Promise<void> {
    live.connection.close('discarded')
    live.bridge?.dispose()
    await live.vm.kill()
  }

  protected async stop(live: VmLive | undefined, removeWorkspace: boolean): Promise<void> {
    clearInterval(this.watchdog)
    live?.bridge?.dispose()
    if (live) await live.vm.kill()
    this.o.provider.forget(this)
    if (removeWorkspace) await rm(this.workspaceDir, { recursive: true, force: true })
    await rm(this.o.provider.egressDir(this.params.sessionId), { recursive: true, force: true })
  }

  /** The run directory of the live VM (for the provider's sweep), if any. */
  get runDir(): string | undefined {
    return this.live?.vm.runDir
  }
}

export class VmSandboxProvider implements SandboxProvider {
  readonly backend = 'vm'
  private readonly live = new Set<VmSandbox>()
  private readonly templates: VmTemplates
  private readonly pools = new Map<string, VmWarmPool>()
  private qemuVersion: Promise<string> | undefined
  private readonly log: (m: string) => void
  private disposed = false
  /** The accelerator and qemu's hardening: the options', else the probe (accel.ts) and qemuHardening (hardening.ts). */
  private readonly accel: () => Promise<VmAccel>
  private readonly hardening: () => Promise<string[]>

  constructor(private readonly options: VmSandboxProviderOptions) {
    this.log = options.log ?? (() => {})
    this.hardening = options.hardening ?? qemuHardening({ qemu: qemuBinary(), log: this.log })
    let accel: Promise<VmAccel> | undefined
    this.accel =
      options.accel ??
      (() =>
        (accel ??= (async () => {
          const found = findVmImage()
          if ('missing' in found) return 'tcg' as const
          const choice = await chooseAccelerator({ qemu: qemuBinary(), kernel: found.image.kernel, initrd: found.image.initrd, cacheFile: acceleratorCacheFile(vmCacheDir()) }).catch((err: Error) => ({ accel: 'tcg' as const, reason: `the probe failed: ${err.message}` }))
          this.log(`vm: ${choice.accel} (${choice.reason})`)
          return choice.accel
        })()))
    this.templates = new VmTemplates({ dir: join(options.dataDir, 'templates'), runRoot: this.runRoot, bootTimeoutMs: options.bootTimeoutMs ?? 180_000, log: this.log })
  }

  private get runRoot(): string {
    return join(this.options.dataDir, 'run')
  }

  /** Where a session's copy of its egress CA bundle lives (shared read-only into its VM). */
  egressDir(sessionId: string): string {
    return join(this.options.dataDir, 'egress', bubblewrapKey(sessionId))
  }

  workspaceDir(sessionId: string): string {
    return join(this.options.dataDir, 'workspaces', bubblewrapKey(sessionId))
  }

  private version(): Promise<string> {
    this.qemuVersion ??= run(qemuBinary(), ['--version'], { timeout: 10_000 }).then(
      ({ stdout }) => stdout.split('\n')[0]!.trim(),
      (err: NodeJS.ErrnoException & { stderr?: string }) => {
        this.qemuVersion = undefined
        throw new CorralError('sandbox_error', err.code === 'ENOENT' ? `qemu is not installed (apt-get install --no-install-recommends qemu-system-x86 qemu-utils)` : `${qemuBinary()} --version failed: ${(err.stderr || err.message).trim()}`)
      },
    )
    return this.qemuVersion
  }


  async available(): Promise<{ ok: boolean; reason?: string }> {
    if (process.platform !== 'linux' || process.arch !== 'x64') return { ok: false, reason: `the vm backend needs Linux on x86-64 (this is ${process.platform} ${process.arch})` }
    try {
      await this.version()
    } catch (err) {
      return { ok: false, reason: (err as Error).message }
    }
    const found = findVmImage()
    if ('missing' in found) return { ok: false, reason: found.missing }
    return { ok: true }
  }

  /** The shape of a sandbox with these settings: what its template is booted with. */
  private async shape(settings: SandboxSettings, stateDir: string | undefined): Promise<VmShape> {
    const found = findVmImage()
    if ('missing' in found) throw new CorralError('sandbox_error', found.missing)
    return {
      image: found.image as VmImage,
      accel: await this.accel(),
      memoryMb: settings.memoryMb,
      vcpus: Math.max(1, Math.ceil(settings.cpus)),
      // CORRAL_PIDS: the guest caps the sandbox user's processes with it (vm-init.sh)
      runnerEnv: { ...runnerEnv(settings, stateDir), CORRAL_PIDS: String(settings.pids) },
      qemuVersion: await this.version(),
      hardening: await this.hardening(),
    }
  }

  /** The user qemu runs as when its hardening says `-runas` (Corral as root), whose the VM's shares must be. */
  private runAs(shape: VmShape): QemuUser | undefined {
    const i = shape.hardening.indexOf('-runas')
    return i >= 0 ? qemuUser({ user: shape.hardening[i + 1] }) : undefined
  }

  /**
   * Hands the workspace, and folders that are Corral's own (memory mounts under its data
   * directory), to qemu's -runas user; a read-write folder of the user's is refused then (qemu as
   * that user could not write it, and Corral does not change the owner of a user's files).
   */
  private grantShares(shape: VmShape, workspaceDir: string | undefined, folders: SandboxProvisionParams['folders']): void {
    const runAs = this.runAs(shape)
    if (!runAs) return
    if (workspaceDir) grantToQemuUser(workspaceDir, runAs)
    const own = resolve(this.options.dataDir, '..') + '/'
    for (const f of folders ?? []) {
      if (f.readOnly || f.index < 0) continue
      if (!resolve(f.source).startsWith(own)) {
        throw new CorralError('sandbox_error', `resources[${f.index}]: Corral runs as root, so the vm backend runs qemu as ${runAs.user}, which cannot write the host folder ${f.source}; run Corral as your own user, or mount the folder read_only`)
      }
      grantToQemuUser(f.source, runAs)
    }
  }

  /** For corral doctor: qemu's version, the image, the accelerator and why, the speed to expect, seccomp and qemu's user. */
  async guarantees(): Promise<Record<string, string>> {
    const found = findVmImage()
    return vmDoctorDetails({ qemu: qemuBinary(), image: 'missing' in found ? found : found.image, cacheFile: acceleratorCacheFile(vmCacheDir()) })
  }

  /**
   * Starts a session's VM: a warm one when the session has no folders, no egress and no
   * workspace yet, else a restore of its shape's template; then its start line (the clock, the
   * workspace and folder shares). Throws CorralError sandbox_error with the reason. `step` is
   * told of what takes long (software emulation, a template's cold boot), for the waiting call.
   */
  async startVm(params: SandboxProvisionParams, settings: SandboxSettings, step: (line: string) => void = () => {}): Promise<VmLive> {
    if (this.disposed) throw new CorralError('sandbox_error', 'the vm backend was shut down')
    const plan = packagePlan(params.config)
    if (plan) throw new CorralError('sandbox_error', `environment ${params.environmentId} lists packages (${plan.summary}), which the vm backend does not install yet: use the docker backend for this environment (config.corral.backend)`)
    const folders = [...(params.folders ?? [])]
    const atWorkspace = folders.some((f) => f.target === WORKSPACE)
    const shape = await this.shape(settings, atWorkspace ? STATE_MOUNT : undefined)
    const tcg = shape.accel === 'tcg'
    if (tcg) step('no usable KVM on this machine: the VM runs under software emulation (TCG), slower to start and to run (`corral doctor` says why)')
    const egress = await params.egress?.open()
    if (egress) {
      // The proxy's socket cannot cross 9p: the guest reaches it through the egress bridge; its CA
      // bundle is shared read-only at the egress directory's in-sandbox path, from a copy qemu's user may read.
      const caDir = join(this.options.dataDir, 'egress', bubblewrapKey(params.sessionId))
      await mkdir(caDir, { recursive: true, mode: 0o755 })
      // Its regular files (the CA bundle, the CA certificate), not its socket.
      for (const entry of await readdir(egress.dir, { withFileTypes: true })) if (entry.isFile()) await copyFile(join(egress.dir, entry.name), join(caDir, entry.name))
      folders.push({ index: -1, source: caDir, target: egress.sandboxDir, readOnly: true })
    }
    if (folders.length > VM_FOLDER_SLOTS) throw new CorralError('sandbox_error', `the vm backend mounts at most ${VM_FOLDER_SLOTS} folders (host folders, skills, uploads, memory) per session; this one has ${folders.length}`)
    const workspaceDir = this.workspaceDir(params.sessionId)
    const shares = [{ tag: WORKSPACE_TAG, target: atWorkspace ? STATE_MOUNT : WORKSPACE, readOnly: false }, ...folders.map((f, i) => ({ tag: folderTag(i), target: f.target, readOnly: f.readOnly }))]
    // Outer mounts first (/workspace before /workspace/sub).
    const ordered = [shares[0]!, ...shares.slice(1).sort((a, b) => a.target.length - b.target.length)]
    const pool = folders.length === 0 ? this.poolFor(shape, settings) : undefined
    const timeoutMs = this.options.restoreTimeoutMs ?? 30_000
    let vm: VmProcess | undefined
    const warm = pool && !existsSync(workspaceDir) ? pool.claim() : undefined
    this.grantShares(shape, existsSync(workspaceDir) ? workspaceDir : undefined, folders)
    if (warm) {
      try {
        await rename(warm.workspaceDir, workspaceDir)
        // release() of this session from another process finds the VM by this file.
        await writeFile(join(warm.vm.runDir, 'session'), bubblewrapKey(params.sessionId))
        vm = warm.vm
      } catch {
        await discardWarm(warm)
        vm = undefined
      }
    }
    if (!vm) {
      if (!this.templates.saved(shape)) step(`booting a template VM first (once per VM shape: ${tcg ? 'about 5–20 s under software emulation' : 'a few seconds'}); later sandboxes start from its saved state`)
      else if (tcg) step('restoring the VM from its template')
      await mkdir(workspaceDir, { recursive: true })
      this.grantShares(shape, workspaceDir, [])
      vm = await this.restore(shape, { prefix: bubblewrapKey(params.sessionId), workspaceDir, folderDirs: folders.map((f) => f.source) })
    }
    pool?.fill()
    try {
      // Once the restored runner answered: the clock (now, so one date is enough) and the shares.
      await vm.control.send(startLine({ now: Date.now(), shares: ordered }), timeoutMs)
      // The runner's shell was started ahead in the template, before any share was mounted: its
      // cwd is the /workspace *under* the 9p mount, so a relative path in the first bash call
      // would land in the guest's RAM, not in the session's workspace (the hostile suite's
      // symlink case found it). A cd in that shell (a builtin) moves it into the mounted one;
      // a fresh shell would cost a bash start (~0.3 s under TCG right after a restore).
      const r = await vm.connection.call({ toolUseId: `toolu_corral_vm_cwd_${randomBytes(6).toString('hex')}`, name: 'bash', input: { command: `cd ${WORKSPACE} && unset OLDPWD` } })
      if (r.isError) throw new CorralError('sandbox_error', `the VM's shell could not enter its workspace: ${r.content}`)
    } catch (err) {
      await vm.kill()
      throw err
    }
    let bridge: VmEgressBridge | undefined
    if (egress) {
      try {
        bridge = await connectVmEgressBridge({ chardevPath: join(vm.runDir, 'egress.sock'), proxySocketPath: egress.socketPath, log: this.log })
      } catch (err) {
        await vm.kill()
        throw err
      }
      const b = bridge
      void b.closed.then((why) => {
        if (why) this.log(`vm: session ${params.sessionId}'s VM lost its egress: ${why}`)
      })
      void vm.exited.then(() => b.dispose())
    }
    // The runner exports the egress env into its shell; no bridge of its own (the guest's bridge holds 127.0.0.1:3128).
    return { connection: vm.connection, fresh: true, vm, bridge, egress: egress && { ...egress, bridge: { socket: '', port: egress.bridge.port } } }
  }

  private async restore(shape: VmShape, p: { prefix: string; workspaceDir: string; folderDirs: readonly string[] }): Promise<VmProcess> {
    const stateFile = await this.templates.stateFile(shape, this.runAs(shape))
    return launchVm({ ...shape, runRoot: this.runRoot, prefix: p.prefix, workspaceDir: p.workspaceDir, folderDirs: p.folderDirs, stateFile, helloTimeoutMs: this.options.restoreTimeoutMs ?? 30_000 })
  }

  private poolFor(shape: VmShape, settings: SandboxSettings): VmWarmPool | undefined {
    if (settings.poolSize <= 0) return undefined
    const key = `${shapeKey(shape)}-${settings.poolSize}`
    let pool = this.pools.get(key)
    if (!pool) {
      pool = new VmWarmPool({
        size: settings.poolSize,
        log: this.log,
        launch: async () => {
          const workspaceDir = join(this.options.dataDir, 'workspaces', `.pool-${randomBytes(6).toString('hex')}`)
          await mkdir(workspaceDir, { recursive: true })
          this.grantShares(shape, workspaceDir, [])
          try {
            return { vm: await this.restore(shape, { prefix: 'pool', workspaceDir, folderDirs: [] }), workspaceDir }
          } catch (err) {
            await rm(workspaceDir, { recursive: true, force: true })
            throw err
          }
        },
      })
      this.pools.set(key, pool)
    }
    return pool
  }

  /** Fills the warm pool of an environment's shape and waits (up to `timeoutMs`) until it is full; returns its size. */
  async warm(params: { config: Record<string, unknown> }, timeoutMs = 60_000): Promise<number> {
    const settings = sandboxSettings(params.config)
    const pool = this.poolFor(await this.shape(settings, undefined), settings)
    return pool ? pool.waitReady(timeoutMs) : 0
  }

  create(params: SandboxProvisionParams): Sandbox {
    const settings = sandboxSettings(params.config)
    const sandbox = new VmSandbox({ params, settings, provider: this, hangTimeoutMs: this.options.hangTimeoutMs ?? 2000 })
    this.live.add(sandbox)
    return sandbox
  }

  forget(sandbox: VmSandbox): void {
    this.live.delete(sandbox)
  }

  /** Kills the session's VMs (found by their run directories, whoever started them) and, with removeWorkspace, its workspace. */
  async release(sessionId: string, options?: { removeWorkspace?: boolean }): Promise<void> {
    const key = bubblewrapKey(sessionId)
    await killRunDirs(this.runRoot, (name, claimedBy) => name.startsWith(`${key}-`) || claimedBy === key)
    await rm(this.egressDir(sessionId), { recursive: true, force: true })
    if (options?.removeWorkspace) await rm(this.workspaceDir(sessionId), { recursive: true, force: true })
  }

  /** Kills VMs earlier runs left (their run directories), and unclaimed pool workspaces; this process's own stay. */
  async sweep(_keepSessionIds: ReadonlySet<string>): Promise<number> {
    const own = new Set([...this.live].map((s) => s.runDir).filter((d): d is string => d !== undefined))
    const pooled = (dir: string) => [...this.pools.values()].some((p) => p.owns(dir))
    const killed = await killRunDirs(this.runRoot, (name) => !pooled(join(this.runRoot, name)), own)
    return killed
  }

  async dispose(): Promise<void> {
    this.disposed = true
    const pools = [...this.pools.values()]
    this.pools.clear()
    const all = [...this.live]
    this.live.clear()
    await Promise.all([...pools.map((p) => p.dispose()), ...all.map((s) => s.dispose())])
  }
}
