import { describe, expect, expectTypeOf, it } from 'vitest'
import type { BetaManagedAgentsSessionThreadStatus } from '@anthropic-ai/sdk/resources/beta/sessions/threads/threads'
import type { BetaManagedAgentsSessionEvent } from '@anthropic-ai/sdk/resources/beta/sessions/events'
import type { BetaManagedAgentsSession } from '@anthropic-ai/sdk/resources/beta/sessions/sessions'
import {
  ANSWERS,
  ANSWER_TYPES,
  PENDING_EVENT_TYPES,
  REQUEST_TYPES,
  STATUS_EVENTS,
  STATUS_EVENT_TYPES,
  answeredUseId,
  isOnThread,
  isOnThreadStream,
  isPending,
  isPrimaryVisible,
  permissionOf,
  sessionStatusOf,
  statusChangeOf,
  threadKeyOf,
  type AnswerType,
  type EventType,
  type RequestType,
  type StatusEventType,
} from '../../../src/shared/api/events'
import { primaryThreadId } from '../../../src/shared/api/ids'

type SdkType = BetaManagedAgentsSessionEvent['type']

describe('the status table', () => {
  it('has a row for exactly the SDK status event types, each setting a status word of the SDK', () => {
    // type-level (npm run typecheck): the table's keys are the SDK's status event types, its words the SDK's status unions
    expectTypeOf<StatusEventType>().toEqualTypeOf<Extract<SdkType, `session.status_${string}` | `session.thread_status_${string}`>>()
    expectTypeOf<(typeof STATUS_EVENTS)[StatusEventType]['status']>().toEqualTypeOf<BetaManagedAgentsSession['status']>()
    expectTypeOf<(typeof STATUS_EVENTS)[StatusEventType]['status']>().toEqualTypeOf<BetaManagedAgentsSessionThreadStatus>()
    expect(STATUS_EVENT_TYPES).toHaveLength(8)
    expect(new Set(STATUS_EVENT_TYPES.map((t) => STATUS_EVENTS[t].status))).toEqual(new Set(['running', 'idle', 'rescheduling', 'terminated']))
  })

  it("says 'rescheduling', the API's word, for a rescheduled event of the session and of a thread", () => {
    expect(sessionStatusOf({ type: 'session.status_rescheduled' })).toBe('rescheduling')
    expect(statusChangeOf({ type: 'session.thread_status_rescheduled', session_thread_id: 'sthr_1' })).toEqual({ scope: 'thread', thread: 'sthr_1', status: 'rescheduling' })
  })

  it("takes a session status event for the session's (its primary thread's) and one that names a thread for nothing", () => {
    expect(statusChangeOf({ type: 'session.status_idle' })).toEqual({ scope: 'session', thread: null, status: 'idle' })
    expect(statusChangeOf({ type: 'session.status_idle', session_thread_id: 'sthr_1' })).toBeUndefined()
    expect(sessionStatusOf({ type: 'session.thread_status_running', session_thread_id: 'sthr_1' })).toBeUndefined()
    expect(statusChangeOf({ type: 'agent.message' })).toBeUndefined()
  })
})

describe('what an answer answers', () => {
  it('names the request field of every answer type, a field the SDK gives that type', () => {
    expectTypeOf<AnswerType>().toMatchTypeOf<EventType>()
    expect(Object.fromEntries(ANSWER_TYPES.map((t) => [t, ANSWERS[t].field]))).toEqual({
      'agent.tool_result': 'tool_use_id',
      'agent.mcp_tool_result': 'mcp_tool_use_id',
      'user.tool_result': 'tool_use_id',
      'user.custom_tool_result': 'custom_tool_use_id',
      'user.tool_confirmation': 'tool_use_id',
    })
    expect(answeredUseId({ type: 'agent.mcp_tool_result', mcp_tool_use_id: 'sevt_m' } as { type: string })).toBe('sevt_m')
    expect(answeredUseId({ type: 'user.custom_tool_result', custom_tool_use_id: 'sevt_c' } as { type: string })).toBe('sevt_c')
    expect(answeredUseId({ type: 'agent.message' })).toBeUndefined()
  })

  it('lets a confirmation answer only calls that can ask, and a custom result only a custom call', () => {
    expect(ANSWERS['user.tool_confirmation'].answers).toEqual(['agent.tool_use', 'agent.mcp_tool_use'])
    expect(ANSWERS['user.custom_tool_result'].answers).toEqual(['agent.custom_tool_use'])
    expect(ANSWERS['user.tool_result'].answers).toEqual(['agent.tool_use'])
  })
})

