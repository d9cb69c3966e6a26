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

  constructor(
    private readonly readPage: ReadPage,
    private readonly pageSize: number,
  ) {}

  /** Delivers one append's committed events to the session's tails and to every subscriber. */
  notify(stored: StoredEvent[]): void {
    if (stored.length === 0) return
    // One snapshot per append: a listener added while this batch is being delivered (e.g. a
    // tail opened from inside a listener) read these events as history already.
    const listeners = [...(this.sessionListeners.get(stored[0].sessionId) ?? [])]
    const all = [...this.allListeners]
    for (const s of stored) {
      for (const l of listeners) safeCall(l, s)
      for (const l of all) safeCall(l, s)
    }
  }

  /** Delivers one append's events to the subscribers of commits, as soon as they committed (see subscribeCommitted). */
  notifyCommitted(stored: StoredEvent[]): void {
    if (stored.length === 0 || this.committedListeners.size === 0) return
    const all = [...this.committedListeners]
    for (const s of stored) for (const l of all) safeCall(l, s)
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
    if (!set) this.sessionListeners.set(sessionId, (set = new Set()))
    set.add(deliver)
    return () => {
      disposed = true
      const s = this.sessionListeners.get(sessionId)
      if (!s) return
      s.delete(deliver)
      if (s.size === 0) this.sessionListeners.delete(sessionId)
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
