import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { request, type IncomingMessage } from 'node:http'
import { startApiServer, type TestApiServer } from '../../support/api-server'

let t: TestApiServer
let sid: string

beforeAll(async () => {
  t = await startApiServer()
  const agent = await t.client.beta.agents.create({ name: 'a', model: 'claude-sonnet-4-6' })
  const env = await t.client.beta.environments.create({ name: 'e' })
  sid = (await t.client.beta.sessions.create({ agent: agent.id, environment_id: env.id })).id
})
afterAll(() => t.close())

interface SseMessage {
  event: string
  id?: string
  data: { type: string; id?: string; n?: number }
}

/** Opens the stream with raw HTTP and collects parsed SSE messages until `count` arrived. */
function openStream(path: string, headers: Record<string, string> = {}): Promise<{ res: IncomingMessage; next(count: number): Promise<SseMessage[]> }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: t.server.port, path, headers: { authorization: `Bearer ${t.token}`, ...headers } }, (res) => {
      res.setEncoding('utf8')
      let buf = ''
      const messages: SseMessage[] = []
      let waiter: (() => void) | undefined
      res.on('data', (chunk: string) => {
        buf += chunk
        let end
        while ((end = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, end)
          buf = buf.slice(end + 2)
          if (block.startsWith(':')) continue
          const m: Partial<SseMessage> = {}
          for (const line of block.split('\n')) {
            const i = line.indexOf(': ')
            const k = line.slice(0, i)
            const v = line.slice(i + 2)
            if (k === 'event') m.event = v
            else if (k === 'id') m.id = v
            else if (k === 'data') m.data = JSON.parse(v)
          }
          messages.push(m as SseMessage)
        }
        waiter?.()
      })
      resolve({
        res,
        next: (count) =>
          new Promise((done, fail) => {
            const timer = setTimeout(() => fail(new Error(`only ${messages.length} of ${count} SSE messages arrived`)), 5000)
            const check = () => {
              if (messages.length >= count) {
                clearTimeout(timer)
                waiter = undefined
                done(messages.splice(0, count))
              }
            }
            waiter = check
            check()
          }),
      })
    })
    req.on('error', reject)
    req.end()
  })
}

const listenerCount = () => t.engine.stores.log.tailCount(sid)

describe('the SSE stream', () => {
  it('resumes after Last-Event-ID: history then live, each event once, ids are seqs', async () => {
    const log = t.engine.stores.log
    const base = log.lastSeq(sid)
    await log.append(sid, Array.from({ length: 5 }, (_, n) => ({ type: 'agent.message', n })))
    const s = await openStream(`/v1/sessions/${sid}/events/stream`, { 'last-event-id': String(base + 3) })
    expect(s.res.statusCode).toBe(200)
    expect(s.res.headers['content-type']).toMatch(/^text\/event-stream/)
    const history = await s.next(2)
    expect(history.map((m) => [m.id, m.data.n])).toEqual([
      [String(base + 4), 3],
      [String(base + 5), 4],
    ])
    await log.append(sid, [{ type: 'agent.message', n: 5 }])
    const live = await s.next(1)
    expect(live.map((m) => [m.event, m.id, m.data.n])).toEqual([['agent.message', String(base + 6), 5]])
    s.res.destroy()
  })

  it('replays from the start with after=0 and drops its subscription when the client goes away', async () => {
    // The previous test's stream is gone once its close has been handled.
    for (let i = 0; i < 50 && listenerCount() > 0; i++) await new Promise((r) => setTimeout(r, 20))
    const before = listenerCount()
    expect(before).toBe(0)
    const s = await openStream(`/v1/sessions/${sid}/events/stream?after=0`)
    const all = await s.next(t.engine.services.log.lastSeq(sid))
    expect(all.map((m) => Number(m.id))).toEqual(Array.from({ length: all.length }, (_, i) => i + 1))
    expect(listenerCount()).toBe(before + 1)
    s.res.destroy()
    for (let i = 0; i < 50 && listenerCount() > before; i++) await new Promise((r) => setTimeout(r, 20))
    expect(listenerCount()).toBe(before)
  })

  it('answers an unknown session and a bad event_deltas value with an error envelope, not a stream', async () => {
    const missing = await t.fetch('/v1/sessions/sesn_missing/events/stream')
    expect(missing.status).toBe(404)
    expect(await missing.json()).toMatchObject({ type: 'error', error: { type: 'not_found_error' } })
    const bad = await t.fetch(`/v1/sessions/${sid}/events/stream?event_deltas[]=agent.tool_use`)
    expect(bad.status).toBe(400)
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/event_deltas\[0\]/)
  })

  it('replays a long history at the pace the client reads it, then goes live without a gap', async () => {
    const agent = await t.client.beta.agents.create({ name: 'long', model: 'claude-sonnet-4-6' })
    const env = await t.client.beta.environments.create({ name: 'long' })
    const long = (await t.client.beta.sessions.create({ agent: agent.id, environment_id: env.id })).id
    const N = 20_000
    const text = 'x'.repeat(1000)
    for (let b = 0; b < N; b += 2000) t.engine.stores.log.appendSync(long, Array.from({ length: 2000 }, (_, i) => ({ type: 'agent.message', n: b + i, content: [{ type: 'text', text }] })))
    const live = () => t.engine.stores.log.tailCount(long)
    const s = await openStream(`/v1/sessions/${long}/events/stream?after=0`)
    s.res.pause()
    await new Promise((r) => setTimeout(r, 300))
    // ~20 MB of history cannot have been written yet: the server is waiting for the client.
    expect(live()).toBe(0)
    s.res.resume()
    const history = await s.next(N)
    expect(history.map((m) => Number(m.id))).toEqual(Array.from({ length: N }, (_, i) => i + 1))
    for (let i = 0; i < 50 && live() === 0; i++) await new Promise((r) => setTimeout(r, 20))
    await t.engine.stores.log.append(long, [{ type: 'agent.message', n: N }])
    expect((await s.next(1)).map((m) => Number(m.id))).toEqual([N + 1])
    s.res.destroy()
  })
})
