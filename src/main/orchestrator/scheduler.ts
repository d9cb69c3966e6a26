import type { Db } from '../session/database'
import type { EventLog, StoredEvent } from '../session/event-log'
import { TurnControl, type Harness } from '../harness/harness'
import type { SqliteLeaseStore } from './leases'

/** Client events that give a session work for its brain. */
const WAKING_TYPES = new Set(['user.message', 'user.tool_confirmation', 'user.custom_tool_result', 'user.tool_result', 'system.message', 'user.interrupt'])

export interface SchedulerParams {
  db: Db
  log: EventLog
  harness: Harness
  leases: SqliteLeaseStore
  onError?: (sessionId: string, err: unknown) => void
}

interface Brain {
  control: TurnControl
  again: boolean
  done: Promise<void>
}

/**
 * Many brains in one process: one turn loop per session with work, each under the session's
 * lease, all concurrent (a slow model or tool in one session holds up no other). It wakes a
 * session when a client event arrives, and at start-up every session that was running or has
 * unanswered input. Dispose with `stop()`.
 */
export class Scheduler {
  private readonly brains = new Map<string, Brain>()
  private readonly retryTimers = new Map<string, NodeJS.Timeout>()
  private unsubscribe?: () => void
  private stopped = false

  constructor(private readonly p: SchedulerParams) {}

  /** Subscribes to the log and wakes every session that needs a brain. Returns the ids woken. */
  start(): string[] {
    this.unsubscribe = this.p.log.subscribeAll((s) => this.onEvent(s))
    const ids = this.sessionsNeedingBrains()
    for (const id of ids) this.wake(id)
    return ids
  }

  /** Sessions that were running, or whose newest event is client input nobody answered. */
  sessionsNeedingBrains(): string[] {
    const rows = this.p.db
      .prepare(
        `SELECT s.id FROM sessions s WHERE s.deleting = 0 AND s.archived_at IS NULL AND (
           s.status IN ('running', 'rescheduling') OR
           (SELECT e.type FROM events e WHERE e.session_rid = s.rid ORDER BY e.seq DESC LIMIT 1) IN (${[...WAKING_TYPES].map(() => '?').join(',')}))`,
      )
      .all(...WAKING_TYPES) as { id: string }[]
    return rows.map((r) => r.id)
  }

  private onEvent(stored: StoredEvent): void {
    const type = stored.event.type
    if (!WAKING_TYPES.has(type)) return
    if (type === 'user.interrupt') this.brains.get(stored.sessionId)?.control.interrupt()
    this.wake(stored.sessionId)
  }

  /** Runs the session's brain, or tells the running one to look at the log again. */
  wake(sessionId: string): void {
    if (this.stopped) return
    const running = this.brains.get(sessionId)
    if (running) {
      running.again = true
      return
    }
    let acquired: boolean
    try {
      acquired = this.p.leases.acquire(sessionId)
    } catch (err) {
      this.p.onError?.(sessionId, err)
      return
    }
    if (!acquired) {
      // Another live brain holds it; look again when its lease could have lapsed.
      if (!this.retryTimers.has(sessionId)) {
        const t = setTimeout(() => {
          this.retryTimers.delete(sessionId)
          this.wake(sessionId)
        }, this.p.leases.ttlMs)
        t.unref()
        this.retryTimers.set(sessionId, t)
      }
      return
    }
    const brain: Brain = { control: new TurnControl(), again: false, done: Promise.resolve() }
    this.brains.set(sessionId, brain)
    brain.done = this.runBrain(sessionId, brain)
  }

  private async runBrain(sessionId: string, brain: Brain): Promise<void> {
    const renew = setInterval(() => {
      try {
        if (!this.p.leases.renew(sessionId)) brain.control.stop()
      } catch {
        brain.control.stop()
      }
    }, Math.max(50, Math.floor(this.p.leases.ttlMs / 3)))
    renew.unref()
    try {
      do {
        brain.again = false
        await this.p.harness.run(sessionId, brain.control)
      } while (brain.again && !brain.control.stopped)
    } catch (err) {
      if (!brain.control.stopped) this.p.onError?.(sessionId, err)
    } finally {
      clearInterval(renew)
      this.brains.delete(sessionId)
      try {
        if (!this.stopped || brain.control.stopped) this.p.leases.release(sessionId)
      } catch {
        // the database may be closing; the lease lapses on its own
      }
    }
  }

  /** Sessions with a brain running now. */
  running(): string[] {
    return [...this.brains.keys()]
  }

  /** Resolves when no brain is running (for tests and benchmarks). */
  async settled(): Promise<void> {
    while (this.brains.size > 0) await Promise.allSettled([...this.brains.values()].map((b) => b.done))
  }

  /** Stops every brain without writing more events (the next start continues from the log). */
  async stop(): Promise<void> {
    this.stopped = true
    this.unsubscribe?.()
    for (const t of this.retryTimers.values()) clearTimeout(t)
    this.retryTimers.clear()
    for (const b of this.brains.values()) b.control.stop()
    await Promise.allSettled([...this.brains.values()].map((b) => b.done))
  }
}
