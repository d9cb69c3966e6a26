import { describe, expect, it } from 'vitest'
import { agentDurationMs, RunBoard, runCounterParts, runProgressText, runResultText, type RunBoardEvent } from '../../../src/renderer/src/features/workflows/run-board'

// The run card's fold over the events of docs/workflows.md ("The events"), as the session stream carries them.

const RUN = 'wrun_01CARD'
let n = 0
const at = (s: number) => new Date(Date.UTC(2026, 11, 1, 12, 0, s)).toISOString()
const ev = (type: string, fields: Record<string, unknown> = {}, second = n): RunBoardEvent => ({ id: `sevt_${String(++n).padStart(4, '0')}`, type, processed_at: at(second), ...fields })
const created = (fields: Record<string, unknown> = {}) =>
  ev('workflow_run.created', { workflow_run_id: RUN, name: 'review files', description: 'reviews three files', phases: [{ id: 'wrph_REVIEW', name: 'review', description: null }, { id: 'wrph_SUM', name: 'summarise', description: 'one summary' }], tool_use_id: 'sevt_TOOL', ...fields }, 0)
const thread = (tid: string, fields: Record<string, unknown> = {}, second = 1) => ev('session.thread_created', { session_thread_id: tid, agent_name: 'reviewer', workflow_run_id: RUN, parent_thread_id: 'sthr_PRIMARY', ...fields }, second)
const status = (tid: string, kind: 'running' | 'idle' | 'terminated', fields: Record<string, unknown> = {}, second = 2) => ev(`session.thread_status_${kind}`, { session_thread_id: tid, agent_name: 'reviewer', ...fields }, second)
const idle = (tid: string, reason: string, second = 3) => status(tid, 'idle', { stop_reason: { type: reason, ...(reason === 'requires_action' ? { event_ids: ['sevt_X'] } : {}) } }, second)

function board(...events: RunBoardEvent[]): RunBoard {
  const b = new RunBoard()
  for (const e of events) b.apply(e)
  return b
}

