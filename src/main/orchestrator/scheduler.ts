import type { EventLog, StoredEvent } from '../session/event-log'
import type { SessionStore } from '../session/session-store'
import { isLeaseLost, type SqliteLeaseStore } from '../session/lease-store'
import { TurnControl, type Harness } from '../harness/harness'
import { primaryRef, type ThreadRef } from '../harness/platform-tools'

/** Client events that give a session work for its brain. */
const WAKING_TYPES = new Set(['user.message', 'user.tool_confirmation', 'user.custom_tool_result', 'user.tool_result', 'system.message', 'user.interrupt', 'user.define_outcome'])
/**
 * What a session's newest event may be when a brain still owes it something at start-up: client
 * input, or a thread's termination (an archive writes it outside any brain, and the primary's
 * brain re-writes the session's aggregate idle after it: a crash in between left it unwritten).
 */
const START_TYPES = [...WAKING_TYPES, 'session.thread_status_terminated']

export interface SchedulerParams {
  log: EventLog
  /** Asked at start which sessions need a brain. */
  sessions: Pick<SessionStore, 'needingBrains'>
  harness: Harness
  leases: SqliteLeaseStore
  onError?: (sessionId: string, err: unknown) => void
  /** A lease stays held this long after its session's brain last ran (default 5 s), so a quick next turn wakes without a database write. */
  idleReleaseMs?: number
}

interface Brain {
  thread: ThreadRef
  control: TurnControl
  again: boolean
  done: Promise<void>
}

const keyOf = (t: ThreadRef) => `${t.sessionId}/${t.threadId}`

/**
 * Many brains in one process: one turn loop per thread with work, all the threads of a session
 * under the session's one lease, all concurrent (a slow model or tool in one thread holds up no
 * other). It wakes the thread an event is for when a client event or a message between threads
 * arrives, and at start-up every thread of every session that was running or has unanswered
 * input. Dispose with `stop()`.
 */
export class Scheduler {
  /** Brains by thread (`sessionId/threadId`). */
  private readonly brains = new Map<string, Brain>()
  /** How many brains each session has running. */
  private readonly perSession = new Map<string, number>()
  private readonly retryTimers = new Map<string, NodeJS.Timeout>()
  /** Sessions whose lease we hold, with when their brain last ran (ms). */
  private readonly held = new Map<string, number>()
  /** Sessions whose lease is held for something other than a brain (a workflow run's driver), kept however idle. */
  private readonly pinned = new Set<string>()
  private readonly leaseListeners = new Set<(sessionId: string, held: boolean) => void>()
  /** Per held lease: stops hearing what other processes append to the session (EventLog.hearForeign). */
  private readonly hearing = new Map<string, () => void>()
  private renewTimer?: NodeJS.Timeout
  private lastRenewAt = 0
  private unsubscribe?: () => void
  private stopped = false

  constructor(private readonly p: SchedulerParams) {}

  /**
   * Renews every held lease in one transaction at a third of the lease lifetime; a lease that
   * was lost stops its brain; one idle longer than idleReleaseMs is given back.
   */
  private renewHeld(): void {
    const now = Date.now()
    const idleFor = this.p.idleReleaseMs ?? 5_000
    const release = [...this.held].filter(([id, at]) => !this.perSession.has(id) && !this.pinned.has(id) && now - at > idleFor).map(([id]) => id)
    for (const id of release) {
      this.held.delete(id)
      this.deafen(id)
    }
    try {
      if (release.length) this.p.leases.releaseAll(release)
      for (const lost of this.p.leases.renewAll([...this.held.keys()])) this.lost(lost)
      this.lastRenewAt = now
    } catch {
      // the database is closing or busy: try again on the next tick
    }
  }

  /**
   * The session's lease is another process's now (found at renewal, or a brain's fenced write
   * refused): its brains stop without writing more, and the session is looked at again shortly,
   * as after a refused acquire, so its work resumes here once the other process is gone.
   */
  private lost(sessionId: string): void {
    if (!this.held.delete(sessionId)) return
    this.deafen(sessionId)
    this.pinned.delete(sessionId)
    for (const b of this.brains.values()) if (b.thread.sessionId === sessionId) b.control.stop('lease_lost')
    this.tellLease(sessionId, false)
    this.retryLater(sessionId)
  }

  /** Wakes the session's threads again in a while (the lease's lifetime, at most 2 s): one timer per session. */
  private retryLater(sessionId: string): void {
    if (this.stopped || this.retryTimers.has(sessionId)) return
    const t = setTimeout(() => {
      this.retryTimers.delete(sessionId)
      this.wakeSession(sessionId)
    }, Math.min(this.p.leases.ttlMs, 2_000))
    t.unref()
    this.retryTimers.set(sessionId, t)
  }

