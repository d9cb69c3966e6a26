import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { Hono } from 'hono'
import { createApiApp } from '../../../src/main/api/server'
import { PreviewBus, type ApiServices } from '../../../src/main/api/services'
import { memoryStores, type Stores } from '../session/fixtures'
import { parseQuery } from '../../../src/main/api/query'

// The Hono app driven in-process through app.request: no socket, no disk.
const TOKEN = 'unit-token'
let t: Stores
let app: Hono
let errors: unknown[]

beforeEach(() => {
  t = memoryStores()
  errors = []
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
  app = createApiApp({ services, token: TOKEN, onInternalError: (e) => errors.push(e) })
})
afterEach(() => t.close())

const call = (path: string, init: RequestInit & { host?: string } = {}) =>
  app.request(`http://127.0.0.1${path}`, {
    ...init,
    headers: { host: init.host ?? '127.0.0.1:4610', authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...(init.headers as Record<string, string>) },
  })

describe('the API app', () => {
  it('refuses an unknown query parameter on a route that takes none, naming it', async () => {
    const sid = await t.newSession()
    const res = await call(`/v1/sessions/${sid}?beta=true&expand=agent`)
    expect(res.status).toBe(400)
    expect(await res.json()).toEqual({ type: 'error', error: { type: 'invalid_request_error', message: 'invalid query: unknown parameter "expand"; this route takes none' } })
    expect((await call(`/v1/sessions/${sid}?beta=true`)).status).toBe(200)
  })

  it('refuses an unknown query parameter on a list route', async () => {
    const res = await call('/v1/agents?limit=2&colour=blue')
    expect(res.status).toBe(400)
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/invalid query: .*colour/)
  })

  it('answers a foreign Host with 403 before checking the token', async () => {
    const res = await call('/v1/agents', { host: 'corral.attacker.example:4610', headers: { authorization: 'Bearer wrong' } })
    expect(res.status).toBe(403)
    expect(((await res.json()) as { error: { type: string } }).error.type).toBe('permission_error')
  })

  it('names the field and rule of a bad vault body and creates nothing', async () => {
    const res = await call('/v1/vaults', { method: 'POST', body: JSON.stringify({ display_name: 'x'.repeat(300) }) })
    expect(res.status).toBe(400)
    expect(((await res.json()) as { error: { message: string } }).error.message).toBe('invalid body: display_name: at most 255 characters')
    expect(t.db.prepare('SELECT COUNT(*) AS n FROM vaults').get()).toEqual({ n: 0 })
  })

  it("lists a thread-filtered page of the primary thread's events: its own, and the creation of its child (spec: a thread_created is the parent's event), never the child's activity", async () => {
    const sid = await t.newSession()
    await t.log.append(sid, [
      { type: 'session.thread_created', session_thread_id: 'sthr_C', agent_name: 'c', workflow_run_id: null },
      { type: 'agent.message', content: [] },
      { type: 'agent.message', session_thread_id: 'sthr_C', content: [] },
    ])
    const primary = `sthr_${sid.slice(5)}`
    const res = await call(`/v1/sessions/${sid}/threads/${primary}/events`)
    const body = (await res.json()) as { data: { type: string; session_thread_id?: string }[] }
    expect(body.data.map((e) => [e.type, e.session_thread_id ?? null])).toEqual([
      ['session.thread_created', 'sthr_C'],
      ['agent.message', null],
    ])
    expect(errors).toEqual([])
  })
})

describe('parseQuery', () => {
  it('reads bracketed arrays, repeated keys and keeps created_at[...] keys whole', () => {
    const q = parseQuery(new URLSearchParams('types[]=a&types[]=b&statuses=idle&created_at[gte]=2026-01-01T00:00:00Z&beta=true&x=1&x=2'), ['statuses'])
    expect(q).toEqual({ types: ['a', 'b'], statuses: ['idle'], 'created_at[gte]': '2026-01-01T00:00:00Z', x: ['1', '2'] })
  })
})

describe('PreviewBus', () => {
  it('keeps publishing to the other subscribers when one throws, and never throws to the publisher', () => {
    const bus = new PreviewBus()
    const got: string[] = []
    const quiet = console.error
    console.error = () => {}
    try {
      bus.subscribe('sesn_1', () => {
        throw new Error('subscriber bug')
      })
      const stop = bus.subscribe('sesn_1', (e) => got.push(e.type))
      bus.subscribe('sesn_2', (e) => got.push(`other:${e.type}`))
      bus.publish('sesn_1', { type: 'event_start', event: { id: 'sevt_1', type: 'agent.message' } })
      stop()
      bus.publish('sesn_1', { type: 'event_delta', event_id: 'sevt_1', delta: {} })
    } finally {
      console.error = quiet
    }
    expect(got).toEqual(['event_start'])
  })
})
