import { describe, expect, it } from 'vitest'
import { TimelineBuilder, type DelegationItem, type ReportItem, type TimelineEvent } from '../../../src/renderer/src/features/thread/timeline'
import { threadCardView, threadMessageView } from '../../../src/renderer/src/features/thread/thread-cards'
import { rowText } from '../../../src/renderer/src/features/thread/tool-view'

let n = 0
const ev = (type: string, fields: Record<string, unknown> = {}): TimelineEvent => ({ id: `sevt_${++n}`, type, processed_at: new Date(Date.UTC(2026, 11, 1, 12, 0, n)).toISOString(), ...fields })
const text = (t: string) => [{ type: 'text', text: t }]
const R = 'sthr_01RESEARCHER'

/** One delegation as the primary stream shows it (spec §4.2): created, task sent, status, report. */
function delegation(): TimelineEvent[] {
  return [
    ev('user.message', { content: text('Find why the date test is flaky') }),
    ev('session.thread_created', { session_thread_id: R, agent_name: 'researcher', workflow_run_id: null }),
    ev('agent.thread_message_sent', { to_session_thread_id: R, to_agent_name: 'researcher', content: text('Which CI runs failed date.test.ts?') }),
    ev('session.thread_status_running', { session_thread_id: R, agent_name: 'researcher' }),
    ev('agent.thread_message_received', { from_session_thread_id: R, from_agent_name: 'researcher', content: text('All 7 failures ran between 23:00 and 00:00 UTC.') }),
    ev('session.thread_status_idle', { session_thread_id: R, agent_name: 'researcher', stop_reason: { type: 'end_turn' }, stop_details: null }),
  ]
}

describe('delegation and report cards on the primary timeline', () => {
  it('folds a delegation into one card with its task, and the report into a card of its own, both linking to the thread', () => {
    const items = TimelineBuilder.from(delegation(), null).items
    expect(items.map((i) => i.kind)).toEqual(['user', 'delegation', 'report'])
    const [d, r] = [items[1] as DelegationItem, items[2] as ReportItem]
    expect(threadCardView(d)).toEqual({ tone: 'delegation', title: 'Delegated to researcher', agentName: 'researcher', threadId: R, body: 'Which CI runs failed date.test.ts?', linkLabel: "Open researcher's thread" })
    expect(r.from).toBe('subagent')
    expect(threadCardView(r)).toEqual({ tone: 'report', title: 'Report from researcher', agentName: 'researcher', threadId: R, body: 'All 7 failures ran between 23:00 and 00:00 UTC.', linkLabel: "Open researcher's thread" })
    expect(rowText(r)).toContain('23:00')
  })

  it('makes a later message to an existing thread a follow-up card, named from the thread even when the event leaves the name out', () => {
    const b = TimelineBuilder.from(delegation(), null)
    b.append(ev('agent.thread_message_sent', { to_session_thread_id: R, content: text('And in November?') }))
    const last = b.items[b.items.length - 1] as DelegationItem
    expect(threadCardView(last)).toMatchObject({ title: 'Follow-up to researcher', body: 'And in November?', threadId: R })
  })

  it("names a report by its thread's agent when from_agent_name is absent", () => {
    const events = delegation().map((e) => (e.type === 'agent.thread_message_received' ? { ...e, from_agent_name: null } : e))
    const report = TimelineBuilder.from(events, null).items.find((i) => i.kind === 'report') as ReportItem
    expect(threadCardView(report).title).toBe('Report from researcher')
  })

  it('reads an advisor consultation as one and its answer as advice, both linking to its thread, and leaves out its normal termination', () => {
    const A = 'sthr_01ADV'
    const b = TimelineBuilder.from(
      [
        ev('session.thread_created', { session_thread_id: A, agent_name: 'anthropic.advisor', workflow_run_id: null, agent: { type: 'advisor', model: 'claude-opus-4-5' } }),
        ev('session.thread_status_running', { session_thread_id: A, agent_name: 'anthropic.advisor' }),
        ev('agent.thread_message_received', { from_session_thread_id: A, from_agent_name: 'anthropic.advisor', content: text('Check the timezone first.') }),
        ev('session.thread_status_idle', { session_thread_id: A, agent_name: 'anthropic.advisor', stop_reason: { type: 'end_turn' } }),
        ev('session.thread_status_terminated', { session_thread_id: A, agent_name: 'anthropic.advisor' }),
      ],
      null,
    )
    expect(b.items.map((i) => i.kind)).toEqual(['delegation', 'report'])
    expect(threadCardView(b.items[0] as DelegationItem)).toMatchObject({ title: 'Consulted the advisor', threadId: A, linkLabel: 'Open the advisor consultation' })
    expect(threadCardView(b.items[1] as ReportItem)).toMatchObject({ title: 'Advice from the advisor', body: 'Check the timezone first.', threadId: A })
  })

  it("keeps on the primary timeline what a child's status says that needs reading (waiting, failed, terminated), not a turn that ended well", () => {
    const b = TimelineBuilder.from(delegation(), null)
    b.append(ev('session.thread_status_idle', { session_thread_id: R, agent_name: 'researcher', stop_reason: { type: 'requires_action', event_ids: ['sevt_x'] } }))
    b.append(ev('session.thread_status_terminated', { session_thread_id: R, agent_name: 'researcher' }))
    const lifecycle = b.items.flatMap((i) => (i.kind === 'thread' ? [`${i.state}:${i.stopReason ?? ''}`] : []))
    expect(lifecycle).toEqual(['idle:requires_action', 'terminated:'])
  })

  it("shows a child's own timeline with its task received and its report sent, and without the primary's cards", () => {
    const child = [
      ev('session.thread_status_running', { session_thread_id: R, agent_name: 'researcher' }),
      ev('agent.thread_message_received', { session_thread_id: R, from_session_thread_id: 'sthr_01PRIMARY', content: text('Which CI runs failed?') }),
      ev('agent.message', { session_thread_id: R, content: text('Looking at the CI logs.') }),
      ev('agent.thread_message_sent', { session_thread_id: R, to_session_thread_id: 'sthr_01PRIMARY', content: text('All 7 at night.') }),
    ]
    const items = TimelineBuilder.from([delegation()[1], ...child], R).items
    expect(items.map((i) => (i.kind === 'thread_message' ? `${i.kind}:${i.direction}` : i.kind))).toEqual(['thread', 'thread_message:received', 'agent', 'thread_message:sent'])
    // The other side names no agent: it is the lead.
    const messages = items.flatMap((i) => (i.kind === 'thread_message' ? [threadMessageView(i)] : []))
    expect(messages).toEqual([
      { title: 'Task from the lead', linkLabel: 'Open the primary thread' },
      { title: 'Report to the lead', linkLabel: 'Open the primary thread' },
    ])
  })

  it("drops another thread's streaming preview on the primary timeline", () => {
    const b = TimelineBuilder.from(delegation(), null)
    expect(b.preview({ type: 'event_start', event: { id: 'sevt_child_msg', type: 'agent.message', session_thread_id: R } })).toBe(false)
    expect(b.preview({ type: 'event_start', event: { id: 'sevt_own_msg', type: 'agent.message' } })).toBe(true)
  })
})
