import type { Session } from '../../api/types'
import type { SessionModelError } from '../../../../shared/api/types'

/** What the list row shows for a session's failing model: short text, and the accessible label that says it in full. */
export interface ModelErrorBadge {
  state: SessionModelError['state']
  text: string
  label: string
  /** The endpoint's own error text (the row's tooltip). */
  detail: string
}

/**
 * The list row's badge for `corral.model_error` (a Corral addition the engine folds from the
 * log), or null when the session's model is not failing or the engine does not send it.
 */
export function modelErrorBadge(session: Session): ModelErrorBadge | null {
  const e = (session as Session & { corral?: { model_error?: SessionModelError | null } }).corral?.model_error
  if (!e) return null
  const of = e.attempt !== null ? ` ${e.attempt}${e.max_attempts !== null ? `/${e.max_attempts}` : ''}` : ''
  if (e.state === 'retrying') return { state: 'retrying', text: `retrying${of}`, label: `Model failing, retrying${of ? ` (attempt${of})` : ''}`, detail: e.message }
  return { state: 'failed', text: 'model failed', label: `Model failed${of ? ` after attempt${of}` : ''}: the last turn ended on retries_exhausted`, detail: e.message }
}
