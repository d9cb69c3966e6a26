import type { Disposer, EventListener, StoredEvent } from '../event-log'

/** Reads one page of a session's events with seq > after, in seq order (the log's read side). */
export type ReadPage = (sessionId: string, after: number, limit: number) => StoredEvent[]

/**
 * The live side of the SQLite event log: tails (history, then live) and subscribers to every
 * session. It hears of events through `notify`, which the append side calls only after their
 * transaction committed, so nothing is delivered that a crash could lose.
 */
export class LogTail {
  private readonly sessionListeners = new Map<string, Set<EventListener>>()
  private readonly allListeners = new Set<EventListener>()
  private readonly committedListeners = new Set<EventListener>()
  /** Per session with tails open: the last seq its tails were told of (this log's commits, or another process's found by catchUpForeign). */
  private readonly told = new Map<string, number>()
  /**
   * Sessions whose subscribers to commits hear another process's events too (hearForeign: the
   * sessions whose brains this engine runs): the last seq those subscribers heard, and how many
   * asked.
   */
  private readonly heard = new Map<string, { seq: number; n: number }>()

  /**
   * `readPage`: what is on disk (tails); `readCommitted`: what is committed, this log's unsynced
   * events included (subscribers to commits hear another process's events at their commit, as
   * they hear this log's).
   */
  constructor(
    private readonly readPage: ReadPage,
    private readonly pageSize: number,
    private readonly readCommitted: ReadPage = readPage,
  ) {}

  /** Delivers one append's committed events to the session's tails and to every subscriber. */
  notify(stored: StoredEvent[]): void {
    if (stored.length === 0) return
    // One snapshot per append: a listener added while this batch is being delivered (e.g. a
    // tail opened from inside a listener) read these events as history already.
    const sessionId = stored[0].sessionId
    const listeners = [...(this.sessionListeners.get(sessionId) ?? [])]
    if (listeners.length) {
      // another process's events before these (committed before them, so on disk with them): told first, in order
      const told = this.told.get(sessionId) ?? 0
      if (stored[0].seq > told + 1) this.tellForeign(sessionId, this.readRange(sessionId, told, stored[0].seq))
      this.told.set(sessionId, Math.max(this.told.get(sessionId) ?? 0, stored[stored.length - 1].seq))
    }
    const all = [...this.allListeners]
    for (const s of stored) {
      for (const l of listeners) safeCall(l, s)
      for (const l of all) safeCall(l, s)
    }
  }

  /** Delivers one append's events to the subscribers of commits, as soon as they committed (see subscribeCommitted). */
  notifyCommitted(stored: StoredEvent[]): void {
    if (stored.length === 0) return
    const h = this.heard.size ? this.heard.get(stored[0].sessionId) : undefined
    if (h) {
      // another process's events before these (committed before them): heard first, in order
      if (stored[0].seq > h.seq + 1) this.tellCommittedForeign(stored[0].sessionId, this.readRange(stored[0].sessionId, h.seq, stored[0].seq, this.readCommitted))
      h.seq = Math.max(h.seq, stored[stored.length - 1].seq)
    }
    if (this.committedListeners.size === 0) return
    const all = [...this.committedListeners]
    for (const s of stored) for (const l of all) safeCall(l, s)
  }

  /**
   * From now until the disposer runs, subscribers to commits hear what another process appends
   * to `sessionId` past `from` (found by catchUpForeign, or before one of this log's own commits),
   * in seq order, once each. Nested calls for one session share one mark.
   */
  hearForeign(sessionId: string, from: number): Disposer {
    const h = this.heard.get(sessionId)
    if (h) h.n++
    else this.heard.set(sessionId, { seq: from, n: 1 })
    let done = false
    return () => {
      if (done) return
      done = true
      const cur = this.heard.get(sessionId)
      if (cur && --cur.n === 0) this.heard.delete(sessionId)
    }
  }

  private tellCommittedForeign(sessionId: string, events: readonly StoredEvent[]): void {
    const h = this.heard.get(sessionId)
    if (!h) return
    const all = [...this.committedListeners]
    for (const s of events) {
      if (s.seq <= h.seq) continue
      h.seq = s.seq
      for (const l of all) safeCall(l, s)
    }
  }

