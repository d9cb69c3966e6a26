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

/**
 * A raw event row, as `scan` visits it. `data` is the JSON text of the event's own fields: without
 * `id`, `type` and `processed_at`, which are columns (rows stored before schema version 4 still
 * repeat them in `data`, with the same values).
 */
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
  /** How many events of each dense type the session's current block has, as far as this log knows. */
  marked: MarkedBlock | undefined
}

/**
 * How many events (1, or 2 for two or more) of each dense type one TYPE_BLOCK-seq block of a
 * session holds, as far as this log knows. Never mutated once shared.
 */
interface MarkedBlock {
  block: number
  counts: Map<string, number>
}

/** An event row as reads select it. */
interface EventRow {
  seq: number
  id: string
  type: string
  processed_at: string
  data: string
}

type Outcome = { ok: true; stored: StoredEvent[] } | { ok: false; err: unknown }

interface SessionRow {
  rid: number
  deleting: number
}

const MAX_READ_LIMIT = 1000
/** Rows per multi-row INSERT in bulk appends. */
const INSERT_ROWS = 32
/** Parameters per row of the INSERTs (the session and processed_at are bound once per statement). */
const ROW_PARAMS = 6
const EVENT_COLUMNS = 'seq, id, type, processed_at, data'

/**
 * Event types that come once or more per model request or tool call. In a working session each is
 * a sizeable share of the log, so a page of one is found by scanning the session in seq order, and
 * listing every one in the type index would cost each append an index leaf per session (with many
 * sessions appending at once, about half of the pages a commit writes). So of these types only the
 * first two events in each block of TYPE_BLOCK seqs are listed in `events_type_marks` (as far as
 * this log knows: another process lists its own), the second one as FOLLOWED; every other event
 * is always listed.
 * Invariant: every unlisted event has a FOLLOWED event of its type earlier in the same block. A read
 * of a dense type therefore takes the listed events and scans a block only from a FOLLOWED one on:
 * a dense type that is rare in some session reads like any listed type.
 * Adding a type here is safe at any time; removing one is not (its unlisted events would be missed
 * by reads that trust the index to list every event of a non-dense type).
 */
export const DENSE_EVENT_TYPES: ReadonlySet<string> = new Set([
  'agent.message',
  'agent.thinking',
  'agent.tool_use',
  'agent.tool_result',
  'agent.mcp_tool_use',
  'agent.mcp_tool_result',
  'span.model_request_start',
  'span.model_request_end',
])
const TYPE_BLOCK = 64
/** A read of several types with a dense one first scans this many rows per row it wants. */
const UNION_SCAN_ROWS = 8
/**
 * Values of events.type_mark. NULL (rows from before schema version 4) is listed like LISTED.
 * FOLLOWED was also written, briefly, for the first event of a dense type in its block, which
 * reads handle the same way: a FOLLOWED event may be followed by unlisted ones.
 */
