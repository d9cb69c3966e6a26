import { describe, expect, it } from 'vitest'
import { modelErrorBadge } from '../../../src/renderer/src/features/sessions/model-error'
import type { Session } from '../../../src/renderer/src/api/types'

const withError = (model_error: unknown) => ({ id: 'sesn_1', corral: { model_error } }) as unknown as Session

describe('the session list row’s model-failure badge', () => {
  it('says retrying with the attempt and how many there may be, in text and in an accessible label', () => {
    const b = modelErrorBadge(withError({ state: 'retrying', type: 'model_overloaded_error', message: 'Overloaded', attempt: 2, max_attempts: 6 }))
    expect(b).toEqual({ state: 'retrying', text: 'retrying 2/6', label: 'Model failing, retrying (attempt 2/6)', detail: 'Overloaded' })
  })

  it('says the model failed when the last turn ended on retries_exhausted', () => {
    const b = modelErrorBadge(withError({ state: 'failed', type: 'model_request_failed_error', message: 'connection refused', attempt: 6, max_attempts: 6 }))
    expect(b?.text).toBe('model failed')
    expect(b?.label).toBe('Model failed after attempt 6/6: the last turn ended on retries_exhausted')
    expect(b?.detail).toBe('connection refused')
  })

  it('shows nothing when the model is not failing, or when the engine sends no corral fields', () => {
    expect(modelErrorBadge(withError(null))).toBeNull()
    expect(modelErrorBadge({ id: 'sesn_2' } as unknown as Session)).toBeNull()
  })
})
