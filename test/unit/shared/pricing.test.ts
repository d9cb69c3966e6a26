import { describe, expect, it } from 'vitest'
import { budgetCents, listCostCents, monetaryAmount } from '../../../src/shared/api/pricing'

describe('list cost', () => {
  it('prices usage by model family, with cache reads and writes, and reads a budget in minor units', () => {
    const u = { input_tokens: 1_000_000, output_tokens: 1_000_000, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
    expect(listCostCents('claude-sonnet-5-5', u)).toBe(1800)
    expect(listCostCents('claude-haiku-4-5', u)).toBe(600)
    expect(listCostCents('claude-sonnet-5-5', { ...u, input_tokens: 0, output_tokens: 0, cache_read_input_tokens: 1_000_000, cache_creation_input_tokens: 1_000_000 })).toBeCloseTo(30 + 375)
    expect(budgetCents({ type: 'limit', max_list_cost: { amount: '2500', currency: 'USD' } })).toBe(2500)
    expect(budgetCents(null)).toBeUndefined()
  })
})

describe('monetary amounts', () => {
  it('reports a cost as whole cents in an integer string with no leading zeros', () => {
    expect(monetaryAmount(0.4)).toEqual({ amount: '0', currency: 'USD' })
    expect(monetaryAmount(1234.5)).toEqual({ amount: '1235', currency: 'USD' })
    expect(monetaryAmount(-3)).toEqual({ amount: '0', currency: 'USD' })
  })
})
