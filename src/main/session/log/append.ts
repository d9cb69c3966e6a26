import type { Statement, Transaction } from 'better-sqlite3'
import { CorralError, notFound, invalid } from '../../../shared/errors'
import { newId, primaryThreadId } from '../../../shared/api/ids'
import { isPrimaryVisible } from '../../../shared/api/events'
import type { Db } from '../database'
import type { RawEventInput as EventInput, LoggedEvent, StoredEvent } from '../event-log'
import { DENSE_EVENT_TYPES, FOLLOWED, LISTED, TYPE_BLOCK, UNLISTED } from './read'
import { WalSync, type FsyncFn } from './wal-sync'
import { WalCheckpointer, type WalCheckpointOptions } from './wal-checkpoint'
import type { RecentEvents, RecentRow } from './recent'

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
  /**
   * Resolve once the group committed, without waiting for the WAL's fsync (EventAppendOptions):
   * the events are in the database (a killed process keeps them), readable with
   * `includeUnsynced`; subscribers still hear of them only once they are on disk, and a failed
   * fsync can no longer reject this append (the log commits with FULL from then on).
   */
  committed?: boolean
  /** Joins the next group rather than starting one (EventAppendOptions): commits at setImmediate at the latest. */
  lazy?: boolean
}

/** EventsAtCommit (../event-log) over the storage's raw events. */
export type RawEventsAtCommit = (group: { earlier: readonly StoredEvent[] }) => readonly EventInput[]

interface PendingAppend {
  sessionId: string
  /** The events, or how to compute them inside the transaction. */
  events: readonly EventInput[] | RawEventsAtCommit
  precheck?: () => void
  committed?: boolean
  resolve: (stored: StoredEvent[]) => void
  reject: (err: unknown) => void
}

