import type { Statement } from 'better-sqlite3'
import { CorralError, notFound, invalid } from '../../shared/errors'
import { newId } from '../../shared/api/ids'
import type { Db } from './database'
import type {
  Disposer,
  EventInput,
  EventListener,
  EventLog,
  EventReadParams,
  LoggedEvent,
  StoredEvent,
} from './event-log'

/**
 * Runs inside the append transaction for every event, so a projection (session status,
 * usage, updated_at) commits atomically with the event it is derived from.
 */
export type EventProjector = (sessionRid: number, stored: StoredEvent) => void

interface PendingAppend {
  sessionId: string
  events: readonly EventInput[]
  resolve: (stored: StoredEvent[]) => void
  reject: (err: unknown) => void
}

interface SessionRow {
  rid: number
  deleting: number
}

const MAX_READ_LIMIT = 1000

/**
 * The event log on SQLite. Appends are group-committed: every append queued during one turn of
 * the event loop goes into one transaction, so concurrent writers share one fsync
 * (`synchronous=FULL`). A promise resolves only after its transaction committed; subscribers
 * hear of an event only after that, so nothing is acknowledged that a crash could lose.
 */
export class SqliteEventLog implements EventLog {
  private queue: PendingAppend[] = []
  private flushScheduled = false
  private readonly sessionListeners = new Map<string, Set<EventListener>>()
  private readonly allListeners = new Set<EventListener>()
  private readonly projectors: EventProjector[] = []
  private readonly readCache = new Map<string, Statement>()
  private readonly insert: Statement
  private readonly maxSeq: Statement
  private readonly sessionByPublicId: Statement
  private readonly byId: Statement
  private readonly clock: () => Date

  constructor(
    private readonly db: Db,
    options: { clock?: () => Date } = {},
  ) {
    this.clock = options.clock ?? (() => new Date())
    this.insert = db.prepare(
      'INSERT INTO events (session_rid, seq, id, thread_id, type, processed_at, data) VALUES (?, ?, ?, ?, ?, ?, ?)',
    )
    this.maxSeq = db.prepare('SELECT COALESCE(MAX(seq), 0) AS s FROM events WHERE session_rid = ?').pluck()
    this.sessionByPublicId = db.prepare('SELECT rid, deleting FROM sessions WHERE id = ?')
    this.byId = db.prepare(
      'SELECT e.seq, s.id AS sessionId, e.data FROM events e JOIN sessions s ON s.rid = e.session_rid WHERE e.id = ?',
    )
  }

  /** Adds a projection run inside every append transaction. */
  addProjector(projector: EventProjector): void {
    this.projectors.push(projector)
  }

