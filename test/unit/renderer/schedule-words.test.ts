import { describe, expect, it } from 'vitest'
import { fromNow, instantWords, nextRunsInWords, runTriggerWords } from '../../../src/renderer/src/features/schedules/schedule-words'

const now = new Date('2026-06-01T10:00:00Z') // Monday, 12:00 in Berlin

describe('schedule words', () => {
  it('lists the next five runs in words, in the schedule\'s time zone', () => {
    const r = nextRunsInWords('0 9 * * 1-5', 'Europe/Berlin', now)
    expect('runs' in r && r.runs.map((x) => x.words)).toEqual([
      'Tomorrow (Tue 2 Jun) at 09:00, in 21 hours',
      'Wed 3 Jun at 09:00, in 2 days',
      'Thu 4 Jun at 09:00, in 3 days',
      'Fri 5 Jun at 09:00, in 4 days',
      'Mon 8 Jun at 09:00, in 7 days',
    ])
    const soon = nextRunsInWords('*/15 * * * *', 'UTC', now)
    expect('runs' in soon && soon.runs[0].words).toBe('Today (Mon 1 Jun) at 10:15, in 15 minutes')
  })

  it('says which rule an expression or a time zone breaks instead of runs', () => {
    expect(nextRunsInWords('0 9 * *', 'UTC', now)).toEqual({ problem: expect.stringMatching(/^Schedule: must have exactly 5 fields/) })
    expect(nextRunsInWords('0 9 L * *', 'UTC', now)).toEqual({ problem: expect.stringMatching(/^Schedule: day-of-month field "L"/) })
    expect(nextRunsInWords('0 9 * * *', 'Nowhere/Town', now)).toEqual({ problem: expect.stringMatching(/^Time zone: "Nowhere\/Town" is not an IANA/) })
  })

  it('tells a run now, a run on time and a catch-up after sleep or a closed app apart', () => {
    expect(runTriggerWords({ created_at: '2026-06-01T09:00:00Z', trigger_context: { type: 'manual' } }, 'UTC', now)).toBe('Run now')
    expect(runTriggerWords({ created_at: '2026-06-01T09:00:12Z', trigger_context: { type: 'schedule', scheduled_at: '2026-06-01T09:00:00Z' }, corral: { catch_up: null } }, 'UTC', now)).toBe('Scheduled for Today (Mon 1 Jun) at 09:00')
    const asleep = runTriggerWords(
      { created_at: '2026-06-01T09:40:00Z', trigger_context: { type: 'schedule', scheduled_at: '2026-06-01T09:30:00Z' }, corral: { catch_up: { reason: 'asleep', missed_since: '2026-06-01T08:00:00Z' } } },
      'UTC',
      now,
    )
    expect(asleep).toBe('Today (Mon 1 Jun) at 09:30, missed while the computer was asleep: caught up once 20 minutes ago; runs since Today (Mon 1 Jun) at 08:00 were skipped')
    const closed = runTriggerWords({ created_at: '2026-06-01T09:59:00Z', trigger_context: { type: 'schedule', scheduled_at: '2026-06-01T09:00:00Z' }, corral: { catch_up: { reason: 'not_running', missed_since: '2026-06-01T09:00:00Z' } } }, 'UTC', now)
    expect(closed).toBe('Today (Mon 1 Jun) at 09:00, missed while Corral was closed: caught up once 1 minute ago')
  })

  it('words relative times', () => {
    expect(fromNow(new Date(now.getTime() + 30_000), now)).toBe('in less than a minute')
    expect(fromNow(new Date(now.getTime() + 45 * 3_600_000), now)).toBe('in 2 days')
    expect(fromNow(new Date(now.getTime() - 3 * 3_600_000), now)).toBe('3 hours ago')
    expect(instantWords(new Date('2026-06-03T07:00:00Z'), 'Europe/Berlin', now)).toBe('Wed 3 Jun at 09:00')
  })
})
