/**
 * Outcomes (`user.define_outcome`, spec multiagent §8), the facts every room reads the same way:
 * the limits, which results are terminal, and the fold of a session's outcome events into the
 * API's `Session.outcome_evaluations[]` and the desktop's outcome card (each iteration's verdict).
 * The session store refuses a second outcome while one is active with `activeOutcome`; the
 * harness runs the grader (harness/outcomes.ts). Plain TypeScript, no I/O.
 */
import type { BetaManagedAgentsOutcomeEvaluationResource } from '@anthropic-ai/sdk/resources/beta/sessions/sessions'

/** `max_iterations` when the event leaves it out (or sends null), and its ceiling (SDK). */
export const OUTCOME_DEFAULT_MAX_ITERATIONS = 3
export const OUTCOME_MAX_ITERATIONS = 20
/** A text rubric's longest content (SDK: 262,144 characters). */
export const OUTCOME_MAX_RUBRIC_CHARS = 262_144

/** The agent's tool for naming its deliverable (harness/outcomes.ts offers it on the primary while an outcome is active). */
export const DELIVERABLES_TOOL = 'ant__name_deliverables'
/** At most this many deliverable files are named (and read for the grader). */
export const MAX_DELIVERABLES = 20

/** The paths an `ant__name_deliverables` call names (non-empty strings only, at most MAX_DELIVERABLES). */
export function deliverablePaths(input: Record<string, unknown> | undefined): string[] {
  const raw = input?.paths
  return Array.isArray(raw) ? raw.filter((x): x is string => typeof x === 'string' && x.trim().length > 0).slice(0, MAX_DELIVERABLES) : []
}

/** What the grader may answer (its forced tool's `result`); the harness turns a last `needs_revision` into `max_iterations_reached`. */
export const GRADER_RESULTS = ['satisfied', 'needs_revision', 'failed'] as const
export type GraderResult = (typeof GRADER_RESULTS)[number]

/** An evaluation's end result that ends the outcome: no evaluation follows. */
export const TERMINAL_OUTCOME_RESULTS = ['satisfied', 'max_iterations_reached', 'failed', 'interrupted'] as const
export type TerminalOutcomeResult = (typeof TERMINAL_OUTCOME_RESULTS)[number]
export type OutcomeEvaluationResult = 'needs_revision' | TerminalOutcomeResult

export function isTerminalOutcomeResult(result: unknown): result is TerminalOutcomeResult {
  return (TERMINAL_OUTCOME_RESULTS as readonly unknown[]).includes(result)
}

/** The event types an outcome's story is told by (the log's type index reads just these). */
export const OUTCOME_EVENT_TYPES = ['user.define_outcome', 'span.outcome_evaluation_start', 'span.outcome_evaluation_end'] as const

/** One gap the grader names: the rubric's criterion and what the deliverable lacks. */
export interface OutcomeGap {
  criterion: string
  gap: string
}

/** One evaluation of an outcome: its start, and its verdict once it ended. */
export interface OutcomeIteration {
  iteration: number
  /** The `span.outcome_evaluation_start` event's id ('' for an interrupt before any evaluation started). */
  start_id: string
  started_at: string | null
  result: OutcomeEvaluationResult | null
  explanation: string | null
  gaps: OutcomeGap[]
  ended_at: string | null
}

/** An outcome as its events tell it (the card's model; `toOutcomeEvaluation` gives the API's resource). */
export interface OutcomeRecord {
  outcome_id: string
  description: string
  /** The rubric's text (a file rubric is resolved to its text on receipt). */
  rubric: string
  max_iterations: number
  /** The `user.define_outcome` event's id and when it was accepted. */
  define_event_id: string
  defined_at: string
  iterations: OutcomeIteration[]
  /** `pending` until the agent's first model request after it, `running`, `evaluating`, then a terminal result. */
  result: BetaManagedAgentsOutcomeEvaluationResource['result']
  explanation: string | null
  completed_at: string | null
}

