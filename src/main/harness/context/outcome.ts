/**
 * What the agent is told of its outcome (harness/outcomes.ts runs the grader): the user-turn text a
 * `user.define_outcome` becomes in the context view, and the one an evaluation's end becomes when
 * the agent must act on it. Pure.
 */
import { DELIVERABLES_TOOL, type OutcomeGap } from '../../../shared/api/outcomes'

export interface OutcomeBrief {
  outcome_id: string
  description: string
  rubric: string
  max_iterations: number
}

/** The user-turn text the agent receives for a `user.define_outcome` (the context view renders the event as this). Pure. */
export function outcomeBriefText(o: OutcomeBrief): string {
  return [
    `<outcome id="${o.outcome_id}">`,
    'The user defined an outcome for you to work toward. When your turn ends, a grader with its own context checks your deliverable against the rubric below ' +
      `(at most ${o.max_iterations} evaluation${o.max_iterations === 1 ? '' : 's'}) and tells you what is still missing.`,
    '',
    `<description>\n${o.description}\n</description>`,
    '',
    `<rubric>\n${o.rubric}\n</rubric>`,
    '',
    `When the deliverable is ready, call ${DELIVERABLES_TOOL} with the paths of the files in the sandbox that make it up (the grader reads those files and your final message, nothing else), then end your turn with a short final message.`,
    '</outcome>',
  ].join('\n')
}

export interface EvaluationFeedback {
  outcome_id: string
  iteration: number
  max_iterations: number
  result: string
  explanation: string
  gaps: readonly OutcomeGap[]
}

/**
 * The user-turn text an evaluation's end gives the agent: for `needs_revision` the gaps to close,
 * for `max_iterations_reached` that no evaluation follows (one last turn to acknowledge).
 * Undefined for the results the agent is not told about (they end the outcome). Pure.
 */
export function evaluationFeedbackText(f: EvaluationFeedback): string | undefined {
  if (f.result !== 'needs_revision' && f.result !== 'max_iterations_reached') return undefined
  const gaps = f.gaps.length ? ['Gaps:', ...f.gaps.map((g) => `- ${g.criterion}: ${g.gap}`)] : []
  const head =
    f.result === 'needs_revision'
      ? `The grader checked your deliverable (evaluation ${f.iteration + 1} of at most ${f.max_iterations}) and it does not meet the rubric yet.`
      : `The grader checked your deliverable for the last time (evaluation ${f.iteration + 1} of ${f.max_iterations}) and it still does not meet the rubric. No further evaluation will run.`
  const tail =
    f.result === 'needs_revision'
      ? `Revise the deliverable to close these gaps, call ${DELIVERABLES_TOOL} again if its files changed, then end your turn.`
      : 'Acknowledge briefly what remains undone, then end your turn.'
  return [`<outcome_evaluation outcome_id="${f.outcome_id}" result="${f.result}">`, head, '', f.explanation, ...(gaps.length ? ['', ...gaps] : []), '', tail, '</outcome_evaluation>'].join('\n')
}
