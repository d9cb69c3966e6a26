import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import http from 'node:http'
import type net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Engine } from '../../../src/main/engine'
import { KeyringKeychain } from '../../../src/main/vault/keyring-keychain'
import { keychainAccount } from '../../../src/main/vault/keychain'
import { EgressProxy, placeholderFor } from '../../../src/main/vault/egress-proxy'
import { EgressCertificateAuthority } from '../../../src/main/vault/egress-ca'
import { bwrapReq, dockerReq } from '../hands/support'
import { keychainProbe, requirement } from '../../support/requirements'
import { echoServer, fakeDialer, fakeResolver, fetchPy, upstreamPki, viaProxy } from './egress-helpers'

/*
 * Finding 4 of the red-team issue: a change to what a session may reach must reach its running
 * sandbox before the API call that made it returns. Each test starts a session on the engine's
 * own hands (a real sandbox, the real proxy, the keychain), shows the credential injected once,
 * makes one change through the official SDK, and the very next request from inside the sandbox
 * is decided by the new policy.
 */

const keychainReq = requirement('keychain', keychainProbe)
const SECRET = 'canary-policy-change-9e41'
const pki = upstreamPki(['api.example.test', 'other.example.test'])
// The sandbox trusts the proxy's CA (intercepted hosts) and, written in by the command, the test
// upstream's own CA (a host the proxy only tunnels blindly, e.g. once no credential is injected there).
const TRUST = `cat /run/corral-egress/ca-bundle.pem > /tmp/trust.pem; cat >> /tmp/trust.pem <<'PEM'\n${pki.caPem}PEM\n`
const CALL_API = TRUST + fetchPy('https://api.example.test/v1/data', `{'Authorization': 'Bearer ' + os.environ['API_TOKEN']}`, true, '/tmp/trust.pem')
const CALL_OTHER = TRUST + fetchPy('https://other.example.test/v1/data', '{}', true, '/tmp/trust.pem')

function describePolicyChanges(backend: 'docker' | 'bubblewrap', ready: boolean): void {
  describe.skipIf(!ready || !keychainReq.ok)(`egress policy changes reach a running ${backend} sandbox before the API call returns`, () => {
    const dataDir = mkdtempSync(join(tmpdir(), `corral-policy-${backend}-`))
    const keychain = new KeyringKeychain({ service: `corral-test-policy-${backend}-${process.pid}-${Date.now()}` })
    const cleanup: string[] = []
    let upstream: Awaited<ReturnType<typeof echoServer>>
    let engine: Engine
    let client: Anthropic
    let calls = 0

    beforeAll(async () => {
      upstream = await echoServer({ cert: pki.cert, key: pki.key })
      engine = await Engine.openWithKeychain({
        dataDir,
        keychain,
        token: 'test-token',
        env: { PATH: process.env.PATH },
        harness: { enabled: false },
        egress: {
          resolver: fakeResolver({ 'api.example.test': ['203.0.113.10'], 'other.example.test': ['203.0.113.11'] }),
          dialer: fakeDialer({ '203.0.113.10:443': upstream.port, '203.0.113.11:443': upstream.port }),
          upstreamCa: [pki.caPem],
        },
      })
      client = new Anthropic({ baseURL: (await engine.listen(0)).url, apiKey: 'test-token' })
    })

    afterAll(async () => {
      await engine?.close()
      await upstream?.close()
      for (const a of [...cleanup, keychainAccount.egressCaKey]) await keychain.delete(a).catch(() => false)
      rmSync(dataDir, { recursive: true, force: true })
    })

    /** Runs a shell command in the session's sandbox (provisioned on the first call). */
    async function sh(sessionId: string, command: string): Promise<string> {
      const r = await engine.hands!.execute({ sessionId, toolUseId: `toolu_policy_${backend}_${++calls}`, name: 'bash', input: { command } })
      return r.content
    }

    /** The Authorization header the upstream saw for the next request `run` makes. */
    async function authorizationSeen(run: () => Promise<string>): Promise<{ out: string; authorization: string | undefined }> {
      const before = upstream.seen.length
      const out = await run()
      return { out, authorization: upstream.seen.length > before ? String(upstream.seen.at(-1)!.headers.authorization) : undefined }
    }

    /**
     * A running session whose environment allows both hosts and whose vault's credential is
     * injected for api.example.test: shown to work from inside the sandbox before any change.
     */
    async function runningSession() {
      const vault = await client.beta.vaults.create({ display_name: 'policy' })
      const credential = await client.beta.vaults.credentials.create(vault.id, {
        auth: { type: 'environment_variable', secret_name: 'API_TOKEN', secret_value: SECRET, networking: { type: 'limited', allowed_hosts: ['api.example.test'] } },
      })
      cleanup.push(keychainAccount.credential(credential.id, 'secret_value'))
      const environment = await client.beta.environments.create({
        name: `policy ${backend}`,
        config: { type: 'cloud', networking: { type: 'limited', allowed_hosts: ['api.example.test', 'other.example.test'] }, corral: { backend, pool_size: 0 } } as unknown as Anthropic.Beta.BetaCloudConfigParams,
      })
      const agent = await client.beta.agents.create({ name: 'policy', model: 'claude-sonnet-5-5' })
      const session = await client.beta.sessions.create({ agent: agent.id, environment_id: environment.id, vault_ids: [vault.id] })
      const first = await authorizationSeen(() => sh(session.id, CALL_API))
      expect(first.out).toMatch(/STATUS 200/)
      expect(first.authorization).toBe(`Bearer ${SECRET}`)
      expect(await sh(session.id, CALL_OTHER)).toMatch(/STATUS 200/)
      return { sessionId: session.id, vaultId: vault.id, credentialId: credential.id, environmentId: environment.id }
    }

    it('refuses a host on the very next request once environments.update narrows allowed_hosts', async () => {
      const s = await runningSession()
      await client.beta.environments.update(s.environmentId, { config: { type: 'cloud', networking: { type: 'limited', allowed_hosts: ['api.example.test'] } } })
      const out = await sh(s.sessionId, CALL_OTHER)
      expect(out).toMatch(/403|Forbidden/)
      expect(out).not.toMatch(/STATUS 200/)
      expect((await authorizationSeen(() => sh(s.sessionId, CALL_API))).authorization).toBe(`Bearer ${SECRET}`)
    }, 120_000)

    it('stops injecting a credential once credentials.update narrows its hosts away from the host', async () => {
      const s = await runningSession()
      await client.beta.vaults.credentials.update(s.credentialId, { vault_id: s.vaultId, auth: { type: 'environment_variable', networking: { type: 'limited', allowed_hosts: ['elsewhere.example.test'] } } })
      const next = await authorizationSeen(() => sh(s.sessionId, CALL_API))
      expect(next.authorization).toBe(`Bearer ${placeholderFor(s.credentialId)}`)
    }, 120_000)

    it('never injects a credential after credentials.archive', async () => {
      const s = await runningSession()
      await client.beta.vaults.credentials.archive(s.credentialId, { vault_id: s.vaultId })
      const next = await authorizationSeen(() => sh(s.sessionId, CALL_API))
      expect(next.authorization).toBe(`Bearer ${placeholderFor(s.credentialId)}`)
      expect(next.out).not.toContain(SECRET)
    }, 120_000)

    it('never injects a credential of a vault after vaults.archive', async () => {
      const s = await runningSession()
      await client.beta.vaults.archive(s.vaultId)
      expect((await authorizationSeen(() => sh(s.sessionId, CALL_API))).authorization).toBe(`Bearer ${placeholderFor(s.credentialId)}`)
    }, 120_000)

    it('never injects a credential of a vault that sessions.update removed from vault_ids', async () => {
      const s = await runningSession()
      await client.beta.sessions.update(s.sessionId, { vault_ids: [] })
      expect((await authorizationSeen(() => sh(s.sessionId, CALL_API))).authorization).toBe(`Bearer ${placeholderFor(s.credentialId)}`)
    }, 120_000)
  })
}

