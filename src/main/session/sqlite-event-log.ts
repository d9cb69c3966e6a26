import { closeSync, fdatasyncSync, openSync } from 'node:fs'
import type { Db } from './database'
import type { Disposer, RawEventInput as EventInput, EventListener, EventLog, EventReadParams, StoredEvent } from './event-log'
import { LogAppender, type AppendOptions, type RawEventsAtCommit, type EventBatchProjector, type EventProjector, type LogAppenderOptions } from './log/append'
import { LogReader, MAX_READ_LIMIT, type AnswerQuery, type ScannedEvent, type SqliteEventReadParams } from './log/read'
import { LogTail } from './log/tail'
import { RecentEvents } from './log/recent'
import { walPathOf } from './log/wal-sync'

export type { AppendOptions, EventBatchProjector, EventProjector } from './log/append'
export { DENSE_EVENT_TYPES, type AnswerQuery, type ScannedEvent, type SqliteEventReadParams } from './log/read'

/** How often a log with tails open or sessions heard looks for another process's commits (SqliteEventLog.startForeignPoll). */
export const FOREIGN_POLL_MS = 250

/**
 * The event log on SQLite, composed of its three sides: `log/append.ts` (group commit,
 * projectors, type marks written), `log/read.ts` (read planner, scans, answer lookups) and
 * `log/tail.ts` (tails and subscribers, told only after a commit). Appends are group-committed:
 * every append queued during one turn of the event loop goes into one transaction, so concurrent
 * writers share one fsync, which runs off the event loop on a WAL file (log/wal-sync.ts). A
 * promise resolves only once its transaction committed and is on disk; subscribers hear of an
 * event, and reads show it, only after that, so nothing is acknowledged that a crash could lose.
 */
export class SqliteEventLog implements EventLog {
  private readonly reader: LogReader
  private readonly appender: LogAppender
  private readonly live: LogTail
  private readonly recent: RecentEvents
  /** While tails are open or sessions heard (hearForeign): looks every `foreignPollMs` for events another process appended. */
  private foreignPoll?: NodeJS.Timeout
  private readonly foreignPollMs: number
  private readonly walPath: string | undefined
  private walFd: number | undefined
  /** `PRAGMA data_version`: moves when another connection commits (the poll reads nothing while it stays). */
  private readonly dataVersion: { get(): unknown } | undefined
  private polledVersion: unknown

  constructor(
    db: Db,
    options: Pick<LogAppenderOptions, 'clock' | 'syncOffThread' | 'fsync' | 'checkpoint'> & { foreignPollMs?: number } = {},
  ) {
    // only a file can have another process writing it
    this.foreignPollMs = db.memory ? 0 : (options.foreignPollMs ?? FOREIGN_POLL_MS)
    this.walPath = db.memory ? undefined : walPathOf(db)
    // the newest rows committed on this connection answer the reads of working sessions (log/recent.ts)
    const recent = (this.recent = RecentEvents.of(db))
    this.reader = new LogReader(db, { visibleBefore: (sessionId) => this.appender.visibleBefore(sessionId), recent })
    this.live = new LogTail(
      (sessionId, after, limit) => this.reader.read(sessionId, { after, limit }),
      MAX_READ_LIMIT,
      (sessionId, after, limit) => this.reader.read(sessionId, { after, limit, includeUnsynced: true }),
    )
    this.dataVersion = db.memory ? undefined : db.prepare('PRAGMA data_version').pluck()
    this.appender = new LogAppender(db, { ...options, recent, onCommit: (stored) => this.live.notify(stored), onCommitted: (stored) => this.live.notifyCommitted(stored) })
  }

  /** After a session's rows were deleted: what the log remembers of it (recent rows, row id) goes too. */
  forgetSession(sessionId: string): void {
    this.recent.forget(sessionId)
  }

  /** Closes the log's handle on the WAL file (the database itself is the caller's). */
  dispose(): void {
    this.stopForeignPoll()
    this.appender.dispose()
  }

  /**
   * Another process appending to this file (`corral run` beside the desktop, a second engine)
   * tells this one nothing: while a tail is open or a session's commits are heard (hearForeign),
   * the log looks every `foreignPollMs` whether another connection committed (`data_version`),
   * and if so whether a watched session has events past what its listeners were told. Subscribers
   * to commits hear them at once; tails after an fdatasync of the WAL (the other process may not
   * have synced them yet; nothing reaches a tail before it is on disk). The poll stops when nothing
   * is watched.
   */
  private startForeignPoll(): void {
    if (this.foreignPoll || this.foreignPollMs <= 0) return
    this.polledVersion = undefined
    this.foreignPoll = setInterval(() => {
      if (!this.live.watching) return this.stopForeignPoll()
      try {
        const version = this.dataVersion?.get()
        if (version !== undefined && version === this.polledVersion) return
        this.live.catchUpForeign(
          (sessionId) => this.reader.lastSeq(sessionId),
          () => this.syncWal(),
          (sessionId) => this.reader.lastSeq(sessionId, { includeUnsynced: true }),
        )
        // a tail's reads stop before this log's own unsynced events, and another process's behind
        // them are not told yet: looked for again at the next poll, whatever data_version says
        this.polledVersion = this.appender.hasUnsynced ? undefined : version
      } catch (err) {
        console.error('[corral] reading events another process appended failed:', err)
      }
    }, this.foreignPollMs)
    this.foreignPoll.unref()
  }

