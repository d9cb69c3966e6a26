import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { primaryThreadId } from '../../../src/shared/api/ids'
import { memoryStores, type Stores } from './fixtures'
import { ThreadStore } from '../../../src/main/session/thread-store'

const memoryStoresOn = (s: Stores) => new ThreadStore({ log: s.log, sessions: s.sessions, clock: () => new Date(now) })

let now = Date.parse('2026-06-01T00:00:00.000Z')
let t: Stores
beforeEach(() => {
  now = Date.parse('2026-06-01T00:00:00.000Z')
  t = memoryStores(() => new Date(now))
})
afterEach(() => t.close())

async function at(ms: number, sid: string, event: Record<string, unknown> & { type: string }) {
  now = Date.parse('2026-06-01T00:00:00.000Z') + ms
  await t.log.append(sid, [event])
}

describe('ThreadStore', () => {
  it('derives the primary thread id from the session id', async () => {
    const sid = await t.newSession()
    expect(primaryThreadId(sid)).toBe(`sthr_${sid.slice('sesn_'.length)}`)
    expect(t.threads.all(sid).map((x) => x.id)).toEqual([primaryThreadId(sid)])
  })

  it("computes a thread's active, startup and total seconds from its status events", async () => {
    const sid = await t.newSession()
    await at(2000, sid, { type: 'session.status_running' })
    await at(5000, sid, { type: 'session.status_idle', stop_reason: { type: 'end_turn' } })
    await at(9000, sid, { type: 'session.status_running' })
    now = Date.parse('2026-06-01T00:00:10.000Z')
    const [primary] = t.threads.all(sid)
    expect(primary.stats).toEqual({ active_seconds: 4, duration_seconds: 10, startup_seconds: 2 })
    expect(primary.status).toBe('running')
    expect(primary.usage).toMatchObject({ active_seconds: 4 })
  })

  it('takes a child thread agent and parent from its thread_created event when given', async () => {
    const sid = await t.newSession()
    const child = 'sthr_CHILD'
    const grandchild = 'sthr_GRANDCHILD'
    const inline = { type: 'inline', name: 'critic', description: null, model: { id: 'm' }, system: 's', tools: [], mcp_servers: [], skills: [], execution_identity: null }
    await at(1000, sid, { type: 'session.thread_created', session_thread_id: child, agent_name: 'critic', agent: inline, workflow_run_id: 'wrun_1' })
    await at(2000, sid, { type: 'session.thread_created', session_thread_id: grandchild, agent_name: 'x', parent_thread_id: child, workflow_run_id: null })
    await at(3000, sid, { type: 'session.thread_created', session_thread_id: child, agent_name: 'dup', workflow_run_id: null })
    const threads = t.threads.all(sid)
    expect(threads.map((x) => x.id)).toEqual([primaryThreadId(sid), child, grandchild])
    expect(threads[1]).toMatchObject({ agent: inline, workflow_run_id: 'wrun_1', parent_thread_id: primaryThreadId(sid), status: 'running', created_at: '2026-06-01T00:00:01.000Z' })
    expect(threads[2].parent_thread_id).toBe(child)
  })

  it('maps thread ids to log keys and refuses a thread the session does not have', async () => {
    const sid = await t.newSession()
    await at(1000, sid, { type: 'session.thread_created', session_thread_id: 'sthr_C', agent_name: 'c', workflow_run_id: null })
    expect(t.threads.logKey(sid, primaryThreadId(sid))).toBeNull()
    expect(t.threads.logKey(sid, 'sthr_C')).toBe('sthr_C')
    expect(() => t.threads.logKey(sid, 'sthr_OTHER')).toThrow(/was not found/)
    const other = await t.newSession()
    expect(() => t.threads.logKey(other, 'sthr_C')).toThrow(/was not found/)
    expect(() => t.threads.list(sid, { page: 'garbage' })).toThrow(/page: not a cursor/)
  })

  it('folds new events into the threads it already derived without changing what it handed out', async () => {
    const sid = await t.newSession()
    const usage = (n: number) => ({ type: 'span.model_request_end', session_thread_id: 'sthr_C', model_request_start_id: 'sevt_x', is_error: false, model_usage: { input_tokens: n, output_tokens: 0, cache_read_input_tokens: 0, cache_creation_input_tokens: n } })
    await at(1000, sid, { type: 'session.thread_created', session_thread_id: 'sthr_C', agent_name: 'c', workflow_run_id: null })
    await at(1500, sid, usage(3))
    await at(2000, sid, { type: 'session.thread_status_idle', session_thread_id: 'sthr_C', agent_name: 'c', stop_reason: { type: 'end_turn' }, stop_details: null })
    const first = t.threads.all(sid)
    expect(first[1]).toMatchObject({ status: 'idle', usage: { input_tokens: 3, cache_creation: { ephemeral_5m_input_tokens: 3 } } })
    await at(3000, sid, { type: 'session.thread_status_running', session_thread_id: 'sthr_C', agent_name: 'c' })
    await at(3500, sid, usage(4))
    await at(4000, sid, { type: 'session.thread_created', session_thread_id: 'sthr_D', agent_name: 'd', workflow_run_id: null })
    await at(4500, sid, { type: 'session.status_running' })
    const second = t.threads.all(sid)
    expect(second.map((x) => [x.id, x.status])).toEqual([
      [primaryThreadId(sid), 'running'],
      ['sthr_C', 'running'],
      ['sthr_D', 'running'],
    ])
    expect(second[1].usage).toMatchObject({ input_tokens: 7, cache_creation: { ephemeral_5m_input_tokens: 7 } })
    expect(first[1]).toMatchObject({ status: 'idle', usage: { input_tokens: 3, cache_creation: { ephemeral_5m_input_tokens: 3 } } })
    // A fresh store (another process) derives the same threads from the log alone.
    const fresh = memoryStoresOn(t)
    expect(fresh.all(sid).map((x) => [x.id, x.status, x.usage?.input_tokens ?? null])).toEqual(second.map((x) => [x.id, x.status, x.usage?.input_tokens ?? null]))
  })
})
