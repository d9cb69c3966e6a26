import Database from 'better-sqlite3'
import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import { CorralError } from '../../shared/errors'
import { MIGRATIONS, type Migration } from './migrations'

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
  if (params.path !== ':memory:') mkdirSync(dirname(params.path), { recursive: true })
  let db: Db
  try {
    db = new Database(params.path)
  } catch (cause) {
    throw new CorralError('api_error', `cannot open the database at ${params.path}: ${(cause as Error).message}`, { cause })
  }
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = FULL')
  db.pragma('foreign_keys = ON')
  db.pragma('busy_timeout = 5000')
  db.pragma('cache_size = -65536') // 64 MiB page cache
  // SQLite's own checkpoint (inside the COMMIT that reaches it, on the committing thread) is a
  // backstop: the log checkpoints on a worker thread long before (log/wal-checkpoint.ts)
  db.pragma('wal_autocheckpoint = 16000')
  migrate(db, params.migrations ?? MIGRATIONS)
  return db
}

/** Applies every migration newer than the recorded version, each in its own transaction. */
export function migrate(db: Db, migrations: Migration[]): number {
  db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)')
  const current = (db.prepare('SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations').get() as { v: number }).v
  const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)')
  const sorted = [...migrations].sort((a, b) => a.version - b.version)
  let applied = current
  for (const m of sorted) {
    if (m.version <= current) continue
    db.transaction(() => {
      db.exec(m.sql)
      record.run(m.version, m.name, new Date().toISOString())
    })()
    applied = m.version
  }
  return applied
}
