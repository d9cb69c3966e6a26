import type { DeploymentStore, DeploymentRunView, ScheduledDeployment } from '../session/deployment-store'
import { CronCache } from '../../shared/api/cron'

/** The scheduler's clock and timers: the wall clock by default; tests inject a manual one. */
export interface SchedulerClock {
  now(): number
  setTimeout(fn: () => void, ms: number): unknown
  clearTimeout(handle: unknown): void
}

export const systemClock: SchedulerClock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms)
    t.unref?.()
    return t
  },
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
}

/**
 * A fire that starts more than this after its time (instant + jitter) was missed: the clock jumped
 * past it (the computer slept) or Corral was not running. Only the latest missed instant runs, once.
 */
export const MISSED_AFTER_MS = 60_000
/** The scheduler looks at the clock at least this often, so a jump past a fire instant is seen within it. */
export const MAX_TICK_MS = 60_000

export interface DeploymentSchedulerParams {
  deployments: Pick<DeploymentStore, 'scheduled' | 'fireScheduled' | 'completePending' | 'changes'>
  clock?: SchedulerClock
  /** The longest wait between two looks at the clock (default MAX_TICK_MS; how late a sleep is noticed at worst). */
  maxTickMs?: number
  /** Told about each run the scheduler started (after its outcome is recorded). */
  onRun?: (run: DeploymentRunView) => void
  onError?: (err: unknown) => void
}

/**
 * Fires deployments on their cron (spec resources.md §10.4, docs/schedules.md). One timer for all
 * deployments, set for the earliest next fire (instant + the deployment's fixed jitter) and at
 * most MAX_TICK_MS away; each tick fires what is due through `DeploymentStore.fireScheduled`,
 * whose unique (deployment, instant) key makes a fire happen at most once even across processes
 * and crashes. When the clock has jumped past one or more instants (sleep, or Corral closed),
 * only the most recent is run, once, marked as a catch-up. `start()` first finishes the runs a
 * crash left between their record and their session. Owns a timer and a store subscription:
 * `dispose()` ends both and waits for a fire in progress.
 */
export class DeploymentScheduler {
  private readonly clock: SchedulerClock
  private readonly crons = new CronCache()
  private timer: unknown
  private unsubscribe?: () => void
  private running?: Promise<void>
  private again = false
  private disposed = false
  /** The first tick after start reads missed instants as "Corral was not running"; later ones as "asleep". */
  private firstTick = true

  constructor(private readonly p: DeploymentSchedulerParams) {
    this.clock = p.clock ?? systemClock
  }

  /** Finishes pending runs, then fires what is due (catch-ups included) and plans the next tick. */
  start(): void {
    if (this.unsubscribe || this.disposed) return
    this.unsubscribe = this.p.deployments.changes.subscribe(() => this.check())
    this.running = this.p.deployments
      .completePending()
      .then((runs) => runs.forEach((r) => this.p.onRun?.(r)))
      .catch((err) => this.p.onError?.(err))
      .then(() => {
        this.running = undefined
        this.check()
      })
  }

  /** Looks at the clock now (a store change, the OS saying it woke up); fires what is due. */
  check(): void {
    if (this.disposed || !this.unsubscribe) return
    if (this.running) {
      this.again = true
      return
    }
    this.clearTimer()
    this.running = this.tick()
      .catch((err) => this.p.onError?.(err))
      .finally(() => {
        this.running = undefined
        if (this.again && !this.disposed) {
          this.again = false
          this.check()
        }
      })
  }

  /** Resolves once no tick is running (tests step the clock, then wait for this). */
  async settled(): Promise<void> {
    while (this.running) await this.running
  }

  async dispose(): Promise<void> {
    this.disposed = true
    this.clearTimer()
    this.unsubscribe?.()
    await this.settled()
  }

  private clearTimer(): void {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer)
    this.timer = undefined
  }

  private async tick(): Promise<void> {
    const now = this.clock.now()
    const asleep = !this.firstTick
    this.firstTick = false
    let nextAt = now + (this.p.maxTickMs ?? MAX_TICK_MS)
    for (const d of this.p.deployments.scheduled()) {
      if (this.disposed) return
      const due = this.due(d, now)
      if (due.fire) {
        const { scheduledAt, missedSince } = due.fire
        const late = now - (scheduledAt.getTime() + d.jitterMs) > MISSED_AFTER_MS
        // on the first tick after start, what passed happened while Corral was not running
        const catchUp = late || missedSince ? { reason: asleep ? ('asleep' as const) : ('not_running' as const), missed_since: (missedSince ?? scheduledAt).toISOString() } : null
        try {
          const run = await this.p.deployments.fireScheduled({ deploymentId: d.id, scheduledAt, catchUp })
          if (run) this.p.onRun?.(run)
        } catch (err) {
          this.p.onError?.(err)
        }
      }
      const next = this.crons.get(d.schedule).next(due.fire?.scheduledAt ?? d.firedThrough)
      if (next) nextAt = Math.min(nextAt, next.getTime() + d.jitterMs)
    }
    if (this.disposed) return
    this.timer = this.clock.setTimeout(() => this.check(), Math.max(0, nextAt - this.clock.now()))
  }

  /**
   * What of a deployment is due at `now`: the latest instant whose fire time (instant + jitter)
   * has come, after the one it last fired; `missedSince` when earlier instants were passed over.
   */
  private due(d: ScheduledDeployment, now: number): { fire?: { scheduledAt: Date; missedSince?: Date } } {
    const cron = this.crons.get(d.schedule)
    const first = cron.next(d.firedThrough)
    if (!first || first.getTime() + d.jitterMs > now) return {}
    const latest = cron.latestAtOrBefore(new Date(now - d.jitterMs)) ?? first
    return { fire: { scheduledAt: latest, missedSince: latest.getTime() > first.getTime() ? first : undefined } }
  }
}