type OutcomeEvent = { id: string; type: string; processed_at?: string | null; [k: string]: unknown }

/**
 * Folds a session's outcome events (OUTCOME_EVENT_TYPES, in log order; other types are skipped)
 * into one record per `user.define_outcome`, oldest first. `workStarted(outcomeId)` says whether
 * the agent has begun (a model request after the define): a not-yet-evaluated outcome is then
 * `running`, else `pending`; without it an outcome with no evaluation is `running`.
 */
export function foldOutcomes(events: Iterable<OutcomeEvent>, workStarted?: (outcomeId: string) => boolean): OutcomeRecord[] {
  const out: OutcomeRecord[] = []
  const byId = new Map<string, OutcomeRecord>()
  for (const e of events) {
    if (e.type === 'user.define_outcome') {
      const rubric = e.rubric as { type?: string; content?: string; file_id?: string } | undefined
      const r: OutcomeRecord = {
        outcome_id: String(e.outcome_id),
        description: String(e.description ?? ''),
        rubric: rubric?.type === 'text' ? String(rubric.content ?? '') : `(rubric file ${String(rubric?.file_id ?? '')})`,
        max_iterations: typeof e.max_iterations === 'number' ? e.max_iterations : OUTCOME_DEFAULT_MAX_ITERATIONS,
        define_event_id: e.id,
        defined_at: String(e.processed_at ?? ''),
        iterations: [],
        result: 'pending',
        explanation: null,
        completed_at: null,
      }
      out.push(r)
      byId.set(r.outcome_id, r)
      continue
    }
    const r = byId.get(String(e.outcome_id))
    if (!r || r.completed_at) continue
    const iteration = typeof e.iteration === 'number' ? e.iteration : 0
    if (e.type === 'span.outcome_evaluation_start') {
      r.iterations.push({ iteration, start_id: e.id, started_at: e.processed_at ?? null, result: null, explanation: null, gaps: [], ended_at: null })
      r.result = 'evaluating'
    } else if (e.type === 'span.outcome_evaluation_end') {
      let it = r.iterations.find((x) => x.start_id === e.outcome_evaluation_start_id && x.result === null)
      if (!it) {
        it = { iteration, start_id: String(e.outcome_evaluation_start_id ?? ''), started_at: null, result: null, explanation: null, gaps: [], ended_at: null }
        r.iterations.push(it)
      }
      it.result = String(e.result) as OutcomeEvaluationResult
      it.explanation = typeof e.explanation === 'string' ? e.explanation : null
      it.gaps = Array.isArray(e.gaps) ? (e.gaps as OutcomeGap[]) : []
      it.ended_at = e.processed_at ?? null
      r.explanation = it.explanation
      if (isTerminalOutcomeResult(e.result)) {
        r.result = e.result
        r.completed_at = e.processed_at ?? ''
      } else r.result = 'running'
    }
  }
  for (const r of out) if (r.result === 'pending' && (workStarted ? workStarted(r.outcome_id) : true)) r.result = 'running'
  return out
}

/** The outcome still active (not terminal), if any: one at a time per session. */
export function activeOutcome(records: readonly OutcomeRecord[]): OutcomeRecord | undefined {
  const last = records[records.length - 1]
  return last && !last.completed_at ? last : undefined
}

/** The API's `Session.outcome_evaluations[]` entry of an outcome. */
export function toOutcomeEvaluation(r: OutcomeRecord): BetaManagedAgentsOutcomeEvaluationResource {
  const current = r.iterations[r.iterations.length - 1]
  return {
    type: 'outcome_evaluation',
    outcome_id: r.outcome_id,
    description: r.description,
    // after a needs_revision the outcome is on the next cycle
    iteration: current ? (current.result === 'needs_revision' ? current.iteration + 1 : current.iteration) : 0,
    result: r.result,
    explanation: r.explanation,
    completed_at: r.completed_at,
  }
}
