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

  it('counts the children that hold a slot: not terminated, and never an advisor consultation or a workflow-run thread', async () => {
    const sid = await t.newSession()
    const created = (id: string, extra: Record<string, unknown> = {}) => ({ type: 'session.thread_created', session_thread_id: id, agent_name: id, workflow_run_id: null, ...extra })
    await at(1000, sid, created('sthr_A'))
    await at(1100, sid, created('sthr_B'))
    await at(1200, sid, created('sthr_ADV', { agent: { type: 'advisor', model: 'claude-opus-4-6' } }))
    await at(1300, sid, created('sthr_RUN', { workflow_run_id: 'wrun_1' }))
    await at(1400, sid, { type: 'session.thread_status_idle', session_thread_id: 'sthr_B', agent_name: 'sthr_B', stop_reason: { type: 'end_turn' }, stop_details: null })
    expect(t.threads.liveChildCount(sid)).toBe(2)
    await at(1500, sid, { type: 'session.thread_status_terminated', session_thread_id: 'sthr_A', agent_name: 'sthr_A' })
    expect(t.threads.liveChildCount(sid)).toBe(1)
    await t.threads.archive(sid, 'sthr_B')
    expect(t.threads.liveChildCount(sid)).toBe(0)
  })

  it("freezes an archived thread's duration at its archive and dates archived_at there; a failure's termination has none", async () => {
    const sid = await t.newSession()
    await at(1000, sid, { type: 'session.thread_created', session_thread_id: 'sthr_C', agent_name: 'c', workflow_run_id: null })
    await at(1000, sid, { type: 'session.thread_status_running', session_thread_id: 'sthr_C', agent_name: 'c' })
    await at(4000, sid, { type: 'session.thread_status_idle', session_thread_id: 'sthr_C', agent_name: 'c', stop_reason: { type: 'end_turn' }, stop_details: null })
    now = Date.parse('2026-06-01T00:00:06.000Z')
    const archived = await t.threads.archive(sid, 'sthr_C')
    expect(archived).toMatchObject({ status: 'terminated', archived_at: '2026-06-01T00:00:06.000Z', stats: { active_seconds: 3, duration_seconds: 5, startup_seconds: 0 } })
    now = Date.parse('2026-06-01T00:01:00.000Z')
    expect(t.threads.retrieve(sid, 'sthr_C').stats).toEqual({ active_seconds: 3, duration_seconds: 5, startup_seconds: 0 })
    // Another process derives the same from the log alone.
    expect(memoryStoresOn(t).retrieve(sid, 'sthr_C')).toEqual(t.threads.retrieve(sid, 'sthr_C'))
    await at(61_000, sid, { type: 'session.thread_created', session_thread_id: 'sthr_F', agent_name: 'f', workflow_run_id: null })
    await at(62_000, sid, { type: 'session.thread_status_terminated', session_thread_id: 'sthr_F', agent_name: 'f' })
    expect(t.threads.retrieve(sid, 'sthr_F')).toMatchObject({ status: 'terminated', archived_at: null })
    // Archiving a thread a failure terminated writes nothing and answers it as it is.
    const seq = t.log.lastSeq(sid)
    expect(await t.threads.archive(sid, 'sthr_F')).toEqual(t.threads.retrieve(sid, 'sthr_F'))
    expect(t.log.lastSeq(sid)).toBe(seq)
  })

  it('refuses to archive a thread that started running after the archive read it idle (checked again in the append)', async () => {
    const sid = await t.newSession()
    await at(1000, sid, { type: 'session.thread_created', session_thread_id: 'sthr_C', agent_name: 'c', workflow_run_id: null })
    await at(2000, sid, { type: 'session.thread_status_idle', session_thread_id: 'sthr_C', agent_name: 'c', stop_reason: { type: 'end_turn' }, stop_details: null })
    // Queued before the archive's append: both land in one group, the running one first.
    const racing = t.log.append(sid, [{ type: 'session.thread_status_running', session_thread_id: 'sthr_C', agent_name: 'c' }])
    const archive = t.threads.archive(sid, 'sthr_C')
    await racing
    await expect(archive).rejects.toThrow('thread sthr_C is running; only an idle thread can be archived')
    expect(t.threads.retrieve(sid, 'sthr_C')).toMatchObject({ status: 'running', archived_at: null })
  })

  it('gives a list without a limit up to 1000 threads on one page', async () => {
    const sid = await t.newSession()
    for (let i = 0; i < 30; i++) await at(1000 + i, sid, { type: 'session.thread_created', session_thread_id: `sthr_${i}`, agent_name: 'c', workflow_run_id: null })
    const page = t.threads.list(sid, {})
    expect(page.data).toHaveLength(31)
    expect(page.next_page).toBeNull()
  })

  it("gives the session's active time with overlapping threads counted once, and each thread's own time summed", async () => {
    const sid = await t.newSession()
    const primary = primaryThreadId(sid)
    await at(1000, sid, { type: 'session.status_running' })
    await at(1000, sid, { type: 'session.thread_status_running', session_thread_id: primary, agent_name: 'tester' })
    await at(2000, sid, { type: 'session.thread_created', session_thread_id: 'sthr_A', agent_name: 'a', workflow_run_id: null })
    await at(3000, sid, { type: 'session.thread_created', session_thread_id: 'sthr_B', agent_name: 'b', workflow_run_id: null })
    await at(4000, sid, { type: 'session.thread_status_idle', session_thread_id: primary, agent_name: 'tester', stop_reason: { type: 'end_turn' }, stop_details: null })
    await at(6000, sid, { type: 'session.thread_status_idle', session_thread_id: 'sthr_A', agent_name: 'a', stop_reason: { type: 'end_turn' }, stop_details: null })
    await at(7000, sid, { type: 'session.thread_status_idle', session_thread_id: 'sthr_B', agent_name: 'b', stop_reason: { type: 'end_turn' }, stop_details: null })
    await at(7000, sid, { type: 'session.status_idle', stop_reason: { type: 'end_turn' }, stop_details: null })
    // A gap with nothing running, then the primary alone again.
    await at(9000, sid, { type: 'session.thread_status_running', session_thread_id: primary, agent_name: 'tester' })
    await at(10_000, sid, { type: 'session.thread_status_idle', session_thread_id: primary, agent_name: 'tester', stop_reason: { type: 'end_turn' }, stop_details: null })
    now = Date.parse('2026-06-01T00:01:00.000Z')
    const threads = t.threads.all(sid)
    // The primary's time is its own (its thread_status_*), not the session's aggregate.
    expect(threads.map((x) => x.stats?.active_seconds)).toEqual([4, 4, 4])
    expect(threads[0].status).toBe('idle')
    expect(t.threads.activity(sid)).toEqual({ union_seconds: 7, sum_seconds: 12 })
    expect(memoryStoresOn(t).activity(sid)).toEqual({ union_seconds: 7, sum_seconds: 12 })
  })

  it("reports each thread's own list cost in whole US cents, priced at the model each request names (else the thread's), rounded per thread", async () => {
    const sid = await t.newSession()
    const primary = primaryThreadId(sid)
    const haiku = { type: 'inline', name: 'cheap', description: null, model: { id: 'claude-haiku-4-5' }, system: 's', tools: [], mcp_servers: [], skills: [], execution_identity: null }
    const end = (thread: string | undefined, model: string | undefined, u: { input_tokens: number; output_tokens: number; cache_read_input_tokens?: number; cache_creation_input_tokens?: number }) => ({
      type: 'span.model_request_end',
      ...(thread ? { session_thread_id: thread } : {}),
      ...(model ? { model } : {}),
      model_request_start_id: 'sevt_x',
      is_error: false,
      model_usage: { cache_read_input_tokens: 0, cache_creation_input_tokens: 0, ...u },
    })
    const idle = (thread: string) => ({ type: 'session.thread_status_idle', session_thread_id: thread, agent_name: 'a', stop_reason: { type: 'end_turn' }, stop_details: null })
    await at(1000, sid, { type: 'session.thread_created', session_thread_id: 'sthr_H', agent_name: 'cheap', agent: haiku, workflow_run_id: null })
    // no model on the span end: the thread's own model (haiku, $1 / $5 per MTok): 0.4 + 0.25 = 0.65 cents
    await at(1500, sid, end('sthr_H', undefined, { input_tokens: 4000, output_tokens: 500 }))
    await at(2000, sid, idle('sthr_H'))
    // the primary (sonnet, $3 / $15): 1M input and a cache read of 1M = 300 + 30 cents
    await at(2500, sid, end(undefined, 'claude-sonnet-4-6', { input_tokens: 1_000_000, output_tokens: 0, cache_read_input_tokens: 1_000_000 }))
    await at(3000, sid, { type: 'session.status_idle', stop_reason: { type: 'end_turn' }, stop_details: null })
    // an advisor consultation is priced at the advisor model its span names (opus 4.8, $5 / $25): 2.5 cents
    await at(3500, sid, { type: 'session.thread_created', session_thread_id: 'sthr_ADV', agent_name: 'anthropic.advisor', agent: { type: 'advisor', model: 'claude-opus-4-8' }, workflow_run_id: null })
    await at(3600, sid, end('sthr_ADV', 'claude-opus-4-8', { input_tokens: 2000, output_tokens: 600 }))
    await at(3700, sid, idle('sthr_ADV'))
    const [p, h, adv] = t.threads.all(sid)
    expect(p.id).toBe(primary)
    expect(p.usage?.list_cost).toEqual({ amount: '330', currency: 'USD' })
    expect(h.usage?.list_cost).toEqual({ amount: '1', currency: 'USD' })
    expect(adv.usage?.list_cost).toEqual({ amount: '3', currency: 'USD' })
    expect(t.threads.retrieve(sid, 'sthr_H').usage?.list_cost).toEqual({ amount: '1', currency: 'USD' })
    // a second cheap request: the thread's figure is its unrounded sum rounded once (0.65 + 0.65 = 1.3 → 1), not 1 + 1
    await at(4000, sid, { type: 'session.thread_status_running', session_thread_id: 'sthr_H', agent_name: 'cheap' })
    await at(4500, sid, end('sthr_H', undefined, { input_tokens: 4000, output_tokens: 500 }))
    await at(5000, sid, idle('sthr_H'))
    expect(t.threads.retrieve(sid, 'sthr_H').usage?.list_cost).toEqual({ amount: '1', currency: 'USD' })
  })
})