  /** Holds the lease of a session (taking it when we do not); false when another brain has it. */
  private hold(sessionId: string): boolean {
    const fresh = Date.now() - this.lastRenewAt < this.p.leases.ttlMs / 2
    if (this.held.has(sessionId) && fresh) {
      this.held.set(sessionId, Date.now())
      return true
    }
    const had = this.held.has(sessionId)
    if (!this.p.leases.acquire(sessionId)) {
      this.held.delete(sessionId)
      this.deafen(sessionId)
      this.pinned.delete(sessionId)
      if (had) this.tellLease(sessionId, false)
      return false
    }
    this.held.set(sessionId, Date.now())
    if (!had) {
      this.listen(sessionId)
      this.tellLease(sessionId, true)
    }
    if (!this.renewTimer && !this.stopped) {
      this.lastRenewAt = Date.now()
      this.renewTimer = setInterval(() => this.renewHeld(), Math.max(20, Math.floor(this.p.leases.ttlMs / 3)))
      this.renewTimer.unref()
    }
    return true
  }

  /**
   * While this engine holds a session's lease, what another engine appends to it (a client's
   * `user.interrupt`, message or confirmation sent through `corral serve` or the desktop while
   * `corral run` runs the session here) reaches onEvent as its own appends do: only the lease
   * holder runs the session's brains, and another engine's scheduler can only wait for the lease.
   */
  private listen(sessionId: string): void {
    if (this.hearing.has(sessionId) || !this.p.log.hearForeign) return
    try {
      this.hearing.set(sessionId, this.p.log.hearForeign(sessionId))
    } catch (err) {
      this.p.onError?.(sessionId, err)
    }
  }

  private deafen(sessionId: string): void {
    this.hearing.get(sessionId)?.()
    this.hearing.delete(sessionId)
  }

  private tellLease(sessionId: string, held: boolean): void {
    for (const l of this.leaseListeners) {
      try {
        l(sessionId, held)
      } catch (err) {
        this.p.onError?.(sessionId, err)
      }
    }
  }

  /**
   * Takes (or keeps) a session's lease for a driver that is not a brain: a workflow run's
   * (orchestrator/workflow-runs.ts). A pinned lease is renewed with the others and not given
   * back while idle, until `unpin`. False when another process holds it (nothing is pinned).
   */
  pin(sessionId: string): boolean {
    if (this.stopped) return false
    if (!this.hold(sessionId)) return false
    this.pinned.add(sessionId)
    return true
  }

  /** Ends a pin: the lease is given back once no brain of the session has run for idleReleaseMs. */
  unpin(sessionId: string): void {
    if (this.pinned.delete(sessionId) && this.held.has(sessionId)) this.held.set(sessionId, Date.now())
  }

  /** Whether this scheduler holds the session's lease now (as it last knew: renewal or acquire). */
  holds(sessionId: string): boolean {
    return this.held.has(sessionId)
  }

  /**
   * Tells `listener` when this scheduler takes a session's lease it did not hold (`true`: a brain
   * woke, or a pin) and when it loses one to another process (`false`: found at renewal or at a
   * refused acquire; a lease given back when idle is not a loss). Returns the disposer.
   */
  onLease(listener: (sessionId: string, held: boolean) => void): () => void {
    this.leaseListeners.add(listener)
    return () => this.leaseListeners.delete(listener)
  }

  /**
   * Subscribes to the log and wakes every session that needs a brain. Returns the ids woken.
   * A brain wakes at the commit of the event that gives it work, not once it is on disk: what it
   * does first is read its thread (reads that include what is unsynced) and ask the model, which
   * leaves nothing outside the process; a tool call of its still waits for the disk
   * (EventLog.subscribeCommitted).
   */
  start(): string[] {
    this.unsubscribe = this.p.log.subscribeCommitted((s) => this.onEvent(s))
    const ids = this.sessionsNeedingBrains()
    for (const id of ids) this.wakeSession(id)
    return ids
  }

  /** Wakes every thread of a session that may have work (the primary and its live children). */
  wakeSession(sessionId: string): void {
    let threads: ThreadRef[]
    try {
      threads = this.p.harness.liveThreads(sessionId)
    } catch (err) {
      this.p.onError?.(sessionId, err)
      return
    }
    for (const t of threads) this.wake(t)
  }

  /** Sessions that were running, or whose newest event is client input nobody answered or a thread's termination the session's status may not follow yet. */
  sessionsNeedingBrains(): string[] {
    return this.p.sessions.needingBrains(START_TYPES)
  }

