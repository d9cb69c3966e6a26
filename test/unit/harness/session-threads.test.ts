import { describe, expect, it } from 'vitest'
import { SessionThreads } from '../../../src/main/harness/session-threads'

const SID = 'sesn_01TEST'
const PRIMARY = 'sthr_01TEST'

/** A fold fed these events in order (seq from 1). */
function fold(events: Record<string, unknown>[]): SessionThreads {
  const t = new SessionThreads(SID, PRIMARY)
  events.forEach((e, i) => t.apply(i + 1, e as Record<string, unknown> & { type: string }))
  return t
}
const created = (id: string, name = 'worker') => ({ type: 'session.thread_created', session_thread_id: id, agent_name: name, agent: { name, model: 'm' } })
const running = (id: string) => ({ type: 'session.thread_status_running', session_thread_id: id, agent_name: 'x' })
const idle = (id: string, stop_reason: Record<string, unknown> = { type: 'end_turn' }) => ({ type: 'session.thread_status_idle', session_thread_id: id, agent_name: 'x', stop_reason, stop_details: null })

describe('a session\'s threads and their aggregate status', () => {
  it('keeps the session running while any thread runs, and asks for the session idle once the last one stops', () => {
    const t = fold([running(PRIMARY), { type: 'session.status_running' }, created('sthr_a'), running('sthr_a'), idle(PRIMARY)])
    expect(t.aggregate()).toEqual({ status: 'running' })
    expect(t.aggregateEvent()).toBeUndefined()
    t.apply(6, idle('sthr_a'))
    expect(t.aggregateEvent()).toEqual({ type: 'session.status_idle', stop_reason: { type: 'end_turn' }, stop_details: null })
  })

  it("keeps the session running while a workflow run is open, through its phases' starts and ends, until the run pauses or ends", () => {
    const run = (type: string, extra: Record<string, unknown> = {}) => ({ type, workflow_run_id: 'wrun_a', ...extra })
    const t = fold([running(PRIMARY), { type: 'session.status_running' }, run('workflow_run.created'), run('workflow_run.status_running'), run('workflow_run.phase_started', { workflow_run_phase_id: 'wrph_a' }), idle(PRIMARY)])
    expect(t.aggregate()).toEqual({ status: 'running' })
    // a status append's transaction folds what it wrote before unfiltered: a phase's end and an error change nothing
    t.apply(7, run('workflow_run.phase_ended', { workflow_run_phase_id: 'wrph_a', phase_started_id: 'sevt_a' }))
    t.apply(8, run('workflow_run.error', { error: { type: 'program_error', message: 'x' } }))
    expect(t.aggregate()).toEqual({ status: 'running' })
    expect(t.aggregateEvent()).toBeUndefined()
    t.apply(9, run('workflow_run.status_idle'))
    expect(t.aggregateEvent()).toEqual({ type: 'session.status_idle', stop_reason: { type: 'end_turn' }, stop_details: null })
    t.apply(10, run('workflow_run.status_running'))
    expect(t.aggregate()).toEqual({ status: 'running' })
    // the run's end is the idle primary's input: the session runs on until the primary's reading turn ends
    t.apply(11, run('workflow_run.status_ended', { result: { type: 'completed' } }))
    expect(t.aggregate()).toEqual({ status: 'running' })
    expect(t.aggregateEvent()).toBeUndefined()
    t.apply(12, running(PRIMARY))
    t.apply(13, idle(PRIMARY))
    expect(t.aggregateEvent()).toEqual({ type: 'session.status_idle', stop_reason: { type: 'end_turn' }, stop_details: null })
  })

  it('is rescheduling while a thread waits to retry its model request and none runs, and running again once any thread runs', () => {
    const rescheduled = (id: string) => ({ type: 'session.thread_status_rescheduled', session_thread_id: id, agent_name: 'x' })
    const t = fold([running(PRIMARY), { type: 'session.status_running' }, created('sthr_a'), running('sthr_a'), idle(PRIMARY), rescheduled('sthr_a')])
    expect(t.aggregate()).toEqual({ status: 'rescheduling' })
    expect(t.aggregateEvent()).toEqual({ type: 'session.status_rescheduled' })
    t.apply(7, { type: 'session.status_rescheduled' })
    expect(t.aggregateEvent()).toBeUndefined()
    // another thread running outranks a retry
    t.apply(8, running(PRIMARY))
    expect(t.aggregate()).toEqual({ status: 'running' })
    expect(t.aggregateEvent()).toEqual({ type: 'session.status_running' })
    t.apply(9, { type: 'session.status_running' })
    t.apply(10, idle(PRIMARY))
    expect(t.aggregateEvent()).toEqual({ type: 'session.status_rescheduled' })
    // the retry starts: running again; then it ends, and the session idles
    t.apply(11, running('sthr_a'))
    expect(t.aggregate()).toEqual({ status: 'running' })
    t.apply(12, idle('sthr_a'))
    expect(t.aggregate()).toEqual({ status: 'idle', stop_reason: { type: 'end_turn' } })
  })

  it('lists every pending event id across threads when any thread waits on the client, above a budget pause', () => {
    const t = fold([
      created('sthr_a'),
      created('sthr_b'),
      idle(PRIMARY, { type: 'requires_action', event_ids: ['sevt_p'] }),
      idle('sthr_a', { type: 'requires_action', event_ids: ['sevt_a1', 'sevt_a2'] }),
      idle('sthr_b', { type: 'budget_reached' }),
    ])
    expect(t.aggregate()).toEqual({ status: 'idle', stop_reason: { type: 'requires_action', event_ids: ['sevt_p', 'sevt_a1', 'sevt_a2'] } })
  })

  it('reports budget_reached when a thread paused at the budget and none waits on the client, else the primary\'s own reason', () => {
    expect(fold([created('sthr_a'), idle(PRIMARY), idle('sthr_a', { type: 'budget_reached' })]).aggregate()).toEqual({ status: 'idle', stop_reason: { type: 'budget_reached' } })
    expect(fold([created('sthr_a'), idle('sthr_a'), idle(PRIMARY, { type: 'retries_exhausted' })]).aggregate()).toEqual({ status: 'idle', stop_reason: { type: 'retries_exhausted' } })
  })

  it('writes nothing when the session already says what the threads say, and a new idle when the pending ids change', () => {
    const t = fold([created('sthr_a'), idle(PRIMARY), idle('sthr_a', { type: 'requires_action', event_ids: ['sevt_1'] }), { type: 'session.status_idle', stop_reason: { type: 'requires_action', event_ids: ['sevt_1'] } }])
    expect(t.aggregateEvent()).toBeUndefined()
    t.apply(5, idle('sthr_a', { type: 'requires_action', event_ids: ['sevt_2'] }))
    expect(t.aggregateEvent()).toMatchObject({ type: 'session.status_idle', stop_reason: { type: 'requires_action', event_ids: ['sevt_2'] } })
  })

  it('counts a terminated child out of the live ones, and sums every thread\'s usage for the one budget', () => {
    const t = fold([
      created('sthr_a'),
      created('sthr_b'),
      { type: 'session.thread_status_terminated', session_thread_id: 'sthr_b', agent_name: 'x' },
      { type: 'span.model_request_end', model: 'm', model_usage: { input_tokens: 10, output_tokens: 1 } },
      { type: 'span.model_request_end', session_thread_id: 'sthr_a', model: 'm', model_usage: { input_tokens: 5, output_tokens: 2 } },
    ])
    expect(t.liveChildren().map((c) => c.id)).toEqual(['sthr_a'])
    expect(t.children.get('sthr_a')).toMatchObject({ agentName: 'worker', parentId: PRIMARY, agent: { name: 'worker' } })
    expect(t.usageByModel.get('m')).toMatchObject({ input_tokens: 15, output_tokens: 3 })
  })

  it('counts the children holding a slot by the thread store\'s rule: not advisor consultations, workflow-run threads or terminated ones', () => {
    const t = fold([
      created('sthr_a'),
      created('sthr_b'),
      { type: 'session.thread_created', session_thread_id: 'sthr_adv', agent_name: 'advisor', agent: { type: 'advisor', name: 'advisor', model: 'm' } },
      { type: 'session.thread_created', session_thread_id: 'sthr_run', agent_name: 'step', workflow_run_id: 'wrun_1', agent: { name: 'step', model: 'm' } },
      idle('sthr_b'),
    ])
    expect(t.liveChildCount()).toBe(2)
    t.apply(6, { type: 'session.thread_status_terminated', session_thread_id: 'sthr_b', agent_name: 'worker', archived: true })
    expect(t.liveChildCount()).toBe(1)
  })

  it('keeps a fork\'s running threads and active time apart from its origin\'s, either way', () => {
    const at = (e: Record<string, unknown> & { type: string }, iso: string) => ({ ...e, processed_at: iso })
    const active = (t: SessionThreads) => (t.usageEvent(null) as unknown as { usage: { active_seconds: number } }).usage.active_seconds
    const origin = fold([at(running(PRIMARY), '2026-01-01T00:00:00.000Z'), created('sthr_a'), at(running('sthr_a'), '2026-01-01T00:00:01.000Z'), at(idle(PRIMARY), '2026-01-01T00:00:02.000Z')])
    const fork = origin.fork()
    // the fork stops the last running thread: its active time ends there; the origin's goes on
    fork.apply(5, at(idle('sthr_a'), '2026-01-01T00:00:10.000Z'))
    expect(active(fork)).toBe(10)
    expect(active(origin)).toBeGreaterThan(10)
    // the origin stops it later: its own time, and the fork's stays what it was
    origin.apply(5, at(idle('sthr_a'), '2026-01-01T00:00:20.000Z'))
    expect(active(origin)).toBe(20)
    expect(active(fork)).toBe(10)
  })
})
