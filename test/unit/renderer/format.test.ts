import { describe, expect, it } from 'vitest'
import { duration, money, relativeTime, sessionCost, tokens } from '../../../src/renderer/src/ui/format'
import { operationPath, toQueryString } from '../../../src/shared/api/operations'
import { diffRows } from '../../../src/renderer/src/ui/diff-rows'

describe('sessionCost', () => {
  it('prefers the cost the engine reports, in minor units', () => {
    expect(sessionCost({ list_cost: { amount: '2500', currency: 'USD' }, input_tokens: 1 }, 'claude-sonnet-4-5')).toEqual({ usd: 25, reported: true })
  })

  it('estimates from tokens at the model family list price, cache reads at a tenth', () => {
    const c = sessionCost({ input_tokens: 1_000_000, output_tokens: 100_000, cache_read_input_tokens: 1_000_000 }, 'claude-sonnet-4-5')
    expect(c?.reported).toBe(false)
    expect(c?.usd).toBeCloseTo(3 + 1.5 + 0.3, 6)
  })

  it('gives no cost for a model it has no price for', () => {
    expect(sessionCost({ input_tokens: 10 }, 'llama3:8b')).toBeUndefined()
  })
})

describe('formatting', () => {
  it('formats tokens, durations, money and relative times', () => {
    expect(tokens(1234)).toBe('1.2k')
    expect(tokens(2_500_000)).toBe('2.50M')
    expect(duration(850)).toBe('850 ms')
    expect(duration(125_000)).toBe('2m 5s')
    expect(money(0.004)).toBe('<$0.01')
    expect(relativeTime('2026-01-01T00:00:00Z', Date.parse('2026-01-01T00:05:00Z'))).toBe('5m ago')
  })
})

describe('operations', () => {
  it('fills path ids and refuses anything that is not an id', () => {
    expect(operationPath('threads.events', { id: 'sesn_1', threadId: 'sthr_2' })).toBe('/v1/sessions/sesn_1/threads/sthr_2/events')
    expect(() => operationPath('sessions.retrieve', { id: '../agents' })).toThrow(/path parameter id must be an id/)
    expect(() => operationPath('sessions.retrieve', {})).toThrow(/path parameter id is required/)
  })

  it('writes arrays the way the SDK does and skips empty values', () => {
    expect(toQueryString({ types: ['a', 'b'], limit: 5, page: undefined, x: null })).toBe('?types%5B%5D=a&types%5B%5D=b&limit=5')
    expect(toQueryString({})).toBe('')
  })
})

describe('diffRows', () => {
  it('numbers old and new lines and folds long unchanged stretches', () => {
    const before = Array.from({ length: 20 }, (_, i) => `line ${i}`).join('\n')
    const after = before.replace('line 10', 'line ten')
    const rows = diffRows(before, after, 1)
    expect(rows.filter((r) => r.kind === 'del').map((r) => [r.oldNo, r.text])).toEqual([[11, 'line 10']])
    expect(rows.filter((r) => r.kind === 'add').map((r) => [r.newNo, r.text])).toEqual([[11, 'line ten']])
    expect(rows[0].kind).toBe('gap')
    expect(rows.filter((r) => r.kind === 'ctx')).toHaveLength(2)
  })
})
