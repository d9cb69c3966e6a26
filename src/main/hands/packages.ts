import { createHash } from 'node:crypto'
import { PACKAGE_SPEC } from '../../shared/api/schemas'
import type { PackageStatus } from '../../shared/api/types'
import { CorralError } from '../../shared/errors'
import type { RunnerConnection } from './runner-connection'
import type { SandboxEgress } from './sandbox'

/**
 * An environment's `packages` (the API's apt / cargo / gem / go / npm / pip lists), installed
 * once per environment at provision, through the egress proxy, and cached: Docker commits the
 * result as an image (`corral-env:<key>`), bubblewrap keeps a per-environment prefix directory.
 * The next sandbox of the environment starts from the cache without reinstalling.
 *
 * The install never uses the session's own networking: it gets an egress of its own that reaches
 * the package registries (PACKAGE_MANAGER_HOSTS) and the environment's `config.corral.package_sources`
 * mirrors, and nothing else, with no credential. The sandbox's network stays off.
 */
export const PACKAGE_MANAGERS = ['apt', 'pip', 'npm', 'gem', 'cargo', 'go'] as const
export type PackageManager = (typeof PACKAGE_MANAGERS)[number]

/** Registry mirrors (Corral's `config.corral.package_sources`): for offline or company registries. */
export interface PackageSources {
  /** sources.list lines that replace the image's apt sources, e.g. `deb [trusted=yes] http://mirror/ ./`. */
  apt?: string[]
  /** An npm registry URL. */
  npm?: string
  /** A pip index URL (PEP 503 "simple"). */
  pip?: string
}

export interface PackagePlan {
  /** Each manager's package specs, deduplicated and sorted (the order never changes what gets installed). */
  packages: Record<PackageManager, string[]>
  sources: PackageSources
  /** Hosts the install may reach besides the registries' defaults: the mirrors'. */
  mirrorHosts: string[]
  /** "apt: jq; npm: left-pad@1.3.0" — for progress lines and errors. */
  summary: string
}

/** An egress for an install (registries only, no credentials); closed when the install ends. */
export interface PackageEgress extends SandboxEgress {
  close(): Promise<void>
}

/** Opens an egress that reaches the package registries plus `extraHosts` (the vault's `packageEgress`). */
export type PackageEgressOpener = (extraHosts: readonly string[]) => Promise<PackageEgress>


/**
 * The install plan of an environment's stored config, or undefined when it lists no package.
 * Throws CorralError invalid_request_error naming the field when a spec or a source is unusable.
 */
