import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { mkdir, rename, rm, writeFile } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'
import type { Writable } from 'node:stream'
import { promisify } from 'node:util'
import { CorralError } from '../../../shared/errors'
import { packageCacheKey, packagePlan, type PackagePlan } from '../packages/plan'
import { installScript, prefixEnv } from '../packages/script'
import { InstallFlights, installOnce, runInstall, type PackageEgressOpener } from '../packages/install'
import type { PackageProgress } from '../packages/status'
import { runnerPath } from '../paths'
import { cgroupLauncher, openSandboxCgroup } from './cgroup'
import { type BwrapHardening, describeHardening, detectHardening, SANDBOX_CPU_SECONDS } from './hardening'
import { seccompFilterBytes } from './seccomp'
import { type LiveRunner, type RunnerDeath, RunnerSandbox } from '../runner/runner-sandbox'
import { startRunner } from '../runner/start'
import type { EnvironmentPackages, EnvironmentPackagesParams, SandboxEgress, SandboxProvider, SandboxProvisionParams } from '../sandbox'
import type { FolderMount } from '../folders'
import { runnerEnv, type SandboxSettings, sandboxSettings, SESSION_MOUNT, STATE_MOUNT, WORKSPACE } from '../settings'

const run = promisify(execFile)

/**
 * bubblewrap sandboxes (Linux, where no Docker engine answers): the runner runs inside `bwrap`
 * with every namespace unshared (no network), uid/gid 1000, all capabilities dropped, a
 * scrubbed environment, the host's /usr read-only, a private /tmp, and the session's workspace
 * directory `<dataDir>/<key>/workspace` bound at /workspace; with what the host offers
 * (hardening.ts): a seccomp filter, no nested user namespaces, a fresh session keyring, a cgroup
 * and rlimits for processes and memory. Options reach bwrap through a descriptor, not argv.
 */
export interface BubblewrapSandboxProviderOptions {
  /** Where per-session workspaces live (host directories Corral owns). */
  dataDir: string
  /** The bwrap binary; default `bwrap` on PATH. */
  bwrap?: string
  /** Progress (package installs). */
  log?: (message: string) => void
}

interface BwrapLive extends LiveRunner {
  child: ChildProcess
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  stderr: () => string
}

export function bubblewrapKey(sessionId: string): string {
  return /^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}$/.test(sessionId) ? sessionId : 'h' + createHash('sha256').update(sessionId).digest('hex').slice(0, 32)
}

/**
 * The node binary that runs the runner inside bwrap: the system's under /usr (visible in the
 * sandbox as is), else this process's own node, bound read-only at /opt/corral/node.
 */
export function hostNode(): { path: string; bind?: string } | undefined {
  for (const p of ['/usr/bin/node', '/usr/local/bin/node']) if (existsSync(p)) return { path: p }
  if (/\/node$/.test(process.execPath)) return { path: '/opt/corral/node', bind: process.execPath }
  return undefined
}

/**
 * The bwrap command line for one session's runner: options, then the command (node and the
 * runner, after prlimit and its options when `hardening.prlimit`). With `egress`, its directory is bound
 * read-only at `egress.sandboxDir` and its env set; the network stays unshared (the runner
 * starts the bridge to the proxy's socket).
 */
export interface BwrapArgsParams {
  sessionDir: string
  settings: SandboxSettings
  runner: string
  node?: { path: string; bind?: string }
  egress?: SandboxEgress
  /** The environment's installed packages (a prefix directory), at PACKAGES_PREFIX; writable only while installing. */
  packages?: { dir: string; writable?: boolean }
  /** Host folders bound in (resolved by the router); one at /workspace moves the session's workspace to STATE_MOUNT. */
  folders?: readonly FolderMount[]
  /** What of seccomp / userns / limits this host offers; `seccompFd`: the descriptor bwrap reads the filter from. */
  hardening?: BwrapHardening & { seccompFd?: number }
}

/** bwrap's whole command line: `options`, then `command` (see bwrapCommandLine). */
export function bwrapArgs(p: BwrapArgsParams): string[] {
  const { options, command } = bwrapCommandLine(p)
  return [...options, ...command]
}

