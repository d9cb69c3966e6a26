import { closeSync, fdatasync, openSync } from 'node:fs'
import type { Statement } from 'better-sqlite3'
import type { Db } from '../database'

/**
 * The log's commit without an fsync on the event loop. A group transaction is committed with
 * `synchronous=NORMAL` (its WAL frames reach the OS, which a killed process does not lose), then
 * the WAL file is fsynced on libuv's thread pool; only when that fsync returns is the group
 * durable against an OS crash, as `synchronous=FULL` would have made it inside the commit. Up to
 * MAX_IN_FLIGHT fsyncs run at once; what was committed while they ran shares the next one. Every other write on the connection
 * stays `synchronous=FULL` (the pragma is switched around the log's group transaction only).
 *
 * Available only for a file database in WAL mode (`open` returns undefined otherwise, and the
 * log commits with FULL as before). The caller disposes it.
 */
/**
 * How the WAL's descriptor is synced: fdatasync on libuv's thread pool (what SQLite itself calls
 * for synchronous=FULL on Linux; fsync also writes the file's times, an extra journal commit on
 * ext4), unless a test holds it.
 */
export type FsyncFn = (fd: number, done: (err: NodeJS.ErrnoException | null) => void) => void

/** Where SQLite keeps a file database's write-ahead log. */
export function walPathOf(db: Db): string {
  return `${db.name}-wal`
}

export class WalSync {
  private fd: number | undefined
  private readonly normal: Statement
  private readonly full: Statement
  /** fsyncs running now (at most MAX_IN_FLIGHT). */
  private inFlight = 0
  private disposed = false

  private constructor(
    db: Db,
    private readonly walPath: string,
    private readonly fsync: FsyncFn,
  ) {
    this.normal = db.prepare('PRAGMA synchronous = NORMAL')
    this.full = db.prepare('PRAGMA synchronous = FULL')
  }

  /** For a file database in WAL mode; undefined for `:memory:` or another journal mode. */
  static open(db: Db, fsync: FsyncFn = fdatasync): WalSync | undefined {
    if (db.memory || String(db.pragma('journal_mode', { simple: true })).toLowerCase() !== 'wal') return undefined
    return new WalSync(db, walPathOf(db), fsync)
  }

  /**
   * Runs `commit` (a write transaction) with synchronous=NORMAL, restoring FULL after it. Returns
   * false without running it when the WAL file cannot be opened (the caller commits with FULL).
   */
  commitUnsynced<T>(commit: () => T): { ran: true; value: T } | { ran: false } {
    if (this.fd === undefined) {
      try {
        // read-only is enough for fsync; the WAL exists once the connection has read the database
        this.fd = openSync(this.walPath, 'r')
      } catch {
        return { ran: false }
      }
    }
    this.normal.run()
    try {
      return { ran: true, value: commit() }
    } finally {
      this.full.run()
    }
  }

  /**
   * How many fsyncs may run at once. Two: a group committed while one runs starts its own at once
   * instead of waiting for the event loop to hear that the first returned (under load that wait
   * was longer than the fsync); an fsync covers everything committed before it began, so either
   * returning first settles what it covers.
   */
  static readonly MAX_IN_FLIGHT = 2

  /** Whether no further fsync may start now (one is started when one returns). */
  get busy(): boolean {
    return this.inFlight >= WalSync.MAX_IN_FLIGHT
  }

  /**
   * fsyncs the WAL off the event loop; `done` is called once with null when everything committed
   * before this call is on disk, or with the error. At most MAX_IN_FLIGHT at once (check `busy`).
   */
  sync(done: (err: Error | null) => void): void {
    const fd = this.fd
    if (fd === undefined || this.disposed) return done(new Error('the WAL file is not open'))
    this.inFlight++
    this.fsync(fd, (err) => {
      this.inFlight--
      if (this.disposed && this.inFlight === 0) this.closeFd()
      done(err)
    })
  }

  /** Closes the WAL's descriptor (after the fsync in flight, if any). Idempotent. */
  dispose(): void {
    this.disposed = true
    if (this.inFlight === 0) this.closeFd()
  }

  private closeFd(): void {
    if (this.fd === undefined) return
    try {
      closeSync(this.fd)
    } catch {
      // already closed
    }
    this.fd = undefined
  }
}
