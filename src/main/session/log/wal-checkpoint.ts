import { closeSync, openSync, readSync } from 'node:fs'
import { createRequire } from 'node:module'
import { endianness } from 'node:os'
import { join } from 'node:path'
import { Worker } from 'node:worker_threads'
import type { Db } from '../database'

/**
 * The WAL's checkpoints, off the event loop. SQLite checkpoints on its own inside the COMMIT that
 * takes the WAL past `wal_autocheckpoint` frames: it copies every page the WAL holds into the
 * database file and fsyncs it, on the committing thread. For the log that is the event loop of
 * the engine, once per 16 MB of WAL (4,000 frames, database.ts's setting before this): 20–27 ms
 * against a group commit's 3.4 ms p50 with 64 writers appending back to back.
 *
 * Here a worker thread does it first: after commits, the WAL's length is read from the wal-index
 * (the `-shm` file's header, `mxFrame`: four bytes, no lock, a hint only) every POLL_MS while
 * commits come; once MIN_FRAMES frames are not yet in the database file, the worker opens its own
 * connection and runs `PRAGMA wal_checkpoint(PASSIVE)` (it waits for no reader or writer: the
 * event loop's commits go on meanwhile), then closes it. The WAL starts over only at a commit
 * that begins after a checkpoint copied all of it, so when commits pause (a tick with none) and
 * the WAL is MIN_FRAMES long, the rest is copied too. When commits never pause, the WAL reaches
 * RESTART_FRAMES with the worker close behind: the log then holds its next group commit (the
 * appends wait; the event loop does not) while the worker copies the rest, and that commit starts
 * the WAL over. SQLite's own checkpoint stays as a backstop at four times RESTART_FRAMES
 * (database.ts), for a worker that falls far behind, and at IN_COMMIT_FRAMES again once it failed.
 *
 * The worker is started on the first checkpoint (a database whose WAL never grows that far, as in
 * most tests, never has one) and holds no connection between checkpoints, so the event loop's
 * connection closes last and SQLite's close-time checkpoint is unchanged. A checkpoint is not a
 * commit: `PRAGMA data_version` does not move, so the recent windows (recent.ts) stay trusted.
 * If the worker cannot start or fails, SQLite's own checkpoints go on as before.
 */
export interface WalCheckpointOptions {
  /** Frames not yet in the database file that start a checkpoint (default MIN_FRAMES). */
  minFrames?: number
  /** How often the WAL's length is read while commits come (default POLL_MS). */
  pollMs?: number
  /** Told of each checkpoint the worker ran (tests, diagnostics). */
  onCheckpoint?: (r: WalCheckpointResult) => void
  /** The WAL's length at which the log's commits wait for a last checkpoint, so that the WAL starts over (default RESTART_FRAMES). */
  restartFrames?: number
  /** For tests: how the worker is started (default: a worker_threads Worker running CHECKPOINT_WORKER). */
  startWorker?: (path: string) => Worker
}

/** How the checkpointer holds the log's next group commit (the appender's), and lets it go. */
export interface CommitGate {
  hold(): void
  release(): void
}

export interface WalCheckpointResult {
  /** The checkpoint could not copy every frame (a reader or writer held some). */
  busy: boolean
  /** Frames in the WAL when it ran. */
  walFrames: number
  /** Frames in the database file after it. */
  checkpointedFrames: number
  /** Its time on the worker. */
  ms: number
}

type FromWorker = ({ type: 'checkpointed' } & WalCheckpointResult) | { type: 'failed'; message: string }

/**
 * The worker's code: one connection per checkpoint, closed after it. Plain JavaScript run with
 * `eval` (better-sqlite3 resolved by the engine's thread), so it needs no bundle entry of its own
 * in the desktop's, the CLI's and the benches' builds.
 */
const CHECKPOINT_WORKER = `
const { parentPort, workerData } = require('node:worker_threads')
const Database = require(workerData.sqlite)
parentPort.on('message', () => {
  const started = performance.now()
  let db
  try {
    db = new Database(workerData.path, { fileMustExist: true })
    const r = db.pragma('wal_checkpoint(PASSIVE)')[0]
    parentPort.postMessage({ type: 'checkpointed', busy: r.busy !== 0, walFrames: r.log, checkpointedFrames: r.checkpointed, ms: performance.now() - started })
  } catch (err) {
    parentPort.postMessage({ type: 'failed', message: String((err && err.message) || err) })
  } finally {
    try { if (db) db.close() } catch {}
  }
})
`