  append(sessionId: string, events: readonly EventInput[]): Promise<StoredEvent[]> {
    if (events.length === 0) return Promise.resolve([])
    for (const e of events) {
      if (!e || typeof e.type !== 'string' || e.type.length === 0) {
        return Promise.reject(invalid('every event needs a non-empty string `type`'))
      }
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ sessionId, events, resolve, reject })
      if (!this.flushScheduled) {
        this.flushScheduled = true
        setImmediate(() => this.flush())
      }
    })
  }

  /**
   * Appends synchronously in a transaction of its own (one fsync). For bulk imports and
   * benchmarks; live code should use `append`, which shares fsyncs between writers.
   */
  appendSync(sessionId: string, events: readonly EventInput[]): StoredEvent[] {
    let out: StoredEvent[] = []
    this.db.transaction(() => {
      const rid = this.ridOf(sessionId)
      out = this.insertAll(rid, sessionId, events, new Map())
    })()
    this.notify(out)
    return out
  }

  private flush(): void {
    this.flushScheduled = false
    const batch = this.queue
    this.queue = []
    if (batch.length === 0) return

    const accepted: { p: PendingAppend; rid: number }[] = []
    for (const p of batch) {
      try {
        accepted.push({ p, rid: this.ridOf(p.sessionId) })
      } catch (err) {
        p.reject(err)
      }
    }
    if (accepted.length === 0) return

    const results: StoredEvent[][] = []
    try {
      this.db.transaction(() => {
        const nextSeq = new Map<number, number>()
        for (const { p, rid } of accepted) results.push(this.insertAll(rid, p.sessionId, p.events, nextSeq))
      })()
    } catch (cause) {
      const err =
        cause instanceof CorralError ? cause : new CorralError('api_error', `appending to the session log failed: ${(cause as Error).message}`, { cause })
      for (const { p } of accepted) p.reject(err)
      return
    }
    for (let i = 0; i < accepted.length; i++) {
      accepted[i].p.resolve(results[i])
      this.notify(results[i])
    }
  }

  private ridOf(sessionId: string): number {
    const row = this.sessionByPublicId.get(sessionId) as SessionRow | undefined
    if (!row || row.deleting) throw notFound('session', sessionId)
    return row.rid
  }

  private insertAll(rid: number, sessionId: string, events: readonly EventInput[], nextSeq: Map<number, number>): StoredEvent[] {
    let seq = nextSeq.get(rid) ?? (this.maxSeq.get(rid) as number) + 1
    const processedAt = this.clock().toISOString()
    const now = Date.now()
    const out: StoredEvent[] = []
    for (const input of events) {
      // The harness may pre-assign an id so stream previews (event_start/event_delta) can name
      // the event they become; client input never carries one (the boundary schemas refuse it).
      const id = typeof input.id === 'string' && input.id.startsWith('sevt_') ? input.id : newId('event', now)
      const event = { ...input, id, processed_at: processedAt } as LoggedEvent
      const threadId = typeof input.session_thread_id === 'string' ? input.session_thread_id : null
      this.insert.run(rid, seq, id, threadId, input.type, processedAt, JSON.stringify(event))
      const stored: StoredEvent = { seq, sessionId, event }
      for (const project of this.projectors) project(rid, stored)
      out.push(stored)
      seq++
    }
    nextSeq.set(rid, seq)
    return out
  }

  private notify(stored: StoredEvent[]): void {
    if (stored.length === 0) return
    const listeners = this.sessionListeners.get(stored[0].sessionId)
    for (const s of stored) {
      if (listeners) for (const l of [...listeners]) safeCall(l, s)
      for (const l of [...this.allListeners]) safeCall(l, s)
    }
  }

  read(sessionId: string, params: EventReadParams = {}): StoredEvent[] {
    const row = this.sessionByPublicId.get(sessionId) as SessionRow | undefined
    if (!row) throw notFound('session', sessionId)
    const limit = Math.min(Math.max(params.limit ?? 100, 1), MAX_READ_LIMIT)
    const order = params.order === 'desc' ? 'DESC' : 'ASC'
    const where = ['session_rid = ?']
    const args: unknown[] = [row.rid]
    if (params.after !== undefined) {
      where.push('seq > ?')
      args.push(params.after)
    }
    if (params.before !== undefined) {
      where.push('seq < ?')
      args.push(params.before)
    }
    if (params.threadId === null) where.push('thread_id IS NULL')
    else if (params.threadId !== undefined) {
      where.push('thread_id = ?')
      args.push(params.threadId)
    }
    if (params.types && params.types.length > 0) {
      where.push(`type IN (${params.types.map(() => '?').join(',')})`)
      args.push(...params.types)
    }
    const sql = `SELECT seq, data FROM events WHERE ${where.join(' AND ')} ORDER BY seq ${order} LIMIT ?`
    let stmt = this.readCache.get(sql)
    if (!stmt) {
      stmt = this.db.prepare(sql)
      if (this.readCache.size > 256) this.readCache.clear()
      this.readCache.set(sql, stmt)
    }
    args.push(limit)
    const rows = stmt.all(...args) as { seq: number; data: string }[]
    return rows.map((r) => ({ seq: r.seq, sessionId, event: JSON.parse(r.data) as LoggedEvent }))
  }

  get(eventId: string): StoredEvent | undefined {
    const row = this.byId.get(eventId) as { seq: number; sessionId: string; data: string } | undefined
    return row && { seq: row.seq, sessionId: row.sessionId, event: JSON.parse(row.data) as LoggedEvent }
  }

  lastSeq(sessionId: string): number {
    const row = this.sessionByPublicId.get(sessionId) as SessionRow | undefined
    if (!row) throw notFound('session', sessionId)
    return this.maxSeq.get(row.rid) as number
  }

  tail(sessionId: string, fromSeq: number, listener: EventListener): Disposer {
    // History and the switch to live happen in one synchronous step: commits (and their
    // notifications) run in `flush`, a separate macrotask, so none can fall in between.
    let after = fromSeq
    for (;;) {
      const page = this.read(sessionId, { after, limit: MAX_READ_LIMIT })
      for (const s of page) safeCall(listener, s)
      if (page.length < MAX_READ_LIMIT) break
      after = page[page.length - 1].seq
    }
    let set = this.sessionListeners.get(sessionId)
    if (!set) this.sessionListeners.set(sessionId, (set = new Set()))
    set.add(listener)
    return () => {
      const s = this.sessionListeners.get(sessionId)
      if (!s) return
      s.delete(listener)
      if (s.size === 0) this.sessionListeners.delete(sessionId)
    }
  }

  subscribeAll(listener: EventListener): Disposer {
    this.allListeners.add(listener)
    return () => this.allListeners.delete(listener)
  }

  /** Waits until every append queued so far has committed (or failed). */
  async drain(): Promise<void> {
    while (this.queue.length > 0 || this.flushScheduled) await new Promise((r) => setImmediate(r))
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
