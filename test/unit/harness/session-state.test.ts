import { describe, expect, it } from 'vitest'
import { PRIMARY_THREAD } from '../../../src/shared/api/events'
import { decideNext, foldInto, foldSession } from '../../../src/main/harness/session-state'
import type { ViewEvent } from '../../../src/main/harness/context/view'

function log(...events: [string, Record<string, unknown>?][]): ViewEvent[] {
  return events.map(([type, fields], i) => ({ seq: i + 1, event: { id: (fields?.id as string) ?? `sevt_${i + 1}`, type, ...fields } }))
}
const decide = (events: ViewEvent[]) => decideNext(foldSession(events, PRIMARY_THREAD))
const end = (fields: Record<string, unknown> = {}): [string, Record<string, unknown>] => ['span.model_request_end', { is_error: false, model_request_start_id: 's', stop_reason: 'end_turn', ...fields }]

describe('deciding the next step from the log', () => {
  it('calls the model for an unanswered user message', () => {
    expect(decide(log(['user.message']))).toEqual({ kind: 'model', attempt: 0 })
  })

  it('idles with end_turn after an answer, then has nothing to do', () => {
    const answered = log(['user.message'], ['session.status_running'], ['span.model_request_start', { id: 's' }], ['agent.message'], end())
    expect(decide(answered)).toEqual({ kind: 'idle', stopReason: { type: 'end_turn' } })
    expect(decide(log(['user.message'], ['session.status_running'], ['span.model_request_start', { id: 's' }], end(), ['session.status_idle', { stop_reason: { type: 'end_turn' } }]))).toEqual({ kind: 'none' })
  })

  it('closes a request a dead process left open before anything else', () => {
    expect(decide(log(['user.message'], ['span.model_request_start', { id: 'sevt_open' }]))).toEqual({ kind: 'close_span', spanId: 'sevt_open' })
  })

  it('counts retrying errors since the last answer as the attempt number', () => {
    const failed = log(['user.message'], ['span.model_request_start', { id: 'a' }], ['span.model_request_end', { model_request_start_id: 'a', is_error: true }], ['session.error', { error: { retry_status: { type: 'retrying' } } }])
    expect(decide(failed)).toEqual({ kind: 'model', attempt: 1 })
  })

  it('runs allowed and confirmed calls, denies denied ones, and waits for the rest with requires_action', () => {
    const base: [string, Record<string, unknown>?][] = [
      ['user.message'],
      ['agent.tool_use', { id: 'u1', name: 'bash', evaluated_permission: 'ask' }],
      ['agent.tool_use', { id: 'u2', name: 'read', evaluated_permission: 'allow' }],
      ['agent.custom_tool_use', { id: 'c1', name: 'x' }],
      end({ stop_reason: 'tool_use' }),
    ]
    const s1 = decide(log(...base))
    expect(s1).toMatchObject({ kind: 'run_tools', deny: [] })
    expect((s1 as { run: { id: string }[] }).run.map((t) => t.id)).toEqual(['u2'])
    expect(decide(log(...base, ['agent.tool_result', { tool_use_id: 'u2' }]))).toEqual({ kind: 'idle', stopReason: { type: 'requires_action', event_ids: ['u1', 'c1'] } })
    const waiting = log(...base, ['agent.tool_result', { tool_use_id: 'u2' }], ['session.status_idle', { stop_reason: { type: 'requires_action', event_ids: ['u1', 'c1'] } }])
    expect(decide(waiting)).toEqual({ kind: 'none' })
    const denied = decideNext(foldSession([...waiting, { seq: 99, event: { id: 'sevt_99', type: 'user.tool_confirmation', tool_use_id: 'u1', result: 'deny', deny_message: 'no' } } as ViewEvent], PRIMARY_THREAD))
    expect(denied).toMatchObject({ kind: 'run_tools', run: [] })
    expect((denied as { deny: { id: string }[] }).deny.map((t) => t.id)).toEqual(['u1'])
  })

  it('re-idles with only the calls still waiting after some are answered', () => {
    const events = log(
      ['user.message'],
      ['agent.tool_use', { id: 'u1', evaluated_permission: 'ask' }],
      ['agent.custom_tool_use', { id: 'c1' }],
      end({ stop_reason: 'tool_use' }),
      ['session.status_idle', { stop_reason: { type: 'requires_action', event_ids: ['u1', 'c1'] } }],
      ['user.custom_tool_result', { custom_tool_use_id: 'c1' }],
    )
    expect(decide(events)).toEqual({ kind: 'idle', stopReason: { type: 'requires_action', event_ids: ['u1'] } })
  })

  it('calls the model once every call of the response has a result', () => {
    const events = log(['user.message'], ['agent.tool_use', { id: 'u1', evaluated_permission: 'allow' }], end({ stop_reason: 'tool_use' }), ['agent.tool_result', { tool_use_id: 'u1' }])
    expect(decide(events)).toEqual({ kind: 'model', attempt: 0 })
  })

  it('on an interrupt stops open calls, then idles, and does not answer the interrupted message again', () => {
    const running = log(['user.message'], ['session.status_running'], ['agent.tool_use', { id: 'u1', evaluated_permission: 'allow' }], end({ stop_reason: 'tool_use' }), ['user.interrupt'])
    expect(decide(running)).toMatchObject({ kind: 'stop_tools', toolUses: [{ id: 'u1' }] })
    const stopped = log(
      ['user.message'],
      ['session.status_running'],
      ['agent.tool_use', { id: 'u1', evaluated_permission: 'allow' }],
      end({ stop_reason: 'tool_use' }),
      ['user.interrupt'],
      ['agent.tool_result', { tool_use_id: 'u1', is_error: true, interrupted: true }],
    )
    expect(decide(stopped)).toEqual({ kind: 'idle', stopReason: { type: 'end_turn' } })
    expect(decide(log(['user.message'], ['session.status_running'], ['span.model_request_start', { id: 'x' }], ['user.interrupt'], ['span.model_request_end', { model_request_start_id: 'x', is_error: true, interrupted: true }]))).toEqual({
      kind: 'idle',
      stopReason: { type: 'end_turn' },
    })
  })

  it('stops the calls of an answer whose request was in flight when the interrupt was logged, though the answer was logged after it', () => {
    // seq: 1 message, 2 running, 3 span start, 4 interrupt, 5 tool_use, 6 span end that saw through seq 3
    const raced = log(
      ['user.message'],
      ['session.status_running'],
      ['span.model_request_start', { id: 's' }],
      ['user.interrupt'],
      ['agent.tool_use', { id: 'u1', evaluated_permission: 'allow' }],
      end({ stop_reason: 'tool_use', context_seq: 3 }),
    )
    expect(decide(raced)).toEqual({ kind: 'stop_tools', toolUses: [expect.objectContaining({ id: 'u1' })], cause: 'interrupt' })
    const stopped = [...raced, { seq: 7, event: { id: 'sevt_7', type: 'agent.tool_result', tool_use_id: 'u1', is_error: true, interrupted: true } }]
    expect(decide(stopped)).toEqual({ kind: 'idle', stopReason: { type: 'end_turn' } })
    // an answer whose request saw the interrupt (a message sent with it) settles it: its calls run
    const seen = log(['user.message'], ['session.status_running'], ['user.interrupt'], ['user.message'], ['agent.tool_use', { id: 'u1', evaluated_permission: 'allow' }], end({ stop_reason: 'tool_use', context_seq: 4 }))
    expect(decide(seen)).toMatchObject({ kind: 'run_tools', run: [{ id: 'u1' }] })
  })

  it('leaves no custom call waiting on the client once an interrupted turn has idled end_turn', () => {
    const raced = log(
      ['user.message'],
      ['session.status_running'],
      ['span.model_request_start', { id: 's' }],
      ['user.interrupt'],
      ['agent.custom_tool_use', { id: 'c1' }],
      end({ stop_reason: 'tool_use', context_seq: 3 }),
    )
    expect(decide(raced)).toEqual({ kind: 'idle', stopReason: { type: 'end_turn' } })
    const idled = log(...[...raced.map((r) => [r.event.type, r.event] as [string, Record<string, unknown>]), ['session.status_idle', { stop_reason: { type: 'end_turn' } }] as [string, Record<string, unknown>]])
    expect(decide(idled)).toEqual({ kind: 'none' })
  })

  it('answers a message sent after an interrupt', () => {
    expect(decide(log(['user.message'], ['session.status_running'], ['user.interrupt'], ['user.message']))).toEqual({ kind: 'model', attempt: 0 })
  })

  it('abandons calls waiting for confirmation when the user sends a new message instead', () => {
    const events = log(['user.message'], ['agent.tool_use', { id: 'u1', evaluated_permission: 'ask' }], end({ stop_reason: 'tool_use' }), ['session.status_idle', { stop_reason: { type: 'requires_action', event_ids: ['u1'] } }], ['user.message'])
    expect(decide(events)).toMatchObject({ kind: 'stop_tools', toolUses: [{ id: 'u1' }] })
  })

  it('reports a refusal as the idle stop reason', () => {
    expect(decide(log(['user.message'], end({ stop_reason: 'refusal' })))).toEqual({ kind: 'idle', stopReason: { type: 'refusal' } })
  })

  it('folds incrementally to the same state as folding everything at once', () => {
    const events = log(['user.message'], ['agent.tool_use', { id: 'u1', evaluated_permission: 'allow' }], end({ stop_reason: 'tool_use', model_usage: { input_tokens: 5, output_tokens: 3, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 } }))
    const whole = foldSession(events, PRIMARY_THREAD)
    const part = foldSession(events.slice(0, 1), PRIMARY_THREAD)
    foldInto(part, events.slice(1))
    expect(part).toEqual(whole)
    expect(whole.usageByModel.get('')).toEqual({ input_tokens: 5, output_tokens: 3, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 })
  })

  it('still answers input that arrived while a request ran, even when its answer ended the turn in the same commit', () => {
    const events = log(
      ['user.message'],
      ['session.status_running'],
      ['user.message'],
      ['span.model_request_start', { id: 's' }],
      ['agent.message'],
      end({ context_seq: 2 }),
      ['session.status_idle', { stop_reason: { type: 'end_turn' }, context_seq: 2 }],
    )
    expect(decide(events)).toEqual({ kind: 'model', attempt: 0 })
    const covered = log(['user.message'], ['span.model_request_start', { id: 's' }], end({ context_seq: 1 }), ['session.status_idle', { stop_reason: { type: 'end_turn' }, context_seq: 1 }])
    expect(decide(covered)).toEqual({ kind: 'none' })
  })

  it('continues a turn the endpoint paused (pause_turn)', () => {
    expect(decide(log(['user.message'], ['agent.message'], end({ stop_reason: 'pause_turn' })))).toEqual({ kind: 'model', attempt: 0 })
  })

  it('on an interrupt while calls wait for confirmation, answers them as not run and ends the turn', () => {
    const waiting: [string, Record<string, unknown>?][] = [
      ['user.message'],
      ['session.status_running'],
      ['agent.tool_use', { id: 'u1', evaluated_permission: 'ask' }],
      ['agent.custom_tool_use', { id: 'c1' }],
      end({ stop_reason: 'tool_use' }),
      ['session.status_idle', { stop_reason: { type: 'requires_action', event_ids: ['u1', 'c1'] } }],
      ['user.interrupt'],
    ]
    expect(decide(log(...waiting))).toMatchObject({ kind: 'stop_tools', toolUses: [{ id: 'u1' }] })
    expect(decide(log(...waiting, ['agent.tool_result', { tool_use_id: 'u1', is_error: true, interrupted: true }]))).toEqual({ kind: 'idle', stopReason: { type: 'end_turn' } })
  })

  it('folds one thread of a log that holds two: each fold sees only its own thread', () => {
    const events = log(
      ['user.message'],
      ['agent.custom_tool_use', { id: 'c1', name: 'x', session_thread_id: 'sthr_child' }],
      ['session.thread_status_idle', { session_thread_id: 'sthr_child', stop_reason: { type: 'requires_action', event_ids: ['c1'] } }],
      ['span.model_request_start', { id: 'sp' }],
      ['session.thread_status_rescheduled', { session_thread_id: 'sthr_other' }],
    )
    const primary = foldSession(events, PRIMARY_THREAD)
    const child = foldSession(events, 'sthr_child')
    expect(primary.openToolUses).toEqual([])
    expect(primary.openSpanId).toBe('sp')
    expect(primary.lastUserMessageSeq).toBe(1)
    expect(primary.status).toBe('idle')
    expect(child.openToolUses.map((t) => t.id)).toEqual(['c1'])
    expect(child.openSpanId).toBeUndefined()
    expect(child.lastUserMessageSeq).toBe(0)
    expect(child.lastIdle).toEqual({ seq: 3, stopReason: { type: 'requires_action', event_ids: ['c1'] } })
    expect(decideNext(child)).toEqual({ kind: 'none' })
    expect(decideNext(primary)).toEqual({ kind: 'close_span', spanId: 'sp' })
    // both folds have read the whole log, so a continued fold starts after it
    expect([primary.lastSeq, child.lastSeq]).toEqual([5, 5])
    expect(foldSession(events, 'sthr_other').status).toBe('rescheduling')
  })

  it("takes the API's status word from a rescheduled event: rescheduling", () => {
    expect(foldSession(log(['session.status_running'], ['session.status_rescheduled']), PRIMARY_THREAD).status).toBe('rescheduling')
  })
})
