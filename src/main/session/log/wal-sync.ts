import { closeSync, fdatasync, openSync } from 'node:fs'
import type { Statement } from 'better-sqlite3'
import type { Db } from '../database'

/**
 * The log's commit without an fsync on the event loop. A group transaction is committed with
 * `synchronous=NORMAL` (its WAL frames reach the OS, which a killed process does not lose), then
 * the WAL file is fsynced on libuv's thread pool; only when that fsync returns is the group
 * durable against an OS crash, as `synchronous=FULL` would have made it inside the commit. What
 * was committed while an fsync ran shares the next one. Every other write on the connection
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

export class WalSync {
  private fd: number | undefined
  private readonly normal: Statement
  private readonly full: Statement
  private inFlight = false
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
    return new WalSync(db, `${db.name}-wal`, fsync)
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

  /** Whether an fsync is running now (a new one is started when it returns). */
  get busy(): boolean {
    return this.inFlight
  }

  /**
   * fsyncs the WAL off the event loop; `done` is called once with null when everything committed
   * before this call is on disk, or with the error. One at a time (check `busy`).
   */
  sync(done: (err: Error | null) => void): void {
    const fd = this.fd
    if (fd === undefined || this.disposed) return done(new Error('the WAL file is not open'))
    this.inFlight = true
    this.fsync(fd, (err) => {
      this.inFlight = false
      if (this.disposed) this.closeFd()
      done(err)
    })
  }

  /** Closes the WAL's descriptor (after the fsync in flight, if any). Idempotent. */
  dispose(): void {
    this.disposed = true
    if (!this.inFlight) this.closeFd()
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