const bwrap = bwrapReq()
const docker = dockerReq()
describe('EgressHandle.update: a connection made under the old policy does not outlive it', () => {
  it('closes a blind tunnel opened before the policy narrowed, and refuses the next CONNECT', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'corral-policy-tunnel-'))
    const upstream = await echoServer({ cert: pki.cert, key: pki.key })
    const proxy = new EgressProxy({
      runtimeDir: join(dir, 'egress'),
      ca: EgressCertificateAuthority.generate(),
      resolver: fakeResolver({ 'other.example.test': ['203.0.113.11'] }),
      dialer: fakeDialer({ '203.0.113.11:443': upstream.port }),
    })
    try {
      const handle = await proxy.open({ sessionId: 'sesn_tunnel', policy: { networking: { type: 'limited', allowedHosts: ['other.example.test'] }, credentials: [], repositories: [] } })
      const tunnel = await new Promise<net.Socket>((resolve, reject) => {
        const req = http.request({ socketPath: handle.socketPath, method: 'CONNECT', path: 'other.example.test:443' })
        req.on('connect', (res, socket) => (res.statusCode === 200 ? resolve(socket) : reject(new Error(`CONNECT ${res.statusCode}`))))
        req.on('error', reject)
        req.end()
      })
      const closed = new Promise<void>((resolve) => tunnel.once('close', () => resolve()))
      // The same decisions: the tunnel stays.
      handle.update({ networking: { type: 'limited', allowedHosts: ['other.example.test'] }, credentials: [], repositories: [] })
      expect(tunnel.destroyed).toBe(false)
      handle.update({ networking: { type: 'limited', allowedHosts: [] }, credentials: [], repositories: [] })
      await closed
      expect((await viaProxy(handle.socketPath, 'https://other.example.test/x')).status).toBe(403)
    } finally {
      await proxy.dispose()
      await upstream.close()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describePolicyChanges('bubblewrap', bwrap.ok && existsSync('/usr/bin/python3'))
describePolicyChanges('docker', docker.ok)
