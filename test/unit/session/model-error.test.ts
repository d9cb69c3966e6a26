import { describe, expect, it } from 'vitest'
import { stepModelError } from '../../../src/main/session/model-error'
import type { SessionModelError } from '../../../src/shared/api/types'

/** Folds events the way the session store's projector does, from no error. */
function fold(events: Record<string, unknown>[]): SessionModelError | null {
  let cur: SessionModelError | null = null
  for (const e of events) {
    const next = stepModelError(() => cur, e)
    if (next !== undefined) cur = next
  }
  return cur
}

const retrying = (attempt: number, type = 'model_overloaded_error') => ({ type: 'session.error', error: { type, message: 'Overloaded', retry_status: { type: 'retrying' } }, attempt, max_attempts: 6 })
const exhausted = { type: 'session.error', error: { type: 'model_overloaded_error', message: 'Overloaded', retry_status: { type: 'exhausted' } }, attempt: 6, max_attempts: 6 }
const idle = (type: string) => ({ type: 'session.status_idle', stop_reason: { type } })

describe('the model-failure fold over a session’s log', () => {
  it('is retrying with the latest attempt while requests fail, and none after a request that succeeds', () => {
    expect(fold([{ type: 'session.status_running' }, retrying(1), retrying(2)])).toMatchObject({ state: 'retrying', attempt: 2, max_attempts: 6 })
    expect(fold([retrying(1), { type: 'span.model_request_end', is_error: false }])).toBeNull()
  })

  it('is failed when the turn ends on retries_exhausted, and stays failed until the next turn starts', () => {
    const failed = [retrying(5), exhausted, idle('retries_exhausted')]
    expect(fold(failed)).toMatchObject({ state: 'failed', type: 'model_overloaded_error', attempt: 6 })
    expect(fold([...failed, { type: 'user.message' }])).toMatchObject({ state: 'failed' })
    expect(fold([...failed, { type: 'session.status_running' }])).toBeNull()
  })

  it('ignores an MCP server’s error, a subagent thread’s events and a failed request that is not yet reported', () => {
    expect(fold([retrying(1, 'mcp_connection_failed_error')])).toBeNull()
    expect(fold([{ ...retrying(1), session_thread_id: 'sthr_1' }])).toBeNull()
    expect(fold([retrying(1), { type: 'span.model_request_end', is_error: true }])).toMatchObject({ state: 'retrying' })
  })

  it('is none after a turn that ends otherwise (an interrupt while retrying ends in end_turn)', () => {
    expect(fold([retrying(3), idle('end_turn')])).toBeNull()
  })
})