interface Tip {
  rid: number
  seq: number
  /** How many events of each dense type the session's current block has, as far as this log knows. */
  marked: MarkedBlock | undefined
  /** The session's events appended earlier in this group transaction (what a RawEventsAtCommit is given). */
  inGroup?: readonly StoredEvent[]
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

/** A group transaction committed but not yet on disk: its appends resolve once the WAL's fsync returns. */
interface UnsyncedGroup {
  /** Counts up per group (an fsync covers every group numbered up to the last one when it began). */
  n: number
  batch: readonly PendingAppend[]
  outcomes: Outcome[]
  /** Per session with events in the group: its first seq (reads of this log stop before it until then). */
  firsts: Map<string, number>
  /** The group's failed appends were rejected at commit (they wrote nothing, so they need not wait). */
  failuresRejected: boolean
}

interface SessionRow {
  rid: number
  deleting: number
}

/** Rows per multi-row INSERT in bulk appends. */
const INSERT_ROWS = 32
/** Parameters per row of the INSERTs (the session and processed_at are bound once per statement). */
const ROW_PARAMS = 7
/** Group transactions one flush may commit back to back (the first and those its listeners' appends make). */
const CHAINED_GROUPS = 4
/** Sessions whose current block's marks are remembered; past this the memory starts over (more marks, never fewer). */
const MAX_MARKED_SESSIONS = 4096

export interface LogAppenderOptions {
  clock?: () => Date
  /** Told of each append's events once they have committed and are on disk (in append order), e.g. to notify tails. */
  onCommit?: (stored: StoredEvent[]) => void
  /**
   * Told of each append's events as soon as their transaction committed (in append order), before
   * the WAL's fsync returns: for reactions that stay inside the process and the log (waking a
   * brain, a workflow run's driver), never for what a client or the hands see.
   */
  onCommitted?: (stored: StoredEvent[]) => void
  /**
   * false: every group transaction commits with synchronous=FULL, its fsync on the event loop
   * (as before the WAL's fsync moved off it). Default true for a file database in WAL mode.
   */
  syncOffThread?: boolean
  /** For tests: how the WAL is fsynced (default node's fs.fsync, on libuv's thread pool). */
  fsync?: FsyncFn
  /** Told of each append's rows right after their commit (before the fsync: reads bound them by visibleBefore). */
  recent?: RecentEvents
  /**
   * The WAL's checkpoints on a worker thread (wal-checkpoint.ts), with these options; false:
   * SQLite's own only, inside the COMMIT that takes the WAL past wal_autocheckpoint. Default on
   * for a file database in WAL mode.
   */
  checkpoint?: WalCheckpointOptions | false
}

/**
 * The append side of the SQLite event log. Appends are group-committed: every append queued
 * during one task of the event loop (a callback and the microtasks it leads to) goes into one
 * transaction, committed as soon as that task is done (scheduleFlush), and the groups committed
 * while an fsync runs share the next one; what that commit's `onCommitted` listeners append in
 * answer commits right behind it, in the same turn (up to CHAINED_GROUPS groups). On a file
 * database in WAL mode that fsync runs off the event loop (wal-sync.ts): the group commits with
 * synchronous=NORMAL and its appends wait for the WAL's fsync on libuv's thread pool, which every
 * group committed meanwhile shares. A promise resolves only once its events are on disk,
 * `onCommit` hears of them only then, and this log's reads (`visibleBefore`) stop before
 * a session's events until then, so nothing is acknowledged or shown that an OS crash could lose.
 * Projectors run inside the transaction. Writes the type marks that reads rely on (see
 * DENSE_EVENT_TYPES in ./read). The WAL's checkpoints run on a worker thread (wal-checkpoint.ts).
 * Dispose with `dispose()` (closes the WAL's descriptor, stops the checkpoints).
 */
export class LogAppender {
  private queue: PendingAppend[] = []
  private flushScheduled = false
  /** A lazy append's setImmediate is on its way (scheduleLazyFlush). */
  private lazyScheduled = false
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
  private readonly onCommitted: (stored: StoredEvent[]) => void
  private readonly groupTx: Transaction<(batch: readonly PendingAppend[], isolate: boolean, pending: Map<string, Tip>) => Outcome[]>
  private readonly savepointTx: (p: PendingAppend, pending: Map<string, Tip>) => StoredEvent[]
  /** Commits without an fsync on the event loop (undefined: synchronous=FULL commits). */
  private wal: WalSync | undefined
  /** Checkpoints the WAL off the event loop (undefined: SQLite's own, inside a COMMIT). */
  private readonly checkpointer: WalCheckpointer | undefined
  /** Group commits wait (the checkpointer copies the WAL's last frames, so the next commit starts it over). */
  private held = false
  /** Groups committed, waiting for the WAL's fsync, oldest first. */
  private readonly unsynced: UnsyncedGroup[] = []
  private groupCount = 0
  /** The last group an fsync already started covers (syncNext starts one only for groups after it). */
  private syncStartedUpTo = 0
  /** Per session: the first seq not yet on disk (reads stop before it). */
  private unsyncedFrom = new Map<string, number>()
  /** whenSynced()'s waits: each for the groups up to its `n`. */
  private syncWaiters: { n: number; resolve: () => void; reject: (err: unknown) => void }[] = []
  private readonly recent: RecentEvents | undefined
  /** Per append's stored events (insertAll's result): its session's row id and rows as inserted, for `recent`. */
  private readonly rowsOf = new WeakMap<StoredEvent[], { rid: number; rows: RecentRow[] }>()

  constructor(
    private readonly db: Db,
    options: LogAppenderOptions = {},
  ) {
    this.clock = options.clock ?? (() => new Date())
    this.onCommit = options.onCommit ?? (() => {})
    this.onCommitted = options.onCommitted ?? (() => {})
    this.recent = options.recent
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
    this.wal = options.syncOffThread === false ? undefined : WalSync.open(db, options.fsync)
    this.checkpointer = options.checkpoint === false ? undefined : WalCheckpointer.open(db, { hold: () => (this.held = true), release: () => this.release() }, options.checkpoint)
  }

  /** Whether some committed group is not on disk yet (reads stop before it: see visibleBefore). */
  get hasUnsynced(): boolean {
    return this.unsyncedFrom.size > 0
  }

  /**
   * The first seq of the session that is committed but not yet on disk, or undefined when all of
   * it is: the log's reads show only what is before it.
   */
  visibleBefore(sessionId: string): number | undefined {
    return this.unsyncedFrom.size === 0 ? undefined : this.unsyncedFrom.get(sessionId)
  }