/** bwrap's options (they go through `--args FD`) and the command it runs (it stays in argv). */
export function bwrapCommandLine(p: BwrapArgsParams): { options: string[]; command: string[] } {
  const h = p.hardening
  const node = p.node ?? { path: '/usr/bin/node' }
  const folders = p.folders ?? []
  const workspaceTarget = folders.some((f) => f.target === WORKSPACE) ? STATE_MOUNT : WORKSPACE
  const env: Record<string, string> = {
    ...runnerEnv(p.settings, workspaceTarget === STATE_MOUNT ? STATE_MOUNT : undefined),
    PATH: '/usr/local/bin:/usr/bin:/bin',
    HOME: '/home/corral',
    LANG: 'C.UTF-8',
    USER: 'corral',
    ...(p.packages ? prefixEnv(PACKAGES_PREFIX) : {}),
    ...(h?.prlimit ? { CORRAL_CPU_SECONDS: String(SANDBOX_CPU_SECONDS) } : {}),
    ...p.egress?.env,
  }
  const args = ['--unshare-all', '--die-with-parent', '--new-session', '--uid', '1000', '--gid', '1000', '--cap-drop', 'ALL', '--clearenv']
  if (h?.disableUserns) args.push('--unshare-user', '--disable-userns')
  if (h?.seccomp && h.seccompFd !== undefined) args.push('--seccomp', String(h.seccompFd))
  for (const [k, v] of Object.entries(env)) args.push('--setenv', k, v)
  args.push('--ro-bind', '/usr', '/usr')
  for (const [link, target] of [['/bin', 'usr/bin'], ['/lib', 'usr/lib'], ['/lib64', 'usr/lib64'], ['/sbin', 'usr/sbin']]) args.push('--symlink', target, link)
  for (const etc of ['/etc/alternatives', '/etc/ssl', '/etc/ca-certificates', '/etc/ld.so.cache', '/etc/localtime', '/etc/nsswitch.conf']) args.push('--ro-bind-try', etc, etc)
  args.push('--ro-bind', join(p.sessionDir, 'etc/passwd'), '/etc/passwd', '--ro-bind', join(p.sessionDir, 'etc/group'), '/etc/group')
  args.push('--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp', '--tmpfs', '/home/corral', '--tmpfs', SESSION_MOUNT)
  for (const root of p.settings.extraRoots) if (root !== SESSION_MOUNT && root !== '/tmp') args.push('--tmpfs', root)
  if (p.egress) args.push('--ro-bind', p.egress.dir, p.egress.sandboxDir)
  if (p.packages) args.push(p.packages.writable ? '--bind' : '--ro-bind', p.packages.dir, PACKAGES_PREFIX)
  args.push('--bind', join(p.sessionDir, 'workspace'), workspaceTarget)
  // Outer mounts first (/workspace before /workspace/sub); a bind follows the folder's real path.
  for (const f of [...folders].sort((a, b) => a.target.length - b.target.length)) args.push(f.readOnly ? '--ro-bind' : '--bind', f.source, f.target)
  args.push('--ro-bind', p.runner, '/opt/corral/runner.js', '--chdir', WORKSPACE)
  if (node.bind) args.push('--ro-bind', node.bind, node.path)
  // Limits are set inside the sandbox: set before bwrap, RLIMIT_NPROC would count the host user's own processes.
  const limits = h?.prlimit ? [h.prlimit, `--nproc=${p.settings.pids}`, `--data=${p.settings.memoryMb * 1024 * 1024}`, '--core=0', '--'] : []
  return { options: args, command: [...limits, node.path, '/opt/corral/runner.js'] }
}

/**
 * bwrap's `--args FD` format: each argument followed by a NUL. Throws when an argument holds a
 * NUL itself (it would split into two arguments).
 */
export function bwrapArgsFile(args: readonly string[]): Buffer {
  for (const a of args) if (a.includes('\0')) throw new CorralError('sandbox_error', `a bwrap argument contains a NUL byte: ${JSON.stringify(a.slice(0, 80))}`)
  return Buffer.from(args.map((a) => a + '\0').join(''), 'utf8')
}

/** Where an environment's packages appear inside a bubblewrap sandbox. */
export const PACKAGES_PREFIX = '/opt/corral/env'

