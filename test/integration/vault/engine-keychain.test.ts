import http from 'node:http'
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { keychainProbe, requirement } from '../../support/requirements'
import { Engine } from '../../../src/main/engine'
import { KeyringKeychain } from '../../../src/main/vault/keyring-keychain'
import { keychainAccount } from '../../../src/main/vault/keychain'

const keychain = requirement('keychain', keychainProbe)

/** Every byte Corral wrote under its data dir (the SQLite file, WAL, settings, token). */
function dataDirBytes(dir: string): string {
  let all = ''
  for (const f of readdirSync(dir, { recursive: true }) as string[]) {
    const p = join(dir, f)
    if (statSync(p).isFile()) all += readFileSync(p, 'latin1')
  }
  return all
}

describe.skipIf(!keychain.ok)('Engine with the OS keychain', () => {
  const service = `corral-test-engine-${process.pid}-${Date.now()}`
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-engine-kc-'))
  const k = new KeyringKeychain({ service })
  const TOKEN = 'corral_canary_token_from_keychain_91c2'
  const MODEL_KEY = 'sk-ant-canary-model-key-5d0e'
  let engine: Engine
  let client: Anthropic
  const logs: string[] = []

  beforeAll(async () => {
    await k.set(keychainAccount.apiToken, TOKEN)
    await k.set(keychainAccount.anthropicApiKey, MODEL_KEY)
    engine = await Engine.openWithKeychain({ dataDir, keychain: k, env: { PATH: process.env.PATH }, harness: { enabled: false }, log: (l) => logs.push(l) })
    const server = await engine.listen(0)
    client = new Anthropic({ baseURL: server.url, apiKey: TOKEN })
  })

  afterAll(async () => {
    await engine.close()
    await k.delete(keychainAccount.apiToken)
    await k.delete(keychainAccount.anthropicApiKey)
    rmSync(dataDir, { recursive: true, force: true })
  })

  it('takes the local API token from the keychain: no token 401, a foreign Host or Origin 403, and the token in no log line', async () => {
    expect(engine.token).toBe(TOKEN)
    const base = (client as unknown as { baseURL: string }).baseURL
    const bad = new Anthropic({ baseURL: base, apiKey: 'wrong' })
    await expect(bad.beta.agents.list()).rejects.toMatchObject({ status: 401 })
    expect((await fetch(`${base}/v1/agents`)).status).toBe(401)
    expect((await fetch(`${base}/v1/agents`, { headers: { authorization: `Bearer ${TOKEN}`, origin: 'https://evil.example' } })).status).toBe(403)
    const port = new URL(base).port
    const foreignHost = await new Promise<number>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, path: '/v1/agents', headers: { host: 'evil.example', authorization: `Bearer ${TOKEN}` } }, (res) => {
        res.resume()
        resolve(res.statusCode!)
      })
      req.on('error', reject)
      req.end()
    })
    expect(foreignHost).toBe(403)
    expect((await fetch(`${base}/v1/agents`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200)
    expect(logs.join('\n')).not.toContain(TOKEN)
  })

  it('keeps credential secrets in the keychain only: never in a response, the database or a log', async () => {
    const SECRET = 'canary-credential-secret-e71f'
    const BEARER = 'canary-static-bearer-aa90'
    const vault = await client.beta.vaults.create({ display_name: 'red team' })
    const env = await client.beta.vaults.credentials.create(vault.id, {
      auth: { type: 'environment_variable', secret_name: 'API_TOKEN', secret_value: SECRET, networking: { type: 'limited', allowed_hosts: ['api.example.test'] } },
    })
    const mcp = await client.beta.vaults.credentials.create(vault.id, { auth: { type: 'static_bearer', mcp_server_url: 'https://mcp.example.test/mcp', token: BEARER } })
    expect((env as unknown as { corral?: { secret_stored: boolean } }).corral?.secret_stored ?? true).toBe(true)
    expect(await k.get(keychainAccount.credential(env.id, 'secret_value'))).toBe(SECRET)
    expect(await k.get(keychainAccount.credential(mcp.id, 'token'))).toBe(BEARER)
    const listed = JSON.stringify(await client.beta.vaults.credentials.list(vault.id))
    const fetched = JSON.stringify(await client.beta.vaults.credentials.retrieve(env.id, { vault_id: vault.id }))
    expect(listed + fetched + JSON.stringify(env) + JSON.stringify(mcp)).not.toMatch(/canary-credential-secret|canary-static-bearer/)
    await engine.stores.log.drain()
    const bytes = dataDirBytes(dataDir)
    for (const c of [SECRET, BEARER, TOKEN, MODEL_KEY]) expect(bytes).not.toContain(c)
    expect(logs.join('\n')).not.toMatch(/canary/)

    // rotate, then delete: the keychain follows
    await client.beta.vaults.credentials.update(env.id, { vault_id: vault.id, auth: { type: 'environment_variable', secret_value: 'canary-rotated-3c1d' } })
    expect(await k.get(keychainAccount.credential(env.id, 'secret_value'))).toBe('canary-rotated-3c1d')
    await client.beta.vaults.credentials.delete(env.id, { vault_id: vault.id })
    expect(await k.get(keychainAccount.credential(env.id, 'secret_value'))).toBeUndefined()
    await client.beta.vaults.delete(vault.id)
    expect(await k.get(keychainAccount.credential(mcp.id, 'token'))).toBeUndefined()
  })
})