  private stopForeignPoll(): void {
    if (this.foreignPoll) clearInterval(this.foreignPoll)
    this.foreignPoll = undefined
    if (this.walFd !== undefined) closeSync(this.walFd)
    this.walFd = undefined
  }

  /** fdatasyncs the WAL (on the event loop: a rare, small wait, only when another process wrote). */
  private syncWal(): void {
    if (!this.walPath) return
    try {
      this.walFd ??= openSync(this.walPath, 'r')
      fdatasyncSync(this.walFd)
    } catch {
      // no WAL file (checkpointed and removed): what was read is in the database file, which the checkpoint synced
    }
  }

  /** The clock that stamps processed_at on appends (tests replace it with a fixed time). */
  get clock(): () => Date {
    return this.appender.clock
  }

  set clock(clock: () => Date) {
    this.appender.clock = clock
  }

  /** Adds a projection run inside every append transaction. */
  addProjector(projector: EventProjector): void {
    this.appender.addProjector(projector)
  }

  /** Adds a projection run once per append (with all its events) inside the transaction. */
  addBatchProjector(projector: EventBatchProjector): void {
    this.appender.addBatchProjector(projector)
  }

  append(sessionId: string, events: readonly EventInput[] | RawEventsAtCommit, options: AppendOptions = {}): Promise<StoredEvent[]> {
    return this.appender.append(sessionId, events, options)
  }

  /** Runs `write` inside the next group commit (one shared fsync); resolves once committed. */
  commitWith(write: () => void): Promise<void> {
    return this.appender.commitWith(write)
  }

  /**
   * Appends synchronously in a transaction of its own (one fsync). For bulk imports and
   * benchmarks; live code should use `append`, which shares fsyncs between writers.
   */
  appendSync(sessionId: string, events: readonly EventInput[]): StoredEvent[] {
    return this.appender.appendSync(sessionId, events)
  }

  read(sessionId: string, params: SqliteEventReadParams = {}): StoredEvent[] {
    return this.reader.read(sessionId, params)
  }

  /**
   * Visits every event of a session with seq > `after` (of the given types), in seq order, as raw
   * rows: no JSON parsed unless the visitor asks. For folds over a whole log (threads, stats),
   * where `read`'s pages would parse and merge far more than needed.
   */
  scan(sessionId: string, params: { after?: number; types?: readonly string[] }, visit: (row: ScannedEvent) => void): void {
    this.reader.scan(sessionId, params, visit)
  }

  get(eventId: string): StoredEvent | undefined {
    return this.reader.get(eventId)
  }

  lastSeq(sessionId: string, options?: Pick<EventReadParams, 'includeUnsynced'>): number {
    return this.reader.lastSeq(sessionId, options)
  }

  /** Whether an answer (type, field = id) to a request follows it in the session; see LogReader.hasAnswer. */
  hasAnswer(q: AnswerQuery): boolean {
    return this.reader.hasAnswer(q)
  }

  tail(sessionId: string, fromSeq: number, listener: EventListener): Disposer {
    const stop = this.live.tail(sessionId, fromSeq, listener)
    this.startForeignPoll()
    return stop
  }

  /**
   * From now until the disposer runs, `subscribeCommitted` listeners hear what another process
   * appends to this session too (the scheduler asks it for the sessions whose lease it holds: a
   * `user.interrupt` or a message sent through another engine reaches the brains running here
   * within `foreignPollMs`).
   */
  hearForeign(sessionId: string): Disposer {
    const stop = this.live.hearForeign(sessionId, this.reader.lastSeq(sessionId, { includeUnsynced: true }))
    this.startForeignPoll()
    return stop
  }

  /** How many tails of a session are open (diagnostics and tests: a closed stream leaves none). */
  tailCount(sessionId: string): number {
    return this.live.tailCount(sessionId)
  }

  subscribeAll(listener: EventListener): Disposer {
    return this.live.subscribeAll(listener)
  }

  subscribeCommitted(listener: EventListener): Disposer {
    return this.live.subscribeCommitted(listener)
  }

  /** Resolves once everything committed so far is on disk; see EventLog.whenSynced. */
  whenSynced(): Promise<void> {
    return this.appender.whenSynced()
  }

  /** Waits until every append queued so far has committed (or failed). */
  drain(): Promise<void> {
    return this.appender.drain()
  }
}
