import { describe, expect, it } from 'vitest'
import { TimelineBuilder, type TimelineEvent } from '../../../src/renderer/src/features/thread/timeline'
import { answerEvent, pendingThreadOf, queueThreadLabel } from '../../../src/renderer/src/features/confirmations/queue'

let n = 0
const ev = (type: string, fields: Record<string, unknown> = {}): TimelineEvent => ({ id: `sevt_${++n}`, type, processed_at: new Date(Date.UTC(2026, 11, 1, 12, 0, n)).toISOString(), ...fields })
const T = 'sthr_01TESTERTHREAD'

/** What the session's event list holds when a child asks (spec §4.5): the cross-posted call and the child's idle, and the aggregate idle. */
function crossPosted() {
  const own = ev('agent.tool_use', { name: 'bash', input: { command: 'ls' }, evaluated_permission: 'ask' })
  const child = ev('agent.tool_use', { name: 'bash', input: { command: 'npm test' }, evaluated_permission: 'ask', session_thread_id: T })
  const events = [
    ev('session.thread_created', { session_thread_id: T, agent_name: 'tester', workflow_run_id: null }),
    own,
    child,
    ev('session.thread_status_idle', { session_thread_id: T, agent_name: 'tester', stop_reason: { type: 'requires_action', event_ids: [child.id] }, stop_details: null }),
    ev('session.status_idle', { stop_reason: { type: 'requires_action', event_ids: [own.id, child.id] }, stop_details: null }),
  ]
  return { own, child, events }
}

describe('the confirmation queue', () => {
  it("names the thread and agent of a child's call, and nothing for the primary's own", () => {
    const { own, child, events } = crossPosted()
    const b = TimelineBuilder.from(events, '*')
    // Named by both the child's idle and the session's aggregate idle: listed once. (The queue orders by time.)
    const pending = b.pending().sort((x, y) => (x.at ?? '').localeCompare(y.at ?? ''))
    expect(pending.map((t) => t.id)).toEqual([own.id, child.id])
    const items = pending.map((tool) => ({ tool, thread: pendingThreadOf(tool, (t) => b.agentOf(t)) }))
    expect(items.map((i) => queueThreadLabel(i))).toEqual([undefined, 'tester · thread …THREAD'])
    expect(items[1].thread).toEqual({ id: T, agentName: 'tester' })
  })

  it('names the agent from the requires_action idle when the thread_created event was not read', () => {
    const { events } = crossPosted()
    const b = TimelineBuilder.from(events.slice(1), '*')
    const child = b.pending().find((t) => t.threadId === T)!
    expect(pendingThreadOf(child, (t) => b.agentOf(t))).toEqual({ id: T, agentName: 'tester' })
  })

  it("approves a child's call on the session endpoint by its tool-use id alone (no session_thread_id: the engine routes it)", () => {
    const { child, events } = crossPosted()
    const tool = TimelineBuilder.from(events, '*').pending().find((t) => t.id === child.id)!
    expect(tool.threadId).toBe(T)
    expect(answerEvent({ tool }, 'allow')).toEqual({ type: 'user.tool_confirmation', tool_use_id: child.id, result: 'allow' })
    expect(answerEvent({ tool }, 'deny', 'not now')).toEqual({ type: 'user.tool_confirmation', tool_use_id: child.id, result: 'deny', deny_message: 'not now' })
    expect(answerEvent({ tool }, 'allow', undefined, 'session')).toEqual({ type: 'user.tool_confirmation', tool_use_id: child.id, result: 'allow', corral_allow_for_session: true })
  })

  it("answers a child's custom tool call with its result by the call's id", () => {
    const call = ev('agent.custom_tool_use', { name: 'lookup_ticket', input: { ticket: 'T-9' }, session_thread_id: T })
    const b = TimelineBuilder.from([call, ev('session.thread_status_idle', { session_thread_id: T, agent_name: 'triager', stop_reason: { type: 'requires_action', event_ids: [call.id] } })], '*')
    const [tool] = b.pending()
    expect(answerEvent({ tool }, 'allow', 'open, P2')).toEqual({ type: 'user.custom_tool_result', custom_tool_use_id: call.id, content: [{ type: 'text', text: 'open, P2' }], is_error: false })
  })

  it("leaves the queue once the answer's echo (the primary copy, with the thread's id) is folded", () => {
    const { own, child, events } = crossPosted()
    const b = TimelineBuilder.from(events, '*')
    b.append(ev('user.tool_confirmation', { tool_use_id: child.id, result: 'allow', session_thread_id: T }))
    expect(b.pending().map((t) => t.id)).toEqual([own.id])
  })
})
