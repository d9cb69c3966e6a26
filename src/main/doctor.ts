import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { readSettings } from './config'
import { webSearchOffer } from './harness/tools'
import { BubblewrapSandboxProvider, DockerSandboxProvider, VmSandboxProvider, detectBackends, type BackendReport } from './hands'
import { openKeychain } from './vault/vault-services'
import { keychainAccount, keychainFix } from './vault/keychain'
import { peerCredentialsReader } from './vault/peer-credentials'
import { probeModel, type ModelProbeResult } from './harness/model-probe'

export interface DoctorFinding {
  area: string
  ok: boolean
  detail: string
}

/**
 * What works on this machine and why the rest does not: sandbox backends (Docker, gVisor,
 * bubblewrap, Seatbelt), the keychain, the model endpoint, the data directory. Never throws:
 * every probe that fails is a finding with ok: false and the reason.
 */
export interface DoctorParams {
  dataDir: string
  env?: NodeJS.ProcessEnv
  /**
   * The model key the engine uses and where it came from (the engine passes its own; the CLI
   * leaves it out and doctor looks: ANTHROPIC_API_KEY, then the keychain).
   */
  apiKey?: { value?: string; source: 'environment' | 'keychain' | 'none' }
  /** false: skip the model probe (no request leaves the machine). Default true. */
  probeModel?: boolean
}

/** Where the model key comes from, said plainly for a finding. */
function keySourceText(source: 'environment' | 'keychain' | 'none'): string {
  return source === 'environment' ? 'API key from the environment (ANTHROPIC_API_KEY)' : source === 'keychain' ? 'API key from the OS keychain' : 'no API key (none in ANTHROPIC_API_KEY or the keychain)'
}

/** The model endpoint finding: a real minimal request (probeModel), its status and error text, and the key's source. */
export function modelFinding(probe: ModelProbeResult, source: 'environment' | 'keychain' | 'none', compatibilityMode: boolean): DoctorFinding {
  const where = `${probe.base_url}${compatibilityMode ? ' (compatibility mode)' : ''}, model ${probe.model}`
  const outcome = probe.ok ? `answered in ${probe.elapsed_ms} ms` : `${probe.status !== null ? `HTTP ${probe.status}: ` : ''}${probe.message}`
  return { area: 'model endpoint', ok: probe.ok, detail: `${where}: ${outcome}; ${keySourceText(source)}` }
}

export async function runDoctor(params: DoctorParams): Promise<DoctorFinding[]> {
  const env = params.env ?? process.env
  const findings: DoctorFinding[] = []
  const providers = [new DockerSandboxProvider({}), new VmSandboxProvider({ dataDir: join(params.dataDir, 'vm') }), new BubblewrapSandboxProvider({ dataDir: join(params.dataDir, 'sandboxes') })]
  try {
    const backends: BackendReport[] = await detectBackends(providers)
    for (const b of backends) {
      const extra = b.details?.gvisor ? `; gVisor: ${String(b.details.gvisor)}` : ''
      findings.push({ area: `sandbox: ${b.backend}`, ok: b.ok, detail: (b.ok ? 'works' : (b.reason ?? 'does not work')) + extra })
      for (const part of ['seccomp', 'user_namespaces', 'keyring', 'limits']) {
        const detail = b.details?.[part]
        if (typeof detail === 'string') findings.push({ area: `sandbox: ${b.backend} ${part.replace('_', ' ')}`, ok: !/^none|^no filter|reachable|possible/.test(detail), detail })
      }
    }
  } finally {
    await Promise.all(providers.map((p) => p.dispose().catch(() => undefined)))
  }

  let keychainKey: string | undefined
  let keychainUp = false
  try {
    const keychain = openKeychain({ dataDir: params.dataDir, env })
    keychainKey = await keychain.get(keychainAccount.anthropicApiKey)
    keychainUp = true
    findings.push({ area: 'keychain', ok: true, detail: `${keychain.backend} answers` })
  } catch (err) {
    findings.push({ area: 'keychain', ok: false, detail: `${(err as Error).message.replace(/; to fix: .*$/, '')} — secrets cannot be stored; to fix: ${keychainFix()}` })
  }

  const peer = peerCredentialsReader()
  findings.push(
    'read' in peer
      ? { area: 'egress socket', ok: true, detail: 'every connection to a sandbox\'s egress socket is checked by its peer credentials (SO_PEERCRED)' }
      : { area: 'egress socket', ok: false, detail: `connections are not checked by peer credentials, only the 0700 socket directory keeps other local users out: ${peer.unavailable}` },
  )

  let settings: ReturnType<typeof readSettings> = {}
  try {
    settings = readSettings(params.dataDir)
  } catch (err) {
    findings.push({ area: 'settings', ok: false, detail: (err as Error).message })
  }
  const key = params.apiKey ?? (env.ANTHROPIC_API_KEY ? { value: env.ANTHROPIC_API_KEY, source: 'environment' as const } : keychainKey ? { value: keychainKey, source: 'keychain' as const } : { source: 'none' as const })
  const baseUrl = env.ANTHROPIC_BASE_URL || settings.model?.baseUrl || undefined
  const compat = env.CORRAL_MODEL_COMPAT === '1' || settings.model?.compatibilityMode === true
  if (!key.value && !baseUrl) {
    // Nothing configured: no request leaves the machine unasked (the brains do not start either).
    findings.push({ area: 'model endpoint', ok: false, detail: `no model endpoint is configured: ${keySourceText(key.source)} and no base URL; connect one in Settings (Connect a model) or set ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL` })
  } else if (params.probeModel === false) {
    findings.push({ area: 'model endpoint', ok: true, detail: `${baseUrl ?? 'https://api.anthropic.com'} (not probed); ${keySourceText(key.source)}${keychainUp || key.source !== 'none' ? '' : ' (the keychain could not be read)'}` })
  } else {
    const probe = await probeModel({ baseURL: baseUrl, apiKey: key.value, compatibilityMode: compat, model: settings.model?.defaultModel })
    findings.push(modelFinding(probe, key.source, compat))
  }
  const search = webSearchOffer({ compatibilityMode: compat, baseUrl })
  findings.push({ area: 'web_search', ok: search.offered, detail: search.reason })
  findings.push({
    area: 'data directory',
    ok: true,
    detail: `${params.dataDir}${existsSync(join(params.dataDir, 'corral.db')) ? '' : ' (no database yet: created at first start)'}`,
  })
  return findings
}
