/**
 * The Schedules page's words: a cron schedule's next runs as a person reads them, and what a run
 * was (run now, on schedule, or the one catch-up after the computer slept). Pure: the clock and the
 * locale come in as arguments.
 */
import { CronSchedule, cronExpressionProblem, timezoneProblem, UPCOMING_RUNS } from '../../../../shared/api/cron'

/** A run as the page reads it (the SDK's deployment run with Corral's `corral.catch_up`). */
export interface RunLike {
  created_at: string
  trigger_context: { type: 'manual' } | { type: 'schedule'; scheduled_at: string }
  corral?: { catch_up: { reason: 'asleep' | 'not_running'; missed_since: string } | null }
}

/** Ready-made schedules for the cron helper. */
export const CRON_PRESETS: readonly { label: string; expression: string }[] = [
  { label: 'Every weekday at 9:00', expression: '0 9 * * 1-5' },
  { label: 'Every day at 7:00', expression: '0 7 * * *' },
  { label: 'Every hour', expression: '0 * * * *' },
  { label: 'Every 15 minutes', expression: '*/15 * * * *' },
  { label: 'Mondays at 8:30', expression: '30 8 * * 1' },
]

/** "09:00 on Tue 2 Jun" style, in the schedule's time zone. */
export function instantWords(at: Date, timezone: string, now: Date, locale = 'en-GB'): string {
  const day = (d: Date) => new Intl.DateTimeFormat('en-CA', { timeZone: timezone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(d)
  const time = new Intl.DateTimeFormat(locale, { timeZone: timezone, hour: '2-digit', minute: '2-digit', hour12: false }).format(at)
  const date = new Intl.DateTimeFormat(locale, { timeZone: timezone, weekday: 'short', day: 'numeric', month: 'short' }).format(at)
  const tomorrow = new Date(now.getTime() + 86_400_000)
  const which = day(at) === day(now) ? 'today' : day(at) === day(tomorrow) ? 'tomorrow' : date
  return `${which === date ? date : `${which[0].toUpperCase()}${which.slice(1)} (${date})`} at ${time}`
}

/** "in 5 minutes", "in 3 hours", "in 2 days" (or "… ago"). */
export function fromNow(at: Date, now: Date): string {
  const ms = at.getTime() - now.getTime()
  const past = ms < 0
  const m = Math.round(Math.abs(ms) / 60_000)
  const text = Math.abs(ms) < 60_000 ? 'less than a minute' : m < 60 ? plural(m, 'minute') : m < 24 * 60 ? plural(Math.round(m / 60), 'hour') : plural(Math.round(m / 1440), 'day')
  return past ? `${text} ago` : `in ${text}`
}

function plural(n: number, unit: string): string {
  return `${n} ${unit}${n === 1 ? '' : 's'}`
}

/**
 * What the cron helper shows under the expression: the rule it breaks (with the field), or the
 * next five runs in words.
 */
export function nextRunsInWords(expression: string, timezone: string, now: Date, count = UPCOMING_RUNS): { problem: string } | { runs: { at: string; words: string }[] } {
  const e = cronExpressionProblem(expression)
  if (e) return { problem: `Schedule: ${e}` }
  const t = timezoneProblem(timezone)
  if (t) return { problem: `Time zone: ${t}` }
  const runs = new CronSchedule({ expression: expression.trim(), timezone }).upcoming(now, count)
  return { runs: runs.map((d) => ({ at: d.toISOString(), words: `${instantWords(d, timezone, now)}, ${fromNow(d, now)}` })) }
}

/** What started a run, in words; a catch-up says it was missed and why. */
export function runTriggerWords(run: RunLike, timezone: string, now: Date): string {
  if (run.trigger_context.type === 'manual') return 'Run now'
  const planned = instantWords(new Date(run.trigger_context.scheduled_at), timezone, now)
  const catchUp = run.corral?.catch_up
  if (!catchUp) return `Scheduled for ${planned}`
  const why = catchUp.reason === 'asleep' ? 'missed while the computer was asleep' : 'missed while Corral was closed'
  const since = catchUp.missed_since !== run.trigger_context.scheduled_at ? `; runs since ${instantWords(new Date(catchUp.missed_since), timezone, now)} were skipped` : ''
  return `${planned[0].toUpperCase()}${planned.slice(1)}, ${why}: caught up once ${fromNow(new Date(run.created_at), now)}${since}`
}