  private onEvent(stored: StoredEvent): void {
    const { type, session_thread_id: tid } = stored.event
    const sessionId = stored.sessionId
    // a message between threads wakes the thread it reached (null: the primary)
    if (type === 'agent.thread_message_received') return this.wake(tid ? { sessionId, threadId: tid } : primaryRef(sessionId))
    // an archive (the API's terminated, marked archived) changes the session's aggregate: the
    // primary's brain re-writes it after finding no step of its own (no model turn is started)
    if (type === 'session.thread_status_terminated' && (stored.event as { archived?: unknown }).archived === true) return this.wake(primaryRef(sessionId))
    // a budget raised (or removed) resumes every thread paused at it (spec §9)
    if (type === 'session.updated' && (stored.event as { budget?: unknown }).budget !== undefined) return this.wakeSession(sessionId)
    // a workflow run that ended gives the primary a turn to read its result (docs/workflows.md)
    if (type === 'workflow_run.status_ended') return this.wake(primaryRef(sessionId))
    if (!WAKING_TYPES.has(type)) return
    if (type === 'user.interrupt') {
      // with a thread: that thread; without: every thread of the session
      if (tid) {
        const t = { sessionId, threadId: tid }
        if (this.p.harness.isWorkflowThread(t)) return
        this.brains.get(keyOf(t))?.control.interrupt()
        return this.wake(t)
      }
      // a workflow run's threads are stopped by their run, never by an interrupt (spec §6.8)
      for (const b of this.brains.values()) if (b.thread.sessionId === sessionId && !this.p.harness.isWorkflowThread(b.thread)) b.control.interrupt()
      return this.wakeSession(sessionId)
    }
    // an answer wakes the thread the session store routed it to; a message, the primary
    this.wake(tid ? { sessionId, threadId: tid } : primaryRef(sessionId))
  }

  /** Runs the thread's brain (a session id: its primary thread), or tells the running one to look at the log again. */
  wake(target: ThreadRef | string): void {
    if (this.stopped) return
    const thread = typeof target === 'string' ? primaryRef(target) : target
    const { sessionId } = thread
    const key = keyOf(thread)
    const running = this.brains.get(key)
    if (running) {
      running.again = true
      return
    }
    let acquired: boolean
    try {
      acquired = this.hold(sessionId)
    } catch (err) {
      this.p.onError?.(sessionId, err)
      return
    }
    if (!acquired) {
      // Another live brain holds it (another process on this data): look again shortly.
      this.retryLater(sessionId)
      return
    }
    const brain: Brain = { thread, control: new TurnControl(), again: false, done: Promise.resolve() }
    this.brains.set(key, brain)
    this.perSession.set(sessionId, (this.perSession.get(sessionId) ?? 0) + 1)
    brain.done = this.runBrain(brain)
  }

  private async runBrain(brain: Brain): Promise<void> {
    const { sessionId } = brain.thread
    try {
      do {
        brain.again = false
        await this.p.harness.run(brain.thread, brain.control)
      } while (brain.again && !brain.control.stopped)
    } catch (err) {
      // a write refused by the lease fence (orchestrator/lease-fence.ts): another engine runs the session now
      if (isLeaseLost(err)) this.lost(sessionId)
      else if (!brain.control.stopped) this.p.onError?.(sessionId, err)
    } finally {
      this.brains.delete(keyOf(brain.thread))
      const n = (this.perSession.get(sessionId) ?? 1) - 1
      if (n > 0) this.perSession.set(sessionId, n)
      else this.perSession.delete(sessionId)
      if (this.held.has(sessionId)) this.held.set(sessionId, Date.now())
    }
  }

  /** Stops the brain of one thread (a workflow run done with it) and resolves once it has stopped; the next wake of the thread starts afresh. */
  async stopThread(thread: ThreadRef): Promise<void> {
    const b = this.brains.get(keyOf(thread))
    if (!b) return
    b.control.stop('shutdown')
    await b.done.catch(() => undefined)
  }

  /** Sessions with a brain running now. */
  running(): string[] {
    return [...this.perSession.keys()]
  }

  /** Threads with a brain running now. */
  runningThreads(): ThreadRef[] {
    return [...this.brains.values()].map((b) => b.thread)
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
    if (this.renewTimer) clearInterval(this.renewTimer)
    for (const b of this.brains.values()) b.control.stop()
    await Promise.allSettled([...this.brains.values()].map((b) => b.done))
    try {
      this.p.leases.releaseAll([...this.held.keys()])
    } catch {
      // the database may be closing; the leases lapse on their own
    }
    this.held.clear()
    for (const id of [...this.hearing.keys()]) this.deafen(id)
    this.pinned.clear()
    this.leaseListeners.clear()
  }
}
