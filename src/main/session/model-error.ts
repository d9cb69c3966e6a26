import type { SessionModelError } from '../../shared/api/types'

/**
 * The session's model-failure state as a fold over its primary thread's log: `retrying` from a
 * `session.error` whose retry_status is `retrying` until a model request succeeds or the turn
 * ends; `failed` from a turn that ended on `retries_exhausted` until the next turn starts; else
 * none (null). An MCP server's failure is not a model failure and changes nothing.
 *
 * `step` returns the state after `event`, or `undefined` when the event leaves it as it was;
 * `prev` is read only for the events whose outcome depends on it (the caller may pass a thunk
 * that reads the stored projection lazily).
 */
export function stepModelError(prev: () => SessionModelError | null, event: Record<string, unknown>): SessionModelError | null | undefined {
  if (event.session_thread_id) return undefined
  switch (event.type) {
    case 'session.error': {
      const err = (event.error ?? {}) as { type?: unknown; message?: unknown; retry_status?: { type?: unknown } }
      const type = typeof err.type === 'string' ? err.type : 'unknown_error'
      if (type.startsWith('mcp_')) return undefined
      const retry = err.retry_status?.type
      if (retry !== 'retrying' && retry !== 'exhausted') return undefined
      return {
        state: retry === 'retrying' ? 'retrying' : 'failed',
        type,
        message: typeof err.message === 'string' ? err.message : '',
        attempt: typeof event.attempt === 'number' ? event.attempt : null,
        max_attempts: typeof event.max_attempts === 'number' ? event.max_attempts : null,
      }
    }
    case 'span.model_request_end':
      return event.is_error === false ? null : undefined
    case 'session.status_idle': {
      const stop = (event.stop_reason ?? {}) as { type?: unknown }
      if (stop.type !== 'retries_exhausted') return null
      const p = prev()
      return p ? { ...p, state: 'failed' } : { state: 'failed', type: 'unknown_error', message: '', attempt: null, max_attempts: null }
    }
    case 'session.status_running':
      // a new turn: the one that failed is over (a retrying episode stays as it is)
      return prev()?.state === 'failed' ? null : undefined
    case 'session.status_terminated':
      return null
    default:
      return undefined
  }
}