export function packagePlan(config: Record<string, unknown> | undefined): PackagePlan | undefined {
  const raw = (config?.packages ?? {}) as Partial<Record<PackageManager, unknown>>
  const packages = {} as Record<PackageManager, string[]>
  let any = false
  for (const m of PACKAGE_MANAGERS) {
    const list = raw[m] ?? []
    if (!Array.isArray(list)) throw new CorralError('invalid_request_error', `config.packages.${m} must be a list of package names`)
    for (const [i, spec] of list.entries()) {
      if (typeof spec !== 'string' || spec.length === 0 || spec.length > 256 || !PACKAGE_SPEC.test(spec)) {
        throw new CorralError('invalid_request_error', `config.packages.${m}[${i}]: ${JSON.stringify(spec)} is not a package spec (letters, digits and @ _ . + = < > ~ ^ : / * , [ ] ! -, not starting with -)`)
      }
    }
    packages[m] = [...new Set(list as string[])].sort()
    if (packages[m].length) any = true
  }
  if (!any) return undefined
  const corral = (config?.corral ?? {}) as { package_sources?: PackageSources }
  const sources: PackageSources = {}
  const mirrorHosts = new Set<string>()
  const s = corral.package_sources ?? {}
  for (const [field, url] of [['npm', s.npm], ['pip', s.pip]] as const) {
    if (url === undefined) continue
    const host = urlHost(url, `config.corral.package_sources.${field}`)
    mirrorHosts.add(host)
    sources[field] = url
  }
  if (s.apt?.length) {
    sources.apt = s.apt.map((line, i) => {
      const m = /^deb(?:\s+\[[^\]\n]*\])?\s+(\S+)(\s+\S+)+$/.exec(line)
      if (!m || /['"\\\n]/.test(line)) throw new CorralError('invalid_request_error', `config.corral.package_sources.apt[${i}]: ${JSON.stringify(line)} is not a sources.list line ("deb [options] URL suite [components]")`)
      mirrorHosts.add(urlHost(m[1]!, `config.corral.package_sources.apt[${i}]`))
      return line
    })
  }
  const summary = PACKAGE_MANAGERS.filter((m) => packages[m].length)
    .map((m) => `${m}: ${packages[m].join(' ')}`)
    .join('; ')
  return { packages, sources, mirrorHosts: [...mirrorHosts].sort(), summary }
}

function urlHost(url: string, field: string): string {
  let u: URL
  try {
    u = new URL(url)
  } catch {
    throw new CorralError('invalid_request_error', `${field}: ${JSON.stringify(url)} is not a URL`)
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new CorralError('invalid_request_error', `${field}: ${JSON.stringify(url)} must be an http or https URL`)
  if (u.username || u.password) throw new CorralError('invalid_request_error', `${field}: put no credentials in a mirror URL (it would be baked into the cache); use a vault credential`)
  return u.hostname.toLowerCase()
}

/** Bumped when the install script changes in a way that must not reuse older caches. */
const SCRIPT_VERSION = 1

/** The cache key of a plan on a base (an image id, or a host root's identity): 16 hex digits. */
export function packageCacheKey(plan: PackagePlan, base: string): string {
  return createHash('sha256').update(JSON.stringify({ v: SCRIPT_VERSION, base, packages: plan.packages, sources: plan.sources })).digest('hex').slice(0, 16)
}

const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`
const words = (list: string[]) => list.map(q).join(' ')

/**
 * The bash script that installs a plan. `prefix` (bubblewrap) installs npm, pip, gem, cargo and go
 * packages under a directory instead of the system (apt needs a root filesystem of its own: Docker
 * only). Every step prints a `[packages]` progress line; a failure prints
 * `[packages] FAILED: <what>` and exits non-zero.
 */
export function installScript(plan: PackagePlan, options: { prefix?: string } = {}): string {
  const p = plan.packages
  const pre = options.prefix
  const lines = [
    'set -o pipefail',
    'export DEBIAN_FRONTEND=noninteractive',
    'say() { printf "[packages] %s\\n" "$*"; }',
    'fail() { printf "[packages] FAILED: %s\\n" "$*"; exit 3; }',
    'need() { command -v "$1" >/dev/null 2>&1 || fail "packages.$2 needs $1, which this sandbox image does not have: $3"; }',
  ]
  if (p.apt.length) {
    if (pre) lines.push('fail "packages.apt needs a root filesystem of its own: use the docker backend (config.corral.backend) for this environment"')
    lines.push('need apt-get apt "use a Debian or Ubuntu based image"')
    if (plan.sources.apt) lines.push(`printf '%s\\n' ${words(plan.sources.apt)} > /etc/apt/sources.list`, 'rm -f /etc/apt/sources.list.d/*')
    lines.push(
      'say "apt: updating the package lists"',
      'apt-get -q -o APT::Sandbox::User=root -o Acquire::Retries=2 update 2>&1 || fail "packages.apt: apt-get update failed"',
      `say "apt: installing ${p.apt.length} package(s)"`,
      `apt-get -q -y -o APT::Sandbox::User=root --no-install-recommends install ${words(p.apt)} 2>&1 || fail "packages.apt: apt-get install failed"`,
      'apt-get clean; rm -rf /var/lib/apt/lists/*',
    )
  }
  if (p.pip.length) {
    lines.push('python3 -m pip --version >/dev/null 2>&1 || fail "packages.pip needs pip, which this sandbox image does not have: add python3-pip to packages.apt"')
    const index = plan.sources.pip ? ` --index-url ${q(plan.sources.pip)}${plan.sources.pip.startsWith('http:') ? ` --trusted-host ${q(new URL(plan.sources.pip).host)}` : ''}` : ''
    const target = pre ? ` --target ${q(`${pre}/python`)}` : ' --break-system-packages'
    lines.push(
      `say "pip: installing ${p.pip.length} package(s)"`,
      `python3 -m pip install --no-cache-dir --disable-pip-version-check --no-input --root-user-action=ignore --progress-bar off${target}${index} ${words(p.pip)} 2>&1 || fail "packages.pip: pip install failed"`,
    )
  }
  if (p.npm.length) {
    lines.push('need npm npm "add npm to packages.apt"')
    const registry = plan.sources.npm ? ` --registry ${q(plan.sources.npm)}` : ''
    const target = pre ? ` --prefix ${q(`${pre}/npm`)}` : ''
    lines.push(
      `say "npm: installing ${p.npm.length} package(s)"`,
      `npm install --global --no-fund --no-audit --no-update-notifier --loglevel=warn${target}${registry} ${words(p.npm)} 2>&1 || fail "packages.npm: npm install failed"`,
      'rm -rf "$HOME/.npm/_cacache"',
    )
  }
  if (p.gem.length) {
    lines.push('need gem gem "add ruby to packages.apt"', `say "gem: installing ${p.gem.length} package(s)"`)
    lines.push(`gem install --no-document${pre ? ` --install-dir ${q(`${pre}/gem`)} --bindir ${q(`${pre}/bin`)}` : ''} ${words(p.gem)} 2>&1 || fail "packages.gem: gem install failed"`)
  }
  if (p.cargo.length) {
    lines.push('need cargo cargo "add cargo to packages.apt"', `say "cargo: installing ${p.cargo.length} package(s)"`)
    lines.push(`cargo install --root ${q(pre ? `${pre}/cargo` : '/usr/local')} ${words(p.cargo)} 2>&1 || fail "packages.cargo: cargo install failed"`, 'rm -rf "$HOME/.cargo/registry"')
  }
  if (p.go.length) {
    lines.push('need go go "add golang-go to packages.apt"', `say "go: installing ${p.go.length} package(s)"`)
    lines.push(`GOBIN=${q(pre ? `${pre}/bin` : '/usr/local/bin')} go install ${words(p.go.map((g) => (g.includes('@') ? g : `${g}@latest`)))} 2>&1 || fail "packages.go: go install failed"`, 'rm -rf "$HOME/go/pkg"')
  }
  // What an apt package (or a postinst) brought in cannot regain privileges inside a sandbox.
  if (!pre) lines.push('find / -xdev -perm /6000 -type f -exec chmod ug-s {} + 2>/dev/null', 'true')
  lines.push('say "done"')
  return lines.join('\n')
}

/** The environment variables that put a prefix install (bubblewrap) on the sandbox's paths. */
export function prefixEnv(prefix: string): Record<string, string> {
  return {
    PATH: `${prefix}/bin:${prefix}/npm/bin:${prefix}/python/bin:${prefix}/cargo/bin:/usr/local/bin:/usr/bin:/bin`,
    NODE_PATH: `${prefix}/npm/lib/node_modules`,
    GEM_PATH: `${prefix}/gem`,
    PYTHONPATH: `${prefix}/python`,
  }
}

/** Longest an install may take before it is abandoned. */
export const INSTALL_TIMEOUT_MS = 30 * 60_000

/**
 * Runs an install script through a started runner (whose egress is already open), passing each
 * `[packages]` progress line to `progress` as it comes. Throws CorralError sandbox_error with the
 * package manager's last lines when the script fails.
 */
export async function runInstall(connection: RunnerConnection, script: string, p: { idPrefix: string; environmentId: string; progress: (line: string) => void }): Promise<void> {
  let output = ''
  let pending = ''
  const result = await connection.call({
    toolUseId: `${p.idPrefix}-${Date.now().toString(36)}`,
    name: 'bash',
    input: { command: script, timeout: INSTALL_TIMEOUT_MS },
    cap: 4 * 1024 * 1024,
    onOutput: (chunk) => {
      output = (output + chunk).slice(-64 * 1024)
      pending += chunk
      const lines = pending.split(/\r?\n/)
      pending = lines.pop() ?? ''
      for (const line of lines) if (line.startsWith('[packages] ')) p.progress(line.slice(11))
    },
  })
  if (result.isError || (result.exitCode ?? 0) !== 0) throw installError(p.environmentId, installFailure(output || result.content))
}

/**
 * An environment's install, done once whatever the backend: single-flight by cache key, the cache
 * looked at again inside the flight, progress reported (start, then ready or failed), a missing
 * egress said plainly, every failure as installError. `install` builds the cache; returns `result`.
 */
export function installOnce(p: {
  flights: InstallFlights
  key: string
  result: string
  cached: () => Promise<boolean> | boolean
  plan: PackagePlan
  environmentId: string
  openEgress?: PackageEgressOpener
  progress?: PackageProgress
  install: (openEgress: PackageEgressOpener, progress: PackageProgress) => Promise<void>
}): Promise<string> {
  return p.flights.run(p.key, async () => {
    if (await p.cached()) return p.result
    const progress = p.progress ?? (() => {})
    progress({ kind: 'start', summary: p.plan.summary })
    try {
      if (!p.openEgress) throw new CorralError('sandbox_error', `this Corral has no egress proxy to install them through (${p.plan.summary}; the proxy needs the OS keychain: see corral doctor)`)
      await p.install(p.openEgress, progress)
      progress({ kind: 'ready' })
      return p.result
    } catch (err) {
      const failed = installError(p.environmentId, err)
      progress({ kind: 'failed', message: failed.message })
      throw failed
    }
  })
}

/**
 * The last lines of an install's output that explain a failure: the `FAILED` line and what the
 * package manager printed before it (no more than `max` characters).
 */
export function installFailure(output: string, max = 1500): string {
  const lines = output.replace(/\r/g, '').split('\n').filter((l) => (l.trim() !== '' && !l.startsWith('[packages] ')) || l.startsWith('[packages] FAILED'))
  const failed = lines.findIndex((l) => l.startsWith('[packages] FAILED: '))
  const head = failed >= 0 ? lines[failed]!.slice('[packages] FAILED: '.length) : 'the install script failed'
  const before = (failed >= 0 ? lines.slice(0, failed) : lines).slice(-12).join('\n')
  const detail = before.length > max ? '…' + before.slice(-max) : before
  return detail ? `${head}; its output ended with:\n${detail}` : head
}

/** An install's failure as the sandbox_error sessions and the status show: it always says what failed. */
export function installError(environmentId: string, err: unknown): CorralError {
  const prefix = `installing the packages of environment ${environmentId} failed: `
  const message = err instanceof Error ? err.message : String(err)
  const cause = err instanceof Error ? err : undefined
  if (err instanceof CorralError && err.code === 'sandbox_error' && message.startsWith(prefix)) return err
  return new CorralError('sandbox_error', message.startsWith(prefix) ? message : prefix + message, { cause })
}

/** Single-flight by key: one install per cache key at a time in this process. */
export class InstallFlights {
  private readonly flights = new Map<string, Promise<string>>()

  run(key: string, install: () => Promise<string>): Promise<string> {
    let f = this.flights.get(key)
    if (!f) {
      f = install().finally(() => this.flights.delete(key))
      this.flights.set(key, f)
    }
    return f
  }

  get size(): number {
    return this.flights.size
  }
}

export type { PackageState, PackageStatus } from '../../shared/api/types'

/** What an install tells about itself, as it goes. */
export type PackageProgressEvent = { kind: 'start'; summary: string } | { kind: 'line'; line: string } | { kind: 'ready' } | { kind: 'failed'; message: string }
export type PackageProgress = (event: PackageProgressEvent) => void

/** The installs of this process, by environment: what `packageStatus` reports besides the caches themselves. */
export class PackageStatusBoard {
  private readonly entries = new Map<string, PackageStatus>()

  /** A progress sink for one environment's install on one backend. */
  reporter(environmentId: string, backend: string): PackageProgress {
    return (e) => {
      const now = new Date().toISOString()
      if (e.kind === 'start') {
        this.entries.set(environmentId, { environment_id: environmentId, state: 'installing', backend, summary: e.summary, started_at: now, progress: [] })
        return
      }
      const entry = this.entries.get(environmentId)
      if (!entry) return
      if (e.kind === 'line') entry.progress = [...entry.progress, e.line].slice(-20)
      else if (e.kind === 'ready') Object.assign(entry, { state: 'ready', finished_at: now, error: undefined })
      else Object.assign(entry, { state: 'failed', finished_at: now, error: e.message })
    }
  }

  get(environmentId: string): PackageStatus | undefined {
    const e = this.entries.get(environmentId)
    return e && { ...e, progress: [...e.progress] }
  }
}