function startCheckpointWorker(path: string): Worker {
  const here = typeof __dirname === 'string' ? __dirname : process.cwd()
  const sqlite = createRequire(join(here, 'wal-checkpoint.js')).resolve('better-sqlite3')
  return new Worker(CHECKPOINT_WORKER, { eval: true, workerData: { path, sqlite } })
}

/** Where the wal-index header keeps mxFrame (the WAL's last valid frame), in native byte order. */
const MX_FRAME_OFFSET = 16

export class WalCheckpointer {
  /** SQLite's own default autocheckpoint: 1,000 frames (4 MB of 4 KiB pages). */
  static readonly MIN_FRAMES = 1000
  static readonly RESTART_FRAMES = 4000
  /** SQLite's own checkpoint once the worker failed (database.ts sets a backstop four times RESTART_FRAMES). */
  static readonly IN_COMMIT_FRAMES = 4000
  static readonly POLL_MS = 100
  /** A held commit goes ahead after this long even if the worker has not answered. */
  static readonly HOLD_MAX_MS = 500

  private readonly minFrames: number
  private readonly restartFrames: number
  private readonly pollMs: number
  /** The log's commits are held for the checkpoint in flight; released at its answer or after HOLD_MAX_MS. */
  private holding: NodeJS.Timeout | undefined
  private shmFd: number | undefined
  private readonly header = Buffer.alloc(4)
  private readonly littleEndian = endianness() === 'LE'
  private timer: NodeJS.Timeout | undefined
  /** A commit came since the last tick (the ticks stop once none does). */
  private committed = false
  private inFlight = false
  /** The WAL's length at the last tick, and how much of it is in the database file (as of the last checkpoint). */
  private lastFrames = 0
  private backfilled = 0
  private worker: Worker | undefined
  /** The worker could not start or failed: SQLite's own checkpoints only. */
  private off = false
  private disposed = false
  readonly stats = { checkpoints: 0, workerMs: 0 }

  private readonly path: string

  private constructor(
    private readonly db: Db,
    private readonly options: WalCheckpointOptions,
    private readonly gate: CommitGate,
  ) {
    this.path = db.name
    this.minFrames = options.minFrames ?? WalCheckpointer.MIN_FRAMES
    this.restartFrames = Math.max(this.minFrames, options.restartFrames ?? WalCheckpointer.RESTART_FRAMES)
    this.pollMs = options.pollMs ?? WalCheckpointer.POLL_MS
  }

  /**
   * For a file database in WAL mode (undefined for `:memory:` or another journal mode). `gate`
   * holds the log's group commits while the WAL's last frames are copied (see the class comment).
   */
  static open(db: Db, gate: CommitGate, options: WalCheckpointOptions = {}): WalCheckpointer | undefined {
    if (db.memory || String(db.pragma('journal_mode', { simple: true })).toLowerCase() !== 'wal') return undefined
    return new WalCheckpointer(db, options, gate)
  }

  /** After a commit on the event loop's connection: the WAL's length is looked at within pollMs. */
  noteCommit(): void {
    this.committed = true
    if (this.timer || this.off || this.disposed) return
    this.timer = setTimeout(this.tick, this.pollMs)
    this.timer.unref()
  }

  /** Stops the ticks and the worker (a checkpoint running finishes on its own). Idempotent. */
  dispose(): void {
    this.disposed = true
    this.letGo()
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
    void this.worker?.terminate()
    this.worker = undefined
    if (this.shmFd !== undefined) {
      try {
        closeSync(this.shmFd)
      } catch {
        // already closed
      }
      this.shmFd = undefined
    }
  }

