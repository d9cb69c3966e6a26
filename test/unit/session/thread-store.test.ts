import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { primaryThreadId } from '../../../src/main/session/thread-store'
import { memoryStores, type Stores } from './fixtures'

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
})
