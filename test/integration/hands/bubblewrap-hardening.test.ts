import { readdirSync, readFileSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BubblewrapSandboxProvider } from '../../../src/main/hands/bubblewrap/bubblewrap-sandbox'
import type { Sandbox } from '../../../src/main/hands/sandbox'
import { EgressCertificateAuthority } from '../../../src/main/vault/egress-ca'
import { EgressProxy, placeholderFor, type EgressHandle, type EgressPolicy } from '../../../src/main/vault/egress-proxy'
import { fakeDialer, fakeResolver } from '../vault/egress-helpers'
import { bwrapReq } from './support'

/*
 * What bubblewrap's sandbox keeps from the host (red-team issue #15, findings 7 and 8): its
 * environment never shows in a process list, and the hardening holds from inside a real
 * bubblewrap sandbox.
 */

const bwrap = bwrapReq()

/** Every host process's command line (NULs as spaces), with its pid. */
function hostCommandLines(): { pid: string; cmdline: string }[] {
  const out: { pid: string; cmdline: string }[] = []
  for (const pid of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      out.push({ pid, cmdline: readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ') })
    } catch {
      // gone meanwhile
    }
  }
  return out
}

describe.skipIf(!bwrap.ok)('bubblewrap sandbox hardening', () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-bwrap-hard-'))
  let proxy: EgressProxy
  let provider: BubblewrapSandboxProvider
  let sandbox: Sandbox
  let handle: EgressHandle | undefined
  let n = 0
  const run = (command: string, timeout_ms?: number) => sandbox.execute({ toolUseId: `toolu_hard_${++n}`, name: 'bash', input: { command, ...(timeout_ms ? { timeout_ms } : {}) } })

  beforeAll(async () => {
    proxy = new EgressProxy({ runtimeDir: join(dir, 'egress'), ca: EgressCertificateAuthority.generate(), resolver: fakeResolver({}), dialer: fakeDialer({}) })
    provider = new BubblewrapSandboxProvider({ dataDir: join(dir, 'sandboxes') })
    const sessionId = `sesn_hard_${process.pid}`
    const policy: EgressPolicy = {
      networking: { type: 'limited', allowedHosts: ['api.example.test'] },
      credentials: [{ credentialId: 'vcrd_hardening', secretName: 'API_TOKEN', hosts: ['api.example.test'], header: true, body: false, secret: async () => 'canary-hardening-secret' }],
      repositories: [],
    }
    sandbox = provider.create({
      sessionId,
      environmentId: 'env_hard',
      config: { type: 'cloud', corral: { backend: 'bubblewrap' } },
      egress: { open: async () => (handle ??= await proxy.open({ sessionId, policy })), release: async () => handle?.close() },
    })
    await sandbox.provision()
  }, 60_000)

  afterAll(async () => {
    await sandbox?.dispose({ removeWorkspace: true })
    await provider?.dispose()
    await proxy?.dispose()
    rmSync(dir, { recursive: true, force: true })
  })

  it('shows neither the credential placeholder nor the proxy socket path in any host process command line while a sandbox runs', async () => {
    const placeholder = placeholderFor('vcrd_hardening')
    const pending = run('echo "token=$API_TOKEN"; sleep 1')
    await new Promise((r) => setTimeout(r, 300))
    const leaks = hostCommandLines().filter((p) => p.cmdline.includes(placeholder) || p.cmdline.includes(handle!.dir) || p.cmdline.includes(handle!.bridge.socket))
    const r = await pending
    // The sandbox does have them: they are just not in anybody's argv.
    expect(r.content).toBe(`token=${placeholder}`)
    expect(hostCommandLines().some((p) => /\bbwrap\b/.test(p.cmdline))).toBe(true)
    expect(leaks).toEqual([])
  })
})
