import { describe, expect, it } from 'vitest'
import { formatDreamLimit, parseDreamLimit } from '../../../src/renderer/src/features/settings/dream-limit'

describe('the Settings field for a dream time limit', () => {
  it('shows the default hour as an empty field and another limit as its minutes', () => {
    expect(formatDreamLimit(undefined)).toBe('')
    expect(formatDreamLimit(60)).toBe('')
    expect(formatDreamLimit(90)).toBe('90')
    expect(formatDreamLimit(0.5)).toBe('0.5')
  })

  it('reads minutes, empty as the default, and names what cannot be saved', () => {
    expect(parseDreamLimit(' 90 ')).toEqual({ change: { dream_time_limit_minutes: 90 } })
    expect(parseDreamLimit('2.5')).toEqual({ change: { dream_time_limit_minutes: 2.5 } })
    expect(parseDreamLimit('')).toEqual({ change: { dream_time_limit_minutes: null } })
    expect(parseDreamLimit('0')).toEqual({ error: 'the limit must be more than 0 minutes' })
    expect(parseDreamLimit('10081')).toEqual({ error: 'at most a week (10080 minutes)' })
    expect(parseDreamLimit('1h')).toEqual({ error: 'write a number of minutes, e.g. 90' })
    expect(parseDreamLimit('-5')).toEqual({ error: 'write a number of minutes, e.g. 90' })
  })
})
