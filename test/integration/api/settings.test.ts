import { afterEach, describe, expect, it } from 'vitest'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { Engine } from '../../../src/main/engine'
import { MemoryKeychain } from '../../../src/main/vault/memory-keychain'
import { keychainAccount } from '../../../src/main/vault/keychain'
import { ScriptedModelServer, say } from '../../support/model-server'

const cleanups: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

async function open(opts: { keychain?: MemoryKeychain; env?: NodeJS.ProcessEnv } = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-settings-'))
  const engine = Engine.open({ dataDir, token: 'tok', env: opts.env ?? {}, keychain: opts.keychain, defaultHands: false })
  const server = await engine.listen(0)
  cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }), () => engine.close())
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(server.url + path, {
      method,
      headers: { authorization: 'Bearer tok', 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    return { status: res.status, body: (await res.json()) as Record<string, any> }
  }
  return { engine, server, dataDir, call }
}

describe('settings API (/v1/corral/settings)', () => {
  it('shows the defaults without any secret', async () => {
    const { call } = await open({ keychain: new MemoryKeychain() })
    const r = await call('GET', '/v1/corral/settings')
    expect(r.status).toBe(200)
    expect(r.body).toEqual({
      model: { base_url: null, compatibility_mode: false, default_model: null },
      sandbox_backend: 'auto',
      advisor_tiers: {},
      max_file_bytes: 500 * 1024 * 1024,
      default_budget: null,
      dream_time_limit_minutes: 60,
      api_key: { set: false, source: null },
      endpoint: { base_url: null, source: 'default', environment_base_url: null, configured: false },
      model_check: null,
      keychain: { available: true, backend: 'memory', problem: null },
    })
  })

  it("keeps a default budget for the desktop's new sessions in settings.json, removes it with null, and names a bad amount", async () => {
    const { call } = await open({ keychain: new MemoryKeychain() })
    const budget = { type: 'limit', max_list_cost: { amount: '750', currency: 'USD' } }
    expect((await call('POST', '/v1/corral/settings', { default_budget: budget })).body).toMatchObject({ default_budget: budget })
    expect((await call('GET', '/v1/corral/settings')).body).toMatchObject({ default_budget: budget })
    const bad = await call('POST', '/v1/corral/settings', { default_budget: { type: 'limit', max_list_cost: { amount: '7.50', currency: 'USD' } } })
    expect(bad.status).toBe(400)
    expect(JSON.stringify(bad.body)).toContain('default_budget.max_list_cost.amount')
    expect((await call('POST', '/v1/corral/settings', { default_budget: null })).body).toMatchObject({ default_budget: null })
  })

  it('keeps the API key in the keychain, never in settings.json, the database or a response', async () => {
    const keychain = new MemoryKeychain()
    const { call, dataDir, engine } = await open({ keychain })
    const key = 'sk-canary-settings-0123456789'
    const r = await call('POST', '/v1/corral/settings', { api_key: key, model: { compatibility_mode: true, default_model: 'local-model' }, sandbox_backend: 'bubblewrap' })
    expect(r.status).toBe(200)
    expect(JSON.stringify(r.body)).not.toContain(key)
    expect(r.body).toMatchObject({ api_key: { set: true, source: 'keychain' }, sandbox_backend: 'bubblewrap', model: { compatibility_mode: true, default_model: 'local-model' } })
    expect(await keychain.get(keychainAccount.anthropicApiKey)).toBe(key)
    expect(readFileSync(join(dataDir, 'settings.json'), 'utf8')).not.toContain(key)
    engine.stores.db.pragma('wal_checkpoint(TRUNCATE)')
    expect(readFileSync(join(dataDir, 'corral.db')).includes(Buffer.from(key))).toBe(false)
    const removed = await call('POST', '/v1/corral/settings', { api_key: null })
    expect(removed.body.api_key).toEqual({ set: false, source: null })
    expect(await keychain.get(keychainAccount.anthropicApiKey)).toBeUndefined()
  })

  it('refuses a bad field with a 400 that names it, and changes nothing', async () => {
    const { call, dataDir } = await open({ keychain: new MemoryKeychain() })
    const r = await call('POST', '/v1/corral/settings', { model: { base_url: 'ftp://nope' }, sandbox_backend: 'auto' })
    expect(r.status).toBe(400)
    expect(r.body.error.message).toContain('model.base_url')
    const typo = await call('POST', '/v1/corral/settings', { sandbox: 'docker' })
    expect(typo.status).toBe(400)
    expect(() => readFileSync(join(dataDir, 'settings.json'))).toThrow()
  })

  it('keeps a dream time limit in settings.json, names a bad one, and null restores the default hour', async () => {
    const { call, dataDir } = await open({ keychain: new MemoryKeychain() })
    expect((await call('POST', '/v1/corral/settings', { dream_time_limit_minutes: 90 })).body).toMatchObject({ dream_time_limit_minutes: 90 })
    expect(JSON.parse(readFileSync(join(dataDir, 'settings.json'), 'utf8')).dreamTimeLimitMinutes).toBe(90)
    for (const [bad, says] of [
      [0, 'a positive number of minutes'],
      [20_000, 'at most a week'],
      ['90', 'dream_time_limit_minutes'],
    ] as const) {
      const r = await call('POST', '/v1/corral/settings', { dream_time_limit_minutes: bad })
      expect(r.status).toBe(400)
      expect(r.body.error.message).toMatch(new RegExp(`dream_time_limit_minutes.*${says}|${says}`))
      expect(r.body.error.message).toContain('dream_time_limit_minutes')
    }
    expect((await call('GET', '/v1/corral/settings')).body.dream_time_limit_minutes).toBe(90)
    expect((await call('POST', '/v1/corral/settings', { dream_time_limit_minutes: null })).body.dream_time_limit_minutes).toBe(60)
    expect(JSON.parse(readFileSync(join(dataDir, 'settings.json'), 'utf8'))).not.toHaveProperty('dreamTimeLimitMinutes')
  })

  it('extends the advisor tier table: a saved entry lets that model advise at once, goes to settings.json, and null removes it', async () => {
    const { call, dataDir } = await open({ keychain: new MemoryKeychain() })
    const lead = { name: 'lead', model: 'claude-opus-4-8', multiagent: { type: 'multiagent_20261001', advisor: { type: 'enabled', model: 'qwen-3-235b' } } }
    const before = await call('POST', '/v1/agents', lead)
    expect(before.status).toBe(400)
    expect(before.body.error.message).toMatch(/multiagent\.advisor\.model: .*not in the advisor tier table.*\(V7/)
    const saved = await call('POST', '/v1/corral/settings', { advisor_tiers: { 'qwen-3-235b': 5 } })
    expect(saved.status).toBe(200)
    expect(saved.body.advisor_tiers).toEqual({ 'qwen-3-235b': 5 })
    expect(JSON.parse(readFileSync(join(dataDir, 'settings.json'), 'utf8')).advisorTiers).toEqual({ 'qwen-3-235b': 5 })
    expect((await call('POST', '/v1/agents', lead)).status).toBe(200)
    const bad = await call('POST', '/v1/corral/settings', { advisor_tiers: { 'qwen-3-235b': 2.5 } })
    expect(bad.status).toBe(400)
    expect(bad.body.error.message).toMatch(/advisor_tiers\.qwen-3-235b: a whole tier number/)
    const removed = await call('POST', '/v1/corral/settings', { advisor_tiers: null })
    expect(removed.body.advisor_tiers).toEqual({})
    expect((await call('POST', '/v1/agents', lead)).status).toBe(400)
  })

  it('says clearly that a key cannot be stored when the engine has no keychain, and keeps every other field of the same save', async () => {
    const { call } = await open()
    const r = await call('POST', '/v1/corral/settings', { api_key: 'sk-some-key-123', model: { base_url: 'http://127.0.0.1:9/v1', default_model: 'local' } })
    expect(r.status).toBe(503)
    expect(r.body.error.message).toContain('api_key')
    expect(r.body.error.message).toContain('ANTHROPIC_API_KEY')
    const after = await call('GET', '/v1/corral/settings')
    expect(after.body.model).toEqual({ base_url: 'http://127.0.0.1:9/v1', compatibility_mode: false, default_model: 'local' })
    expect(after.body.api_key).toEqual({ set: false, source: null })
    expect(after.body.keychain).toMatchObject({ available: false, problem: expect.stringContaining('keychain') })
  })

  it('points running brains at a new model endpoint at once: a session waiting for one gets its answer', async () => {
    const model = await ScriptedModelServer.start([say('hello from the new endpoint')])
    cleanups.push(() => model.close())
    const { call, server } = await open({ keychain: new MemoryKeychain() })
    const client = new Anthropic({ baseURL: server.url, apiKey: 'tok' })
    const agent = await client.beta.agents.create({ name: 'a', model: 'claude-sonnet-4-6' })
    const env = await client.beta.environments.create({ name: 'e' })
    const r = await call('POST', '/v1/corral/settings', { api_key: 'sk-test-key-abcdef', model: { base_url: model.url } })
    expect(r.status).toBe(200)
    const session = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id, initial_events: [{ type: 'user.message', content: [{ type: 'text', text: 'hi' }] }] })
    const deadline = Date.now() + 20_000
    let types: string[] = []
    while (Date.now() < deadline) {
      types = (await client.beta.sessions.events.list(session.id)).data.map((e) => e.type)
      if (types.includes('session.status_idle')) break
      await new Promise((res) => setTimeout(res, 50))
    }
    expect(types).toContain('agent.message')
    // the SDK (1.14) sends the key as a bearer token
    expect(model.requests.map((r) => r.headers.authorization)).toContain('Bearer sk-test-key-abcdef')
  })
})

describe('doctor API (/v1/corral/doctor)', () => {
  it('returns the same findings as corral doctor', async () => {
    const { call } = await open()
    const r = await call('GET', '/v1/corral/doctor')
    expect(r.status).toBe(200)
    const areas = (r.body.findings as { area: string }[]).map((f) => f.area)
    expect(areas).toEqual(expect.arrayContaining(['sandbox: docker', 'sandbox: bubblewrap', 'keychain', 'model endpoint', 'data directory']))
  })
})
