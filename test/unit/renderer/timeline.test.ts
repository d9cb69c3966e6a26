import { describe, expect, it } from 'vitest'
import { threadMessageView } from '../../../src/renderer/src/features/thread/thread-cards'
import { TimelineBuilder, asRunThreadRows, isAwaitingUser, textOf, withoutRunThreadRows, type TimelineEvent, type ToolItem } from '../../../src/renderer/src/features/thread/timeline'

let n = 0
const ev = (type: string, fields: Record<string, unknown> = {}): TimelineEvent => ({ id: `sevt_${++n}`, type, processed_at: new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString(), ...fields })
const text = (t: string) => [{ type: 'text', text: t }]

describe('TimelineBuilder', () => {
  it('makes one row of a failing model request episode (one session.error per attempt), with the attempt count and status', () => {
    const err = (attempt: number, retry: string, extra: Record<string, unknown> = {}) =>
      ev('session.error', { error: { type: 'model_request_failed_error', message: `model request failed: connection refused to http://127.0.0.1:9 (#${attempt})`, retry_status: { type: retry } }, attempt, max_attempts: 6, ...extra })
    const b = TimelineBuilder.from([ev('user.message', { content: text('hi') }), err(1, 'retrying'), err(2, 'retrying', { status_code: 529 }), err(3, 'retrying')])
    const rows = b.items.filter((i) => i.kind === 'error')
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ attempts: 3, maxAttempts: 6, retry: 'retrying', message: expect.stringContaining('(#3)') })
    // The episode ends with the retries exhausted: still the same row.
    b.append(err(6, 'exhausted'))
    expect(b.items.filter((i) => i.kind === 'error')).toEqual([expect.objectContaining({ retry: 'exhausted', attempts: 6 })])
    // A later episode (after other events) is a row of its own.
    b.append(ev('user.message', { content: text('again') }))
    b.append(err(1, 'retrying'))
    expect(b.items.filter((i) => i.kind === 'error')).toHaveLength(2)
  })

  it('folds a tool call, its confirmation and its result into one card with a duration', () => {
    const use = ev('agent.tool_use', { name: 'bash', input: { command: 'ls' }, evaluated_permission: 'ask' })
    const b = TimelineBuilder.from([use, ev('user.tool_confirmation', { tool_use_id: use.id, result: 'allow' }), ev('agent.tool_result', { tool_use_id: use.id, content: text('a\nb'), is_error: false })])
    expect(b.items).toHaveLength(1)
    const card = b.items[0] as ToolItem
    expect(card.confirmation?.result).toBe('allow')
    expect(card.result).toMatchObject({ text: 'a\nb', isError: false, durationMs: 1000 })
  })

  it('reads exit_code and duration_ms from a tool result when the engine records them', () => {
    const use = ev('agent.tool_use', { name: 'bash', input: { command: 'false' } })
    const b = TimelineBuilder.from([use, ev('agent.tool_result', { tool_use_id: use.id, content: text(''), is_error: true, exit_code: 1, duration_ms: 42 })])
    expect((b.items[0] as ToolItem).result).toMatchObject({ exitCode: 1, durationMs: 42, isError: true })
  })

  it('attaches a result that arrived before its tool_use once the tool_use is folded in', () => {
    const b = new TimelineBuilder()
    b.append({ id: 'sevt_r', type: 'agent.tool_result', tool_use_id: 'sevt_u', content: text('late') })
    expect(b.items).toHaveLength(0)
    b.append({ id: 'sevt_u', type: 'agent.tool_use', name: 'read', input: { file_path: '/a' } })
    expect((b.items[0] as ToolItem).result?.text).toBe('late')
  })

  it('ignores an event it has already folded in (a stream replaying history)', () => {
    const m = ev('user.message', { content: text('hi') })
    const b = new TimelineBuilder()
    expect(b.append(m)).toBe(true)
    expect(b.append(m)).toBe(false)
    expect(b.items).toHaveLength(1)
  })

  it('streams a message from previews and replaces it in place with the stored event', () => {
    const b = new TimelineBuilder()
    b.append(ev('user.message', { content: text('go') }))
    expect(b.preview({ type: 'event_start', event: { id: 'sevt_m', type: 'agent.message' } })).toBe(true)
    b.preview({ type: 'event_delta', event_id: 'sevt_m', delta: { content: { text: 'Hel' } } })
    b.preview({ type: 'event_delta', event_id: 'sevt_m', delta: { content: { text: 'lo' } } })
    expect(b.items[1]).toMatchObject({ kind: 'agent', text: 'Hello', streaming: true })
    b.append({ id: 'sevt_m', type: 'agent.message', content: text('Hello!') })
    expect(b.items).toHaveLength(2)
    expect(b.items[1]).toMatchObject({ kind: 'agent', text: 'Hello!', streaming: false })
    expect(b.preview({ type: 'event_delta', event_id: 'sevt_m', delta: { content: { text: 'x' } } })).toBe(false)
  })

  it('hides spans and running statuses but shows why a turn stopped', () => {
    const b = TimelineBuilder.from([ev('session.status_running'), ev('span.model_request_start'), ev('span.model_request_end'), ev('session.status_idle', { stop_reason: { type: 'retries_exhausted' } })])
    expect(b.items.map((i) => i.kind)).toEqual(['turn'])
    expect(b.items[0]).toMatchObject({ stopReason: 'retries_exhausted' })
  })

  it('shows the primary thread without subagent events, and a subagent thread with only its own', () => {
    const events = [
      ev('user.message', { content: text('main') }),
      ev('session.thread_created', { session_thread_id: 'sthr_a', agent_name: 'researcher' }),
      ev('agent.message', { content: text('from sub'), session_thread_id: 'sthr_a' }),
      ev('agent.message', { content: text('from main') }),
    ]
    const primary = TimelineBuilder.from(events, null)
    expect(primary.items.map((i) => i.kind)).toEqual(['user', 'delegation', 'agent'])
    const sub = TimelineBuilder.from(events, 'sthr_a')
    expect(sub.items.map((i) => (i.kind === 'agent' ? i.text : i.kind))).toEqual(['thread', 'from sub'])
  })

  it("gives a subagent's lifecycle rows on the primary the API's status words (rescheduling, idle, terminated), from the shared status table", () => {
    const events = [
      ev('session.thread_created', { session_thread_id: 'sthr_a', agent_name: 'researcher' }),
      ev('session.thread_status_running', { session_thread_id: 'sthr_a' }),
      ev('session.thread_status_rescheduled', { session_thread_id: 'sthr_a' }),
      ev('session.thread_status_idle', { session_thread_id: 'sthr_a', stop_reason: { type: 'retries_exhausted' } }),
      ev('session.thread_status_terminated', { session_thread_id: 'sthr_a' }),
    ]
    const rows = TimelineBuilder.from(events, null).items.flatMap((i) => (i.kind === 'thread' ? [i.state] : []))
    expect(rows).toEqual(['rescheduling', 'idle', 'terminated'])
  })

  it('says a thread terminated by its archive was archived, on the primary and on its own timeline', () => {
    const archived = ev('session.thread_status_terminated', { session_thread_id: 'sthr_a', agent_name: 'researcher', archived: true })
    expect(TimelineBuilder.from([archived], null).items[0]).toMatchObject({ kind: 'thread', state: 'terminated', archived: true })
    expect(TimelineBuilder.from([archived], 'sthr_a').items[0]).toMatchObject({ kind: 'note', label: 'Thread archived' })
  })

  it("ends a child's turns on its own timeline as the session's turns end on the primary's (a divider with the stop reason), and says when it terminated", () => {
    const events = [
      ev('session.thread_status_running', { session_thread_id: 'sthr_a' }),
      ev('agent.message', { session_thread_id: 'sthr_a', content: text('done') }),
      ev('session.thread_status_idle', { session_thread_id: 'sthr_a', stop_reason: { type: 'requires_action', event_ids: [] } }),
      ev('session.thread_status_idle', { session_thread_id: 'sthr_a', stop_reason: { type: 'end_turn' } }),
      ev('session.thread_status_terminated', { session_thread_id: 'sthr_a' }),
    ]
    const rows = TimelineBuilder.from(events, 'sthr_a').items.map((i) => (i.kind === 'turn' ? `turn:${i.stopReason}` : i.kind === 'note' ? i.label : i.kind))
    expect(rows).toEqual(['agent', 'turn:requires_action', 'turn:end_turn', 'Thread terminated'])
  })

  it('lists as pending only the asks named by the latest requires_action idle and not yet answered', () => {
    const a = ev('agent.tool_use', { name: 'bash', input: {}, evaluated_permission: 'ask' })
    const c = ev('agent.tool_use', { name: 'write', input: {}, evaluated_permission: 'ask' })
    const b = TimelineBuilder.from([a, c, ev('session.status_idle', { stop_reason: { type: 'requires_action', event_ids: [a.id, c.id] } })], '*')
    expect(b.pending().map((t) => t.name)).toEqual(['bash', 'write'])
    b.append(ev('user.tool_confirmation', { tool_use_id: a.id, result: 'deny', deny_message: 'no' }))
    expect(b.pending().map((t) => t.name)).toEqual(['write'])
    // The brain runs the answered call; the unanswered one still waits.
    b.append(ev('session.status_running'))
    expect(b.pending().map((t) => t.name)).toEqual(['write'])
    b.append(ev('session.status_idle', { stop_reason: { type: 'end_turn' } }))
    expect(b.pending()).toEqual([])
  })

  it('does not count an ask that an interrupt answered with a result', () => {
    const a = ev('agent.tool_use', { name: 'bash', input: {}, evaluated_permission: 'ask' })
    const b = TimelineBuilder.from([a, ev('session.status_idle', { stop_reason: { type: 'requires_action', event_ids: [a.id] } }), ev('agent.tool_result', { tool_use_id: a.id, content: text('Not run'), is_error: true })], '*')
    expect(b.pending()).toEqual([])
    expect(isAwaitingUser(b.items[0])).toBe(false)
  })

  it('ends a streaming message that never got its stored event when the turn is settled', () => {
    const b = new TimelineBuilder()
    b.preview({ type: 'event_start', event: { id: 'sevt_x', type: 'agent.message' } })
    expect(b.settleStreaming()).toBe(true)
    expect(b.items[0]).toMatchObject({ streaming: false })
  })

  it('folds a 100,000-event history into 50,000 rows with every result on its card', () => {
    const events: TimelineEvent[] = []
    for (let i = 0; i < 25_000; i++) {
      const use = { id: `u${i}`, type: 'agent.tool_use', name: 'bash', input: { command: `echo ${i}` } }
      events.push({ id: `m${i}`, type: 'agent.message', content: text(`step ${i}`) }, use, { id: `r${i}`, type: 'agent.tool_result', tool_use_id: `u${i}`, content: text(String(i)) }, { id: `s${i}`, type: 'span.model_request_end' })
    }
    const b = TimelineBuilder.from(events)
    expect(b.items).toHaveLength(50_000)
    expect((b.items[49_999] as ToolItem).result?.text).toBe('24999')
  })
})

