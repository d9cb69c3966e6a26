import { describe, expect, it } from 'vitest'
import { TimelineBuilder, type TimelineEvent, type TimelineItem, type ToolItem } from '../../../src/renderer/src/features/thread/timeline'
import { findRows, terminalView, toolState, toolTurns } from '../../../src/renderer/src/features/thread/tool-view'

let n = 0
const ev = (type: string, fields: Record<string, unknown> = {}): TimelineEvent => ({ id: `sevt_${++n}`, type, processed_at: new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString(), ...fields })
const text = (t: string) => [{ type: 'text', text: t }]
const delta = (eventId: string, t: string) => ({ type: 'event_delta', event_id: eventId, delta: { type: 'content_delta', content: { type: 'text', text: t }, index: 0 } })

describe('live tool output in the timeline', () => {
  it('shows previewed output on the running call as it arrives, and the stored result with the same id replaces it', () => {
    const use = ev('agent.tool_use', { name: 'bash', input: { command: 'for i in 1 2; do echo $i; sleep 1; done' }, evaluated_permission: 'allow' })
    const b = TimelineBuilder.from([use])
    b.preview({ type: 'event_start', event: { id: 'sevt_res', type: 'agent.tool_result', tool_use_id: use.id } })
    expect(b.preview(delta('sevt_res', '1\n'))).toBe(true)
    expect((b.items[0] as ToolItem).live).toBe('1\n')
    b.preview(delta('sevt_res', '2\n'))
    expect((b.items[0] as ToolItem).live).toBe('1\n2\n')
    expect(toolState(b.items[0] as ToolItem, false)).toBe('running')
    b.append({ id: 'sevt_res', type: 'agent.tool_result', tool_use_id: use.id, content: text('1\n2'), is_error: false, exit_code: 0 })
    const card = b.items[0] as ToolItem
    expect(card.live).toBeUndefined()
    expect(card.result?.text).toBe('1\n2')
    // A late delta of a concluded preview changes nothing.
    expect(b.preview(delta('sevt_res', '3\n'))).toBe(false)
  })

  it('ignores output previews for a call that is not in this view', () => {
    const b = TimelineBuilder.from([ev('user.message', { content: text('hi') })])
    b.preview({ type: 'event_start', event: { id: 'sevt_other', type: 'agent.tool_result', tool_use_id: 'sevt_elsewhere' } })
    expect(b.preview(delta('sevt_other', 'x'))).toBe(false)
    expect(b.items).toHaveLength(1)
  })

  it('keeps a running call\'s live output when the timeline is rebuilt with older events', () => {
    const use = ev('agent.tool_use', { name: 'bash', input: { command: 'ls' } })
    const before = TimelineBuilder.from([use])
    before.preview({ type: 'event_start', event: { id: 'sevt_r2', type: 'agent.tool_result', tool_use_id: use.id } })
    before.preview(delta('sevt_r2', 'a\n'))
    const after = TimelineBuilder.from([ev('user.message', { content: text('older') }), use])
    after.carryLive(before)
    expect((after.items[1] as ToolItem).live).toBe('a\n')
    after.preview(delta('sevt_r2', 'b\n'))
    expect((after.items[1] as ToolItem).live).toBe('a\nb\n')
  })
})

