import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { Hono } from 'hono'
import { createApiApp, SESSION_COOKIE } from '../../../src/main/api/server'
import { PreviewBus, type ApiServices } from '../../../src/main/api/services'
import { memoryStores, type Stores } from '../session/fixtures'

// Red-team issue #15, finding 1: a page on another loopback port sent a blind text/plain POST
// with the signed-in browser's cookie. The app is driven in-process (no socket, no disk), with
// the headers a browser would send.
const TOKEN = 'unit-token'
const HOST = '127.0.0.1:4610'
const OWN = `http://${HOST}`
let t: Stores
let app: Hono
let baseline: number
let errors: unknown[]

beforeEach(() => {
  t = memoryStores()
  const services: ApiServices = {
    searchMessages: t.searchMessages,
    log: t.log,
    agents: t.agents,
    environments: t.environments,
    sessions: t.sessions,
    threads: t.threads,
    vaults: t.vaults,
    memory: t.memory,
    deployments: t.deployments,
    previews: new PreviewBus(),
  }
  errors = []
  app = createApiApp({ services, token: TOKEN, onInternalError: (e) => errors.push(e) })
  baseline = countAgents()
})
afterEach(() => t.close())

const countAgents = () => (t.db.prepare('SELECT COUNT(DISTINCT id) AS n FROM agents').get() as { n: number }).n
/** Agents created by the test (the fixture makes one). */
const agentCount = () => countAgents() - baseline
const agentBody = JSON.stringify({ name: 'made by a page', model: 'claude-sonnet-4-5' })

/** A request with exactly these headers (and the Host a browser would send). */
const send = (path: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}) =>
  app.request(`http://${HOST}${path}`, { method: init.method ?? 'GET', body: init.body, headers: { host: HOST, ...init.headers } })

/** What the renderer sends from its own page: the cookie, same-origin fetch metadata, JSON, the CSRF header. */
const renderer = (extra: Record<string, string> = {}) => ({
  cookie: `${SESSION_COOKIE}=${TOKEN}`,
  'sec-fetch-site': 'same-origin',
  'content-type': 'application/json',
  'x-corral-csrf': '1',
  ...extra,
})

async function refusal(res: Response): Promise<string> {
  expect(res.status).toBe(403)
  const body = (await res.json()) as { type: string; error: { type: string; message: string } }
  expect(body.type).toBe('error')
  expect(body.error.type).toBe('permission_error')
  return body.error.message
}