const UNLISTED = 0
const FOLLOWED = 1
const LISTED = 2
/** Sessions whose current block's marks are remembered; past this the memory starts over (more marks, never fewer). */
const MAX_MARKED_SESSIONS = 4096

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
  /** Per session id: the marked dense types of its current block, as of the last commit of this log. */
  private readonly markedBlocks = new Map<string, MarkedBlock>()
  private readonly insert: Statement
  private readonly insertMany: Statement
  private readonly maxSeq: Statement
  private readonly sessionByPublicId: Statement
  private readonly sessionTip: Statement
  private readonly byId: Statement
  private readonly clock: () => Date
  private readonly groupTx: Transaction<(batch: readonly PendingAppend[], isolate: boolean, pending: Map<string, Tip>) => Outcome[]>
  private readonly savepointTx: (p: PendingAppend, pending: Map<string, Tip>) => StoredEvent[]

  constructor(
    private readonly db: Db,
    options: { clock?: () => Date } = {},
  ) {
    this.clock = options.clock ?? (() => new Date())
    // OR FAIL, not the default ABORT: a multi-row statement that may abort makes SQLite keep a
    // statement journal (every page the statement touches copied to a temp file first), which was
    // a third of a bulk append's CPU. Nothing is lost: a failed append rolls back its whole
    // transaction or savepoint, never just the statement.
    const insertSql = (n: number) =>
      `INSERT OR FAIL INTO events (session_rid, processed_at, seq, id, thread_id, type, data, type_mark) VALUES ${Array(n).fill('(@rid, @at, ?, ?, ?, ?, ?, ?)').join(', ')}`
    this.insert = db.prepare(insertSql(1))
    this.insertMany = db.prepare(insertSql(INSERT_ROWS))
    this.maxSeq = db.prepare('SELECT COALESCE(MAX(seq), 0) AS s FROM events WHERE session_rid = ?').pluck()
    // Built once: better-sqlite3 runs a transaction function called inside another as a savepoint.
    this.groupTx = db.transaction((batch: readonly PendingAppend[], isolate: boolean, pending: Map<string, Tip>) => this.runGroup(batch, isolate, pending))
    this.savepointTx = db.transaction((p: PendingAppend, pending: Map<string, Tip>) => this.appendOne(p, pending))
    this.sessionByPublicId = db.prepare('SELECT rid, deleting FROM sessions WHERE id = ?')
    this.sessionTip = db.prepare(
      'SELECT s.rid, s.deleting, (SELECT COALESCE(MAX(e.seq), 0) FROM events e WHERE e.session_rid = s.rid) AS seq FROM sessions s WHERE s.id = ?',
    )
    this.byId = db.prepare(
      'SELECT e.seq, e.id, e.type, e.processed_at, e.data, s.id AS sessionId FROM events e JOIN sessions s ON s.rid = e.session_rid WHERE e.id = ?',
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
    const pending = new Map<string, Tip>()
    try {
      out = this.db.transaction(() => this.insertAll(sessionId, this.tipOf(sessionId), events, pending)).immediate()
    } catch (err) {
      throw asCorralError(err)
    }
    this.committed(pending)
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
    let pending = new Map<string, Tip>()
    try {
      try {
        outcomes = this.groupTx.immediate(batch, false, pending)
      } catch {
        pending = new Map()
        outcomes = this.groupTx.immediate(batch, true, pending)
      }
    } catch (cause) {
      const err = asCorralError(cause)
      for (const p of batch) p.reject(err)
      return
    }
    this.committed(pending)
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
    // Within one group transaction an earlier append's tip is known; otherwise read it.
    return this.insertAll(p.sessionId, pending.get(p.sessionId) ?? this.tipOf(p.sessionId), p.events, pending)
  }

  /**
   * The session's row id and last seq, read under the write lock (never from a cache: another
   * process may have appended since), with this log's marks of its current block.
   * Throws not_found_error for an unknown session or one being deleted.
   */
  private tipOf(sessionId: string): Tip {
    const row = this.sessionTip.get(sessionId) as (SessionRow & { seq: number }) | undefined
    if (!row || row.deleting) throw notFound('session', sessionId)
    return { rid: row.rid, seq: row.seq, marked: this.markedBlocks.get(sessionId) }
  }

  private insertAll(sessionId: string, from: Tip, events: readonly EventInput[], pending: Map<string, Tip>): StoredEvent[] {
    const rid = from.rid
    let seq = from.seq + 1
    // Copied before the first change: if this append rolls back, the state it started from stands.
    let marked = from.marked
    let markedOwn = false
    const processedAt = this.clock().toISOString()
    const now = Date.now()
    const bound = { rid, at: processedAt }
    const out: StoredEvent[] = []
    const rows: unknown[] = []
    let lastId: string | undefined
    for (const input of events) {
      const type = input.type
      // The harness may pre-assign an id so stream previews (event_start/event_delta) can name
      // the event they become; client input never carries one (the boundary schemas refuse it).
      // The ids an append makes count up from a random one (as ULIDs do within a millisecond):
      // each lands just after the last in the id index instead of at a random place in it.
      const preassigned = typeof input.id === 'string' && input.id.startsWith('sevt_')
      const id = preassigned ? (input.id as string) : (lastId = lastId === undefined ? newId('event', now, pooledRandom) : successorId(lastId))
      // `data` holds the event's own fields; id, type and processed_at are columns. The event
      // handed back is built as a read rebuilds it, so both have the same keys in the same order.
      const own: Record<string, unknown> = {}
      for (const k in input) if (k !== 'type' && k !== 'id' && k !== 'processed_at') own[k] = input[k]
      const event = Object.assign({ type }, own) as unknown as LoggedEvent
      event.id = id
      event.processed_at = processedAt
      let mark = LISTED
      if (DENSE_EVENT_TYPES.has(type)) {
        const block = Math.floor(seq / TYPE_BLOCK)
        if (marked === undefined || marked.block !== block) {
          marked = { block, counts: new Map() }
          markedOwn = true
        }
        const count = marked.counts.get(type) ?? 0
        if (count === 1) mark = FOLLOWED
        else if (count >= 2) mark = UNLISTED
        if (count < 2) {
          if (!markedOwn) marked = { block, counts: new Map(marked.counts) }
          markedOwn = true
          marked.counts.set(type, count + 1)
        }
      }
      const threadId = typeof input.session_thread_id === 'string' ? input.session_thread_id : null
      rows.push(seq, id, threadId, type, JSON.stringify(own), mark)
      if (rows.length === INSERT_ROWS * ROW_PARAMS) {
        this.insertMany.run(rows, bound)
        rows.length = 0
      }
      const stored: StoredEvent = { seq, sessionId, event }
      for (const project of this.projectors) project(rid, stored)
      out.push(stored)
      seq++
    }
    // The rest one row at a time (a multi-row statement saves per-statement overhead in bulk).
    for (let i = 0; i < rows.length; i += ROW_PARAMS) this.insert.run(rows.slice(i, i + ROW_PARAMS), bound)
    for (const project of this.batchProjectors) project(rid, out)
    // Only now: if anything above threw, the savepoint rolls back and the seqs stay free.
    pending.set(sessionId, { rid, seq: seq - 1, marked })
    return out
  }

  /** After a commit: the marks it wrote become what later appends of this log build on. */
  private committed(pending: Map<string, Tip>): void {
    for (const [sessionId, tip] of pending) {
      if (!tip.marked) continue
      if (this.markedBlocks.size >= MAX_MARKED_SESSIONS && !this.markedBlocks.has(sessionId)) this.markedBlocks.clear()
      this.markedBlocks.set(sessionId, tip.marked)
    }
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
    const desc = params.order === 'desc'
    const terms: string[] = []
    const args: unknown[] = []
    if (params.threadId === null) terms.push(' AND thread_id IS NULL')
    else if (params.threadId !== undefined) {
      terms.push(' AND thread_id = ?')
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
        terms.push(` AND processed_at ${op} ?`)
        args.push(new Date(t).toISOString())
      }
    }
    const q: RangeQuery = { rid: row.rid, filter: terms.join(''), args, desc }
    // Exclusive bounds on seq.
    const lo = params.after ?? 0
    const hi = params.before ?? Number.MAX_SAFE_INTEGER
    let rows: EventRow[]
    const types = params.types && params.types.length > 0 ? [...new Set(params.types)] : undefined
    if (!types) rows = this.readRange(q, lo, hi, undefined, limit)
    else if (types.length === 1) rows = this.readType(q, lo, hi, types[0], limit)
    else if (!types.some((type) => DENSE_EVENT_TYPES.has(type))) rows = this.readTypes(q, lo, hi, types, limit)
    else {
      // With a dense type among them, the types are likely common together: scan the next
      // UNION_SCAN_ROWS rows per row wanted for all of them at once, then (if the page is not
      // full) read on beyond that window type by type.
      const window = limit * UNION_SCAN_ROWS
      const top = desc && params.before === undefined ? (this.maxSeq.get(row.rid) as number) + 1 : hi
      const a = desc ? Math.max(lo, top - window - 1) : lo
      const b = desc ? hi : Math.min(hi, lo + window + 1)
      rows = this.readRange(q, a, b, types, limit)
      if (rows.length < limit && (desc ? a > lo : b < hi)) {
        rows = rows.concat(desc ? this.readTypes(q, lo, a + 1, types, limit - rows.length) : this.readTypes(q, b - 1, hi, types, limit - rows.length))
      }
    }
    return rows.map((r) => ({ seq: r.seq, sessionId, event: toEvent(r) }))
  }

  private readType(q: RangeQuery, lo: number, hi: number, type: string, limit: number): EventRow[] {
    return DENSE_EVENT_TYPES.has(type) ? this.readDense(q, lo, hi, type, limit) : this.readListed(q, lo, hi, type, limit)
  }

  /**
   * Each type on its own, each stopping after `limit` rows, then a merge by seq: SQLite never has
   * to collect and sort every match of an IN list.
   */
  private readTypes(q: RangeQuery, lo: number, hi: number, types: readonly string[], limit: number): EventRow[] {
    const rows: EventRow[] = []
    for (const type of types) rows.push(...this.readType(q, lo, hi, type, limit))
    rows.sort(q.desc ? (a, b) => b.seq - a.seq : (a, b) => a.seq - b.seq)
    rows.length = Math.min(rows.length, limit)
    return rows
  }

  /** Events in (lo, hi) in seq order (of some types: a scan of the session that skips the others). */
  private readRange(q: RangeQuery, lo: number, hi: number, types: string | readonly string[] | undefined, limit: number): EventRow[] {
    const list = types === undefined ? [] : typeof types === 'string' ? [types] : types
    const typed = list.length === 0 ? '' : list.length === 1 ? ' AND type = ?' : ` AND type IN (${list.map(() => '?').join(', ')})`
    const sql = `SELECT ${EVENT_COLUMNS} FROM events WHERE session_rid = ? AND seq > ? AND seq < ?${typed}${q.filter} ORDER BY seq ${q.desc ? 'DESC' : 'ASC'} LIMIT ?`
    return this.cached(sql).all(q.rid, lo, hi, ...list, ...q.args, limit) as EventRow[]
  }

  /** Events of a type that is not dense: every one is listed in the type index. */
  private readListed(q: RangeQuery, lo: number, hi: number, type: string, limit: number): EventRow[] {
    const sql = `SELECT ${EVENT_COLUMNS} FROM events INDEXED BY events_type_marks WHERE session_rid = ? AND type = ? AND type_mark IS NOT 0 AND seq > ? AND seq < ?${q.filter} ORDER BY seq ${q.desc ? 'DESC' : 'ASC'} LIMIT ?`
    return this.cached(sql).all(q.rid, type, lo, hi, ...q.args, limit) as EventRow[]
  }

  /**
   * Events of a dense type (see DENSE_EVENT_TYPES), found through its listed events: an unlisted
   * one lies in the block of a FOLLOWED one, after it. Each round takes the next listed events
   * beyond `cur` (the point up to which every event of the type has been read) and reads the
   * region they cover: with a plain scan where their blocks are mostly contiguous (the type is
   * common here), else event by event, scanning on only after FOLLOWED ones (it is rare here).
   */
  private readDense(q: RangeQuery, lo: number, hi: number, type: string, limit: number): EventRow[] {
    const order = q.desc ? 'DESC' : 'ASC'
    const listedOf = this.cached(
      `SELECT seq FROM events INDEXED BY events_type_marks WHERE session_rid = ? AND type = ? AND type_mark IS NOT 0 AND seq >= ? AND seq < ? ORDER BY seq ${order} LIMIT ?`,
    )
    // Each listed event, plus the rest of its block after a FOLLOWED one (and after `edge`, the
    // last listed event of the round, whose block may hold a FOLLOWED one the round did not reach).
    const blockwise = this.cached(
      `SELECT e.seq, e.id, e.type, e.processed_at, e.data FROM (SELECT seq AS m, type_mark AS v FROM events INDEXED BY events_type_marks WHERE session_rid = ? AND type = ? AND type_mark IS NOT 0 AND seq >= ? AND seq <= ?) k ` +
        // CROSS JOIN: the listed events drive the loop (SQLite would otherwise scan the session).
        `CROSS JOIN events e WHERE e.session_rid = ? AND e.seq >= k.m AND e.seq <= (CASE WHEN k.v = ${FOLLOWED} OR k.m = ? THEN k.m - k.m % ${TYPE_BLOCK} + ${TYPE_BLOCK - 1} ELSE k.m END) ` +
        `AND e.type = ? AND e.seq > ? AND e.seq < ?${q.filter} ORDER BY e.seq ${order} LIMIT ?`,
    )
    const perRound = limit + 1
    const out: EventRow[] = []
    let cur = q.desc ? hi : lo
    for (;;) {
      // Ascending, a mark before `cur` in cur's block may cover events after it; descending, an
      // event's mark is never after the event.
      const marks = (q.desc ? listedOf.all(q.rid, type, blockStart(lo + 1), cur, perRound) : listedOf.all(q.rid, type, blockStart(cur + 1), hi, perRound)).map(
        (r) => (r as { seq: number }).seq,
      )
      if (marks.length === 0) break
      const first = marks[0]
      const last = marks[marks.length - 1]
      // The exclusive bounds of the region these marks cover completely.
      const a = q.desc ? Math.max(lo, last - 1) : Math.max(cur, blockStart(first) - 1)
      const b = q.desc ? Math.min(cur, blockStart(first) + TYPE_BLOCK) : Math.min(hi, blockStart(last) + TYPE_BLOCK)
      let blocks = 1
      for (let i = 1; i < marks.length; i++) if (blockStart(marks[i]) !== blockStart(marks[i - 1])) blocks++
      const span = Math.abs(blockStart(last) - blockStart(first)) / TYPE_BLOCK + 1
      const need = limit - out.length
      const rows =
        span <= 2 * blocks
          ? this.readRange(q, a, b, type, need)
          : (blockwise.all(q.rid, type, Math.min(first, last), Math.max(first, last), q.rid, last, type, a, b, ...q.args, need) as EventRow[])
      // Blockwise, the rest of a block after a FOLLOWED event holds listed events read on their own too.
      let prev = out.length > 0 ? out[out.length - 1].seq : NaN
      for (const r of rows) {
        if (r.seq === prev) continue
        out.push(r)
        prev = r.seq
      }
      if (out.length >= limit) break
      if (rows.length >= need) {
        cur = rows[rows.length - 1].seq
        continue
      }
      if (marks.length < perRound || (q.desc ? a <= lo : b >= hi)) break
      cur = q.desc ? a + 1 : b - 1
    }
    return out
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
    const row = this.byId.get(eventId) as (EventRow & { sessionId: string }) | undefined
    return row && { seq: row.seq, sessionId: row.sessionId, event: toEvent(row) }
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

interface RangeQuery {
  rid: number
  /** Terms on other columns (thread, processed_at), each starting with ' AND '. */
  filter: string
  args: unknown[]
  desc: boolean
}

function blockStart(seq: number): number {
  return seq - (((seq % TYPE_BLOCK) + TYPE_BLOCK) % TYPE_BLOCK)
}

/** The event as the API shows it: its own fields from `data`, id, type and processed_at from their columns. */
function toEvent(r: EventRow): LoggedEvent {
  const event = Object.assign({ type: r.type }, JSON.parse(r.data)) as LoggedEvent
  event.id = r.id
  event.processed_at = r.processed_at
  return event
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

const ID_ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
/** Length of the random part at the end of an id (see newId). */
const ID_RANDOM_CHARS = 16

/** The id after `id` in its random part (base 32, Crockford), or a new random one if that part is all Z. */
function successorId(id: string): string {
  for (let i = id.length - 1; i >= id.length - ID_RANDOM_CHARS; i--) {
    const digit = ID_ALPHABET.indexOf(id[i])
    if (digit < ID_ALPHABET.length - 1) return id.slice(0, i) + ID_ALPHABET[digit + 1] + '0'.repeat(id.length - 1 - i)
  }
  return newId('event', Date.now(), pooledRandom)
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
