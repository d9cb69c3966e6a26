import { DEFAULT_DREAM_TIME_LIMIT_MINUTES } from '../../shared/api/dreams'
import type { DreamChange, DreamStore } from '../session/dream-store'

export interface DreamRunnerParams {
  dreams: Pick<DreamStore, 'changes' | 'start' | 'finish' | 'unsettled' | 'sessionOf' | 'endedSessionOf' | 'firstUnended' | 'unendedBefore' | 'timeOut'>
  /** How long a dream may take from its creation, read at each look (it may change); past it, the dream fails with `timeout` (default DEFAULT_DREAM_TIME_LIMIT_MINUTES). */
  timeLimitMs?: () => number
  /** Now, in ms since the epoch (tests). */
  now?: () => number
  /**
   * Stops a dream's session for good: interrupted if it runs, archived, and resolved once its
   * hands are released (their last memory sync has reached the store).
   */
  stopSession: (sessionId: string) => Promise<void>
  onError?: (err: unknown) => void
}

/**
 * Runs dreams (docs/dreams.md): starts each new one (DreamStore.start makes its output store,
 * transcripts and session; the brains run the session like any other), and once a dream's session
 * has ended (recorded by the store in the transaction of its final status event) stops that
 * session and gives the dream its final status; a canceled dream's session is stopped. The work
 * of one dream is done one step after another; at `start()` it picks up what a stopped process
 * left: pending dreams, ended sessions not yet settled, canceled dreams' sessions still open.
 *
 * A dream not ended `timeLimitMs` after its creation is timed out (DreamStore.timeOut): its
 * session is stopped like any ended one and the dream fails with `timeout`. The limit counts from
 * the dream's creation time in the database, so a dream whose process was stopped is timed out
 * by the next one at its start, or when its time comes.
 */
export class DreamRunner {
  private readonly queues = new Map<string, Promise<void>>()
  private unsubscribe?: () => void
  private disposed = false
  private readonly timeLimitMs: () => number
  private readonly now: () => number
  /** Fires when the first unended dream reaches its time limit (armDeadline). */
  private deadline?: NodeJS.Timeout
  private started = false

  constructor(private readonly p: DreamRunnerParams) {
    this.timeLimitMs = p.timeLimitMs ?? (() => DEFAULT_DREAM_TIME_LIMIT_MINUTES * 60_000)
    this.now = p.now ?? Date.now
  }

  start(): void {
    this.started = true
    this.unsubscribe = this.p.dreams.changes.subscribe((change) => this.heard(change))
    const left = this.p.dreams.unsettled()
    for (const id of left.pending) this.heard({ kind: 'created', id })
    for (const id of left.finishing) this.heard({ kind: 'finishing', id })
    for (const sessionId of left.canceledSessions) this.enqueue(sessionId, () => this.p.stopSession(sessionId))
    this.armDeadline()
  }

  /** Resolves once every step begun so far has finished (tests, shutdown). */
  async settled(): Promise<void> {
    while (this.queues.size) await Promise.all([...this.queues.values()])
  }

  dispose(): void {
    this.disposed = true
    this.unsubscribe?.()
    if (this.deadline) clearTimeout(this.deadline)
  }

  /** The time limit changed: the timer is set again for it (a lower one may have passed already). */
  limitChanged(): void {
    if (this.started) this.armDeadline()
  }

  /**
   * Sets the timer for the first unended dream's time limit (none when every dream ended). When it
   * fires, every dream past its limit is timed out, each behind the steps already queued for it
   * (its start, say), and the timer is set again once they are done. A dream that ended before its
   * time only makes the timer fire for nothing, and it is set again.
   */
  private armDeadline(): void {
    if (this.deadline) clearTimeout(this.deadline)
    this.deadline = undefined
    if (this.disposed) return
    const first = this.p.dreams.firstUnended()
    if (!first) return
    const due = Date.parse(first.created_at) + this.timeLimitMs()
    // at most a minute: timers run on the monotonic clock, which stands still while the machine
    // sleeps, and the limit is on the wall clock (created_at); a timer for nothing just re-arms
    const wait = Math.min(Math.max(0, due - this.now()), 60_000)
    this.deadline = setTimeout(() => {
      this.deadline = undefined
      const limit = this.timeLimitMs()
      const cutoff = new Date(this.now() - limit).toISOString()
      const steps = this.p.dreams.unendedBefore(cutoff).map((id) => this.enqueue(id, async () => void this.p.dreams.timeOut(id, limit)))
      void Promise.all(steps).then(() => this.armDeadline())
    }, wait)
    this.deadline.unref()
  }

  private heard(change: DreamChange): void {
    const { id } = change
    // a new dream's limit comes after every other's: the timer is set only when none is
    if (change.kind === 'created' && !this.deadline) this.armDeadline()
    if (change.kind === 'created') this.enqueue(id, async () => void (await this.p.dreams.start(id)))
    else if (change.kind === 'finishing') {
      this.enqueue(id, async () => {
        // only an ending that committed (a rolled-back append may have told of one)
        const sessionId = this.p.dreams.endedSessionOf(id)
        if (!sessionId) return
        await this.p.stopSession(sessionId)
        this.p.dreams.finish(id)
      })
    } else {
      this.enqueue(id, async () => {
        const sessionId = this.p.dreams.sessionOf(id)
        if (sessionId) await this.p.stopSession(sessionId)
      })
    }
  }

  private enqueue(key: string, step: () => Promise<void>): Promise<void> {
    if (this.disposed) return Promise.resolve()
    const prev = this.queues.get(key) ?? Promise.resolve()
    const next = prev
      .then(() => (this.disposed ? undefined : step()))
      .catch((err) => (this.p.onError ?? console.error)(err))
      .finally(() => {
        if (this.queues.get(key) === next) this.queues.delete(key)
      })
    this.queues.set(key, next)
    return next
  }
}
