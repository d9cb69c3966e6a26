import type { Statement, Transaction } from 'better-sqlite3'
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

/**
 * Like EventProjector, but called once per append with all its events (after the per-event
 * projectors), so a projection can write its row once per append instead of once per event.
 */
export type EventBatchProjector = (sessionRid: number, stored: readonly StoredEvent[]) => void

export interface AppendOptions {
  /**
   * Runs inside the append's transaction, before the session is looked up and its events are
   * inserted, so a check
   * against the log (e.g. "this tool use is still unanswered") cannot race another append.
   * Throwing rejects this append only (nothing of it is written); other appends committed in
   * the same group are unaffected.
   */
  precheck?: () => void
}

/** A raw event row, as `scan` visits it; `data` is the event's JSON text. */
export interface ScannedEvent {
  seq: number
  threadId: string | null
  type: string
  processedAt: string
  data: string
}

/** Read params plus filters on `processed_at` (ISO 8601 strings, compared as instants). */
export interface SqliteEventReadParams extends EventReadParams {
  processedAt?: { gt?: string; gte?: string; lt?: string; lte?: string }
}

interface PendingAppend {
  sessionId: string
  events: readonly EventInput[]
  precheck?: () => void
  resolve: (stored: StoredEvent[]) => void
  reject: (err: unknown) => void
}

interface Tip {
  rid: number
  seq: number
}

type Outcome = { ok: true; stored: StoredEvent[] } | { ok: false; err: unknown }

interface SessionRow {
  rid: number
  deleting: number
}

