import { describe, expect, it } from 'vitest'
import { PRIMARY_THREAD } from '../../../src/shared/api/events'
import { decideNext, foldSession } from '../../../src/main/harness/session-state'
import type { ViewEvent } from '../../../src/main/harness/context/view'
import { evaluationFeedbackText, graderRequest, outcomeBriefText, readVerdict, VERDICT_TOOL } from '../../../src/main/harness/outcomes'
import { activeOutcome, foldOutcomes, toOutcomeEvaluation } from '../../../src/shared/api/outcomes'

function log(...events: [string, Record<string, unknown>?][]): ViewEvent[] {
  return events.map(([type, fields], i) => ({ seq: i + 1, event: { id: (fields?.id as string) ?? `sevt_${i + 1}`, type, processed_at: `2026-12-01T00:00:0${i % 10}Z`, ...fields } }))
}
const decide = (events: ViewEvent[]) => decideNext(foldSession(events, PRIMARY_THREAD))
const define: [string, Record<string, unknown>] = ['user.define_outcome', { outcome_id: 'outc_1', description: 'd', rubric: { type: 'text', content: 'r' }, max_iterations: 3 }]
const answer: [string, Record<string, unknown>][] = [
  ['session.status_running', {}],
  ['span.model_request_start', { id: 's' }],
  ['agent.message', { content: [{ type: 'text', text: 'done' }] }],
  ['span.model_request_end', { is_error: false, model_request_start_id: 's', stop_reason: 'end_turn' }],
]
const start = (id: string, iteration = 0): [string, Record<string, unknown>] => ['span.outcome_evaluation_start', { id, outcome_id: 'outc_1', iteration }]
const endOf = (startId: string, result: string, iteration = 0): [string, Record<string, unknown>] => [
  'span.outcome_evaluation_end',
  { outcome_evaluation_start_id: startId, outcome_id: 'outc_1', iteration, result, explanation: `e${iteration}`, usage: { input_tokens: 5, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }, model: 'm' },
]

describe('outcomes in the turn loop', () => {
  it('asks the model to work on a defined outcome, then grades instead of idling once its turn ends', () => {
    expect(decide(log(define))).toEqual({ kind: 'model', attempt: 0 })
    expect(decide(log(define, ...answer))).toEqual({ kind: 'grade' })
  })

  it('re-runs an evaluation a dead process started under its start, instead of starting another', () => {
    expect(decide(log(define, ...answer, start('ev_1')))).toEqual({ kind: 'grade', startId: 'ev_1' })
  })

  it('gives needs_revision back to the model, and grades the revision as the next iteration', () => {
    const revised = log(define, ...answer, start('ev_1'), endOf('ev_1', 'needs_revision'))
    expect(decide(revised)).toEqual({ kind: 'model', attempt: 0 })
    const s = foldSession(log(define, ...answer, start('ev_1'), endOf('ev_1', 'needs_revision'), ...answer), PRIMARY_THREAD)
    expect(s.outcome).toMatchObject({ iteration: 1, phase: 'working' })
    expect(decideNext(s)).toEqual({ kind: 'grade' })
  })

  it('idles after the acknowledgement turn of max_iterations_reached without another evaluation', () => {
    const acked = log(define, ...answer, start('ev_1'), endOf('ev_1', 'max_iterations_reached'), ...answer)
    expect(decide(acked)).toEqual({ kind: 'idle', stopReason: { type: 'end_turn' } })
  })

  it('ends the outcome interrupted on an interrupt: with the open start, or with an empty start id before any evaluation', () => {
    expect(decide(log(define, ['user.interrupt']))).toEqual({ kind: 'end_outcome', result: 'interrupted', startId: '' })
    expect(decide(log(define, ...answer, start('ev_1'), ['user.interrupt']))).toEqual({ kind: 'end_outcome', result: 'interrupted', startId: 'ev_1' })
  })

  it('starts no evaluation while a workflow run is open, and does once it ended', () => {
    const open = log(define, ['workflow_run.created', { workflow_run_id: 'wrun_1' }], ...answer)
    expect(decide(open)).toEqual({ kind: 'none' })
    // the run's end first gives the primary its reading turn (spec multiagent §6.7: "the turn that reads the run's result may start one")
    const ended = [...open, ...log(['workflow_run.status_ended', { workflow_run_id: 'wrun_1' }]).map((e) => ({ ...e, seq: e.seq + 100 }))]
    expect(decide(ended)).toEqual({ kind: 'model', attempt: 0 })
    const read = log(['span.model_request_start', { id: 'read' }], ['agent.message', { id: 'read_msg', content: [{ type: 'text', text: 'read it' }] }], ['span.model_request_end', { id: 'read_end', is_error: false, model_request_start_id: 'read', stop_reason: 'end_turn' }]).map((e) => ({ ...e, seq: e.seq + 200 }))
    expect(decide([...ended, ...read])).toEqual({ kind: 'grade' })
  })

  it('waits at the budget, and grades once a session.updated changed the budget', () => {
    const paused = log(define, ...answer, ['session.status_idle', { stop_reason: { type: 'budget_reached' } }])
    expect(decide(paused)).toEqual({ kind: 'none' })
    expect(decide([...paused, ...log(['session.updated', { budget: null }]).map((e) => ({ ...e, seq: 99 }))])).toEqual({ kind: 'grade' })
  })

  it("adds the grader's usage at its model to what the budget counts", () => {
    const s = foldSession(log(define, ...answer, start('ev_1'), endOf('ev_1', 'satisfied')), PRIMARY_THREAD)
    expect(s.usageByModel.get('m')).toMatchObject({ input_tokens: 5, output_tokens: 1 })
  })
})

