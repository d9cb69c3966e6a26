import type { Statement } from 'better-sqlite3'
import type { Db } from '../database'

/** A row this connection committed, as the events table holds it (what a read selects, and the columns it filters on). */
export interface RecentRow {
  seq: number
  id: string
  type: string
  processed_at: string
  data: string
  threadId: string | null
  primaryVisible: boolean
}

/** What a read asks of a session's rows, as LogReader's SQL terms say it (bounds exclusive). */
export interface RecentQuery {
  lo: number
  hi: number
  desc: boolean
  limit: number
  /** undefined: every thread; null: the primary's (thread_id IS NULL); a string: that thread's. */
  threadId?: string | null
  /** undefined: no stream filter; null: the primary's stream; a string: that thread's stream. */
  streamOf?: string | null
  /** Distinct types (a short list: a read names a few). */
  types?: readonly string[]
  /** processed_at comparisons, each [operator, ISO string] (text order is time order). */
  processedAt: readonly (readonly ['>' | '>=' | '<' | '<=', string])[]
}

interface Window {
  rid: number
  /** Every event of the session with seq > base is in `rows`, in seq order. */
  base: number
  rows: RecentRow[]
  bytes: number
}

export interface RecentEventsOptions {
  /** Rows kept per session (the newest). */
  perSession?: number
  /** Bytes of event data kept over all sessions; the least recently used sessions go first. */
  maxBytes?: number
}

/**
 * The newest events each session appended through this connection, kept in memory so that the
 * reads of a working session — a thread catching up on what it missed, the threads' fold, a tail
 * — are answered without SQLite. A window is trusted only while no other connection has committed
 * (`PRAGMA data_version` unchanged since it was filled: another process appending to the same file
 * empties every window), and it is filled only after a commit, with the rows exactly as inserted,
 * so a read answered here is row for row what the SQL read returns (tested against it). Rows are
 * JSON text, parsed per read like a row from disk: callers never share objects.
 *
 * It also knows each working session's row id (an id's row id never changes while the row lives)
 * and where its log ends, under the same trust. `data_version` is asked once per synchronous run
 * of the event loop (the first read of a task asks, the reads after it until the next microtask
 * checkpoint rely on that answer): a read answers as of that first look, as a read through SQLite
 * a moment earlier would have. A commit of this connection always asks afresh.
 */
export class RecentEvents {
  /**
   * The one window set of a connection: every log on it shares it (two logs on one connection see
   * each other's commits only through it — data_version counts other connections' commits).
   */
  static of(db: Db): RecentEvents {
    let r = byConnection.get(db)
    if (!r) byConnection.set(db, (r = new RecentEvents(db)))
    return r
  }

  private readonly windows = new Map<string, Window>()
  /** Row ids of sessions read or committed here (a window holds its own). */
  private readonly rids = new Map<string, number>()
  private readonly version: Statement
  private seen: unknown
  /** data_version was asked in this synchronous run (reset at the next microtask checkpoint). */
  private looked = false
  private readonly endOfRun = () => {
    this.looked = false
  }
  private bytes = 0
  private readonly perSession: number
  private readonly maxBytes: number

  private constructor(db: Db, options: RecentEventsOptions = {}) {
    this.version = db.prepare('PRAGMA data_version').pluck()
    this.seen = this.version.get()
    this.perSession = options.perSession ?? 2048
    this.maxBytes = options.maxBytes ?? 32 * 2 ** 20
  }

  /** After this connection committed `rows` (seq order, contiguous) for the session: they join its window. */
  committed(sessionId: string, rid: number, rows: readonly RecentRow[]): void {
    if (rows.length === 0) return
    this.validate(true)
    let w = this.windows.get(sessionId)
    const first = rows[0].seq
    if (w && (w.rid !== rid || (w.rows.length ? w.rows[w.rows.length - 1].seq : w.base) !== first - 1)) {
      this.drop(sessionId, w)
      w = undefined
    }
    // seqs are MAX(seq) + 1 under the write lock: nothing of the session lies after first - 1 but these
    if (!w) w = { rid, base: first - 1, rows: [], bytes: 0 }
    else this.windows.delete(sessionId) // re-inserted: most recently used last
    this.windows.set(sessionId, w)
    for (const r of rows) {
      w.rows.push(r)
      w.bytes += r.data.length
      this.bytes += r.data.length
    }
    // trimmed by a quarter at a time: a window at its size is not shifted on every commit
    if (w.rows.length > this.perSession * 1.25) {
      const cut = w.rows.length - this.perSession
      for (let i = 0; i < cut; i++) {
        w.bytes -= w.rows[i].data.length
        this.bytes -= w.rows[i].data.length
      }
      w.base = w.rows[cut - 1].seq
      w.rows.splice(0, cut)
    }
    while (this.bytes > this.maxBytes && this.windows.size > 1) {
      const [oldest, ow] = this.windows.entries().next().value as [string, Window]
      this.drop(oldest, ow)
    }
  }

