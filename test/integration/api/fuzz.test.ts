import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Agent, request } from 'node:http'
import { startApiServer, type TestApiServer } from '../../support/api-server'
import { mulberry32 } from '../../support/random'

/**
 * Malformed requests against a real server: every one must get a 4xx with the API's error
 * envelope (never a 5xx), the server must stay up, the database must stay intact and no rejected
 * send may append anything. Seeded, so a failure names the seed and the case that reproduces it.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 20261130)
const CASES = Number(process.env.FUZZ_CASES ?? 1200)

interface FuzzCase {
  method: string
  path: string
  body?: Buffer | string
  headers?: Record<string, string>
  why: string
}

interface Reply {
  status: number
  text: string
}

let t: TestApiServer
const agent = new Agent({ keepAlive: true, maxSockets: 8 })
const ids: Record<string, string> = {}

function send(c: FuzzCase): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const body = c.body === undefined ? undefined : Buffer.isBuffer(c.body) ? c.body : Buffer.from(c.body)
    const req = request(
      {
        host: '127.0.0.1',
        port: t.server.port,
        method: c.method,
        path: c.path,
        agent,
        headers: {
          authorization: `Bearer ${t.token}`,
          'content-type': 'application/json',
          ...(body ? { 'content-length': String(body.length) } : {}),
          ...c.headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (d: Buffer) => chunks.push(d))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }))
        res.on('error', reject)
      },
    )
    req.on('error', reject)
    if (body) req.write(body)
    req.end()
  })
}

function generator(rand: () => number) {
  const int = (n: number) => Math.floor(rand() * n)
  const pick = <T,>(xs: readonly T[]): T => xs[int(xs.length)]
  const randString = (max: number) => {
    const alphabet = 'abcXYZ019 _-./%?#&=[]{}"\\\u00e9\u4e2d\ud83d\ude00\u0000\n'
    let s = ''
    const n = int(max)
    for (let i = 0; i < n; i++) s += alphabet[int(alphabet.length)]
    return s
  }
  const randJson = (depth: number): unknown => {
    const r = int(depth > 3 ? 6 : 9)
    switch (r) {
      case 0:
        return null
      case 1:
        return rand() < 0.5
      case 2:
        return pick([0, -1, 1.5, 1e308, -1e308, Number.MAX_SAFE_INTEGER + 2, 2 ** 31])
      case 3:
        return randString(40)
      case 4:
        return pick(['', 'user.message', 'agent', 'limited', 'static_bearer', '__proto__', 'constructor'])
      case 5:
        return []
      case 6:
        return Array.from({ length: int(4) }, () => randJson(depth + 1))
      default: {
        const o: Record<string, unknown> = {}
        for (let i = 0; i < int(5); i++) o[pick(['type', 'name', 'model', 'events', 'auth', 'content', 'display_name', 'metadata', 'config', randString(8)])] = randJson(depth + 1)
        return o
      }
    }
  }
  const resourcePaths = () => [
    '/v1/agents',
    `/v1/agents/${ids.agent}`,
    '/v1/environments',
    `/v1/environments/${ids.env}`,
    '/v1/sessions',
    `/v1/sessions/${ids.session}`,
    `/v1/sessions/${ids.session}/events`,
    '/v1/vaults',
    `/v1/vaults/${ids.vault}`,
    `/v1/vaults/${ids.vault}/credentials`,
    `/v1/vaults/${ids.vault}/credentials/${ids.credential}`,
  ]
  const validBodies: [string, Record<string, unknown>][] = [
    ['/v1/agents', { name: 'a', model: 'claude-sonnet-4-6' }],
    ['/v1/environments', { name: 'e' }],
    ['/v1/vaults', { display_name: 'v' }],
    [`/v1/vaults/${ids.vault}/credentials`, { auth: { type: 'static_bearer', token: 't', mcp_server_url: 'https://fuzz.example.com' } }],
    [`/v1/sessions/${ids.session}/events`, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'hi' }] }] }],
    ['/v1/sessions', { agent: ids.agent, environment_id: ids.env }],
  ]
  /** A mutation that makes a valid body invalid: wrong type, unknown key, missing required key. */
  const breakBody = (body: Record<string, unknown>): [unknown, string] => {
    const b = structuredClone(body) as Record<string, unknown>
    const keys = Object.keys(b)
    switch (int(6)) {
      case 0:
        b[`unknown_${int(1000)}`] = randJson(2)
        return [b, 'unknown key']
      case 1: {
        const k = pick(keys)
        b[k] = pick([42, true, [], { nested: 1 }, null])
        // `display_name: null` etc. are optional-nullable in a few schemas; a number never is.
        if (b[k] === null) b[k] = 42
        return [b, `wrong type for ${k}`]
      }
      case 2: {
        const k = pick(keys)
        delete b[k]
        b.extra_field = 1 // keeps it invalid even where the removed key was optional
        return [b, `missing ${k}`]
      }
      case 3:
        return [pick([[], 'a string', 7, null, true]), 'body is not an object']
      case 4: {
        const k = pick(keys)
        b[k] = 'x'.repeat(2_000_000 + int(1000))
        return [b, `huge string in ${k}`]
      }
      default: {
        const ev = b.events as unknown[] | undefined
        if (ev) {
          b.events = [{ type: pick(['user.message', 'user.tool_confirmation', 'user.custom_tool_result', 'agent.message', 'user.teleport']), tool_use_id: 'sevt_missing', custom_tool_use_id: 'sevt_missing', result: 'allow', content: int(2) ? 'not-an-array' : [] }]
          return [b, 'bad event']
        }
        b.metadata = { k: int(2) ? 5 : 'x'.repeat(600) }
        return [b, 'bad metadata']
      }
    }
  }

  return (): FuzzCase => {
    switch (int(10)) {
      case 0:
        return { method: 'POST', path: pick(resourcePaths()), body: JSON.stringify(pick([[], 'str', 1, null, true, randJson(0)]) ?? null) + (int(3) === 0 ? '}' : ''), why: 'random JSON' }
      case 1: {
        const [path, body] = pick(validBodies)
        const [broken, why] = breakBody(body)
        return { method: 'POST', path, body: JSON.stringify(broken), why }
      }
      case 2: {
        const bytes = Buffer.from([0x7b, 0x22, 0x6e, 0x22, 0x3a, 0x22, pick([0xff, 0xc3, 0xe2, 0xed, 0xf8]), pick([0x28, 0xa0, 0xfe]), 0x22, 0x7d])
        return { method: 'POST', path: pick(resourcePaths()), body: bytes, why: 'invalid UTF-8' }
      }
      case 3: {
        const path = pick(['/v1/nope', '/v1/agents/x/y/z', '/v2/agents', '/v1/sessions//events', `/v1/vaults/${ids.vault}/credentials/x/y`, '/v1/%E0%A4%A', '/v1/agents/%ZZ', '/' + randString(30).replace(/[#?]/g, '').replace(/[^\x21-\x7e]/g, '%C3')])
        return { method: pick(['GET', 'POST', 'DELETE', 'PUT', 'PATCH']), path, body: int(2) ? '{}' : undefined, why: 'unknown path' }
      }
      case 4:
        return { method: pick(['PUT', 'PATCH']), path: pick(resourcePaths()), body: '{}', why: 'unknown method' }
      case 5: {
        const q = pick([
          'limit=-1',
          'limit=0',
          'limit=abc',
          'limit=100000',
          'limit=1.5',
          'order=sideways',
          'include_archived=maybe',
          'created_at[gte]=yesterday',
          'created_at[lt]=2026-13-45T99:00:00Z',
          'statuses[]=dancing',
          `types[]=${'t'.repeat(200)}`,
          `page=${Array.from({ length: 1 + int(30) }, () => '%' + int(256).toString(16).padStart(2, '0')).join('')}`,
          `page=${'A'.repeat(600)}`,
          `page=${Buffer.from('{"c":1}').toString('base64url')}`,
          `page=${Buffer.from('s-5').toString('base64url')}`,
          `page=${Buffer.from('t-1').toString('base64url')}`,
          'event_deltas[]=agent.tool_use',
          'version=0',
          'version=x',
          'agent_version=-3',
        ])
        const path = pick(['/v1/agents', '/v1/environments', '/v1/sessions', `/v1/sessions/${ids.session}/events`, '/v1/vaults', `/v1/vaults/${ids.vault}/credentials`, `/v1/agents/${ids.agent}`, `/v1/agents/${ids.agent}/versions`, `/v1/sessions/${ids.session}/threads`])
        return { method: 'GET', path: `${path}?${q}`, why: `bad query ${q}` }
      }
      case 6:
        return { method: 'GET', path: pick([`/v1/agents/agent_${randString(5).replace(/[^a-z0-9]/gi, '')}`, '/v1/sessions/sesn_none', '/v1/vaults/vlt_none', `/v1/vaults/${ids.vault}/credentials/vcrd_none`, `/v1/sessions/${ids.session}/threads/sthr_none`]), why: 'unknown id' }
      case 7:
        return { method: 'POST', path: `/v1/sessions/${ids.session}/events`, body: JSON.stringify({ events: Array.from({ length: 1 + int(3) }, () => randJson(1)) }), why: 'random events' }
      case 8:
        return {
          method: 'POST',
          path: pick(resourcePaths()),
          body: JSON.stringify(randJson(0)),
          headers: pick<Record<string, string>>([{ authorization: 'Bearer wrong' }, { authorization: '' }, { host: 'evil.example.com' }, { origin: 'http://evil.example.com' }]),
          why: 'bad credentials or host',
        }
      default:
        return { method: 'POST', path: `/v1/sessions/${ids.session}/events`, body: JSON.stringify({ events: [{ type: 'user.message', content: [{ type: 'text', text: randString(20) }] }], extra: 1 }), why: 'unknown top-level key in a send' }
    }
  }
}

function eventCount(): number {
  return (t.engine.stores.db.prepare('SELECT COUNT(*) AS n FROM events').get() as { n: number }).n
}

beforeAll(async () => {
  t = await startApiServer()
  const c = t.client
  ids.agent = (await c.beta.agents.create({ name: 'fuzz', model: 'claude-sonnet-4-6' })).id
  ids.env = (await c.beta.environments.create({ name: 'fuzz' })).id
  ids.session = (await c.beta.sessions.create({ agent: ids.agent, environment_id: ids.env })).id
  ids.vault = (await c.beta.vaults.create({ display_name: 'fuzz' })).id
  ids.credential = (await c.beta.vaults.credentials.create(ids.vault, { auth: { type: 'static_bearer', token: 't', mcp_server_url: 'https://fuzz.example.com' } })).id
  await c.beta.sessions.events.send(ids.session, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'seed' }] }] })
})
afterAll(async () => {
  agent.destroy()
  await t.close()
})