describe('what is pending on the person', () => {
  const req = (type: RequestType, permission: 'allow' | 'ask' | null, confirmed = false, resulted = false) => isPending({ type, permission, confirmed, resulted })

  it('is a custom call without a result, or an asking call without a confirmation', () => {
    expect(req('agent.custom_tool_use', null)).toBe(true)
    expect(req('agent.custom_tool_use', null, false, true)).toBe(false)
    expect(req('agent.tool_use', 'ask')).toBe(true)
    expect(req('agent.tool_use', 'ask', true)).toBe(false)
    expect(req('agent.mcp_tool_use', 'ask', false, true)).toBe(false)
    expect(req('agent.tool_use', 'allow')).toBe(false)
  })

  it('reads a missing permission as allowed for a toolset call and as asking for an MCP call', () => {
    expect(permissionOf({ type: 'agent.tool_use' })).toBe('allow')
    expect(permissionOf({ type: 'agent.mcp_tool_use' })).toBe('ask')
    expect(permissionOf({ type: 'agent.custom_tool_use', evaluated_permission: 'ask' })).toBeNull()
    expect(permissionOf({ type: 'agent.tool_use', evaluated_permission: 'ask' })).toBe('ask')
  })

  it('is decided by the requests, their answers and the idles that list them', () => {
    expect(new Set(PENDING_EVENT_TYPES)).toEqual(new Set([...REQUEST_TYPES, ...ANSWER_TYPES, 'session.status_idle', 'session.thread_status_idle']))
  })
})

describe('threads', () => {
  it('puts an event without a thread id (or an empty one) on the primary thread, and one with an id on that thread', () => {
    expect(isOnThread({}, null)).toBe(true)
    expect(isOnThread({ session_thread_id: '' }, null)).toBe(true)
    expect(isOnThread({ session_thread_id: 'sthr_1' }, null)).toBe(false)
    expect(isOnThread({ session_thread_id: 'sthr_1' }, 'sthr_1')).toBe(true)
    expect(isOnThread({}, 'sthr_1')).toBe(false)
  })
})

describe('what the primary (session) stream shows', () => {
  const sid = 'sesn_01ABC'
  const primary = primaryThreadId(sid)
  const child = 'sthr_CHILD'
  const onChild = <E extends { type: string }>(e: E) => ({ ...e, session_thread_id: child })

  it("shows every event of the primary thread, also one that names the primary by its id", () => {
    expect(isPrimaryVisible({ type: 'agent.message' })).toBe(true)
    expect(isPrimaryVisible({ type: 'agent.tool_use', evaluated_permission: 'allow' })).toBe(true)
    expect(isOnThreadStream({ type: 'session.thread_status_running', session_thread_id: primary }, { sessionId: sid, thread: null })).toBe(true)
    expect(isOnThreadStream({ type: 'user.interrupt', session_thread_id: primary }, { sessionId: sid, thread: null })).toBe(true)
    expect(threadKeyOf({ session_thread_id: primary }, sid)).toBeNull()
  })

  it("shows a child's lifecycle, its calls that wait on the client and the client's answers to them, and nothing else of it", () => {
    const shown = [
      onChild({ type: 'session.thread_created' }),
      onChild({ type: 'session.thread_status_running' }),
      onChild({ type: 'session.thread_status_idle' }),
      onChild({ type: 'session.thread_status_rescheduled' }),
      onChild({ type: 'session.thread_status_terminated' }),
      onChild({ type: 'agent.tool_use', evaluated_permission: 'ask' }),
      onChild({ type: 'agent.mcp_tool_use', evaluated_permission: 'ask' }),
      // An MCP call without an evaluation asks (permissionOf).
      onChild({ type: 'agent.mcp_tool_use' }),
      onChild({ type: 'agent.custom_tool_use' }),
      onChild({ type: 'user.tool_confirmation' }),
      onChild({ type: 'user.custom_tool_result' }),
      onChild({ type: 'user.tool_result' }),
      onChild({ type: 'user.interrupt' }),
    ]
    const hidden = [
      onChild({ type: 'agent.message' }),
      onChild({ type: 'agent.thinking' }),
      onChild({ type: 'agent.tool_use', evaluated_permission: 'allow' }),
      onChild({ type: 'agent.tool_use' }),
      onChild({ type: 'agent.tool_use', evaluated_permission: 'deny' }),
      onChild({ type: 'agent.mcp_tool_use', evaluated_permission: 'allow' }),
      onChild({ type: 'agent.tool_result' }),
      onChild({ type: 'agent.mcp_tool_result' }),
      onChild({ type: 'agent.thread_message_sent' }),
      onChild({ type: 'agent.thread_message_received' }),
      onChild({ type: 'agent.thread_context_compacted' }),
      onChild({ type: 'span.model_request_start' }),
      onChild({ type: 'span.model_request_end' }),
      onChild({ type: 'session.error' }),
    ]
    expect(shown.filter((e) => !isPrimaryVisible(e))).toEqual([])
    expect(hidden.filter((e) => isPrimaryVisible(e))).toEqual([])
  })

  it("gives a child's stream its own events but the thread_created that names it, and never the primary's", () => {
    const view = { sessionId: sid, thread: child }
    expect(isOnThreadStream(onChild({ type: 'agent.message' }), view)).toBe(true)
    expect(isOnThreadStream(onChild({ type: 'agent.tool_use', evaluated_permission: 'ask' }), view)).toBe(true)
    expect(isOnThreadStream(onChild({ type: 'session.thread_created' }), view)).toBe(false)
    expect(isOnThreadStream({ type: 'agent.message' }, view)).toBe(false)
    expect(isOnThreadStream({ type: 'session.thread_status_idle', session_thread_id: primary }, view)).toBe(false)
    expect(isOnThreadStream({ type: 'agent.message', session_thread_id: 'sthr_OTHER' }, view)).toBe(false)
  })
})