  /** Forgets a session (its log was deleted). */
  forget(sessionId: string): void {
    this.rids.delete(sessionId)
    const w = this.windows.get(sessionId)
    if (w) this.drop(sessionId, w)
  }

  /** The session's row id as known here, or undefined (ask SQLite, then `knowRid`). */
  ridOf(sessionId: string): number | undefined {
    if (!this.validate()) return undefined
    return this.windows.get(sessionId)?.rid ?? this.rids.get(sessionId)
  }

  /**
   * Remembers a session's row id read from SQLite. Only outside a transaction: a row read inside
   * one may yet be rolled back (and its row id reused by another session).
   */
  knowRid(sessionId: string, rid: number, inTransaction: boolean): void {
    if (inTransaction) return
    if (this.rids.size >= MAX_RIDS) this.rids.clear()
    this.rids.set(sessionId, rid)
  }

  /**
   * The session's last seq when its window holds the end of its log (what MAX(seq) would say), or
   * undefined. A window always ends at the session's last commit on this connection, and no other
   * connection committed since it was filled.
   */
  lastSeq(sessionId: string, rid: number): number | undefined {
    const w = this.windows.get(sessionId)
    if (!w || w.rid !== rid || !this.validate()) return undefined
    return w.rows.length ? w.rows[w.rows.length - 1].seq : w.base
  }

  /**
   * The rows a read asks for, or undefined when the window cannot answer it whole (the read goes
   * to SQLite): no window, another connection committed, or the read reaches below the window.
   */
  read(sessionId: string, rid: number, q: RecentQuery): RecentRow[] | undefined {
    const w = this.windows.get(sessionId)
    if (!w || w.rid !== rid || !this.validate()) return undefined
    const out: RecentRow[] = []
    const rows = w.rows
    if (!q.desc) {
      if (q.lo < w.base) return undefined
      for (let i = firstAbove(rows, q.lo); i < rows.length && out.length < q.limit; i++) {
        const r = rows[i]
        if (r.seq >= q.hi) break
        if (matches(r, q)) out.push(r)
      }
      return out
    }
    for (let i = firstAbove(rows, q.hi - 1) - 1; i >= 0 && out.length < q.limit; i--) {
      const r = rows[i]
      if (r.seq <= q.lo) return out
      if (matches(r, q)) out.push(r)
    }
    // reached the window's bottom short of the limit: older rows may match
    return out.length < q.limit && q.lo < w.base ? undefined : out
  }

  /**
   * False (and every window and row id forgotten) when another connection committed since the
   * last look; true without asking when this synchronous run already looked (unless `fresh`).
   */
  private validate(fresh = false): boolean {
    if (this.looked && !fresh) return true
    if (!this.looked) {
      this.looked = true
      queueMicrotask(this.endOfRun)
    }
    const v = this.version.get()
    if (v === this.seen) return true
    this.seen = v
    this.windows.clear()
    this.rids.clear()
    this.bytes = 0
    return false
  }

  private drop(sessionId: string, w: Window): void {
    this.windows.delete(sessionId)
    this.bytes -= w.bytes
  }
}

const byConnection = new WeakMap<Db, RecentEvents>()
/** Row ids remembered outside windows; past this the memory starts over. */
const MAX_RIDS = 8192

/** The index of the first row with seq > seq (rows in seq order). */
function firstAbove(rows: readonly RecentRow[], seq: number): number {
  let a = 0
  let b = rows.length
  while (a < b) {
    const m = (a + b) >>> 1
    if (rows[m].seq <= seq) a = m + 1
    else b = m
  }
  return a
}

function matches(r: RecentRow, q: RecentQuery): boolean {
  if (q.threadId !== undefined && r.threadId !== q.threadId) return false
  if (q.streamOf === null && !(r.threadId === null || r.primaryVisible)) return false
  if (typeof q.streamOf === 'string' && (r.threadId !== q.streamOf || r.type === 'session.thread_created')) return false
  if (q.types && !q.types.includes(r.type)) return false
  for (const [op, v] of q.processedAt) {
    const t = r.processed_at
    if (op === '>' ? !(t > v) : op === '>=' ? !(t >= v) : op === '<' ? !(t < v) : !(t <= v)) return false
  }
  return true
}
