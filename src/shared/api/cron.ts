/**
 * A deployment's cron schedule (spec resources.md §10.4, the SDK's BetaManagedAgentsCronSchedule):
 * 5-field POSIX expressions (minute hour day-of-month month day-of-week; day-of-week 0–7, 0 and 7
 * Sunday; no seconds or year field, no L W # ?, no @macros) matched on the wall clock of an IANA
 * time zone. Plain TypeScript over croner (no node:): the engine's scheduler, the deployment
 * store's `upcoming_runs_at` and the desktop's cron helper read the same occurrences.
 *
 * DST (croner's rules, `fixedTimeRule: 'no-wildcard'`, close to Vixie cron): an expression whose
 * minute and hour fields hold no `*` and no step is a fixed-time job: a time that does not exist
 * (the spring gap) fires once at the first valid minute after the gap, a time that occurs twice
 * (the autumn repeat) fires once, at its first occurrence. Any other expression fires on real
 * instants: nothing in a gap (there is none), both passes of a repeated hour.
 */
import { Cron } from 'croner'

/** A scheduled fire starts this much after its instant at most (the jitter is fixed per deployment). */
export const MAX_JITTER_MS = 30_000
/** How many upcoming instants a deployment lists. */
export const UPCOMING_RUNS = 5

export interface CronSpec {
  expression: string
  timezone: string
}

const FIELDS = [
  { name: 'minute', min: 0, max: 59, names: null },
  { name: 'hour', min: 0, max: 23, names: null },
  { name: 'day-of-month', min: 1, max: 31, names: null },
  { name: 'month', min: 1, max: 12, names: ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'] },
  { name: 'day-of-week', min: 0, max: 7, names: ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'] },
] as const

/**
 * What is wrong with a cron expression under the API's rules, or null when it is one. The
 * message names the field (`minute`, `hour`, …) and the rule.
 */
export function cronExpressionProblem(expression: string): string | null {
  if (typeof expression !== 'string' || expression.trim() === '') return 'must be a 5-field cron expression (minute hour day-of-month month day-of-week)'
  if (/^\s*@/.test(expression)) return 'predefined shortcuts such as @daily are not supported; write the 5 fields'
  const parts = expression.trim().split(/\s+/)
  if (parts.length !== 5) return `must have exactly 5 fields (minute hour day-of-month month day-of-week), got ${parts.length}; seconds and year fields are not supported`
  for (let i = 0; i < 5; i++) {
    const field = FIELDS[i]
    const part = parts[i]
    const special = `${field.name} field ${JSON.stringify(part)}: the special characters L, W, # and ? are not supported`
    if (/[#?]/.test(part)) return special
    for (const token of part.split(',')) {
      const m = /^(\*|[0-9A-Za-z]+(?:-[0-9A-Za-z]+)?)(?:\/(\d+))?$/.exec(token)
      if (!m) return `${field.name} field ${JSON.stringify(part)}: ${JSON.stringify(token)} is not a value, range (a-b), list (a,b) or step (*/n, a-b/n)`
      if (m[2] !== undefined && Number(m[2]) < 1) return `${field.name} field ${JSON.stringify(part)}: a step must be at least 1`
      if (m[1] === '*') continue
      const [lo, hi] = m[1].split('-')
      const a = valueOf(lo, field)
      const b = hi === undefined ? a : valueOf(hi, field)
      if ((a === null || b === null) && /[LW]/i.test(m[1])) return special
      if (a === null || b === null) return `${field.name} field ${JSON.stringify(part)}: ${JSON.stringify(token)} is not a number${field.names ? ' or a name (' + field.names[0] + '…)' : ''}`
      if (a < field.min || a > field.max || b < field.min || b > field.max) return `${field.name} field ${JSON.stringify(part)}: values must be ${field.min}–${field.max}`
      if (b < a) return `${field.name} field ${JSON.stringify(part)}: a range must go from low to high`
    }
  }
  return null
}

function valueOf(text: string, field: (typeof FIELDS)[number]): number | null {
  if (/^\d+$/.test(text)) return Number(text)
  if (!field.names) return null
  const i = field.names.indexOf(text.toUpperCase() as never)
  return i < 0 ? null : i + (field.name === 'month' ? 1 : 0)
}

/** What is wrong with an IANA time zone name, or null when this runtime's time zone database knows it. */
export function timezoneProblem(timezone: string): string | null {
  if (typeof timezone !== 'string' || timezone === '') return 'must be an IANA time zone name such as "Europe/Berlin" or "UTC"'
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone })
    return null
  } catch {
    return `${JSON.stringify(timezone)} is not an IANA time zone name (e.g. "Europe/Berlin", "America/Los_Angeles", "UTC")`
  }
}

/**
 * One schedule's occurrences. Built from a spec already checked (cronExpressionProblem,
 * timezoneProblem); throws a plain Error otherwise. Holds no timer.
 */
export class CronSchedule {
  private readonly cron: Cron

  constructor(readonly spec: CronSpec) {
    this.cron = new Cron(spec.expression, { timezone: spec.timezone, mode: '5-part', fixedTimeRule: 'no-wildcard', paused: true })
  }

  /** The first scheduled instant strictly after `after`, or null when there is none. */
  next(after: Date): Date | null {
    return this.cron.nextRun(after)
  }

  /** Up to `count` scheduled instants strictly after `after`, in order. */
  upcoming(after: Date, count = UPCOMING_RUNS): Date[] {
    return this.cron.nextRuns(count, after)
  }

  /** The latest scheduled instant at or before `at`, or null when there is none. */
  latestAtOrBefore(at: Date): Date | null {
    return this.cron.previousRuns(1, new Date(at.getTime() + 1))[0] ?? null
  }
}

/**
 * A deployment's fixed jitter: 0 ≤ jitter < MAX_JITTER_MS, derived from its id (FNV-1a), so it
 * is the same in every process and after every restart. A scheduled fire starts this long after
 * its instant; `scheduled_at` and `upcoming_runs_at` hold the instant itself.
 */
export function deploymentJitterMs(deploymentId: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < deploymentId.length; i++) {
    h ^= deploymentId.charCodeAt(i)
    h = Math.imul(h, 0x01000193) >>> 0
  }
  return Math.floor((h / 0x1_0000_0000) * MAX_JITTER_MS)
}

/** One string per schedule (its time zone and expression): the key of caches by schedule. */
export function cronKey(spec: CronSpec): string {
  return `${spec.timezone} ${spec.expression}`
}

/**
 * Schedules by spec, built once each (parsing a cron expression is the costly part of asking for
 * its next instants). Bounded: past 257 specs it starts over (as each store's own map did).
 */
export class CronCache {
  private readonly schedules = new Map<string, CronSchedule>()

  get(spec: CronSpec): CronSchedule {
    const key = cronKey(spec)
    let c = this.schedules.get(key)
    if (!c) {
      if (this.schedules.size > 256) this.schedules.clear()
      this.schedules.set(key, (c = new CronSchedule(spec)))
    }
    return c
  }
}