describe('the own-origin rule', () => {
  it('refuses an Origin on another loopback port, even with a valid bearer token', async () => {
    const res = await send('/v1/agents', { method: 'POST', body: agentBody, headers: { origin: 'http://127.0.0.1:5173', authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' } })
    expect(await refusal(res)).toMatch(/Origin "http:\/\/127.0.0.1:5173" is not this server's origin http:\/\/127.0.0.1:4610/)
    expect(agentCount()).toBe(0)
  })

  it('refuses another scheme or host name for the same port, and Origin: null', async () => {
    for (const origin of ['https://127.0.0.1:4610', 'http://localhost:4610', 'null', '']) {
      expect(await refusal(await send('/v1/agents', { headers: { origin, authorization: `Bearer ${TOKEN}` } }))).toMatch(/cross-origin requests are not allowed/)
    }
  })

  it('accepts the server\'s own origin, whatever its case', async () => {
    expect((await send('/v1/agents', { headers: { ...renderer(), origin: OWN } })).status).toBe(200)
    expect((await send('/v1/agents', { headers: { ...renderer(), origin: OWN.toUpperCase().replace('HTTP', 'http') } })).status).toBe(200)
  })

  it('accepts the own origin of each loopback name the server answers on', async () => {
    for (const host of ['localhost:4610', '[::1]:4610', '127.0.0.1']) {
      const res = await app.request(`http://${HOST}/v1/agents`, { headers: { host, origin: `http://${host}`, authorization: `Bearer ${TOKEN}` } })
      expect(res.status).toBe(200)
    }
  })

  it('refuses a foreign Origin on a route outside /v1 too (a preflight gets no CORS grant)', async () => {
    const res = await send('/v1/agents', { method: 'OPTIONS', headers: { origin: 'http://127.0.0.1:8888', 'access-control-request-method': 'POST', 'access-control-request-headers': 'x-corral-csrf' } })
    await refusal(res)
    expect(res.headers.get('access-control-allow-origin')).toBeNull()
    await refusal(await send('/auth/session', { method: 'POST', headers: { origin: 'http://127.0.0.1:8888', 'content-type': 'application/json', 'x-corral-csrf': '1' }, body: '{}' }))
  })
})

describe('a request signed in by the browser cookie', () => {
  it('is served when it carries what the renderer sends', async () => {
    const res = await send('/v1/agents', { method: 'POST', body: agentBody, headers: renderer({ origin: OWN }) })
    expect(res.status).toBe(200)
    expect(agentCount()).toBe(1)
  })

  it('refuses a blind text/plain POST (what a cross-origin form or no-cors fetch sends) and creates nothing', async () => {
    const res = await send('/v1/agents', { method: 'POST', body: agentBody, headers: renderer({ 'content-type': 'text/plain;charset=UTF-8', 'sec-fetch-site': 'same-origin' }) })
    expect(await refusal(res)).toMatch(/Content-Type: text\/plain is refused/)
    expect(agentCount()).toBe(0)
  })

  it('lets the page upload a file as multipart/form-data with X-Corral-CSRF, and refuses multipart without the header or on any other route', async () => {
    const multipart = { 'content-type': 'multipart/form-data; boundary=x' }
    const body = '--x\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\nhello\r\n--x--\r\n'
    const upload = await send('/v1/files', { method: 'POST', body, headers: renderer({ origin: OWN, ...multipart }) })
    // Past the browser rules: the files route answers (this in-memory app has no file store).
    expect(upload.status).not.toBe(403)
    expect(((await upload.json()) as { error?: { type?: string } }).error?.type).not.toBe('permission_error')
    const { 'x-corral-csrf': _, ...noCsrf } = renderer(multipart)
    expect(await refusal(await send('/v1/files', { method: 'POST', body, headers: noCsrf }))).toMatch(/X-Corral-CSRF: 1/)
    expect(await refusal(await send('/v1/agents', { method: 'POST', body, headers: renderer(multipart) }))).toMatch(/Content-Type: multipart\/form-data is refused: a POST signed in by the browser cookie must be application\/json$/)
    expect(agentCount()).toBe(0)
  })

  it('refuses a JSON POST without X-Corral-CSRF: 1', async () => {
    const { 'x-corral-csrf': _, ...headers } = renderer()
    expect(await refusal(await send('/v1/agents', { method: 'POST', body: agentBody, headers }))).toMatch(/X-Corral-CSRF: 1/)
    expect(await refusal(await send('/v1/agents', { method: 'POST', body: agentBody, headers: { ...headers, 'x-corral-csrf': '0' } }))).toMatch(/X-Corral-CSRF: 1/)
    expect(agentCount()).toBe(0)
  })

  it('refuses a request from another site or another port of this host (Sec-Fetch-Site cross-site / same-site), GETs included', async () => {
    for (const site of ['cross-site', 'same-site']) {
      expect(await refusal(await send('/v1/agents', { headers: renderer({ 'sec-fetch-site': site }) }))).toMatch(new RegExp(`Sec-Fetch-Site: ${site} is refused`))
      expect(await refusal(await send('/v1/agents', { method: 'POST', body: agentBody, headers: renderer({ 'sec-fetch-site': site }) }))).toMatch(/Sec-Fetch-Site/)
    }
    expect(agentCount()).toBe(0)
  })

  it('refuses a request without Sec-Fetch-Site', async () => {
    const { 'sec-fetch-site': _, ...headers } = renderer()
    expect(await refusal(await send('/v1/agents', { headers }))).toMatch(/must carry Sec-Fetch-Site: same-origin/)
  })

  it('serves GETs with same-origin or none fetch metadata and no CSRF header', async () => {
    const sid = await t.newSession()
    expect((await send('/v1/agents', { headers: { cookie: `${SESSION_COOKIE}=${TOKEN}`, 'sec-fetch-site': 'none' } })).status).toBe(200)
    const events = await send(`/v1/sessions/${sid}/events`, { headers: { cookie: `${SESSION_COOKIE}=${TOKEN}`, 'sec-fetch-site': 'same-origin' } })
    expect(events.status).toBe(200)
    expect(errors).toEqual([])
  })

  it('still answers a wrong cookie token with 401', async () => {
    const res = await send('/v1/agents', { headers: renderer({ cookie: `${SESSION_COOKIE}=wrong` }) })
    expect(res.status).toBe(401)
  })
})

describe('a request with an API token (the SDK, the CLI)', () => {
  it('is unaffected by the browser rules: no fetch metadata, no CSRF header, any content type', async () => {
    const bearer = await send('/v1/agents', { method: 'POST', body: agentBody, headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' } })
    expect(bearer.status).toBe(200)
    const apiKey = await send('/v1/agents', { method: 'POST', body: agentBody, headers: { 'x-api-key': TOKEN } })
    expect(apiKey.status).toBe(200)
    expect(agentCount()).toBe(2)
  })

  it('takes the bearer token over a cookie sent alongside it', async () => {
    const res = await send('/v1/agents', { method: 'POST', body: agentBody, headers: { authorization: `Bearer ${TOKEN}`, cookie: `${SESSION_COOKIE}=${TOKEN}`, 'content-type': 'application/json' } })
    expect(res.status).toBe(200)
  })
})
