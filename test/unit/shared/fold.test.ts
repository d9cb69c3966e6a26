import { describe, expect, expectTypeOf, it } from 'vitest'
import { defineFold, ignoring, type FoldHandlers } from '../../../src/shared/api/fold'
import type { EventType, LoggedEventOf } from '../../../src/shared/api/events'

type Seen = string[]

/** Every type but the ones a test names, marked ignore: a complete table to start from. */
const ALL_IGNORED: { [T in EventType]: 'ignore' } = ignoring(
  'user.message', 'user.interrupt', 'user.tool_confirmation', 'user.custom_tool_result', 'user.tool_result', 'user.define_outcome', 'system.message',
  'agent.custom_tool_use', 'agent.message', 'agent.thinking', 'agent.mcp_tool_use', 'agent.mcp_tool_result', 'agent.tool_use', 'agent.tool_result',
  'agent.thread_message_received', 'agent.thread_message_sent', 'agent.thread_context_compacted',
  'session.error', 'session.status_rescheduled', 'session.status_running', 'session.status_idle', 'session.status_terminated', 'session.thread_created',
  'session.thread_status_running', 'session.thread_status_idle', 'session.thread_status_terminated', 'session.thread_status_rescheduled',
  'session.updated', 'session.usage', 'session.deleted',
  'span.outcome_evaluation_start', 'span.outcome_evaluation_end', 'span.model_request_start', 'span.model_request_end', 'span.outcome_evaluation_ongoing',
  'workflow_run.created', 'workflow_run.status_running', 'workflow_run.status_idle', 'workflow_run.status_ended', 'workflow_run.error', 'workflow_run.phase_started', 'workflow_run.phase_ended',
)

describe('an exhaustive fold over events', () => {
  it('hands each event to the handler of its type, narrowed to that type', () => {
    const step = defineFold<Seen, number>({
      ...ALL_IGNORED,
      'user.tool_confirmation': (seen, e, seq) => {
        expectTypeOf(e.result).toEqualTypeOf<'allow' | 'deny'>()
        seen.push(`${seq}:${e.tool_use_id}:${e.result}`)
      },
      'span.model_request_end': (seen, e: LoggedEventOf<'span.model_request_end'>) => {
        // Corral's additions are typed too (CorralEventFields)
        expectTypeOf(e.context_seq).toEqualTypeOf<number | undefined>()
        seen.push(`end:${e.model_request_start_id}`)
      },
    })
    const seen: Seen = []
    step(seen, { type: 'user.tool_confirmation', tool_use_id: 'u1', result: 'allow' } as { type: string }, 7)
    step(seen, { type: 'span.model_request_end', model_request_start_id: 's1' } as { type: string }, 8)
    step(seen, { type: 'agent.message' }, 9)
    expect(seen).toEqual(['7:u1:allow', 'end:s1'])
  })

  it('ignores a type the table marks ignore and a type it does not know (a newer log)', () => {
    const step = defineFold<Seen>({ ...ALL_IGNORED, 'user.message': (seen) => seen.push('message') })
    const seen: Seen = []
    step(seen, { type: 'agent.thinking' }, undefined)
    step(seen, { type: 'corral.not_a_type_yet' }, undefined)
    step(seen, { type: 'user.message' }, undefined)
    expect(seen).toEqual(['message'])
  })

  it('does not compile when a handler for an event type is missing', () => {
    const { 'workflow_run.error': _dropped, ...missingOne } = ALL_IGNORED
    // @ts-expect-error 'workflow_run.error' has neither a handler nor 'ignore'
    const incomplete: FoldHandlers<Seen> = missingOne
    // @ts-expect-error a fold built from an incomplete table does not compile either
    defineFold<Seen>({ ...missingOne, 'user.message': () => {} })
    // and a handler for a type that does not exist is refused too
    // @ts-expect-error 'user.mesage' is not an event type
    defineFold<Seen>({ ...ALL_IGNORED, 'user.mesage': () => {} })
    expect(Object.keys(incomplete)).not.toContain('workflow_run.error')
  })
})