describe('RunBoard', () => {
  it('reads a run from its created event: name, description, the declared phases in order, no agents yet', () => {
    const run = board(created()).run(RUN)!
    expect(run).toMatchObject({ id: RUN, name: 'review files', description: 'reviews three files', status: 'created', toolUseId: 'sevt_TOOL', hasOutput: false })
    expect(run.phases.map((p) => [p.name, p.description, p.declared, p.startedAt])).toEqual([
      ['review', null, true, undefined],
      ['summarise', 'one summary', true, undefined],
    ])
    expect(run.counts).toEqual({ started: 0, working: 0, waiting: 0, paused: 0, done: 0, failed: 0, stopped: 0 })
  })

  it('gives each agent the innermost phase open at its creation and counts per phase how many started and are done', () => {
    const b = board(
      created(),
      ev('workflow_run.status_running', { workflow_run_id: RUN }),
      ev('workflow_run.phase_started', { workflow_run_id: RUN, workflow_run_phase_id: 'wrph_REVIEW' }, 1),
      thread('sthr_A', { workflow_label: 'a.ts', workflow_call_index: 1 }),
      thread('sthr_B', { workflow_label: 'b.ts', workflow_call_index: 2 }),
      status('sthr_A', 'running'),
      idle('sthr_A', 'end_turn', 5),
      ev('workflow_run.phase_ended', { workflow_run_id: RUN, workflow_run_phase_id: 'wrph_REVIEW', phase_started_id: 'x' }, 6),
      ev('workflow_run.phase_started', { workflow_run_id: RUN, workflow_run_phase_id: 'wrph_SUM' }, 7),
      thread('sthr_C', { agent_name: 'writer' }, 7),
    )
    const run = b.run(RUN)!
    expect(run.status).toBe('running')
    expect(run.agents.map((a) => [a.threadId, a.label, a.phaseId, a.status, a.callIndex])).toEqual([
      ['sthr_A', 'a.ts', 'wrph_REVIEW', 'done', 1],
      ['sthr_B', 'b.ts', 'wrph_REVIEW', 'starting', 2],
      ['sthr_C', null, 'wrph_SUM', 'starting', undefined],
    ])
    expect(run.phases.map((p) => [p.name, p.agents, p.done, !!p.startedAt, !!p.endedAt])).toEqual([
      ['review', 2, 1, true, true],
      ['summarise', 1, 0, true, false],
    ])
    expect(agentDurationMs(run.agents[0], 0)).toBe(4000)
    expect(agentDurationMs(run.agents[1], Date.parse(at(11)))).toBe(10_000)
    expect(b.runOfThread('sthr_C')).toBe(RUN)
  })

  it('counts working, waiting-on-you, paused, done and failed agents from their threads\' statuses, moving each agent between counts as its status changes', () => {
    const b = board(created(), thread('sthr_A'), thread('sthr_B'), thread('sthr_C'), thread('sthr_D'), thread('sthr_E'))
    for (const t of ['sthr_A', 'sthr_B', 'sthr_C', 'sthr_D', 'sthr_E']) b.apply(status(t, 'running'))
    b.apply(idle('sthr_A', 'requires_action'))
    b.apply(idle('sthr_B', 'end_turn'))
    b.apply(idle('sthr_C', 'retries_exhausted'))
    b.apply(idle('sthr_D', 'budget_reached'))
    expect(b.run(RUN)!.counts).toEqual({ started: 5, working: 1, waiting: 1, paused: 1, done: 1, failed: 1, stopped: 0 })
    expect(b.agentOfThread('sthr_C')).toMatchObject({ status: 'failed', stopReason: 'retries_exhausted' })
    // the confirmation answered: it works again, then finishes; Corral archives the done ones
    b.apply(status('sthr_A', 'running'))
    b.apply(idle('sthr_A', 'end_turn', 9))
    b.apply(status('sthr_A', 'terminated', { archived: true }, 9))
    b.apply(status('sthr_B', 'terminated', { archived: true }, 9))
    expect(b.run(RUN)!.counts).toEqual({ started: 5, working: 1, waiting: 0, paused: 1, done: 2, failed: 1, stopped: 0 })
    expect(b.agentOfThread('sthr_A')).toMatchObject({ status: 'done', archived: true, endedAt: at(9) })
    expect(runCounterParts(b.run(RUN)!.counts).map((p) => `${p.n} ${p.label}`)).toEqual(['1 working', '0 waiting on you', '1 paused at the budget', '2 done', '1 failed'])
  })

  it('reads an agent archived while it still worked as stopped once the run has ended, and as failed while the run is open', () => {
    const b = board(created(), thread('sthr_A'), thread('sthr_B'), status('sthr_A', 'running'), status('sthr_B', 'running'))
    b.apply(status('sthr_A', 'terminated', { archived: true }))
    b.apply(ev('workflow_run.status_ended', { workflow_run_id: RUN, result: { type: 'stopped' }, output: null }, 8))
    b.apply(status('sthr_B', 'terminated', { archived: true }, 8))
    const run = b.run(RUN)!
    expect(run.agents.map((a) => [a.status, a.stopReason])).toEqual([
      ['failed', 'terminated'],
      ['stopped', undefined],
    ])
    expect(run.counts).toMatchObject({ working: 0, failed: 1, stopped: 1 })
    expect(run.result).toEqual({ type: 'stopped' })
    expect(runResultText(run.result!)).toBe('Stopped')
  })

  it('ends a run with its result and output: completed with the JSON output, or an error with its type and message and no output (its null is no return value)', () => {
    const done = board(created(), ev('workflow_run.status_ended', { workflow_run_id: RUN, result: { type: 'completed' }, name: 'review files', output: { summary: 'ok', reviews: [1, 2] } }, 9)).run(RUN)!
    expect(done).toMatchObject({ status: 'ended', result: { type: 'completed' }, output: { summary: 'ok', reviews: [1, 2] }, hasOutput: true, endedAt: at(9) })
    const failed = board(
      created(),
      ev('workflow_run.phase_started', { workflow_run_id: RUN, workflow_run_phase_id: 'wrph_REVIEW' }),
      ev('workflow_run.phase_ended', { workflow_run_id: RUN, workflow_run_phase_id: 'wrph_REVIEW', phase_started_id: 'x' }),
      ev('workflow_run.error', { workflow_run_id: RUN, error: { type: 'timeout_error', message: 'the run passed its 60 s lifetime' } }),
      ev('workflow_run.status_ended', { workflow_run_id: RUN, result: { type: 'error', error: { type: 'timeout_error', message: 'the run passed its 60 s lifetime' } }, output: null }),
    ).run(RUN)!
    expect(failed.result).toEqual({ type: 'error', errorType: 'timeout_error', message: 'the run passed its 60 s lifetime' })
    expect(failed.hasOutput).toBe(false)
    expect(runResultText(failed.result!)).toBe('Error: timeout error — the run passed its 60 s lifetime')
  })

  it('marks a run idle while it is paused (at the budget) and running when it resumes, and ended at its end whatever comes after', () => {
    const b = board(created(), ev('workflow_run.status_running', { workflow_run_id: RUN }), ev('workflow_run.status_idle', { workflow_run_id: RUN }))
    expect(b.run(RUN)!.status).toBe('idle')
    b.apply(ev('workflow_run.status_running', { workflow_run_id: RUN }))
    expect(b.run(RUN)!.status).toBe('running')
    b.apply(ev('workflow_run.status_ended', { workflow_run_id: RUN, result: { type: 'stopped' } }))
    b.apply(ev('workflow_run.status_running', { workflow_run_id: RUN }))
    expect(b.run(RUN)!.status).toBe('ended')
  })

  it('keeps a refused start (workflow_run.error with a null run id) apart, creating no run', () => {
    const b = board(ev('workflow_run.error', { workflow_run_id: null, error: { type: 'max_workflow_runs_error', message: 'this session has 10 open workflow runs' } }))
    expect(b.runs()).toEqual([])
    expect(b.refused()).toEqual([expect.objectContaining({ errorType: 'max_workflow_runs_error', message: 'this session has 10 open workflow runs' })])
  })

  it('names an undeclared phase by its place and marks it undeclared', () => {
    const run = board(created({ phases: [] }), ev('workflow_run.phase_started', { workflow_run_id: RUN, workflow_run_phase_id: 'wrph_NEW' })).run(RUN)!
    expect(run.phases).toEqual([expect.objectContaining({ id: 'wrph_NEW', name: 'Phase 1', declared: false })])
  })

  it('ignores duplicates, threads of no run and events of other kinds, and replaces only the run that changed', () => {
    const first = created()
    const b = board(first, thread('sthr_A'))
    const before = b.run(RUN)!
    expect(b.apply(first)).toBe(false)
    expect(b.apply(ev('session.thread_created', { session_thread_id: 'sthr_SUB', agent_name: 'researcher', workflow_run_id: null }))).toBe(false)
    expect(b.apply(status('sthr_SUB', 'running'))).toBe(false)
    expect(b.apply(ev('agent.message', { content: [] }))).toBe(false)
    expect(b.run(RUN)).toBe(before)
    expect(b.apply(status('sthr_A', 'running'))).toBe(true)
    expect(b.run(RUN)).not.toBe(before)
    expect(b.run(RUN)!.revision).toBe(before.revision + 1)
    expect(before.agents[0].status).toBe('starting')
  })

  it('folds a 1,000-agent run event by event into the same counts as its events say', () => {
    const b = board(created())
    for (let i = 0; i < 1000; i++) {
      b.apply(thread(`sthr_${i}`, { workflow_call_index: i }))
      b.apply(status(`sthr_${i}`, 'running'))
    }
    for (let i = 0; i < 1000; i++) if (i % 10 !== 0) b.apply(idle(`sthr_${i}`, i % 100 === 1 ? 'refusal' : 'end_turn'))
    const run = b.run(RUN)!
    expect(run.agents).toHaveLength(1000)
    expect(run.counts).toEqual({ started: 1000, working: 100, waiting: 0, paused: 0, done: 890, failed: 10, stopped: 0 })
    expect(runProgressText(run)).toBe('workflow · 890/1000 done')
  })
})
