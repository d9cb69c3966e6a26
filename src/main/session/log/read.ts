import type { Statement } from 'better-sqlite3'
import { notFound, invalid } from '../../../shared/errors'
import type { Db } from '../database'
import type { EventReadParams, LoggedEvent, StoredEvent } from '../event-log'
import type { RecentEvents, RecentQuery } from './recent'

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

/** An event row as reads select it. */
export interface EventRow {
  seq: number
  id: string
  type: string
  processed_at: string
  data: string
}

interface SessionRow {
  rid: number
  deleting: number
}

/** What `hasAnswer` looks for: a later event of type `type` whose field `field` is `id`. */
export interface AnswerQuery {
  sessionId: string
  /** Only events with seq > after (the request's own seq). */
  after: number
  /** The answer's event type, e.g. user.tool_confirmation. */
  type: string
  /** The answer's field naming the request, e.g. tool_use_id (a plain identifier). */
  field: string
  /** The request's event id. */
  id: string
}

export const MAX_READ_LIMIT = 1000
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
export const TYPE_BLOCK = 64
/** A read of several types with a dense one first scans this many rows per row it wants. */
const UNION_SCAN_ROWS = 8
/**
 * Values of events.type_mark. NULL (rows from before schema version 4) is listed like LISTED.
 * FOLLOWED was also written, briefly, for the first event of a dense type in its block, which
 * reads handle the same way: a FOLLOWED event may be followed by unlisted ones.
 */
export const UNLISTED = 0
export const FOLLOWED = 1
export const LISTED = 2

export interface LogReaderOptions {
  /**
   * A session's first seq that is committed but not yet on disk (the append side's
   * `visibleBefore`): `read`, `scan`, `get` and `lastSeq` show only events before it. Undefined:
   * everything committed is on disk.
   */
  visibleBefore?: (sessionId: string) => number | undefined
  /** The newest rows this connection committed: reads they answer whole skip SQLite (./recent.ts). */
  recent?: RecentEvents
}

/**
 * The read side of the SQLite event log: the read planner over the type marks (see
 * DENSE_EVENT_TYPES), raw scans, single events by id, and answer lookups. Holds no state but
 * prepared statements: every read sees what is committed and on disk (`hasAnswer`, the append's
 * own check under the write lock, sees every commit).
 */
export class LogReader {
  private readonly readCache = new Map<string, Statement>()
  private readonly maxSeq: Statement
  private readonly sessionByPublicId: Statement
  private readonly byId: Statement
  private readonly visibleBefore: (sessionId: string) => number | undefined
  private readonly recent: RecentEvents | undefined

  constructor(
    private readonly db: Db,
    options: LogReaderOptions = {},
  ) {
    this.visibleBefore = options.visibleBefore ?? (() => undefined)
    this.recent = options.recent
    this.maxSeq = db.prepare('SELECT COALESCE(MAX(seq), 0) AS s FROM events WHERE session_rid = ?').pluck()
    this.sessionByPublicId = db.prepare('SELECT rid, deleting FROM sessions WHERE id = ?')
    this.byId = db.prepare(
      'SELECT e.seq, e.id, e.type, e.processed_at, e.data, s.id AS sessionId FROM events e JOIN sessions s ON s.rid = e.session_rid WHERE e.id = ?',
    )
  }

  /** The session's row id (from the window's memory when it knows it); not_found_error for an unknown session. */
  private ridOf(sessionId: string): number {
    const known = this.recent?.ridOf(sessionId)
    if (known !== undefined) return known
    const row = this.sessionByPublicId.get(sessionId) as SessionRow | undefined
    if (!row) throw notFound('session', sessionId)
    this.recent?.knowRid(sessionId, row.rid, this.db.inTransaction)
    return row.rid
  }

