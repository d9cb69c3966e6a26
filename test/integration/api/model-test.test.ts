import { afterEach, describe, expect, it } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Engine } from '../../../src/main/engine'
import { MemoryKeychain } from '../../../src/main/vault/memory-keychain'
import { ScriptedModelServer, say } from '../../support/model-server'

const cleanups: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

async function open(opts: { keychain?: MemoryKeychain; env?: NodeJS.ProcessEnv } = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-model-test-'))
  const engine = Engine.open({ dataDir, token: 'tok', env: opts.env ?? {}, keychain: opts.keychain, defaultHands: false, harness: { enabled: false } })
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
  return { engine, call }
}

/** A loopback port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const srv = createServer()
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r))
  const port = (srv.address() as { port: number }).port
  await new Promise((r) => srv.close(r))
  return port
}

async function model(steps = [say('pong')]) {
  const m = await ScriptedModelServer.start(steps)
  cleanups.push(() => m.close())
  return m
}

describe('Test connection (POST /v1/corral/model/test)', () => {
  it('sends one real minimal request with the form’s endpoint and key and reports that the model answered', async () => {
    const m = await model()
    const { call } = await open({ keychain: new MemoryKeychain() })
    const r = await call('POST', '/v1/corral/model/test', { base_url: m.url, api_key: 'sk-test-connect-123', model: 'claude-haiku-4-5' })
    expect(r.status).toBe(200)
    expect(r.body).toMatchObject({ ok: true, status: 200, base_url: m.url, model: 'claude-haiku-4-5', key_source: 'request' })
    expect(m.requests).toHaveLength(1)
    expect(m.requests[0].body.max_tokens).toBe(1)
    expect(m.requests[0].headers.authorization).toBe('Bearer sk-test-connect-123')
    expect(JSON.stringify(r.body)).not.toContain('sk-test-connect-123')
    // the home screen and a new session read the outcome from the settings
    const settings = await call('GET', '/v1/corral/settings')
    expect(settings.body.model_check).toMatchObject({ ok: true, base_url: m.url })
  })

  it('against a closed port answers ok: false with the connection error and the address it tried', async () => {
    const port = await closedPort()
    const { call } = await open()
    const r = await call('POST', '/v1/corral/model/test', { base_url: `http://127.0.0.1:${port}`, api_key: 'sk-test-connect-123' })
    expect(r.status).toBe(200)
    expect(r.body).toMatchObject({ ok: false, status: null })
    expect(r.body.message).toContain(`connection refused to http://127.0.0.1:${port}`)
  })

  it('shows the status code and the endpoint’s own error text when the endpoint refuses', async () => {
    const m = await model([{ kind: 'error', status: 401, type: 'authentication_error', message: 'invalid x-api-key' }])
    const { call } = await open()
    const r = await call('POST', '/v1/corral/model/test', { base_url: m.url, api_key: 'sk-wrong-key-123' })
    expect(r.body).toMatchObject({ ok: false, status: 401 })
    expect(r.body.message).toContain('invalid x-api-key')
  })

  it('uses the saved endpoint and the keychain key when the form sends nothing, and says where the key came from', async () => {
    const m = await model()
    const { call } = await open({ keychain: new MemoryKeychain() })
    expect((await call('POST', '/v1/corral/settings', { model: { base_url: m.url }, api_key: 'sk-saved-key-456' })).status).toBe(200)
    const r = await call('POST', '/v1/corral/model/test', {})
    expect(r.body).toMatchObject({ ok: true, base_url: m.url, key_source: 'keychain' })
    expect(m.requests[0].headers.authorization).toBe('Bearer sk-saved-key-456')
  })

  it('with ANTHROPIC_BASE_URL in the environment and an empty form field (base_url null) tests the environment’s endpoint, and the settings say where the endpoint comes from', async () => {
    const m = await model()
    const { call } = await open({ env: { ANTHROPIC_BASE_URL: m.url } })
    const settings = await call('GET', '/v1/corral/settings')
    expect(settings.body.model.base_url).toBeNull()
    expect(settings.body.endpoint).toMatchObject({ base_url: m.url, source: 'environment', environment_base_url: m.url, configured: true })
    const r = await call('POST', '/v1/corral/model/test', { base_url: null, compatibility_mode: false, model: null })
    expect(r.body).toMatchObject({ ok: true, status: 200, base_url: m.url })
    expect(m.requests).toHaveLength(1)
  })

  it('says the endpoint comes from the settings, or is the default, when the environment sets no URL', async () => {
    const m = await model()
    const { call } = await open()
    expect((await call('GET', '/v1/corral/settings')).body.endpoint).toMatchObject({ base_url: null, source: 'default', environment_base_url: null })
    await call('POST', '/v1/corral/settings', { model: { base_url: m.url } })
    expect((await call('GET', '/v1/corral/settings')).body.endpoint).toMatchObject({ base_url: m.url, source: 'settings', environment_base_url: null })
  })

  it('refuses a base_url that is not http(s) with a 400 naming the field, and sends nothing', async () => {
    const { call } = await open()
    const r = await call('POST', '/v1/corral/model/test', { base_url: 'ftp://127.0.0.1/' })
    expect(r.status).toBe(400)
    expect(r.body.error.message).toContain('base_url')
    expect((await call('GET', '/v1/corral/settings')).body.model_check).toBeNull()
  })
})

describe('doctor’s model finding (GET /v1/corral/doctor)', () => {
  const modelFinding = (findings: { area: string; ok: boolean; detail: string }[]) => findings.find((f) => f.area === 'model endpoint')!

  it('probes the endpoint with a real request and says the key comes from the keychain', async () => {
    const m = await model()
    const { call } = await open({ keychain: new MemoryKeychain() })
    await call('POST', '/v1/corral/settings', { model: { base_url: m.url }, api_key: 'sk-doctor-key-789' })
    const f = modelFinding((await call('GET', '/v1/corral/doctor')).body.findings)
    expect(f.ok).toBe(true)
    expect(f.detail).toContain(m.url)
    expect(f.detail).toContain('API key from the OS keychain')
    expect(m.requests).toHaveLength(1)
  })

  it('says the key comes from the environment when ANTHROPIC_API_KEY is set, and shows a failing endpoint’s error', async () => {
    const port = await closedPort()
    const { call } = await open({ env: { ANTHROPIC_API_KEY: 'sk-env-key-0000', ANTHROPIC_BASE_URL: `http://127.0.0.1:${port}` } })
    const f = modelFinding((await call('GET', '/v1/corral/doctor')).body.findings)
    expect(f.ok).toBe(false)
    expect(f.detail).toContain('API key from the environment (ANTHROPIC_API_KEY)')
    expect(f.detail).toContain('connection refused')
  })

  it('says no endpoint is configured and sends no request when there is neither a key nor a URL', async () => {
    const { call } = await open()
    const f = modelFinding((await call('GET', '/v1/corral/doctor')).body.findings)
    expect(f.ok).toBe(false)
    expect(f.detail).toContain('no model endpoint is configured')
    expect(f.detail).toContain('no API key')
  })
})
