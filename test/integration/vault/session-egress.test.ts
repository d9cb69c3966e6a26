import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Engine } from '../../../src/main/engine'
import { KeyringKeychain } from '../../../src/main/vault/keyring-keychain'
import { keychainAccount } from '../../../src/main/vault/keychain'
import { placeholderFor } from '../../../src/main/vault/egress-proxy'
import { Vault } from '../../../src/main/vault/vault'
import { keychainProbe, requirement } from '../../support/requirements'
import { echoServer, fakeDialer, fakeResolver, upstreamPki, viaProxy } from './egress-helpers'

const keychainReq = requirement('keychain', keychainProbe)
const SECRET = 'canary-session-egress-7d21'
const REPO_TOKEN = 'canary-session-repo-token-0c3f'

describe.skipIf(!keychainReq.ok)('Vault.sessionEgress: a session’s egress from its environment, vaults and repositories', () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-sess-egress-'))
  const keychain = new KeyringKeychain({ service: `corral-test-sessegress-${process.pid}-${Date.now()}` })
  const pki = upstreamPki(['api.example.test', 'git.example.test'])
  let upstream: Awaited<ReturnType<typeof echoServer>>
  let engine: Engine
  let vault: Vault
  let client: Anthropic
  const cleanup: string[] = []

  beforeAll(async () => {
    upstream = await echoServer({ cert: pki.cert, key: pki.key })
    engine = await Engine.openWithKeychain({ dataDir: dir, keychain, token: 'test-token', env: { PATH: process.env.PATH }, harness: { enabled: false } })
    client = new Anthropic({ baseURL: (await engine.listen(0)).url, apiKey: 'test-token' })
    vault = new Vault({
      keychain,
      dataDir: dir,
      egressRuntimeDir: join(dir, 'egress'),
      resolver: fakeResolver({ 'api.example.test': ['203.0.113.10'], 'git.example.test': ['203.0.113.20'] }),
      dialer: fakeDialer({ '203.0.113.10:443': upstream.port, '203.0.113.20:443': upstream.port }),
      upstreamCa: [pki.caPem],
    })
  })

  afterAll(async () => {
    await vault.dispose()
    await engine.close()
    await upstream.close()
    for (const a of [...cleanup, keychainAccount.egressCaKey]) await keychain.delete(a).catch(() => false)
    rmSync(dir, { recursive: true, force: true })
  })

  async function session(config: Record<string, unknown>, resources: Record<string, unknown>[] = []): Promise<{ id: string; resources: { id: string }[] }> {
    const v = await client.beta.vaults.create({ display_name: 'v' })
    const c = await client.beta.vaults.credentials.create(v.id, {
      auth: { type: 'environment_variable', secret_name: 'API_TOKEN', secret_value: SECRET, networking: { type: 'limited', allowed_hosts: ['api.example.test'] } },
    })
    cleanup.push(keychainAccount.credential(c.id, 'secret_value'))
    const env = await client.beta.environments.create({ name: 'e', config: config as unknown as Anthropic.Beta.BetaCloudConfigParams })
    const agent = await client.beta.agents.create({ name: 'a', model: 'claude-sonnet-5-5' })
    const s = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id, vault_ids: [v.id], resources: resources as never })
    return s as unknown as { id: string; resources: { id: string }[] }
  }

  it('opens once per session with placeholders, and the proxy injects the vault secret for the allowed host', async () => {
    const s = await session({ type: 'cloud', networking: { type: 'limited', allowed_hosts: ['api.example.test'] } })
    const handle = (await vault.sessionEgress(engine.services, s.id))!
    expect(await vault.sessionEgress(engine.services, s.id)).toBe(handle)
    const credentialId = handle.env.API_TOKEN!.replace('corral_placeholder_', '')
    expect(handle.env.API_TOKEN).toBe(placeholderFor(credentialId))
    expect(JSON.stringify(handle.env)).not.toContain(SECRET)
    const r = await viaProxy(handle.socketPath, 'https://api.example.test/x', { headers: { authorization: `Bearer ${handle.env.API_TOKEN}` }, ca: [readCa(handle.dir)] })
    expect(r.status).toBe(200)
    expect(upstream.seen.at(-1)!.headers.authorization).toBe(`Bearer ${SECRET}`)
    await vault.releaseSessionEgress(s.id)
    expect(existsSync(handle.socketPath)).toBe(false)
  })

  it('gives a session without networking and without a credentialed repository no egress at all', async () => {
    const s = await session({ type: 'cloud' })
    expect(await vault.sessionEgress(engine.services, s.id)).toBeUndefined()
  })

  it('serves a repository whose token is in the keychain even when networking is none', async () => {
    const s = await session({ type: 'cloud' }, [{ type: 'github_repository', url: 'https://git.example.test/acme/widgets.git' }])
    const account = keychainAccount.sessionResource(s.id, s.resources[0]!.id, 'authorization_token')
    cleanup.push(account)
    await keychain.set(account, REPO_TOKEN)
    const handle = (await vault.sessionEgress(engine.services, s.id))!
    const r = await viaProxy(handle.socketPath, 'https://git.example.test/acme/widgets.git/info/refs?service=git-upload-pack', { ca: [readCa(handle.dir)] })
    expect(r.status).toBe(200)
    expect(upstream.seen.at(-1)!.headers.authorization).toBe(`Basic ${Buffer.from(`x-access-token:${REPO_TOKEN}`).toString('base64')}`)
    expect(r.body).not.toContain(REPO_TOKEN)
    expect((await viaProxy(handle.socketPath, 'https://api.example.test/x')).status).toBe(403)
  })
})

function readCa(dir: string): string {
  return readFileSync(join(dir, 'ca.pem'), 'utf8')
}