  tail(sessionId: string, fromSeq: number, listener: EventListener): Disposer {
    // History and the switch to live happen in one synchronous step: commits (and their
    // notifications) run in the append side's flush, a separate macrotask, so none can fall in
    // between. `delivered` guards exactly-once even if a notification ever overlaps the history read.
    let delivered = fromSeq
    let disposed = false
    const deliver: EventListener = (s) => {
      if (disposed || s.seq <= delivered) return
      delivered = s.seq
      safeCall(listener, s)
    }
    for (;;) {
      const page = this.readPage(sessionId, delivered, this.pageSize)
      for (const s of page) deliver(s)
      if (page.length < this.pageSize || disposed) break
    }
    let set = this.sessionListeners.get(sessionId)
    // the tails already open were told up to `told`; this one's history read may have gone past it
    // (another process appended since): they hear those events now, so every tail of a session
    // stands at one point
    const told = this.told.get(sessionId) ?? 0
    if (set && delivered > told) this.tellForeign(sessionId, this.readRange(sessionId, told, delivered + 1))
    if (!set) this.sessionListeners.set(sessionId, (set = new Set()))
    set.add(deliver)
    this.told.set(sessionId, Math.max(this.told.get(sessionId) ?? 0, delivered))
    return () => {
      disposed = true
      const s = this.sessionListeners.get(sessionId)
      if (!s) return
      s.delete(deliver)
      if (s.size !== 0) return
      this.sessionListeners.delete(sessionId)
      this.told.delete(sessionId)
    }
  }

  /** Whether another process's events are looked for: a tail is open, or a session's commits are heard (hearForeign). */
  get watching(): boolean {
    return this.sessionListeners.size > 0 || this.heard.size > 0
  }

  /**
   * Tells what another process appended (SqliteEventLog's poll, while `watching`): the subscribers
   * to commits of each session heard with hearForeign, at once (`lastCommitted`: its last committed
   * seq), then every open tail of the events past what its session's tails were told (`lastVisible`:
   * its last seq on disk). `durable` runs once before a tail is told (the WAL's fdatasync: the other
   * process's events may not be on disk yet when read). Tail reads stop where this log's own
   * unsynced events start; each tail drops what it already had.
   */
  catchUpForeign(lastVisible: (sessionId: string) => number, durable: () => void, lastCommitted: (sessionId: string) => number = lastVisible): void {
    for (const [sessionId, h] of [...this.heard]) {
      try {
        if (lastCommitted(sessionId) <= h.seq) continue
        this.tellCommittedForeign(sessionId, this.readRange(sessionId, h.seq, Number.POSITIVE_INFINITY, this.readCommitted))
      } catch {
        // a session deleted meanwhile (by another process): nothing more to hear
      }
    }
    const found: [string, StoredEvent[]][] = []
    for (const sessionId of this.sessionListeners.keys()) {
      const told = this.told.get(sessionId) ?? 0
      try {
        if (lastVisible(sessionId) <= told) continue
        const events = this.readRange(sessionId, told, Number.POSITIVE_INFINITY)
        if (events.length) found.push([sessionId, events])
      } catch {
        // a session deleted under its tail (another process deleted it): nothing more to tell them
      }
    }
    if (found.length === 0) return
    durable()
    for (const [sessionId, events] of found) this.tellForeign(sessionId, events)
  }

  /** A session's events with after < seq < before, in order. */
  private readRange(sessionId: string, after: number, before: number, read: ReadPage = this.readPage): StoredEvent[] {
    const out: StoredEvent[] = []
    for (;;) {
      const page = read(sessionId, after, this.pageSize)
      for (const s of page) {
        if (s.seq >= before) return out
        out.push(s)
      }
      if (page.length < this.pageSize) return out
      after = page[page.length - 1].seq
    }
  }

  /** Tells a session's tails of events another process appended (those past what they were told, in order). */
  private tellForeign(sessionId: string, events: readonly StoredEvent[]): void {
    const set = this.sessionListeners.get(sessionId)
    if (!set) return
    const listeners = [...set]
    for (const s of events) {
      if (s.seq <= (this.told.get(sessionId) ?? 0)) continue
      this.told.set(sessionId, s.seq)
      for (const l of listeners) safeCall(l, s)
    }
  }

  /** How many tails of a session are open (diagnostics and tests: a closed stream leaves none). */
  tailCount(sessionId: string): number {
    return this.sessionListeners.get(sessionId)?.size ?? 0
  }

  subscribeAll(listener: EventListener): Disposer {
    this.allListeners.add(listener)
    return () => this.allListeners.delete(listener)
  }

  subscribeCommitted(listener: EventListener): Disposer {
    this.committedListeners.add(listener)
    return () => this.committedListeners.delete(listener)
  }
}

function safeCall(listener: EventListener, stored: StoredEvent): void {
  try {
    listener(stored)
  } catch (err) {
    // A subscriber's bug must not break the log or other subscribers.
    console.error('[corral] event subscriber threw:', err)
  }
}
