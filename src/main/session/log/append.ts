import type { Statement, Transaction } from 'better-sqlite3'
import { CorralError, notFound, invalid } from '../../../shared/errors'
import { newId, primaryThreadId } from '../../../shared/api/ids'
import { isPrimaryVisible } from '../../../shared/api/events'
import type { Db } from '../database'
import type { RawEventInput as EventInput, LoggedEvent, StoredEvent } from '../event-log'
import { DENSE_EVENT_TYPES, FOLLOWED, LISTED, TYPE_BLOCK, UNLISTED } from './read'

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

type Outcome = { ok: true; stored: StoredEvent[] } | { ok: false; err: unknown }

interface SessionRow {
  rid: number
  deleting: number
}

/** Rows per multi-row INSERT in bulk appends. */
const INSERT_ROWS = 32
/** Parameters per row of the INSERTs (the session and processed_at are bound once per statement). */
const ROW_PARAMS = 7
/** Sessions whose current block's marks are remembered; past this the memory starts over (more marks, never fewer). */
const MAX_MARKED_SESSIONS = 4096

export interface LogAppenderOptions {
  clock?: () => Date
  /** Told of each append's events once they have committed (in append order), e.g. to notify tails. */
  onCommit?: (stored: StoredEvent[]) => void
}

/**
 * The append side of the SQLite event log. Appends are group-committed: every append queued
 * during one turn of the event loop goes into one transaction, so concurrent writers share one
 * fsync (`synchronous=FULL`). A promise resolves only after its transaction committed, and
 * `onCommit` hears of events only after that, so nothing is acknowledged that a crash could lose.
 * Projectors run inside the transaction. Writes the type marks that reads rely on (see
 * DENSE_EVENT_TYPES in ./read).
 */
export class LogAppender {
  private queue: PendingAppend[] = []
  private flushScheduled = false
  private readonly projectors: EventProjector[] = []
  private readonly batchProjectors: EventBatchProjector[] = []
  /** Per session id: the marked dense types of its current block, as of the last commit of this log. */
  private readonly markedBlocks = new Map<string, MarkedBlock>()
  private readonly insert: Statement
  private readonly insertMany: Statement
  private readonly sessionTip: Statement
  /** Stamps each append's processed_at (replaceable: tests set a fixed time). */
  clock: () => Date
  private readonly onCommit: (stored: StoredEvent[]) => void
  private readonly groupTx: Transaction<(batch: readonly PendingAppend[], isolate: boolean, pending: Map<string, Tip>) => Outcome[]>
  private readonly savepointTx: (p: PendingAppend, pending: Map<string, Tip>) => StoredEvent[]

  constructor(
    private readonly db: Db,
    options: LogAppenderOptions = {},
  ) {
    this.clock = options.clock ?? (() => new Date())
    this.onCommit = options.onCommit ?? (() => {})
    // OR FAIL, not the default ABORT: a multi-row statement that may abort makes SQLite keep a
    // statement journal (every page the statement touches copied to a temp file first), which was
    // a third of a bulk append's CPU. Nothing is lost: a failed append rolls back its whole
    // transaction or savepoint, never just the statement.
    const insertSql = (n: number) =>
      `INSERT OR FAIL INTO events (session_rid, processed_at, seq, id, thread_id, type, data, type_mark, primary_visible) VALUES ${Array(n).fill('(@rid, @at, ?, ?, ?, ?, ?, ?, ?)').join(', ')}`
    this.insert = db.prepare(insertSql(1))
    this.insertMany = db.prepare(insertSql(INSERT_ROWS))
    // Built once: better-sqlite3 runs a transaction function called inside another as a savepoint.
    this.groupTx = db.transaction((batch: readonly PendingAppend[], isolate: boolean, pending: Map<string, Tip>) => this.runGroup(batch, isolate, pending))
    this.savepointTx = db.transaction((p: PendingAppend, pending: Map<string, Tip>) => this.appendOne(p, pending))
    this.sessionTip = db.prepare(
      'SELECT s.rid, s.deleting, (SELECT COALESCE(MAX(e.seq), 0) FROM events e WHERE e.session_rid = s.rid) AS seq FROM sessions s WHERE s.id = ?',
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
   * Runs `write` (synchronous statements on this database, no events) inside the next group
   * transaction, so it shares that group's one fsync; resolves once it committed. A write that
   * throws rejects its own promise and takes no append down (the group's savepoint path).
   */
  commitWith(write: () => void): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ sessionId: '', events: [], precheck: write, resolve: () => resolve(), reject })
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
    this.onCommit(out)
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
        if (o.stored.length > 0) this.onCommit(o.stored)
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
    if (p.events.length === 0) return [] // a commitWith write: no events
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
    // The primary thread is keyed null, also where an event names it by its id (the primary's
    // own session.thread_status_*, an interrupt of the primary alone): its reads are one term
    // (threadKeyOf, computed here once per append).
    const primaryId = primaryThreadId(sessionId)
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
      const named = input.session_thread_id
      const threadId = typeof named === 'string' && named !== '' && named !== primaryId ? named : null
      rows.push(seq, id, threadId, type, JSON.stringify(own), mark, threadId !== null && isPrimaryVisible(input) ? 1 : 0)
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