describe("the grader's request and verdict", () => {
  it('builds a request of its own: one user turn with the rubric, the files and the final message, and one forced tool', () => {
    const req = graderRequest({ model: 'm', description: 'Write it', rubric: 'R1', finalMessage: 'Here.', files: [{ path: '/workspace/a.md', content: 'A' }, { path: '/workspace/b.md', error: 'no such file' }] })
    expect(req.tool_choice).toEqual({ type: 'tool', name: VERDICT_TOOL })
    expect((req.tools ?? []).map((t) => (t as { name: string }).name)).toEqual([VERDICT_TOOL])
    const text = JSON.stringify(req.messages)
    for (const part of ['R1', 'Write it', 'Here.', '<file path=\\"/workspace/a.md\\">\\nA', 'unreadable=\\"true\\"', 'no such file']) expect(text).toContain(part)
  })

  it('reads a verdict from the record_verdict call, and says why when there is none or it is malformed', () => {
    const call = (input: unknown) => ({ blocks: [{ type: 'tool_use' as const, id: 't', name: VERDICT_TOOL, input: input as Record<string, unknown> }] })
    expect(readVerdict(call({ result: 'satisfied', explanation: 'ok', gaps: [] }))).toEqual({ verdict: { result: 'satisfied', explanation: 'ok', gaps: [] } })
    expect(readVerdict({ blocks: [{ type: 'text', text: 'fine' }] })).toEqual({ problem: 'the answer has no record_verdict call' })
    expect('problem' in readVerdict(call({ result: 'great', explanation: 'ok', gaps: [] }))).toBe(true)
    expect('problem' in readVerdict(call({ result: 'satisfied', gaps: [] }))).toBe(true)
  })

  it("tells the agent its outcome and, after an evaluation, the gaps (needs_revision) or that none follows (max_iterations_reached), nothing for a final verdict", () => {
    expect(outcomeBriefText({ outcome_id: 'outc_1', description: 'D', rubric: 'R', max_iterations: 2 })).toMatch(/<description>\nD\n<\/description>[\s\S]*<rubric>\nR\n<\/rubric>[\s\S]*ant__name_deliverables/)
    const gaps = [{ criterion: 'C', gap: 'G' }]
    expect(evaluationFeedbackText({ outcome_id: 'o', iteration: 0, max_iterations: 3, result: 'needs_revision', explanation: 'X', gaps })).toContain('- C: G')
    expect(evaluationFeedbackText({ outcome_id: 'o', iteration: 2, max_iterations: 3, result: 'max_iterations_reached', explanation: 'X', gaps })).toContain('No further evaluation will run')
    expect(evaluationFeedbackText({ outcome_id: 'o', iteration: 0, max_iterations: 3, result: 'satisfied', explanation: 'X', gaps: [] })).toBeUndefined()
  })
})

describe("a session's outcomes folded for the API and the card", () => {
  it('is pending before the agent works, evaluating while graded, and records each verdict', () => {
    const events = log(define, ...answer, start('ev_1'), endOf('ev_1', 'needs_revision'), start('ev_2', 1)).map((e) => e.event as { id: string; type: string })
    expect(foldOutcomes(events.slice(0, 1), () => false)[0].result).toBe('pending')
    const [r] = foldOutcomes(events)
    expect(r.result).toBe('evaluating')
    expect(activeOutcome([r])?.outcome_id).toBe('outc_1')
    expect(r.iterations.map((i) => [i.iteration, i.result])).toEqual([
      [0, 'needs_revision'],
      [1, null],
    ])
    expect(toOutcomeEvaluation(r)).toEqual({ type: 'outcome_evaluation', outcome_id: 'outc_1', description: 'd', iteration: 1, result: 'evaluating', explanation: 'e0', completed_at: null })
  })
})