/** Makes `dir` a sandbox's home on the host (workspace, passwd, group) and starts its runner in bwrap. */
async function launchBwrap(p: { options: BubblewrapSandboxProviderOptions; dir: string; settings: SandboxSettings; hardening: BwrapHardening; egress?: SandboxEgress; packages?: { dir: string; writable?: boolean }; folders?: readonly FolderMount[] }): Promise<Omit<BwrapLive, 'egress'>> {
  const dir = p.dir
  await mkdir(join(dir, 'workspace'), { recursive: true })
  await mkdir(join(dir, 'etc'), { recursive: true })
  await writeFile(join(dir, 'etc/passwd'), 'root:x:0:0:root:/root:/usr/sbin/nologin\ncorral:x:1000:1000:Corral sandbox:/home/corral:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n')
  await writeFile(join(dir, 'etc/group'), 'root:x:0:\ncorral:x:1000:\nnogroup:x:65534:\n')
  const node = hostNode()
  if (!node) throw new CorralError('sandbox_error', 'no node binary to run the sandbox runner with (install nodejs)')
  const hardening = { ...p.hardening, seccompFd: p.hardening.seccomp ? 4 : undefined }
  const { options, command } = bwrapCommandLine({ sessionDir: dir, settings: p.settings, runner: runnerPath(), node, egress: p.egress, packages: p.packages, folders: p.folders, hardening })
  // Options go through a descriptor (`--args 3`): bwrap's argv, which `ps` shows every user,
  // would otherwise carry the sandbox's environment, the proxy's socket path and the credential
  // placeholders. Only the command (prlimit, node, the runner: nothing secret) stays in argv.
  const bwrap = p.options.bwrap ?? 'bwrap'
  // keyctl session -: bwrap starts in a fresh anonymous session keyring, not the user's.
  const bwrapLine = [...(p.hardening.keyctl ? [p.hardening.keyctl, 'session', '-'] : []), bwrap, '--args', '3', '--', ...command]
  // The whole sandbox in a cgroup of its own where the host lets us make one (pids, memory).
  const cgroup = openSandboxCgroup(`${basename(dir)}-${randomBytes(4).toString('hex')}`, { pids: p.settings.pids, memoryBytes: p.settings.memoryMb * 1024 * 1024 })
  const [file, ...argv] = cgroup ? [...cgroupLauncher(cgroup), ...bwrapLine] : bwrapLine
  const child = spawn(file!, argv, { stdio: ['pipe', 'pipe', 'pipe', 'pipe', 'pipe'], env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } })
  const argsPipe = child.stdio[3] as Writable
  argsPipe.on('error', () => {}) // bwrap that did not start: reported by 'error' / exit below
  argsPipe.end(bwrapArgsFile(options))
  const seccompPipe = child.stdio[4] as Writable
  seccompPipe.on('error', () => {})
  seccompPipe.end(hardening.seccomp ? seccompFilterBytes(hardening.seccomp) : undefined)
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal }))
    child.on('error', () => resolve({ code: null, signal: null }))
  })
  void exited.then(() => cgroup?.dispose())
  const { connection, stderr } = await startRunner({
    input: child.stdin!,
    output: child.stdout!,
    stderr: child.stderr!,
    start: (connection) => {
      child.on('error', (err) => connection.close(`bwrap could not start: ${err.message}`))
    },
    helloTimeoutMs: 15_000,
    failure: 'the bubblewrap sandbox did not start',
    stderrLabel: 'bwrap said',
    abort: () => child.kill('SIGKILL'),
  })
  return { child, connection, exited, fresh: true, stderr }
}

/** What a BubblewrapSandbox works with: its provider's options, and the provider's answers it needs at start. */
export interface BubblewrapSandboxOptions {
  params: SandboxProvisionParams
  settings: SandboxSettings
  provider: BubblewrapSandboxProviderOptions
  /** The environment's installed packages (a prefix directory), installing them first (`progress`: how that install goes); undefined when it lists none. */
  packages: (progress: PackageProgress) => Promise<string | undefined>
  /** What of seccomp / userns / keyring / limits this host offers. */
  hardening: () => Promise<BwrapHardening>
}

export class BubblewrapSandbox extends RunnerSandbox<BwrapLive> {
  readonly backend = 'bubblewrap'
  private readonly o: BubblewrapSandboxOptions

  constructor(o: BubblewrapSandboxOptions) {
    super(o.params, o.settings)
    this.o = o
  }

  get sessionDir(): string {
    return join(this.o.provider.dataDir, bubblewrapKey(this.params.sessionId))
  }

  protected async start(): Promise<BwrapLive> {
    const packages = await this.o.packages(this.packageSteps(this.params.packageProgress))
    const egress = await this.params.egress?.open()
    const live = await launchBwrap({ options: this.o.provider, dir: this.sessionDir, settings: this.settings, hardening: await this.o.hardening(), egress, packages: packages ? { dir: packages } : undefined, folders: this.params.folders })
    return { ...live, egress }
  }

