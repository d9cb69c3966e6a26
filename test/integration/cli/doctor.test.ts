import { describe, expect, it } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runDoctor } from '../../../src/main/doctor'
import { peerCredentialsReader } from '../../../src/main/vault/peer-credentials'
import { bubblewrapProbe, dockerProbe, requirement } from '../../support/requirements'

const bwrap = requirement('bubblewrap', bubblewrapProbe)
const docker = requirement('docker', dockerProbe)

describe('corral doctor', () => {
  it('reports every sandbox backend, the keychain, the model endpoint and the data directory', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'corral-doctor-'))
    try {
      const findings = await runDoctor({ dataDir, env: { ...process.env, ANTHROPIC_BASE_URL: 'http://127.0.0.1:9/v1', ANTHROPIC_API_KEY: '' } })
      const areas = findings.map((f) => f.area)
      expect(areas).toEqual(expect.arrayContaining(['sandbox: docker', 'sandbox: bubblewrap', 'sandbox: seatbelt', 'keychain', 'model endpoint', 'data directory']))
      expect(findings.find((f) => f.area === 'model endpoint')!.detail).toContain('http://127.0.0.1:9/v1')
      expect(findings.find((f) => f.area === 'data directory')!.detail).toContain(dataDir)
      expect(findings.find((f) => f.area === 'web_search')).toMatchObject({ ok: true, detail: expect.stringContaining('server-side search tool (web_search_20250305) at http://127.0.0.1:9/v1') })
      const compat = await runDoctor({ dataDir, env: { ...process.env, ANTHROPIC_BASE_URL: 'http://127.0.0.1:9/v1', CORRAL_MODEL_COMPAT: '1' }, probeModel: false })
      expect(compat.find((f) => f.area === 'web_search')).toMatchObject({ ok: false, detail: expect.stringContaining('not offered: the model endpoint is in compatibility mode') })
      const seatbelt = findings.find((f) => f.area === 'sandbox: seatbelt')!
      if (process.platform !== 'darwin') expect(seatbelt).toMatchObject({ ok: false, detail: 'macOS only' })
      if (bwrap.ok) expect(findings.find((f) => f.area === 'sandbox: bubblewrap')!.ok).toBe(true)
      if (docker.ok) expect(findings.find((f) => f.area === 'sandbox: docker')!.ok).toBe(true)
      for (const f of findings) if (!f.ok) expect(f.detail.length).toBeGreaterThan(5)
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  })

  it('says whether the egress proxy checks who connects to a sandbox socket, and how to build the check when it is missing', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'corral-doctor-'))
    try {
      const findings = await runDoctor({ dataDir, env: { ...process.env, ANTHROPIC_BASE_URL: 'http://127.0.0.1:9/v1' }, probeModel: false })
      const egress = findings.find((f) => f.area === 'egress socket')
      expect(egress).toBeDefined()
      const built = 'read' in peerCredentialsReader()
      expect(egress!.ok).toBe(built)
      expect(egress!.detail).toContain(built ? 'SO_PEERCRED' : 'npm run build:native')
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  })
})
