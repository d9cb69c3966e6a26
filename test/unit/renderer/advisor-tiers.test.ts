import { describe, expect, it } from 'vitest'
import { builtInTiers, formatAdvisorTiers, parseAdvisorTiers } from '../../../src/renderer/src/features/settings/advisor-tiers'

describe("the Settings screen's advisor tier editor", () => {
  it('reads one model id and tier per line, with spaces, = or : between them, skipping blank lines and comments', () => {
    expect(parseAdvisorTiers('qwen-3-235b 5\n\n# mine\nllama-4 = 2\nclaude-opus-4-9: 4  # newer than the table')).toEqual({ tiers: { 'qwen-3-235b': 5, 'llama-4': 2, 'claude-opus-4-9': 4 } })
  })

  it('names the line and the rule of an entry it cannot use', () => {
    expect(parseAdvisorTiers('qwen 5\nllama high')).toEqual({ error: 'line 2: the tier of llama must be a whole number ≥ 0 (the built-in tiers run from 0 to 7)' })
    expect(parseAdvisorTiers('qwen 5\nqwen 6')).toEqual({ error: 'line 2: qwen is listed twice' })
    expect(parseAdvisorTiers('just-a-name')).toEqual({ error: 'line 1: write a model id and a tier number, e.g. "qwen-3-235b 5"' })
    expect(parseAdvisorTiers('qwen -1')).toMatchObject({ error: expect.stringContaining('whole number ≥ 0') })
  })

  it('shows the saved entries in a form it reads back unchanged', () => {
    const saved = { 'qwen-3-235b': 5, 'claude-opus-4-9': 4 }
    expect(formatAdvisorTiers(saved)).toBe('claude-opus-4-9 4\nqwen-3-235b 5')
    expect(parseAdvisorTiers(formatAdvisorTiers(saved))).toEqual({ tiers: saved })
    expect(formatAdvisorTiers(undefined)).toBe('')
  })

  it('lists the built-in tiers highest first', () => {
    const tiers = builtInTiers()
    expect(tiers[0]).toEqual({ tier: 7, models: ['claude-fable-5-1', 'claude-mythos-5-1'] })
    expect(tiers[tiers.length - 1]).toEqual({ tier: 0, models: ['claude-haiku-4-5'] })
  })
})