  protected async diagnose(live: BwrapLive): Promise<RunnerDeath> {
    const result = await Promise.race([live.exited, new Promise<undefined>((r) => setTimeout(() => r(undefined), 1500))])
    if (!result) {
      live.child.kill('SIGKILL')
      return { message: 'the sandbox runner stopped answering (it was killed and will be replaced)' }
    }
    const code = result.code ?? (result.signal === 'SIGKILL' ? 137 : null)
    return { message: `the sandbox process exited (${result.signal ? `signal ${result.signal}` : `exit ${result.code}`}${live.stderr() ? `: ${live.stderr().trim().slice(-300)}` : ''})`, exitCode: code }
  }

  protected async discardRunner(live: BwrapLive): Promise<void> {
    live.connection.close('discarded')
    live.child.kill('SIGKILL')
    await Promise.race([live.exited, new Promise((r) => setTimeout(r, 2000))])
  }

  protected async stop(live: BwrapLive | undefined, removeWorkspace: boolean): Promise<void> {
    if (live) {
      live.child.kill('SIGKILL')
      await Promise.race([live.exited, new Promise((r) => setTimeout(r, 2000))])
    }
    // fs.rm removes symlinks the sandbox made without following them.
    if (removeWorkspace) await rm(this.sessionDir, { recursive: true, force: true })
  }
}

export class BubblewrapSandboxProvider implements SandboxProvider {
  readonly backend = 'bubblewrap'
  private readonly live = new Set<BubblewrapSandbox>()
  private readonly packageFlights = new InstallFlights()
  private base: Promise<string> | undefined
  private features: Promise<BwrapHardening> | undefined

  constructor(private readonly options: BubblewrapSandboxProviderOptions) {}

  /**
   * The host directory holding the environment's installed packages (npm, pip, gem, cargo, go;
   * apt needs a root of its own: Docker), bound read-only at PACKAGES_PREFIX; undefined when the
   * environment lists none. Installed once per environment and host toolchain, by the host's own
   * package managers running inside bwrap as the sandbox user, through a registries-only egress,
   * into `<dataDir>/.packages/<key>` (renamed into place only when complete).
   */
  private async packagePrefix(params: EnvironmentPackagesParams, settings: SandboxSettings): Promise<string | undefined> {
    const plan = packagePlan(params.config)
    if (!plan) return undefined
    if (plan.packages.apt.length) {
      throw new CorralError('sandbox_error', `environment ${params.environmentId} lists apt packages (${plan.packages.apt.join(' ')}); apt needs a root filesystem of its own, which bubblewrap sandboxes share with the host: use the docker backend for this environment (config.corral.backend)`)
    }
    const final = await this.prefixFor(plan)
    if (existsSync(final)) return final
    const key = basename(final)
    return installOnce({
      flights: this.packageFlights,
      key,
      result: final,
      cached: () => existsSync(final),
      plan,
      environmentId: params.environmentId,
      openEgress: params.packageEgress,
      progress: params.packageProgress,
      install: (egress, progress) => this.install({ params, settings, plan, key, root: dirname(final), final, egress, progress }),
    })
  }

  /** An environment's packages as a prefix directory under `<dataDir>/.packages`, bound read-only into its sandboxes. */
  readonly packages: EnvironmentPackages = {
    ready: async (params) => {
      const plan = packagePlan(params.config)
      if (!plan) return undefined
      return !plan.packages.apt.length && existsSync(await this.prefixFor(plan))
    },
    prepare: async (params) => {
      await this.packagePrefix(params, sandboxSettings(params.config))
    },
  }

  /** A session's workspace directory, with removeWorkspace (a session with no sandbox here has no bwrap process to stop). */
  async release(sessionId: string, options?: { removeWorkspace?: boolean }): Promise<void> {
    // fs.rm removes symlinks the sandbox made without following them.
    if (options?.removeWorkspace) await rm(join(this.options.dataDir, bubblewrapKey(sessionId)), { recursive: true, force: true })
  }

  private async prefixFor(plan: PackagePlan): Promise<string> {
    return join(this.options.dataDir, '.packages', packageCacheKey(plan, await this.toolchain()))
  }

