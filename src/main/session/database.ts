import Database from 'better-sqlite3'
import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import { CorralError } from '../../shared/errors'
import { MIGRATIONS, type Migration, type MigrationStep } from './migrations'

export type Db = Database.Database

export interface DatabaseOpenParams {
  /** File path, or ':memory:' for unit tests. */
  path: string
  /** Migrations to apply; the shipped list by default. */
  migrations?: Migration[]
}

/**
 * Opens (creating if needed) the Corral database: WAL, `synchronous=FULL` so a committed
 * transaction survives a crash of the OS, foreign keys on, and every pending migration applied.
 * The caller owns the handle and must `close()` it.
 */
export function openDatabase(params: DatabaseOpenParams): Db {
  const db = connect(params.path)
  try {
    migrate(db, params.migrations ?? MIGRATIONS)
  } catch (err) {
    db.close()
    throw err
  }
  return db
}

function connect(path: string): Db {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true })
  let db: Db
  try {
    db = new Database(path)
  } catch (cause) {
    throw new CorralError('api_error', `cannot open the database at ${path}: ${(cause as Error).message}`, { cause })
  }
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = FULL')
  db.pragma('foreign_keys = ON')
  db.pragma('busy_timeout = 5000')
  db.pragma('cache_size = -65536') // 64 MiB page cache
  // SQLite's own checkpoint (inside the COMMIT that reaches it, on the committing thread) is a
  // backstop: the log checkpoints on a worker thread long before (log/wal-checkpoint.ts)
  db.pragma('wal_autocheckpoint = 16000')
  return db
}

/** A stepped migration's progress, as `upgradeDatabase` reports it. */
export interface UpgradeProgress extends MigrationStep {
  version: number
  name: string
  /** Since the upgrade began. */
  elapsedMs: number
}

function pending(db: Db, migrations: Migration[]): { current: number; todo: Migration[] } {
  db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)')
  const current = (db.prepare('SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations').get() as { v: number }).v
  return { current, todo: [...migrations].sort((a, b) => a.version - b.version).filter((m) => m.version > current) }
}

/** Whether another connection applied `m` since `pending` looked (checked inside the migration's write transaction). */
function alreadyApplied(db: Db, m: Migration): boolean {
  return (db.prepare('SELECT COUNT(*) FROM schema_migrations WHERE version >= ?').pluck().get(m.version) as number) > 0
}

function record(db: Db, m: Migration): void {
  db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, new Date().toISOString())
}

/** Applies every migration newer than the recorded version, each in its own transaction. */
export function migrate(db: Db, migrations: Migration[]): number {
  const { current, todo } = pending(db, migrations)
  let applied = current
  for (const m of todo) {
    db.transaction(() => {
      if (alreadyApplied(db, m)) return
      if (m.sql) db.exec(m.sql)
      if (m.steps) for (const _ of m.steps(db)) void _
      record(db, m)
    }).immediate()
    applied = m.version
  }
  return applied
}

/**
 * Brings the database at `path` up to date before the engine opens it, with the event loop free
 * between a stepped migration's steps (so a window or a terminal can show `onProgress`). Each
 * migration is still one transaction: a process stopped half-way leaves the database as it was,
 * and the next start begins that migration again. Returns the versions before and after.
 */
export async function upgradeDatabase(
  path: string,
  options: { migrations?: Migration[]; onProgress?: (progress: UpgradeProgress) => void } = {},
): Promise<{ from: number; to: number }> {
  const db = connect(path)
  const started = performance.now()
  try {
    const { current, todo } = pending(db, options.migrations ?? MIGRATIONS)
    let applied = current
    for (const m of todo) {
      db.exec('BEGIN IMMEDIATE')
      try {
        // another process (the desktop and a `corral serve` on one data directory) may have done it
        if (alreadyApplied(db, m)) {
          db.exec('COMMIT')
          applied = m.version
          continue
        }
        if (m.sql) db.exec(m.sql)
        if (m.steps) {
          for (const step of m.steps(db)) {
            options.onProgress?.({ version: m.version, name: m.name, ...step, elapsedMs: performance.now() - started })
            await new Promise((resolve) => setImmediate(resolve))
          }
        }
        record(db, m)
        db.exec('COMMIT')
      } catch (err) {
        if (db.inTransaction) db.exec('ROLLBACK')
        throw err
      }
      applied = m.version
    }
    return { from: current, to: applied }
  } finally {
    db.close()
  }
}

/** One line for a person watching an upgrade: what is being done and how far it is. */
export function describeUpgradeProgress(p: UpgradeProgress): string {
  const n = (x: number) => x.toLocaleString('en-US')
  const share = p.total > 0 ? ` (${Math.floor((100 * p.done) / p.total)}%)` : ''
  return `Upgrading Corral's data (migration ${p.version}: ${p.name}): ${p.stage}, ${n(p.done)} of ${n(p.total)} ${p.unit}${share}`
}

/**
 * Progress of an upgrade as lines for a person (a terminal, the desktop's upgrade window): one when
 * a stage begins, then one per `intervalMs` at most, and the stage's last. `write` gets each line.
 */
export function upgradeProgressLines(write: (line: string) => void, intervalMs = 1000): (p: UpgradeProgress) => void {
  let stage = ''
  let writtenAt = -Infinity
  return (p) => {
    const key = `${p.version}:${p.stage}`
    if (key === stage && p.done < p.total && p.elapsedMs - writtenAt < intervalMs) return
    stage = key
    writtenAt = p.elapsedMs
    write(describeUpgradeProgress(p))
  }
}