describe('stderr told apart on a bash card', () => {
  const errDelta = (eventId: string, t: string) => ({ type: 'event_delta', event_id: eventId, delta: { type: 'content_delta', content: { type: 'text', text: t }, index: 0, stream: 'stderr' } })

  it('marks the live output that came as stderr, and the stored result\'s stderr_ranges then replace the marks', () => {
    const use = ev('agent.tool_use', { name: 'bash', input: { command: 'make' }, evaluated_permission: 'allow' })
    const b = TimelineBuilder.from([use])
    b.preview({ type: 'event_start', event: { id: 'sevt_se', type: 'agent.tool_result', tool_use_id: use.id } })
    b.preview(delta('sevt_se', 'cc -c a.c\n'))
    b.preview(errDelta('sevt_se', 'a.c:1: warning\n'))
    b.preview(errDelta('sevt_se', 'a.c:2: warning\n'))
    b.preview(delta('sevt_se', 'ok\n'))
    const live = b.items[0] as ToolItem
    expect(live.live).toBe('cc -c a.c\na.c:1: warning\na.c:2: warning\nok\n')
    expect(live.liveStderr).toEqual([[10, 40]])
    b.append({ id: 'sevt_se', type: 'agent.tool_result', tool_use_id: use.id, content: text('cc -c a.c\na.c:1: warning\na.c:2: warning\nok'), is_error: false, exit_code: 0, stderr_ranges: [[10, 40]] })
    const done = b.items[0] as ToolItem
    expect(done.liveStderr).toBeUndefined()
    expect(done.result?.stderr).toEqual([[10, 40]])
  })

  it('drops stderr_ranges that do not fit the result\'s text', () => {
    const use = ev('agent.tool_use', { name: 'bash', input: { command: 'x' } })
    const b = TimelineBuilder.from([use, ev('agent.tool_result', { tool_use_id: use.id, content: text('abc'), is_error: false, stderr_ranges: [[1, 99]] })])
    expect((b.items[0] as ToolItem).result?.stderr).toBeUndefined()
  })

  it('keeps stderr ranges on the text a person reads when notes are cut and a truncation note is reworded', () => {
    const note = '\n\n[... output truncated: 5000 bytes in total, showing the first 4 and the last 4 bytes; the full output is saved in the sandbox at /workspace/.corral/outputs/t.log (read it with the read tool\'s offset and limit, or grep it) ...]\n\n'
    const full = `ab\nE${note}F\ncd\n[exit code 2]`
    const eAt = full.indexOf('E')
    const fAt = full.indexOf('F')
    const view = terminalView(full, [[eAt, eAt + 1], [fAt, fAt + 2]])
    expect(view.text).toBe('ab\nE\n… 4992 bytes not shown (5000 in total) …\nF\ncd')
    expect((view.stderr ?? []).map(([a, b]) => view.text.slice(a, b))).toEqual(['E', 'F\n'])
  })
})

describe('tool card state', () => {
  it('calls an interrupted call Interrupted, not an error, whatever its exit code', () => {
    const use = ev('agent.tool_use', { name: 'bash', input: { command: 'sleep 100' } })
    const b = TimelineBuilder.from([use, ev('agent.tool_result', { tool_use_id: use.id, content: text("[interrupted: the command's processes were killed; exit code 124]"), is_error: true, exit_code: 124, interrupted: true })])
    expect(toolState(b.items[0] as ToolItem, true)).toBe('interrupted')
  })

  it('calls a failed call an error and a call without result on an idle session stale', () => {
    const a = ev('agent.tool_use', { name: 'bash', input: { command: 'false' } })
    const c = ev('agent.tool_use', { name: 'bash', input: { command: 'true' } })
    const b = TimelineBuilder.from([a, ev('agent.tool_result', { tool_use_id: a.id, content: text('[exit code 1]'), is_error: true, exit_code: 1 }), c])
    expect(toolState(b.items[0] as ToolItem, true)).toBe('error')
    expect(toolState(b.items[1] as ToolItem, true)).toBe('stale')
    expect(toolState(b.items[1] as ToolItem, false)).toBe('running')
  })
})

describe('terminalView', () => {
  it('takes the model-facing notes off the end of the output and keeps the ones a person needs, reworded', () => {
    expect(terminalView('a\nb\n[exit code 2]')).toEqual({ text: 'a\nb', notes: [] })
    expect(terminalView("partial\n[interrupted: the command's processes were killed; exit code 130]")).toEqual({ text: 'partial', notes: [] })
    expect(terminalView("started\n/tmp/.corral-runner-2/cmd-1.sh: line 1:    10 Killed                  sleep 60\n[interrupted: the command's processes were killed; exit code 137]")).toEqual({ text: 'started', notes: [] })
    expect(terminalView("x\n[timed out after 1000 ms: the command's processes were killed; exit code 124]")).toEqual({ text: 'x', notes: ['timed out after 1000 ms'] })
    expect(terminalView('y\n[killed by SIGKILL (exit 137; out of memory or killed); exit code 137]\n[the shell did not return and was restarted: cwd and environment were reset]')).toEqual({
      text: 'y',
      notes: ['killed by SIGKILL', 'the shell did not return and was restarted: cwd and environment were reset'],
    })
  })

  it('keeps output that only looks like a note in the middle, and brackets the command printed itself at the end unless they are the runner\'s', () => {
    expect(terminalView('[exit code 2]\nmore')).toEqual({ text: '[exit code 2]\nmore', notes: [] })
    expect(terminalView('done\n[ok]')).toEqual({ text: 'done\n[ok]', notes: [] })
  })

  it('says how much output a truncation left out without the path inside the sandbox', () => {
    const t = 'head\n\n[... output truncated: 1000 bytes in total, showing the first 100 and the last 100 bytes; the full output is saved in the sandbox at /tmp/.corral/outputs/x.log (read it with view_range, or grep it) ...]\n\ntail'
    const v = terminalView(t)
    expect(v.text).toBe('head\n… 800 bytes not shown (1000 in total) …\ntail')
    expect(v.text).not.toContain('/tmp/.corral')
  })
})