const MAX_READ_LIMIT = 1000
/** Rows per multi-row INSERT in bulk appends. */
const INSERT_ROWS = 16

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
  private readonly batchProjectors: EventBatchProjector[] = []
  private readonly readCache = new Map<string, Statement>()
  private readonly insert: Statement
  private readonly insertMany: Statement
  private readonly maxSeq: Statement
  private readonly sessionByPublicId: Statement
  private readonly byId: Statement
  private readonly clock: () => Date
  private readonly groupTx: Transaction<(batch: readonly PendingAppend[], isolate: boolean, pending: Map<string, Tip>) => Outcome[]>
  private readonly savepointTx: (p: PendingAppend, pending: Map<string, Tip>) => StoredEvent[]

  constructor(
    private readonly db: Db,
    options: { clock?: () => Date } = {},
  ) {
    this.clock = options.clock ?? (() => new Date())
    this.insert = db.prepare(
      'INSERT INTO events (session_rid, seq, id, thread_id, type, processed_at, data) VALUES (?, ?, ?, ?, ?, ?, ?)',
    )
    this.insertMany = db.prepare(
      `INSERT INTO events (session_rid, seq, id, thread_id, type, processed_at, data) VALUES ${Array(INSERT_ROWS).fill('(?, ?, ?, ?, ?, ?, ?)').join(', ')}`,
    )
    this.maxSeq = db.prepare('SELECT COALESCE(MAX(seq), 0) AS s FROM events WHERE session_rid = ?').pluck()
    // Built once: better-sqlite3 runs a transaction function called inside another as a savepoint.
    this.groupTx = db.transaction((batch: readonly PendingAppend[], isolate: boolean, pending: Map<string, Tip>) => this.runGroup(batch, isolate, pending))
    this.savepointTx = db.transaction((p: PendingAppend, pending: Map<string, Tip>) => this.appendOne(p, pending))
    this.sessionByPublicId = db.prepare('SELECT rid, deleting FROM sessions WHERE id = ?')
    this.byId = db.prepare(
      'SELECT e.seq, s.id AS sessionId, e.data FROM events e JOIN sessions s ON s.rid = e.session_rid WHERE e.id = ?',
    )
  }

  /** Adds a projection run inside every append transaction. */
  addProjector(projector: EventProjector): void {
    this.projectors.push(projector)
  }

  /** Adds a projection run once per append (with all its events) inside the transaction. */
  addBatchProjector(projector: EventBatchProjector): void {
    this.batchProjectors.push(projector)
  }

  append(sessionId: string, events: readonly EventInput[], options: AppendOptions = {}): Promise<StoredEvent[]> {
    if (events.length === 0) return Promise.resolve([])
    try {
      checkTypes(events)
    } catch (err) {
      return Promise.reject(err)
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ sessionId, events, precheck: options.precheck, resolve, reject })
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
    if (events.length === 0) return []
    checkTypes(events)
    let out: StoredEvent[]
    try {
      out = this.db.transaction(() => this.insertAll(this.ridOf(sessionId), sessionId, events, new Map())).immediate()
    } catch (err) {
      throw asCorralError(err)
    }
    this.notify(out)
    return out
  }

  private flush(): void {
    this.flushScheduled = false
    const batch = this.queue
    this.queue = []
    if (batch.length === 0) return

    // One transaction (one fsync) for the whole group. Fast path: no savepoints. If any append
    // fails (unknown session, failed precheck, constraint), the group is rolled back and redone
    // with each append in a savepoint of its own, so the failure takes nothing else down.
    // BEGIN IMMEDIATE: the write lock is taken before MAX(seq) is read, so another process
    // writing the same file (the CLI, a second engine) cannot slip an event in between.
    let outcomes: Outcome[]
    try {
      try {
        outcomes = this.groupTx.immediate(batch, false, new Map())
      } catch {
        outcomes = this.groupTx.immediate(batch, true, new Map())
      }
    } catch (cause) {
      const err = asCorralError(cause)
      for (const p of batch) p.reject(err)
      return
    }
    for (let i = 0; i < batch.length; i++) {
      const o = outcomes[i]
      if (o.ok) {
        batch[i].resolve(o.stored)
        this.notify(o.stored)
      } else batch[i].reject(asCorralError(o.err))
    }
  }

  private runGroup(batch: readonly PendingAppend[], isolate: boolean, pending: Map<string, Tip>): Outcome[] {
    const outcomes: Outcome[] = []
    for (const p of batch) {
      if (!isolate) {
        outcomes.push({ ok: true, stored: this.appendOne(p, pending) })
        continue
      }
      try {
        outcomes.push({ ok: true, stored: this.savepointTx(p, pending) })
      } catch (err) {
        outcomes.push({ ok: false, err })
      }
    }
    return outcomes
  }

  private appendOne(p: PendingAppend, pending: Map<string, Tip>): StoredEvent[] {
    // The precheck runs first: it may even create the session row (SessionStore.create appends
    // a new session's initial events in the transaction that inserts it).
    p.precheck?.()
    const rid = pending.get(p.sessionId)?.rid ?? this.ridOf(p.sessionId)
    return this.insertAll(rid, p.sessionId, p.events, pending)
  }

  private ridOf(sessionId: string): number {
    const row = this.sessionByPublicId.get(sessionId) as SessionRow | undefined
    if (!row || row.deleting) throw notFound('session', sessionId)
    return row.rid
  }

  private insertAll(rid: number, sessionId: string, events: readonly EventInput[], pending: Map<string, Tip>): StoredEvent[] {
    // Within one group transaction an earlier append's last seq is known; otherwise read it
    // (never from a cache: another process may have appended since).
    const tip = pending.get(sessionId)
    let seq = (tip && tip.rid === rid ? tip.seq : (this.maxSeq.get(rid) as number)) + 1
    const processedAt = this.clock().toISOString()
    const now = Date.now()
    const out: StoredEvent[] = []
    const rows: unknown[] = []
    for (const input of events) {
      // The harness may pre-assign an id so stream previews (event_start/event_delta) can name
      // the event they become; client input never carries one (the boundary schemas refuse it).
      const preassigned = typeof input.id === 'string' && input.id.startsWith('sevt_')
      const id = preassigned ? (input.id as string) : newId('event', now, pooledRandom)
      // Object.assign + two stores, not `{ ...input, id, processed_at }`: same keys in the same
      // order, but the spread was the single most expensive step of a bulk append.
      const event = Object.assign({}, input) as unknown as LoggedEvent
      event.id = id
      event.processed_at = processedAt
      const threadId = typeof input.session_thread_id === 'string' ? input.session_thread_id : null
      rows.push(rid, seq, id, threadId, input.type, processedAt, JSON.stringify(event))
      if (rows.length === INSERT_ROWS * 7) {
        this.insertMany.run(rows)
        rows.length = 0
      }
      const stored: StoredEvent = { seq, sessionId, event }
      for (const project of this.projectors) project(rid, stored)
      out.push(stored)
      seq++
    }
    // The rest one row at a time (a multi-row statement saves per-statement overhead in bulk).
    for (let i = 0; i < rows.length; i += 7) this.insert.run(rows.slice(i, i + 7))
    for (const project of this.batchProjectors) project(rid, out)
    // Only now: if anything above threw, the savepoint rolls back and the seqs stay free.
    pending.set(sessionId, { rid, seq: seq - 1 })
    return out
  }

  private notify(stored: StoredEvent[]): void {
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

  read(sessionId: string, params: SqliteEventReadParams = {}): StoredEvent[] {
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
    const at = params.processedAt
    if (at) {
      // processed_at is stored as a UTC ISO string (same length), so text order is time order.
      for (const [k, op] of [['gt', '>'], ['gte', '>='], ['lt', '<'], ['lte', '<=']] as const) {
        const v = at[k]
        if (v === undefined) continue
        const t = Date.parse(v)
        if (Number.isNaN(t)) throw invalid(`created_at[${k}]: not an RFC 3339 date-time`)
        where.push(`processed_at ${op} ?`)
        args.push(new Date(t).toISOString())
      }
    }
    let rows: { seq: number; data: string }[]
    const types = params.types && params.types.length > 0 ? [...new Set(params.types)] : undefined
    if (!types) {
      rows = this.cached(`SELECT seq, data FROM events WHERE ${where.join(' AND ')} ORDER BY seq ${order} LIMIT ?`).all(...args, limit) as typeof rows
    } else {
      // One index walk per type (session_rid, type, seq), each stopping after `limit` rows, then
      // a merge by seq: a page costs the same whether a type is common or rare, and SQLite
      // never has to collect and sort every match of an IN list.
      const sql = `SELECT seq, data FROM events INDEXED BY events_type WHERE ${where.join(' AND ')} AND type = ? ORDER BY seq ${order} LIMIT ?`
      const stmt = this.cached(sql)
      rows = []
      for (const type of types) rows.push(...(stmt.all(...args, type, limit) as typeof rows))
      if (types.length > 1) {
        rows.sort(order === 'ASC' ? (a, b) => a.seq - b.seq : (a, b) => b.seq - a.seq)
        rows.length = Math.min(rows.length, limit)
      }
    }
    return rows.map((r) => ({ seq: r.seq, sessionId, event: JSON.parse(r.data) as LoggedEvent }))
  }

  private cached(sql: string): Statement {
    let stmt = this.readCache.get(sql)
    if (!stmt) {
      stmt = this.db.prepare(sql)
      if (this.readCache.size > 256) this.readCache.clear()
      this.readCache.set(sql, stmt)
    }
    return stmt
  }

  /**
   * Visits every event of a session with seq > `after` (of the given types), in seq order, as raw
   * rows: no JSON parsed unless the visitor asks. For folds over a whole log (threads, stats),
   * where `read`'s pages would parse and merge far more than needed.
   */
  scan(sessionId: string, params: { after?: number; types?: readonly string[] }, visit: (row: ScannedEvent) => void): void {
    const row = this.sessionByPublicId.get(sessionId) as SessionRow | undefined
    if (!row) throw notFound('session', sessionId)
    const types = params.types ?? []
    const sql = `SELECT seq, thread_id AS threadId, type, processed_at AS processedAt, data FROM events WHERE session_rid = ? AND seq > ?${
      types.length ? ` AND type IN (${types.map(() => '?').join(',')})` : ''
    } ORDER BY seq`
    for (const r of this.cached(sql).iterate(row.rid, params.after ?? 0, ...types)) visit(r as ScannedEvent)
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
    // `delivered` guards exactly-once even if a notification ever overlaps the history read.
    let delivered = fromSeq
    let disposed = false
    const deliver: EventListener = (s) => {
      if (disposed || s.seq <= delivered) return
      delivered = s.seq
      safeCall(listener, s)
    }
    for (;;) {
      const page = this.read(sessionId, { after: delivered, limit: MAX_READ_LIMIT })
      for (const s of page) deliver(s)
      if (page.length < MAX_READ_LIMIT || disposed) break
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

  subscribeAll(listener: EventListener): Disposer {
    this.allListeners.add(listener)
    return () => this.allListeners.delete(listener)
  }

  /** Waits until every append queued so far has committed (or failed). */
  async drain(): Promise<void> {
    while (this.queue.length > 0 || this.flushScheduled) await new Promise((r) => setImmediate(r))
  }
}

function checkTypes(events: readonly EventInput[]): void {
  events.forEach((e, i) => {
    if (!e || typeof e.type !== 'string' || e.type.length === 0) throw invalid(`events[${i}].type: every event needs a non-empty string type`)
  })
}

function asCorralError(err: unknown): unknown {
  if (err instanceof CorralError) return err
  return new CorralError('api_error', `appending to the session log failed: ${(err as Error).message}`, { cause: err })
}

/**
 * Random bytes for event ids from a refilled pool: one getRandomValues call per 4096 ids instead
 * of one per id (it was a quarter of the append path's CPU).
 */
let pool = new Uint8Array(0)
let poolOffset = 0
function pooledRandom(n: number): Uint8Array {
  if (poolOffset + n > pool.length) {
    pool = new Uint8Array(65536)
    globalThis.crypto.getRandomValues(pool)
    poolOffset = 0
  }
  const out = pool.subarray(poolOffset, poolOffset + n)
  poolOffset += n
  return out
}

function safeCall(listener: EventListener, stored: StoredEvent): void {
  try {
    listener(stored)
  } catch (err) {
    // A subscriber's bug must not break the log or other subscribers.
    console.error('[corral] event subscriber threw:', err)
  }
}
