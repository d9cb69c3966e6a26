import { afterAll, beforeAll } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openDatabase, type Db } from '../../../src/main/session/database'
import { SqliteEventLog } from '../../../src/main/session/sqlite-event-log'
import { AgentStore } from '../../../src/main/session/agent-store'
import { EnvironmentStore } from '../../../src/main/session/environment-store'
import { SessionStore } from '../../../src/main/session/session-store'

type LogOptions = ConstructorParameters<typeof SqliteEventLog>[1]

/**
 * Real SQLite files for the log's tests, in a folder of the test file's own (`prefix`), closed and
 * removed after its tests. `open` makes one: a database with one session, created through a log of
 * its own (no checkpoints of its own), then the log under test with `options`; `prepare` runs on
 * the connection first (a pragma).
 */
export function logFiles(prefix: string): { open: (options?: LogOptions, prepare?: (db: Db) => void) => Promise<{ db: Db; log: SqliteEventLog; sid: string }> } {
  let dir: string
  const dbs: Db[] = []
  const logs: SqliteEventLog[] = []
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), prefix))
  })
  afterAll(() => {
    for (const l of logs) l.dispose()
    for (const db of dbs) db.close()
    rmSync(dir, { recursive: true, force: true })
  })
  return {
    async open(options = {}, prepare) {
      const db = openDatabase({ path: join(dir, `corral-${dbs.length}.db`) })
      dbs.push(db)
      prepare?.(db)
      const setupLog = new SqliteEventLog(db, { checkpoint: false })
      logs.push(setupLog)
      const agents = new AgentStore(db)
      const environments = new EnvironmentStore(db)
      const sessions = new SessionStore(db, { log: setupLog, agents, environments })
      const agent = agents.create({ name: 'a', model: 'claude-sonnet-4-6' })
      const sid = (await sessions.create({ agent: agent.id, environment_id: environments.create({ name: 'e' }).id })).id
      const log = new SqliteEventLog(db, options)
      logs.push(log)
      return { db, log, sid }
    },
  }
}
