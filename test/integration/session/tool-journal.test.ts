import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openDatabase, type Db } from '../../../src/main/session/database'
import { SqliteEventLog } from '../../../src/main/session/sqlite-event-log'
import { AgentStore } from '../../../src/main/session/agent-store'
import { EnvironmentStore } from '../../../src/main/session/environment-store'
import { SessionStore } from '../../../src/main/session/session-store'
import { SqliteToolJournal } from '../../../src/main/session/tool-journal'

// A second connection to the same file stands for another process (a restarted brain): what it
// sees is what was committed.
let dir: string
const dbs: Db[] = []

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'corral-journal-'))
})
afterAll(() => {
  for (const db of dbs) db.close()
  rmSync(dir, { recursive: true, force: true })
})

async function setup() {
  const path = join(dir, `corral-${dbs.length}.db`)
  const db = openDatabase({ path })
  const other = openDatabase({ path })
  dbs.push(db, other)
  const log = new SqliteEventLog(db)
  const agents = new AgentStore(db)
  const sessions = new SessionStore(db, { log, agents, environments: new EnvironmentStore(db) })
  const agent = agents.create({ name: 'a', model: 'claude-sonnet-4-6' })
  const env = new EnvironmentStore(db).create({ name: 'e' })
  const sid = (await sessions.create({ agent: agent.id, environment_id: env.id })).id
  return { log, journal: new SqliteToolJournal(db, log), otherJournal: new SqliteToolJournal(other), sid }
}

describe('the tool journal', () => {
  it('records a started call in the same commit as the events appended in the same tick, and another process sees it once markStarted resolves', async () => {
    const { log, journal, otherJournal, sid } = await setup()
    const otherLog = new SqliteEventLog(dbs.at(-1)!)
    const group = Promise.all([log.append(sid, [{ type: 'x' }]), journal.markStarted(sid, 'toolu_1'), log.append(sid, [{ type: 'y' }])])
    // queued, not yet committed: one commit (one fsync) will carry the record and both appends
    expect(otherJournal.wasStarted('toolu_1')).toBe(false)
    await group
    expect(otherJournal.wasStarted('toolu_1')).toBe(true)
    expect(otherLog.read(sid, { after: 0, limit: 100 }).map((r) => r.event.type).slice(-2)).toEqual(['x', 'y'])
  })

  it('a journal write that fails rejects only its own promise: the appends of the same group still commit', async () => {
    const { log, sid } = await setup()
    const results = await Promise.allSettled([
      log.append(sid, [{ type: 'x' }]),
      log.commitWith(() => {
        throw new Error('disk said no')
      }),
      log.append(sid, [{ type: 'y' }]),
    ])
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled'])
    expect(log.read(sid, { after: 0, limit: 100 }).map((r) => r.event.type).slice(-2)).toEqual(['x', 'y'])
  })
})
