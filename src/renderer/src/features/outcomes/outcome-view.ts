/** How an outcome's result reads on the outcome card. Pure. */
const LABELS: Record<string, string> = {
  pending: 'Waiting to start',
  running: 'Agent working',
  evaluating: 'Grader evaluating',
  needs_revision: 'Needs revision',
  satisfied: 'Satisfied',
  max_iterations_reached: 'Max iterations reached',
  failed: 'Failed: the rubric does not apply',
  interrupted: 'Interrupted',
}

export function outcomeResultLabel(result: string): string {
  return LABELS[result] ?? result.replace(/_/g, ' ')
}

/** The card's colour: good (satisfied), bad (failed, max iterations), warn (needs revision, interrupted), busy (working, grading). */
export function outcomeResultTone(result: string): 'good' | 'bad' | 'warn' | 'busy' {
  if (result === 'satisfied') return 'good'
  if (result === 'failed' || result === 'max_iterations_reached') return 'bad'
  if (result === 'needs_revision' || result === 'interrupted') return 'warn'
  return 'busy'
}