describe('toolTurns', () => {
  it('groups the tool calls of each turn and marks the first of a turn with several', () => {
    const items: TimelineItem[] = [
      { kind: 'user', id: 'u1', text: 'go', attachments: 0 },
      { kind: 'tool', id: 't1', name: 'bash', source: 'toolset', input: {} },
      { kind: 'agent', id: 'a1', text: 'and', streaming: false },
      { kind: 'tool', id: 't2', name: 'read', source: 'toolset', input: {} },
      { kind: 'turn', id: 'd1', stopReason: 'end_turn' },
      { kind: 'user', id: 'u2', text: 'again', attachments: 0 },
      { kind: 'tool', id: 't3', name: 'bash', source: 'toolset', input: {} },
    ]
    const turns = toolTurns(items)
    expect(turns.get('t1')).toEqual({ turn: 'u1', first: true, count: 2 })
    expect(turns.get('t2')).toEqual({ turn: 'u1', first: false, count: 2 })
    expect(turns.get('t3')).toEqual({ turn: 'u2', first: true, count: 1 })
  })
})

describe('findRows', () => {
  it("finds the rows whose shown text has the query, case-insensitively, including a tool call's command and output", () => {
    const items: TimelineItem[] = [
      { kind: 'user', id: 'u', text: 'Where is the Config?', attachments: 0 },
      { kind: 'tool', id: 't', name: 'bash', source: 'toolset', input: { command: 'cat config.yml' }, result: { text: 'port: 8080', isError: false, images: 0, interrupted: false } },
      { kind: 'agent', id: 'a', text: 'It listens on 8080.', streaming: false },
      { kind: 'turn', id: 'd', stopReason: 'end_turn' },
    ]
    expect(findRows(items, 'config')).toEqual([0, 1])
    expect(findRows(items, '8080')).toEqual([1, 2])
    expect(findRows(items, '  ')).toEqual([])
  })
})

describe("Corral's status lines on a running card", () => {
  const statusDelta = (eventId: string, t: string) => ({ type: 'event_delta', event_id: eventId, delta: { type: 'content_delta', content: { type: 'text', text: t }, index: 0, stream: 'status' } })

  it("shows the latest status line (its sandbox starting) apart from the command's output, and drops it with the stored result", () => {
    const use = ev('agent.tool_use', { name: 'bash', input: { command: 'make' }, evaluated_permission: 'allow' })
    const b = TimelineBuilder.from([use])
    b.preview({ type: 'event_start', event: { id: 'sevt_st', type: 'agent.tool_result', tool_use_id: use.id } })
    b.preview(statusDelta('sevt_st', '[corral] starting a QEMU virtual machine for this session…\n'))
    b.preview(statusDelta('sevt_st', '[corral] booting a template VM first (once per VM shape)\n'))
    let card = b.items[0] as ToolItem
    expect(card.liveStatus).toBe('booting a template VM first (once per VM shape)')
    expect(card.live).toBeUndefined()
    b.preview(statusDelta('sevt_st', '[corral] the sandbox is ready (14.9 s)\n'))
    b.preview(delta('sevt_st', 'cc -c a.c\n'))
    card = b.items[0] as ToolItem
    expect(card.live).toBe('cc -c a.c\n')
    expect(card.liveStatus).toBe('the sandbox is ready (14.9 s)')
    b.append({ id: 'sevt_st', type: 'agent.tool_result', tool_use_id: use.id, content: text('cc -c a.c'), is_error: false, exit_code: 0 })
    card = b.items[0] as ToolItem
    expect(card.result?.text).toBe('cc -c a.c')
    expect(card.liveStatus).toBeUndefined()
  })
})
