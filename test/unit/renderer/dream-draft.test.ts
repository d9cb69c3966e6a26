import { describe, expect, it } from 'vitest'
import { dreamCreateSchema } from '../../../src/shared/api/dream-schemas'
import type { Dream } from '../../../src/shared/api/types'
import { dreamClock, dreamCreateBody, dreamDraftProblem, dreamReads, type DreamDraft } from '../../../src/renderer/src/features/memory/dream-draft'

const draft = (d: Partial<DreamDraft> = {}): DreamDraft => ({ storeId: 'memstore_1', sessionIds: ['sesn_b', 'sesn_a'], model: ' claude-sonnet-5-5 ', instructions: '', updateExisting: false, ...d })

describe('the Memory page’s dream form', () => {
  it('sends what the API accepts: a new copy by default, the store itself when asked, guidance only when given', () => {
    const plain = dreamCreateBody(draft())
    expect(dreamCreateSchema.safeParse(plain).success).toBe(true)
    expect(plain).toEqual({ inputs: [{ type: 'memory_store', memory_store_id: 'memstore_1' }, { type: 'sessions', session_ids: ['sesn_b', 'sesn_a'] }], model: 'claude-sonnet-5-5' })
    const inPlace = dreamCreateBody(draft({ updateExisting: true, instructions: '  Group deploy notes. ' }))
    expect(dreamCreateSchema.safeParse(inPlace).success).toBe(true)
    expect(inPlace).toMatchObject({ instructions: 'Group deploy notes.', output_behavior: { type: 'update_existing', memory_store_id: 'memstore_1' } })
  })

  it('says what is missing before it sends', () => {
    expect(dreamDraftProblem(draft())).toBeUndefined()
    expect(dreamDraftProblem(draft({ sessionIds: [] }))).toBe('Choose at least one session for the dream to read.')
    expect(dreamDraftProblem(draft({ model: '  ' }))).toBe('Name the model that runs the dream.')
    expect(dreamDraftProblem(draft({ sessionIds: Array.from({ length: 101 }, (_, i) => `sesn_${i}`) }))).toBe('A dream reads at most 100 sessions (101 chosen).')
    expect(dreamDraftProblem(draft({ instructions: 'x'.repeat(4097) }))).toBe('Guidance is at most 4,096 characters (4,097).')
  })

  it('lists a dream under the store it reads', () => {
    const dream = { inputs: [{ type: 'memory_store', memory_store_id: 'memstore_1' }, { type: 'sessions', session_ids: ['sesn_a'] }] } as Dream
    expect(dreamReads(dream, 'memstore_1')).toBe(true)
    expect(dreamReads(dream, 'memstore_2')).toBe(false)
  })
})

describe('a running dream’s clock on the Memory page', () => {
  const created_at = '2026-12-07T10:00:00.000Z'
  const at = (min: number) => Date.parse(created_at) + min * 60_000
  it('says how long an open dream has run against its limit, in whole minutes', () => {
    expect(dreamClock({ status: 'running', created_at }, at(0.5), 60)).toBe('running under a minute of its 60-minute limit')
    expect(dreamClock({ status: 'running', created_at }, at(12.9), 60)).toBe('running 12 min of its 60-minute limit')
    expect(dreamClock({ status: 'pending', created_at }, at(2), 90)).toBe('running 2 min of its 90-minute limit')
    expect(dreamClock({ status: 'running', created_at }, at(3), undefined)).toBe('running 3 min')
  })
  it('says nothing for an ended dream', () => {
    for (const status of ['completed', 'failed', 'canceled'] as const) expect(dreamClock({ status, created_at }, at(5), 60)).toBeUndefined()
  })
})
