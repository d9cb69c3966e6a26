import { describe, expect, it } from 'vitest'
import { dreamTimeLimitMs, dreamTimeLimitProblem } from '../../../src/main/config'

describe("settings.json's dream time limit", () => {
  it('is an hour when absent, and the minutes given otherwise', () => {
    expect(dreamTimeLimitMs({})).toBe(3_600_000)
    expect(dreamTimeLimitMs({ dreamTimeLimitMinutes: 90 })).toBe(5_400_000)
    expect(dreamTimeLimitMs({ dreamTimeLimitMinutes: 0.05 })).toBe(3000)
    expect(dreamTimeLimitProblem({ dreamTimeLimitMinutes: 10_080 })).toBeUndefined()
  })

  it('names a bad value for the start to refuse, and falls back to the hour if one appears while the engine runs', () => {
    for (const bad of [0, -1, 10_081, Number.NaN, '30', true]) {
      expect(dreamTimeLimitProblem({ dreamTimeLimitMinutes: bad as never })).toMatch(/^dreamTimeLimitMinutes must be a positive number of minutes, at most 10080 \(a week\)/)
      expect(dreamTimeLimitMs({ dreamTimeLimitMinutes: bad as never })).toBe(3_600_000)
    }
  })
})