describe('textOf', () => {
  it('joins text blocks and marks redacted ones', () => {
    expect(textOf([{ type: 'text', text: 'a' }, { type: 'redacted' }, { type: 'image' }, { type: 'text', text: 'b' }])).toBe('a\n[redacted]\nb')
  })
})

describe('reuseUnchanged', () => {
  it('keeps the objects of unchanged rows and takes the new ones where an answer arrived', async () => {
    const { reuseUnchanged } = await import('../../../src/renderer/src/features/thread/useThread')
    const use = { id: 'u1', type: 'agent.tool_use', name: 'bash', input: {} }
    const msg = { id: 'm1', type: 'agent.message', content: text('hi') }
    const before = TimelineBuilder.from([msg, use]).items
    const after = TimelineBuilder.from([{ id: 'm0', type: 'user.message', content: text('older') }, msg, use, { id: 'r1', type: 'agent.tool_result', tool_use_id: 'u1', content: text('ok') }]).items
    const merged = reuseUnchanged(before, after)
    expect(merged[0]).toBe(after[0])
    expect(merged[1]).toBe(before[0])
    expect(merged[2]).toBe(after[2])
    expect((merged[2] as ToolItem).result?.text).toBe('ok')
  })
})

describe('TimelineBuilder: workflow runs on the primary timeline', () => {
  const RUN = 'wrun_01TL'
  it("makes one row for a run, at its workflow_run.created, and none for the run's other events or its threads' lifecycle (the run card draws them)", () => {
    const b = TimelineBuilder.from([
      ev('user.message', { content: text('review it') }),
      ev('workflow_run.created', { workflow_run_id: RUN, name: 'review', description: null, phases: [] }),
      ev('workflow_run.status_running', { workflow_run_id: RUN }),
      ev('workflow_run.phase_started', { workflow_run_id: RUN, workflow_run_phase_id: 'wrph_1' }),
      ev('session.thread_created', { session_thread_id: 'sthr_RUN1', agent_name: 'reviewer', workflow_run_id: RUN }),
      ev('session.thread_status_running', { session_thread_id: 'sthr_RUN1', agent_name: 'reviewer' }),
      ev('session.thread_status_idle', { session_thread_id: 'sthr_RUN1', agent_name: 'reviewer', stop_reason: { type: 'retries_exhausted' } }),
      ev('session.thread_status_terminated', { session_thread_id: 'sthr_RUN1', agent_name: 'reviewer', archived: true }),
      ev('workflow_run.error', { workflow_run_id: RUN, error: { type: 'program_error', message: 'boom' } }),
      ev('workflow_run.status_ended', { workflow_run_id: RUN, result: { type: 'error', error: { type: 'program_error', message: 'boom' } } }),
      // a subagent that is no run's still has its rows
      ev('session.thread_created', { session_thread_id: 'sthr_SUB', agent_name: 'researcher', workflow_run_id: null }),
      ev('session.thread_status_idle', { session_thread_id: 'sthr_SUB', agent_name: 'researcher', stop_reason: { type: 'retries_exhausted' } }),
    ])
    expect(b.items.map((i) => i.kind)).toEqual(['user', 'workflow_run', 'delegation', 'thread'])
    expect(b.items[1]).toMatchObject({ kind: 'workflow_run', runId: RUN, name: 'review' })
  })

  it('says a refused start (workflow_run.error with a null run id) as a row, with its error type and message', () => {
    const b = TimelineBuilder.from([ev('workflow_run.error', { workflow_run_id: null, error: { type: 'max_workflow_runs_error', message: 'this session has 10 open workflow runs' } })])
    expect(b.items).toEqual([expect.objectContaining({ kind: 'note', label: 'Workflow run refused', text: 'max workflow runs error — this session has 10 open workflow runs', tone: 'warn' })])
  })

  it("keeps a run thread's own events in that thread's own timeline", () => {
    const created = ev('session.thread_created', { session_thread_id: 'sthr_RUN2', agent_name: 'reviewer', workflow_run_id: RUN })
    const msg = ev('agent.message', { session_thread_id: 'sthr_RUN2', content: text('a.ts looks fine') })
    const task = ev('agent.thread_message_received', { session_thread_id: 'sthr_RUN2', from_session_thread_id: 'sthr_PRIMARY', content: text('Review a.ts') })
    const b = TimelineBuilder.from([created, task, msg, ev('session.thread_status_idle', { session_thread_id: 'sthr_RUN2', stop_reason: { type: 'end_turn' } })], 'sthr_RUN2')
    expect(b.items.map((i) => i.kind)).toEqual(['thread', 'thread_message', 'agent', 'turn'])
    // its task came from the run's program (through the primary), and reads so
    expect(b.items[1]).toMatchObject({ kind: 'thread_message', direction: 'received', fromRun: true, text: 'Review a.ts' })
    expect(threadMessageView(b.items[1] as Extract<(typeof b.items)[number], { kind: 'thread_message' }>).title).toBe('Task from the workflow run')
  })
})