  /** Closes the WAL's descriptor; appends still waiting for their fsync settle when it returns. */
  dispose(): void {
    this.wal?.dispose()
    this.checkpointer?.dispose()
  }

  /** Adds a projection run inside every append transaction. */
  addProjector(projector: EventProjector): void {
    this.projectors.push(projector)
  }

  /** Adds a projection run once per append (with all its events) inside the transaction. */
  addBatchProjector(projector: EventBatchProjector): void {
    this.batchProjectors.push(projector)
  }

  append(sessionId: string, events: readonly EventInput[] | RawEventsAtCommit, options: AppendOptions = {}): Promise<StoredEvent[]> {
    if (typeof events !== 'function') {
      if (events.length === 0) return Promise.resolve([])
      try {
        checkTypes(events)
      } catch (err) {
        return Promise.reject(err)
      }
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ sessionId, events, precheck: options.precheck, committed: options.committed, resolve, reject })
      if (options.lazy) this.scheduleLazyFlush()
      else this.scheduleFlush()
    })
  }

  /**
   * The group commits once the task that queued its first append is done: a microtask puts the
   * flush on process.nextTick, which Node runs after the task's microtasks have drained (every
   * append its promise chains make joins the group) and before the event loop takes its next
   * callback. It used to wait for setImmediate, after every I/O callback of the loop's poll: when
   * the responses of many threads arrive together, the first one's events then reached the disk
   * only after the last one was read, and every thread's turn waited for the whole burst
   * (issue #11's threads bench; docs/multiagent.md). Groups past CHAINED_GROUPS wait for
   * setImmediate (flush), so a log kept busy by its own listeners still lets I/O in.
   */
  private scheduleFlush(): void {
    if (this.flushScheduled) return
    this.flushScheduled = true
    queueMicrotask(this.flushAfterTask)
  }

  private readonly flushAfterTask = (): void => process.nextTick(this.flushNow)
  private readonly flushNow = (): void => this.flush()

  /** The checkpointer let the group commits go: what waited commits now. */
  private release(): void {
    this.held = false
    if (this.flushScheduled && this.queue.length > 0) setImmediate(this.flushNow)
    else this.flushScheduled = false
  }

  /** A lazy append (AppendOptions.lazy) waits for the next group, committed at setImmediate at the latest. */
  private scheduleLazyFlush(): void {
    if (this.flushScheduled || this.lazyScheduled) return
    this.lazyScheduled = true
    setImmediate(this.lazyFlush)
  }

  private readonly lazyFlush = (): void => {
    this.lazyScheduled = false
    // a group flushed since took it along (or one is on its way)
    if (this.queue.length > 0 && !this.flushScheduled) this.flush()
  }

  /**
   * Runs `write` (synchronous statements on this database, no events) inside the next group
   * transaction, so it shares that group's one fsync; resolves once it committed. A write that
   * throws rejects its own promise and takes no append down (the group's savepoint path).
   */
  commitWith(write: () => void): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ sessionId: '', events: [], precheck: write, resolve: () => resolve(), reject })
      this.scheduleFlush()
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
    this.remember(out)
    // a FULL commit fsynced the WAL: every group committed before it is on disk too, and is told first
    if (this.unsynced.length > 0) {
      const done = this.unsynced.splice(0)
      this.recomputeVisible()
      for (const g of done) this.settle(g)
      this.releaseSyncWaiters(this.groupCount)
    }
    this.onCommitted(out)
    this.onCommit(out)
    return out
  }

  /**
   * Commits what is queued; then, up to CHAINED_GROUPS times, what the commit's listeners queued
   * in answer (a workflow run's driver recording a result and starting the next thread, a brain
   * woken by a message): reactions to a commit commit right behind it, in this turn of the event
   * loop, instead of one turn later behind whatever I/O arrived meanwhile.
   */
  private flush(): void {
    // appends made meanwhile are flushed by the loop below, not by another immediate
    this.flushScheduled = true
    // (release() flushes what waited)
    if (this.held) return
    try {
      for (let i = 0; i < CHAINED_GROUPS && this.queue.length > 0; i++) this.flushGroup()
    } finally {
      // what is still queued (past CHAINED_GROUPS) waits for the I/O that is ready
      this.flushScheduled = this.queue.length > 0
      if (this.flushScheduled) setImmediate(this.flushNow)
    }
  }

  /** One group transaction of everything queued (flush calls it only with a queue that is not empty). */
  private flushGroup(): void {
    const batch = this.queue
    this.queue = []

    // One transaction (one fsync) for the whole group. Fast path: no savepoints. If any append
    // fails (unknown session, failed precheck, constraint), the group is rolled back and redone
    // with each append in a savepoint of its own, so the failure takes nothing else down.
    // BEGIN IMMEDIATE: the write lock is taken before MAX(seq) is read, so another process
    // writing the same file (the CLI, a second engine) cannot slip an event in between.
    let pending = new Map<string, Tip>()
    const commit = (): Outcome[] => {
      try {
        return this.groupTx.immediate(batch, false, pending)
      } catch {
        pending = new Map()
        return this.groupTx.immediate(batch, true, pending)
      }
    }
    let outcomes: Outcome[]
    let onDisk = true
    try {
      const r = this.wal?.commitUnsynced(commit)
      if (r?.ran) {
        outcomes = r.value
        onDisk = false
      } else outcomes = commit()
    } catch (cause) {
      const err = asCorralError(cause)
      for (const p of batch) p.reject(err)
      return
    }
    this.committed(pending)
    for (const o of outcomes) if (o.ok) this.remember(o.stored)
    const group: UnsyncedGroup = { n: ++this.groupCount, batch, outcomes, firsts: new Map(), failuresRejected: !onDisk }
    if (onDisk) {
      this.tellCommitted(outcomes)
      return this.settle(group)
    }
    // an append that failed wrote nothing: it need not wait for the disk
    for (let i = 0; i < batch.length; i++) {
      const o = outcomes[i]
      if (!o.ok) batch[i].reject(asCorralError(o.err))
      else {
        if (o.stored.length > 0 && !group.firsts.has(o.stored[0].sessionId)) group.firsts.set(o.stored[0].sessionId, o.stored[0].seq)
        // (settle resolves it again once on disk: a no-op; onCommit waits for the disk as ever)
        if (batch[i].committed) batch[i].resolve(o.stored)
      }
    }
    if (!outcomes.some((o) => o.ok)) return
    this.unsynced.push(group)
    for (const [sessionId, seq] of group.firsts) if (!this.unsyncedFrom.has(sessionId)) this.unsyncedFrom.set(sessionId, seq)
    this.syncNext()
    // last: a listener may read (reads stop before the group unless they include what is unsynced) and append (the next group)
    this.tellCommitted(outcomes)
  }

  private tellCommitted(outcomes: readonly Outcome[]): void {
    for (const o of outcomes) if (o.ok && o.stored.length > 0) this.onCommitted(o.stored)
  }

  /**
   * Starts the WAL's fsync for every group committed so far and not covered by one already
   * running, unless WalSync.MAX_IN_FLIGHT run (one returning starts the next). An fsync that
   * returns settles every group it covers, whichever returns first.
   */
  private syncNext(): void {
    const wal = this.wal
    if (!wal || wal.busy || this.unsynced.length === 0) return
    const upTo = this.unsynced[this.unsynced.length - 1].n
    if (upTo <= this.syncStartedUpTo) return
    this.syncStartedUpTo = upTo
    wal.sync((err) => {
      const done: UnsyncedGroup[] = []
      while (this.unsynced.length > 0 && this.unsynced[0].n <= upTo) done.push(this.unsynced.shift()!)
      // reads show these groups' events before anyone is told of them (a listener reads the log)
      this.recomputeVisible()
      if (err) {
        // The events are committed, but whether they are on disk is unknown: say so to the
        // appends waiting, and commit with synchronous=FULL from now on.
        this.wal = undefined
        const failure = new CorralError('api_error', `the session log could not be flushed to disk (fsync of the WAL: ${err.message}); these events were committed but may not survive an OS crash`, { cause: err })
        for (const g of done) this.settle(g, failure)
        this.releaseSyncWaiters(upTo, failure)
      } else {
        for (const g of done) this.settle(g)
        this.releaseSyncWaiters(upTo)
      }
      this.syncNext()
    })
  }

  /** Settles a group that is on disk (or whose fsync failed, `failure`): its appends resolve and onCommit hears of them, in order. */
  private settle(group: UnsyncedGroup, failure?: CorralError): void {
    const { batch, outcomes } = group
    for (let i = 0; i < batch.length; i++) {
      const o = outcomes[i]
      if (!o.ok) {
        if (!group.failuresRejected) batch[i].reject(asCorralError(o.err))
      } else if (failure) batch[i].reject(failure)
      else {
        batch[i].resolve(o.stored)
        if (o.stored.length > 0) this.onCommit(o.stored)
      }
    }
  }

  /** After groups left the queue: where each session's reads stop now. */
  private recomputeVisible(): void {
    const from = new Map<string, number>()
    for (const g of this.unsynced) for (const [sessionId, seq] of g.firsts) if (!from.has(sessionId)) from.set(sessionId, seq)
    this.unsyncedFrom = from
  }

  /**
   * Resolves once everything committed so far is on disk (at once when it is); rejects, as a
   * durable append would have, when that fsync failed. For a writer that appended with
   * `committed` to hold a lock only until the commit, and then waits for the disk outside it.
   */
  whenSynced(): Promise<void> {
    const last = this.unsynced[this.unsynced.length - 1]
    if (!last) return Promise.resolve()
    return new Promise((resolve, reject) => this.syncWaiters.push({ n: last.n, resolve, reject }))
  }

  private releaseSyncWaiters(upTo: number, failure?: CorralError): void {
    if (this.syncWaiters.length === 0) return
    const keep: typeof this.syncWaiters = []
    for (const w of this.syncWaiters) {
      if (w.n > upTo) keep.push(w)
      else if (failure) w.reject(failure)
      else w.resolve()
    }
    this.syncWaiters = keep
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
    const known = pending.get(p.sessionId)
    let events = p.events
    if (typeof events === 'function') {
      // computed here, from the log as this transaction has it (the session checked first, as for any append)
      const tip = known ?? this.tipOf(p.sessionId)
      events = events({ earlier: tip.inGroup ?? [] })
      checkTypes(events)
      if (events.length === 0) return []
      return this.insertAll(p.sessionId, tip, events, pending)
    }
    if (events.length === 0) return [] // a commitWith write: no events
    return this.insertAll(p.sessionId, known ?? this.tipOf(p.sessionId), events, pending)
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
    const recentRows: RecentRow[] | undefined = this.recent ? [] : undefined
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
      const data = JSON.stringify(own)
      const primaryVisible = threadId !== null && isPrimaryVisible(input)
      rows.push(seq, id, threadId, type, data, mark, primaryVisible ? 1 : 0)
      recentRows?.push({ seq, id, type, processed_at: processedAt, data, threadId, primaryVisible })
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
    pending.set(sessionId, { rid, seq: seq - 1, marked, inGroup: from.inGroup ? from.inGroup.concat(out) : out })
    if (recentRows) this.rowsOf.set(out, { rid, rows: recentRows })
    return out
  }

  /** After a commit: an append's rows join the recent window of its session. */
  private remember(stored: StoredEvent[]): void {
    const r = stored.length > 0 ? this.rowsOf.get(stored) : undefined
    if (r) this.recent?.committed(stored[0].sessionId, r.rid, r.rows)
  }

  /** After a commit: the marks it wrote become what later appends of this log build on. */
  private committed(pending: Map<string, Tip>): void {
    this.checkpointer?.noteCommit()
    for (const [sessionId, tip] of pending) {
      if (!tip.marked) continue
      if (this.markedBlocks.size >= MAX_MARKED_SESSIONS && !this.markedBlocks.has(sessionId)) this.markedBlocks.clear()
      this.markedBlocks.set(sessionId, tip.marked)
    }
  }

  /** Waits until every append queued so far has committed and is on disk (or failed). */
  async drain(): Promise<void> {
    for (;;) {
      if (this.queue.length > 0 || this.flushScheduled) await new Promise((r) => setImmediate(r))
      // (an fsync that failed rejected its appends already: draining only waits for it to return)
      else if (this.unsynced.length > 0) await this.whenSynced().catch(() => {})
      else return
    }
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
