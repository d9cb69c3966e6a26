import type { Environment } from '../../api/types'

export interface Draft {
  name: string
  description: string
  type: 'cloud' | 'self_hosted'
  networking: 'none' | 'limited' | 'unrestricted'
  allowedHosts: string
  allowPackageManagers: boolean
  allowMcp: boolean
  apt: string
  npm: string
  pip: string
  backend: 'auto' | 'docker' | 'vm' | 'bubblewrap'
  image: string
  memoryMb: string
  cpus: string
}

type CloudConfig = {
  type: 'cloud'
  networking?: { type: string; allowed_hosts?: string[] | null; allow_package_managers?: boolean | null; allow_mcp_servers?: boolean | null } | null
  packages?: { apt?: string[] | null; npm?: string[] | null; pip?: string[] | null; [manager: string]: unknown } | null
  corral?: { backend?: Draft['backend']; image?: string; memory_mb?: number; cpus?: number; [field: string]: unknown }
}

export function draftOf(env?: Environment): Draft {
  const c = (env?.config.type === 'cloud' ? env.config : undefined) as CloudConfig | undefined
  const net = c?.networking
  const hosts = net?.allowed_hosts ?? []
  return {
    name: env?.name ?? '',
    description: env?.description ?? '',
    type: env?.config.type ?? 'cloud',
    networking: net?.type === 'unrestricted' ? 'unrestricted' : net?.type === 'limited' && (hosts.length || net.allow_package_managers || net.allow_mcp_servers) ? 'limited' : 'none',
    allowedHosts: hosts.join('\n'),
    allowPackageManagers: !!net?.allow_package_managers,
    allowMcp: !!net?.allow_mcp_servers,
    apt: (c?.packages?.apt ?? []).join(' '),
    npm: (c?.packages?.npm ?? []).join(' '),
    pip: (c?.packages?.pip ?? []).join(' '),
    backend: c?.corral?.backend ?? 'auto',
    image: c?.corral?.image ?? '',
    memoryMb: c?.corral?.memory_mb ? String(c.corral.memory_mb) : '',
    cpus: c?.corral?.cpus ? String(c.corral.cpus) : '',
  }
}

const list = (s: string) => s.split(/[\s,]+/).map((x) => x.trim()).filter(Boolean)

/**
 * The create/update body for a draft. Fields the form does not show (the packages of other
 * managers, `corral.package_sources`, `pool_size`, …) are kept from `env` as they were, so saving
 * the form never drops what was set through the API.
 */
export function paramsOf(d: Draft, env?: Environment): Record<string, unknown> {
  if (d.type === 'self_hosted') return { name: d.name.trim(), description: d.description.trim() || null, config: { type: 'self_hosted' } }
  const before = (env?.config.type === 'cloud' ? env.config : undefined) as CloudConfig | undefined
  const networking =
    d.networking === 'unrestricted'
      ? { type: 'unrestricted' }
      : d.networking === 'limited'
        ? { type: 'limited', allowed_hosts: list(d.allowedHosts), allow_package_managers: d.allowPackageManagers, allow_mcp_servers: d.allowMcp }
        : { type: 'limited', allowed_hosts: [], allow_package_managers: false, allow_mcp_servers: false }
  const corral: Record<string, unknown> = { ...(before?.corral ?? {}), backend: d.backend }
  for (const [field, value] of [['image', d.image.trim()], ['memory_mb', d.memoryMb.trim()], ['cpus', d.cpus.trim()]] as const) {
    if (!value) delete corral[field]
    else corral[field] = field === 'image' ? value : Number(value)
  }
  return {
    name: d.name.trim(),
    description: d.description.trim() || null,
    config: { type: 'cloud', networking, packages: { ...(before?.packages ?? {}), apt: list(d.apt), npm: list(d.npm), pip: list(d.pip) }, corral },
  }
}

/** Whether a saved environment lists packages to install. */
export function hasPackages(env: Environment): boolean {
  const p = env.config.type === 'cloud' ? ((env.config as unknown as CloudConfig).packages ?? {}) : {}
  return Object.values(p).some((v) => Array.isArray(v) && v.length > 0)
}
