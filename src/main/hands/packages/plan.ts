import { createHash } from 'node:crypto'
import { PACKAGE_SPEC } from '../../../shared/api/schemas'
import { CorralError } from '../../../shared/errors'

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
