import { describe, expect, it } from 'vitest'
import { CronSchedule, cronExpressionProblem, deploymentJitterMs, MAX_JITTER_MS, timezoneProblem } from '../../../src/shared/api/cron'

describe('cron expressions under the API rules', () => {
  it('accepts 5-field expressions with ranges, lists, steps, names and 7 for Sunday', () => {
    for (const e of ['*/5 * * * *', '0 9 * * 1-5', '0,30 8-18/2 1,15 * *', '0 9 * JAN-MAR MON-FRI', '0 9 * * 7', '  15 3 * * 0  ']) expect(cronExpressionProblem(e)).toBeNull()
  })

  it('refuses seconds or year fields, L W # ?, @ shortcuts and out-of-range values, naming the field', () => {
    expect(cronExpressionProblem('0 0 9 * * *')).toMatch(/exactly 5 fields.*got 6/)
    expect(cronExpressionProblem('@daily')).toMatch(/@daily/)
    expect(cronExpressionProblem('0 9 L * *')).toMatch(/^day-of-month field "L": the special characters L, W, # and \?/)
    expect(cronExpressionProblem('0 9 15W * *')).toMatch(/^day-of-month field "15W": the special characters/)
    expect(cronExpressionProblem('0 9 * * 1#2')).toMatch(/^day-of-week field "1#2": the special characters/)
    expect(cronExpressionProblem('0 9 ? * *')).toMatch(/^day-of-month field "\?"/)
    expect(cronExpressionProblem('61 * * * *')).toMatch(/^minute field "61": values must be 0–59/)
    expect(cronExpressionProblem('0 24 * * *')).toMatch(/^hour field "24": values must be 0–23/)
    expect(cronExpressionProblem('0 0 0 * *')).toMatch(/^day-of-month field "0": values must be 1–31/)
    expect(cronExpressionProblem('0 0 * 13 *')).toMatch(/^month field "13"/)
    expect(cronExpressionProblem('0 0 * * 8')).toMatch(/^day-of-week field "8": values must be 0–7/)
    expect(cronExpressionProblem('*/0 * * * *')).toMatch(/^minute field "\*\/0": a step must be at least 1/)
    expect(cronExpressionProblem('5-1 * * * *')).toMatch(/low to high/)
    expect(cronExpressionProblem('')).toMatch(/5-field/)
  })

  it('knows IANA time zones and names a wrong one', () => {
    expect(timezoneProblem('Europe/Berlin')).toBeNull()
    expect(timezoneProblem('UTC')).toBeNull()
    expect(timezoneProblem('Mars/Olympus')).toMatch(/"Mars\/Olympus" is not an IANA time zone name/)
  })

  it('lists the next instants in the time zone, 7 meaning Sunday like 0', () => {
    const sunday = new CronSchedule({ expression: '0 9 * * 7', timezone: 'America/New_York' })
    const zero = new CronSchedule({ expression: '0 9 * * 0', timezone: 'America/New_York' })
    const from = new Date('2026-07-01T00:00:00Z')
    expect(sunday.upcoming(from).map((d) => d.toISOString())).toEqual(zero.upcoming(from).map((d) => d.toISOString()))
    expect(sunday.upcoming(from)[0].toISOString()).toBe('2026-07-05T13:00:00.000Z')
    expect(sunday.upcoming(from)).toHaveLength(5)
  })

  it('gives each deployment a fixed jitter under 30 seconds, derived from its id', () => {
    const ids = Array.from({ length: 200 }, (_, i) => `depl_01TEST${i.toString(32).padStart(4, '0')}`)
    const jitters = ids.map(deploymentJitterMs)
    expect(jitters.every((j) => Number.isInteger(j) && j >= 0 && j < MAX_JITTER_MS)).toBe(true)
    expect(ids.map(deploymentJitterMs)).toEqual(jitters)
    expect(new Set(jitters).size).toBeGreaterThan(150)
  })
})