describe('withoutRunThreadRows', () => {
  it("drops the lifecycle rows of a run's threads whose creation the loaded page did not hold, and keeps a subagent's", () => {
    // the page starts after the run threads' session.thread_created: the builder folds their archive as a subagent's
    const b = TimelineBuilder.from([
      ev('session.thread_status_terminated', { session_thread_id: 'sthr_RUNX', agent_name: 'reviewer', archived: true }),
      ev('session.thread_status_terminated', { session_thread_id: 'sthr_SUBX', agent_name: 'researcher', archived: true }),
      ev('agent.message', { content: text('done') }),
    ])
    expect(b.items.map((i) => i.kind)).toEqual(['thread', 'thread', 'agent'])
    const kept = withoutRunThreadRows(b.items, (tid) => tid === 'sthr_RUNX')
    expect(kept.map((i) => (i.kind === 'thread' ? i.threadId : i.kind))).toEqual(['sthr_SUBX', 'agent'])
    expect(withoutRunThreadRows(b.items, () => false)).toBe(b.items)
  })
})

describe('asRunThreadRows', () => {
  it("reads the messages a run's thread received as the run's task, on a stream that does not carry the thread's creation", () => {
    const b = TimelineBuilder.from([ev('agent.thread_message_received', { session_thread_id: 'sthr_RUN3', from_session_thread_id: 'sthr_P', content: text('Run the checks') }), ev('agent.message', { session_thread_id: 'sthr_RUN3', content: text('ok') })], 'sthr_RUN3')
    const rows = asRunThreadRows(b.items)
    expect(rows[0]).toMatchObject({ kind: 'thread_message', fromRun: true })
    expect(threadMessageView(rows[0] as Extract<(typeof rows)[number], { kind: 'thread_message' }>).title).toBe('Task from the workflow run')
    expect(rows[1]).toBe(b.items[1])
    expect(asRunThreadRows(rows)).toBe(rows)
  })
})