  private async install(p: { params: EnvironmentPackagesParams; settings: SandboxSettings; plan: PackagePlan; key: string; root: string; final: string; egress: PackageEgressOpener; progress: PackageProgress }): Promise<void> {
    const { params, settings, plan } = p
    const work = join(p.root, `${p.key}.install-${Date.now().toString(36)}`)
    const prefix = join(work, 'prefix')
    await mkdir(prefix, { recursive: true })
    const egress = await p.egress(plan.mirrorHosts)
    let live: Omit<BwrapLive, 'egress'> | undefined
    const log = this.options.log ?? (() => {})
    const started = Date.now()
    log(`packages for ${params.environmentId} (${p.final}): installing ${plan.summary}`)
    try {
      live = await launchBwrap({ options: this.options, dir: join(work, 'home'), settings, hardening: await this.hardening(), egress, packages: { dir: prefix, writable: true } })
      await live.connection.egress({ env: egress.env, socket: egress.bridge.socket, port: egress.bridge.port })
      await runInstall(live.connection, {
        script: installScript(plan, { prefix: PACKAGES_PREFIX }),
        idPrefix: `packages-${p.key}`,
        environmentId: params.environmentId,
        progress: (line) => {
          log(`packages for ${params.environmentId}: ${line}`)
          p.progress({ kind: 'line', line })
        },
      })
      await rename(prefix, p.final)
      log(`packages for ${params.environmentId}: built in ${((Date.now() - started) / 1000).toFixed(1)} s`)
    } finally {
      live?.connection.close('install finished')
      live?.child.kill('SIGKILL')
      if (live) await Promise.race([live.exited, new Promise((r) => setTimeout(r, 2000))])
      await egress.close().catch(() => undefined)
      await rm(work, { recursive: true, force: true })
    }
  }

  /** What the host's package managers are, for the cache key: a new node, npm or python installs again. */
  private toolchain(): Promise<string> {
    this.base ??= (async () => {
      const version = async (cmd: string, args: string[]) => (await run(cmd, args, { timeout: 10_000 }).catch(() => ({ stdout: 'none' }))).stdout.trim()
      const [node, npm, python] = await Promise.all([version('/usr/bin/node', ['--version']), version('/usr/bin/npm', ['--version']), version('/usr/bin/python3', ['--version'])])
      return `bubblewrap node ${node} npm ${npm} ${python}`
    })()
    return this.base
  }

  /** Which of seccomp, --disable-userns, a fresh keyring and limits this host offers (found out once). */
  private hardening(): Promise<BwrapHardening> {
    this.features ??= detectHardening(this.options.bwrap ?? 'bwrap')
    return this.features
  }

  /** For `corral doctor`: what the sandboxes of an environment with `config` get (seccomp, userns, keyring, limits). */
  async guarantees(config: Record<string, unknown> = {}): Promise<Record<string, string>> {
    const s = sandboxSettings(config)
    const probe = openSandboxCgroup(`probe-${randomBytes(4).toString('hex')}`, { pids: s.pids, memoryBytes: s.memoryMb * 1024 * 1024 })
    await probe?.dispose()
    return describeHardening(await this.hardening(), { pids: s.pids, memoryMb: s.memoryMb, cgroup: probe?.controllers ?? [], root: process.getuid?.() === 0 })
  }

  async available(): Promise<{ ok: boolean; reason?: string }> {
    if (process.platform !== 'linux') return { ok: false, reason: `bubblewrap needs Linux (this is ${process.platform})` }
    if (!hostNode()) return { ok: false, reason: 'no node binary to run the sandbox runner with (install nodejs)' }
    try {
      await run(this.options.bwrap ?? 'bwrap', ['--unshare-all', '--uid', '1000', '--gid', '1000', '--cap-drop', 'ALL', '--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', 'true'], { timeout: 5000 })
      return { ok: true }
    } catch (err) {
      const e = err as { code?: string; stderr?: string; message: string }
      if (e.code === 'ENOENT') return { ok: false, reason: 'bwrap is not installed (apt-get install bubblewrap)' }
      return { ok: false, reason: `bwrap does not run here: ${(e.stderr || e.message).trim()}` }
    }
  }

  create(params: SandboxProvisionParams): BubblewrapSandbox {
    const settings = sandboxSettings(params.config)
    const sandbox = new BubblewrapSandbox({ params, settings, provider: this.options, packages: (progress) => this.packagePrefix({ ...params, packageProgress: progress }, settings), hardening: () => this.hardening() })
    this.live.add(sandbox)
    return sandbox
  }

  async dispose(): Promise<void> {
    const all = [...this.live]
    this.live.clear()
    await Promise.all(all.map((s) => s.dispose()))
  }
}