describe('the API under malformed requests', () => {
  it(`answers ${CASES} malformed requests (seed ${SEED}) with a 4xx error envelope, appending nothing`, async () => {
    const next = generator(mulberry32(SEED))
    const before = eventCount()
    const failures: string[] = []
    const statuses = new Map<number, number>()
    for (let i = 0; i < CASES; i++) {
      const c = next()
      const r = await send(c)
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1)
      let envelope: { type?: string; error?: { type?: string; message?: string } } | undefined
      try {
        envelope = JSON.parse(r.text)
      } catch {
        envelope = undefined
      }
      const ok = r.status >= 400 && r.status < 500 && envelope?.type === 'error' && typeof envelope.error?.type === 'string' && typeof envelope.error?.message === 'string'
      if (!ok) failures.push(`case ${i} (${c.why}): ${c.method} ${c.path.slice(0, 120)} → ${r.status} ${r.text.slice(0, 200)}`)
    }
    expect(failures, `seed ${SEED}`).toEqual([])
    // The mix really exercised the error paths (not just one status).
    for (const s of [400, 401, 403, 404]) expect(statuses.get(s) ?? 0).toBeGreaterThan(10)
    expect(eventCount()).toBe(before)
  })

  it('answers an over-limit body with 413 and a deep-nested body with 400', async () => {
    const huge = Buffer.alloc(33 * 1024 * 1024, 0x20)
    const r = await send({ method: 'POST', path: '/v1/agents', body: huge, why: 'over limit' })
    expect(r.status).toBe(413)
    expect(JSON.parse(r.text)).toMatchObject({ type: 'error', error: { type: 'request_too_large' } })
    const deep = '['.repeat(100_000) + ']'.repeat(100_000)
    const d = await send({ method: 'POST', path: '/v1/agents', body: deep, why: 'deep nesting' })
    expect(d.status).toBe(400)
  })

  it('is still up, its database intact and its log unchanged after the fuzzing', async () => {
    const list = await t.client.beta.agents.list()
    expect(list.data.map((a) => a.id)).toContain(ids.agent)
    expect(t.engine.stores.db.pragma('integrity_check', { simple: true })).toBe('ok')
    const events = await t.client.beta.sessions.events.list(ids.session)
    expect(events.data.map((e) => e.type)).toEqual(['user.message'])
  })
})