  private readonly tick = (): void => {
    this.timer = undefined
    if (this.disposed || this.off) return
    const frames = this.walFrames()
    let next = this.pollMs
    if (frames !== undefined) {
      // shorter than last time: the WAL started over (everything before is in the database file)
      if (frames < this.lastFrames) this.backfilled = 0
      this.lastFrames = frames
      const left = frames - this.backfilled
      // commits paused with a long WAL: copying the rest now lets the next commit start the WAL
      // over (it can only when a checkpoint finished with nothing after it)
      const quiet = !this.committed && frames >= this.minFrames && left > 0
      // long, commits never pausing, the worker not far behind: the rest with the commits held
      const restart = frames >= this.restartFrames && left < 2 * this.minFrames && !quiet
      if (!this.inFlight && (left >= this.minFrames || quiet || restart)) this.checkpoint(restart)
      // closer to RESTART_FRAMES, looked at more often: a held commit then waits for less
      if (frames >= this.restartFrames / 2) next = Math.max(5, Math.round(this.pollMs / 5))
    }
    const again = this.committed || this.inFlight
    this.committed = false
    if (again && !this.off) {
      this.timer = setTimeout(this.tick, next)
      this.timer.unref()
    }
  }

  /** mxFrame from the wal-index header, or undefined when the -shm file cannot be read. */
  private walFrames(): number | undefined {
    try {
      this.shmFd ??= openSync(`${this.path}-shm`, 'r')
      if (readSync(this.shmFd, this.header, 0, 4, MX_FRAME_OFFSET) !== 4) return undefined
      return this.littleEndian ? this.header.readUInt32LE(0) : this.header.readUInt32BE(0)
    } catch {
      return undefined
    }
  }

  private checkpoint(hold: boolean): void {
    let worker = this.worker
    if (!worker) {
      try {
        worker = this.worker = (this.options.startWorker ?? startCheckpointWorker)(this.path)
      } catch (err) {
        return this.fail(err)
      }
      worker.on('message', (m: FromWorker) => this.heard(m))
      worker.on('error', (err) => this.fail(err))
      worker.on('exit', () => {
        if (!this.disposed) this.fail(new Error('the checkpoint worker exited'))
      })
    }
    // alive for the process only while a checkpoint runs (a held commit waits on it; unref'd when
    // idle, after the listeners: adding one refs the port again, and a process that never disposed
    // its log, a script or the session bench, then never exited)
    worker.ref()
    this.inFlight = true
    if (hold) {
      this.gate.hold()
      this.holding = setTimeout(() => this.letGo(), WalCheckpointer.HOLD_MAX_MS)
      this.holding.unref()
    }
    worker.postMessage('checkpoint')
  }

  /** The log's held commit goes ahead (if held). */
  private letGo(): void {
    if (!this.holding) return
    clearTimeout(this.holding)
    this.holding = undefined
    this.gate.release()
  }

  private heard(m: FromWorker): void {
    this.inFlight = false
    this.worker?.unref()
    this.letGo()
    if (this.disposed) return
    if (m.type === 'failed') return this.fail(new Error(m.message))
    // shorter now than when it ran: the WAL has started over since (what it copied is of the old one)
    const now = this.walFrames()
    if (now !== undefined && now < m.walFrames) {
      this.backfilled = 0
      this.lastFrames = now
    } else this.backfilled = Math.max(this.backfilled, m.checkpointedFrames)
    this.stats.checkpoints++
    this.stats.workerMs += m.ms
    this.options.onCheckpoint?.({ busy: m.busy, walFrames: m.walFrames, checkpointedFrames: m.checkpointedFrames, ms: m.ms })
  }

  private fail(err: unknown): void {
    if (this.off || this.disposed) return
    this.off = true
    this.inFlight = false
    this.letGo()
    // SQLite's own checkpoints, as often as before the worker took them (database.ts's is a backstop)
    try {
      if (Number(this.db.pragma('wal_autocheckpoint', { simple: true })) > WalCheckpointer.IN_COMMIT_FRAMES) this.db.pragma(`wal_autocheckpoint = ${WalCheckpointer.IN_COMMIT_FRAMES}`)
    } catch {
      // the connection is closed
    }
    console.error(`[corral] the WAL's checkpoints stay on the event loop (the checkpoint worker: ${err instanceof Error ? err.message : String(err)})`)
    const w = this.worker
    this.worker = undefined
    void w?.terminate()
  }
}