  read(sessionId: string, params: SqliteEventReadParams = {}): StoredEvent[] {
    const rid = this.ridOf(sessionId)
    const limit = Math.min(Math.max(params.limit ?? 100, 1), MAX_READ_LIMIT)
    const desc = params.order === 'desc'
    const terms: string[] = []
    const args: unknown[] = []
    if (params.threadId === null) terms.push(' AND thread_id IS NULL')
    else if (params.threadId !== undefined) {
      terms.push(' AND thread_id = ?')
      args.push(params.threadId)
    }
    // The SQL twin of isOnThreadStream: the append stored isPrimaryVisible in primary_visible.
    if (params.streamOf === null) terms.push(' AND (thread_id IS NULL OR primary_visible = 1)')
    else if (params.streamOf !== undefined) {
      terms.push(" AND thread_id = ? AND type <> 'session.thread_created'")
      args.push(params.streamOf)
    }
    const at = params.processedAt
    const compared: RecentQuery['processedAt'][number][] = []
    if (at) {
      // processed_at is stored as a UTC ISO string (same length), so text order is time order.
      for (const [k, op] of [['gt', '>'], ['gte', '>='], ['lt', '<'], ['lte', '<=']] as const) {
        const v = at[k]
        if (v === undefined) continue
        const t = Date.parse(v)
        if (Number.isNaN(t)) throw invalid(`created_at[${k}]: not an RFC 3339 date-time`)
        const iso = new Date(t).toISOString()
        terms.push(` AND processed_at ${op} ?`)
        args.push(iso)
        compared.push([op, iso])
      }
    }
    const oneThread = typeof params.threadId === 'string' || typeof params.streamOf === 'string'
    const q: RangeQuery = { rid, filter: terms.join(''), args, desc, oneThread }
    // Exclusive bounds on seq (events not yet on disk are not shown).
    const lo = params.after ?? 0
    const unsynced = params.includeUnsynced ? undefined : this.visibleBefore(sessionId)
    const hi = Math.min(params.before ?? Number.MAX_SAFE_INTEGER, unsynced ?? Number.MAX_SAFE_INTEGER)
    let rows: EventRow[]
    const types = params.types && params.types.length > 0 ? distinct(params.types) : undefined
    const recent = this.recent?.read(sessionId, rid, {
      lo,
      hi,
      desc,
      limit,
      threadId: params.threadId,
      streamOf: params.streamOf,
      types,
      processedAt: compared,
    })
    if (recent) return recent.map((r) => ({ seq: r.seq, sessionId, event: toEvent(r) }))
    if (!types) rows = this.readRange(q, lo, hi, undefined, limit)
    else if (types.length === 1) rows = this.readType(q, lo, hi, types[0], limit)
    else if (!types.some((type) => DENSE_EVENT_TYPES.has(type))) rows = this.readTypes(q, lo, hi, types, limit)
    else {
      // With a dense type among them, the types are likely common together: scan the next
      // UNION_SCAN_ROWS rows per row wanted for all of them at once, then (if the page is not
      // full) read on beyond that window type by type.
      const window = limit * UNION_SCAN_ROWS
      const top = desc && params.before === undefined && unsynced === undefined ? (this.maxSeq.get(rid) as number) + 1 : hi
      const a = desc ? Math.max(lo, top - window - 1) : lo
      const b = desc ? hi : Math.min(hi, lo + window + 1)
      rows = this.readRange(q, a, b, types, limit)
      // Ascending, the window usually reaches past the session's last event: then there is
      // nothing beyond it to read type by type (one MAX(seq) lookup instead of a query per type).
      if (rows.length < limit && (desc ? a > lo : b < hi && b <= (this.maxSeq.get(rid) as number))) {
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
    // One thread's events through its index: without statistics SQLite prefers the primary key's
    // seq range and filters it by thread, which from `after: 0` (a thread's first read) walks the
    // whole session — every other thread's events — once per thread (O(events²) over a fan-out).
    const index = q.oneThread ? ' INDEXED BY events_thread' : ''
    const sql = `SELECT ${EVENT_COLUMNS} FROM events${index} WHERE session_rid = ? AND seq > ? AND seq < ?${typed}${q.filter} ORDER BY seq ${q.desc ? 'DESC' : 'ASC'} LIMIT ?`
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
    const rid = this.ridOf(sessionId)
    const types = params.types ?? []
    const sql = `SELECT seq, thread_id AS threadId, type, processed_at AS processedAt, data FROM events WHERE session_rid = ? AND seq > ?${
      types.length ? ` AND type IN (${types.map(() => '?').join(',')})` : ''
    } ORDER BY seq`
    const before = this.visibleBefore(sessionId) ?? Number.MAX_SAFE_INTEGER
    for (const r of this.cached(sql).iterate(rid, params.after ?? 0, ...types)) {
      if ((r as ScannedEvent).seq >= before) break
      visit(r as ScannedEvent)
    }
  }

  get(eventId: string): StoredEvent | undefined {
    const row = this.byId.get(eventId) as (EventRow & { sessionId: string }) | undefined
    if (!row || row.seq >= (this.visibleBefore(row.sessionId) ?? Number.MAX_SAFE_INTEGER)) return undefined
    return { seq: row.seq, sessionId: row.sessionId, event: toEvent(row) }
  }

  lastSeq(sessionId: string, options: Pick<EventReadParams, 'includeUnsynced'> = {}): number {
    const rid = this.ridOf(sessionId)
    const unsynced = options.includeUnsynced ? undefined : this.visibleBefore(sessionId)
    if (unsynced !== undefined) return unsynced - 1
    // (inside a transaction, SQLite also sees what it wrote and the window does not hold yet)
    const known = this.db.inTransaction ? undefined : this.recent?.lastSeq(sessionId, rid)
    return known ?? (this.maxSeq.get(rid) as number)
  }

  /**
   * Whether the session has an event of type `q.type` after seq `q.after` whose `q.field` is
   * `q.id` (e.g. a user.tool_confirmation answering a tool use). An answer type that is not dense
   * is found through the type index, which lists every event of it.
   */
  hasAnswer(q: AnswerQuery): boolean {
    if (!/^[a-z_]+$/.test(q.field)) throw invalid(`field: ${JSON.stringify(q.field)} is not a plain event field name`)
    const sql = DENSE_EVENT_TYPES.has(q.type)
      ? `SELECT 1 FROM events e JOIN sessions s ON s.rid = e.session_rid WHERE s.id = ? AND e.seq > ? AND e.type = ? AND json_extract(e.data, '$.${q.field}') = ? LIMIT 1`
      : `SELECT 1 FROM events e INDEXED BY events_type_marks JOIN sessions s ON s.rid = e.session_rid WHERE s.id = ? AND e.seq > ? AND e.type = ? AND e.type_mark IS NOT 0 AND json_extract(e.data, '$.${q.field}') = ? LIMIT 1`
    return this.cached(sql).get(q.sessionId, q.after, q.type, q.id) !== undefined
  }
}

interface RangeQuery {
  rid: number
  /** Terms on other columns (thread, processed_at), each starting with ' AND '. */
  filter: string
  args: unknown[]
  desc: boolean
  /** The filter names one thread (thread_id = ?): a scan walks that thread's index, never the session. */
  oneThread: boolean
}

function blockStart(seq: number): number {
  return seq - (((seq % TYPE_BLOCK) + TYPE_BLOCK) % TYPE_BLOCK)
}

/** The event as the API shows it: its own fields from `data`, id, type and processed_at from their columns. */
export function toEvent(r: EventRow): LoggedEvent {
  const event = Object.assign({ type: r.type }, JSON.parse(r.data)) as LoggedEvent
  event.id = r.id
  event.processed_at = r.processed_at
  return event
}

/**
 * The types a read names, each once: the list itself when it repeats none (every caller's case;
 * reads run per turn of every thread, and copying a list into two Sets each time was a visible
 * share of what a workflow run's turns allocate).
 */
function distinct(types: readonly string[]): readonly string[] {
  for (let i = 1; i < types.length; i++) if (types.lastIndexOf(types[i], i - 1) !== -1) return [...new Set(types)]
  return types
}
