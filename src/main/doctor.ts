import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { readSettings } from './config'
import { BubblewrapSandboxProvider, DockerSandboxProvider, detectBackends, type BackendReport } from './hands'
import { openKeychain } from './vault/vault-services'

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
export async function runDoctor(params: { dataDir: string; env?: NodeJS.ProcessEnv }): Promise<DoctorFinding[]> {
  const env = params.env ?? process.env
  const findings: DoctorFinding[] = []
  const providers = [new DockerSandboxProvider({}), new BubblewrapSandboxProvider({ dataDir: join(params.dataDir, 'sandboxes') })]
  try {
    const backends: BackendReport[] = await detectBackends(providers)
    for (const b of backends) {
      const extra = b.details?.gvisor ? `; gVisor: ${String(b.details.gvisor)}` : ''
      findings.push({ area: `sandbox: ${b.backend}`, ok: b.ok, detail: (b.ok ? 'works' : (b.reason ?? 'does not work')) + extra })
    }
  } finally {
    await Promise.all(providers.map((p) => p.dispose().catch(() => undefined)))
  }

  try {
    const keychain = openKeychain({ dataDir: params.dataDir, env })
    await keychain.get('doctor-probe')
    findings.push({ area: 'keychain', ok: true, detail: `${keychain.backend} answers` })
  } catch (err) {
    findings.push({ area: 'keychain', ok: false, detail: `${(err as Error).message} — secrets cannot be stored; on Linux run a Secret Service (gnome-keyring) in a D-Bus session` })
  }

  let settings: ReturnType<typeof readSettings> = {}
  try {
    settings = readSettings(params.dataDir)
  } catch (err) {
    findings.push({ area: 'settings', ok: false, detail: (err as Error).message })
  }
  const baseUrl = env.ANTHROPIC_BASE_URL || settings.model?.baseUrl || 'https://api.anthropic.com'
  const hasKey = Boolean(env.ANTHROPIC_API_KEY)
  findings.push({
    area: 'model endpoint',
    ok: true,
    detail: `${baseUrl}${settings.model?.compatibilityMode ? ' (compatibility mode)' : ''}; API key ${hasKey ? 'from ANTHROPIC_API_KEY' : 'from the keychain if stored there (corral secrets), else none'}`,
  })
  findings.push({
    area: 'data directory',
    ok: true,
    detail: `${params.dataDir}${existsSync(join(params.dataDir, 'corral.db')) ? '' : ' (no database yet: created at first start)'}`,
  })
  return findings
}
