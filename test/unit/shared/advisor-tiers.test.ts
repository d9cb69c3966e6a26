import { describe, expect, it } from 'vitest'
import { ADVISOR_TIERS, advisorPairingProblem, advisorTierTable } from '../../../src/shared/api/advisor-tiers'

/** The advisor tool's compatibility table (Oct 2026), as spec/multiagent.md §7.2 reproduces it: executor → allowed advisors (without `claude-`). */
const COMPATIBILITY: Record<string, string> = {
  'claude-haiku-4-5': 'mythos-5-1, fable-5-1, mythos-5, fable-5, opus-5-5, opus-5, opus-4-8, opus-4-7, opus-4-6, sonnet-5-5, sonnet-5, sonnet-4-6, haiku-5-5',
  'claude-haiku-5-5': 'mythos-5-1, fable-5-1, mythos-5, fable-5, opus-5-5, opus-5, opus-4-8, opus-4-7, sonnet-5-5, sonnet-5, haiku-5-5',
  'claude-sonnet-4-6': 'mythos-5-1, fable-5-1, mythos-5, fable-5, opus-5-5, opus-5, opus-4-8, opus-4-7, opus-4-6, sonnet-5-5, sonnet-5, sonnet-4-6, haiku-5-5',
  'claude-sonnet-5': 'mythos-5-1, fable-5-1, mythos-5, fable-5, opus-5-5, opus-5, opus-4-8, opus-4-7, sonnet-5-5, sonnet-5, haiku-5-5',
  'claude-sonnet-5-5': 'mythos-5-1, fable-5-1, mythos-5, fable-5, opus-5-5, opus-5, sonnet-5-5',
  'claude-opus-4-6': 'mythos-5-1, fable-5-1, mythos-5, fable-5, opus-5-5, opus-5, opus-4-8, opus-4-7, opus-4-6, sonnet-5-5, sonnet-5, haiku-5-5',
  'claude-opus-4-7': 'mythos-5-1, fable-5-1, mythos-5, fable-5, opus-5-5, opus-5, opus-4-8, opus-4-7, sonnet-5-5',
  'claude-opus-4-8': 'mythos-5-1, fable-5-1, mythos-5, fable-5, opus-5-5, opus-5, opus-4-8, opus-4-7, sonnet-5-5',
  'claude-opus-5': 'mythos-5-1, fable-5-1, mythos-5, fable-5, opus-5-5, opus-5',
  'claude-opus-5-5': 'mythos-5-1, fable-5-1, mythos-5, fable-5, opus-5-5, opus-5',
  'claude-fable-5': 'mythos-5-1, fable-5-1, mythos-5, fable-5, opus-5-5, opus-5',
  'claude-mythos-5': 'mythos-5-1, fable-5-1, mythos-5, fable-5, opus-5-5, opus-5',
  'claude-fable-5-1': 'mythos-5-1, fable-5-1',
  'claude-mythos-5-1': 'mythos-5-1, fable-5-1',
}

describe('the advisor tier table', () => {
  it('allows exactly the pairs of the advisor tool’s compatibility table, for every executor and advisor it names', () => {
    const models = Object.keys(ADVISOR_TIERS)
    expect(models.sort()).toEqual(Object.keys(COMPATIBILITY).sort())
    for (const executor of models) {
      const allowed = new Set(COMPATIBILITY[executor].split(', ').map((m) => `claude-${m}`))
      for (const advisor of models) expect({ executor, advisor, ok: advisorPairingProblem(executor, advisor) === null }).toEqual({ executor, advisor, ok: allowed.has(advisor) })
    }
  })

  it('lets any model advise a model absent from the table, and refuses an unknown advisor for a known model', () => {
    expect(advisorPairingProblem('claude-opus-4-5', 'claude-haiku-4-5')).toBeNull()
    expect(advisorPairingProblem('llama-3-70b', 'qwen-2')).toBeNull()
    expect(advisorPairingProblem('claude-sonnet-4-6', 'qwen-2')).toMatch(/qwen-2 is not in the advisor tier table/)
  })

  it('takes the user’s entries over the built-in table and refuses a tier that is not a whole number ≥ 0, naming the entry', () => {
    const t = advisorTierTable({ 'qwen-2': 5, 'claude-sonnet-4-6': 0 })
    expect(advisorPairingProblem('claude-opus-4-8', 'qwen-2', t)).toBeNull()
    expect(advisorPairingProblem('claude-haiku-4-5', 'claude-sonnet-4-6', t)).toMatch(/below the advisor floor/)
    expect(advisorTierTable(undefined)).toBe(ADVISOR_TIERS)
    expect(() => advisorTierTable({ x: 1.5 })).toThrow(/advisorTiers\.x: a whole number/)
    expect(() => advisorTierTable(['x'])).toThrow(/advisorTiers: an object/)
  })
})
