import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openDatabase, type Db } from '../../../src/main/session/database'
import { SqliteEventLog } from '../../../src/main/session/sqlite-event-log'
import { AgentStore } from '../../../src/main/session/agent-store'
import { EnvironmentStore } from '../../../src/main/session/environment-store'
import { SessionStore } from '../../../src/main/session/session-store'

// Two connections to one file stand for two processes (the engine and the CLI, or a harness
// child): each has its own SqliteEventLog, and both append to the same session.
let dir: string
let dbs: Db[] = []

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'corral-multi-'))
})
afterAll(() => {
  for (const db of dbs) db.close()
  rmSync(dir, { recursive: true, force: true })
})

describe('two writers on one database file', () => {
  it('keep one gapless sequence per session when both append to it', async () => {
    const path = join(dir, 'corral.db')
    dbs = [openDatabase({ path }), openDatabase({ path })]
    const logs = dbs.map((db) => new SqliteEventLog(db))
    const agents = new AgentStore(dbs[0])
    const environments = new EnvironmentStore(dbs[0])
    const sessions = new SessionStore(dbs[0], { log: logs[0], agents, environments })
    const agent = agents.create({ name: 'a', model: 'claude-sonnet-4-6' })
    const env = environments.create({ name: 'e' })
    const sid = (await sessions.create({ agent: agent.id, environment_id: env.id })).id
    const results = []
    for (let round = 0; round < 30; round++) {
      // Alternate, and also overlap: both logs have appends queued in the same turn.
      results.push(...(await Promise.all([logs[round % 2].append(sid, [{ type: 'x', round }]), logs[(round + 1) % 2].append(sid, [{ type: 'y', round }, { type: 'y', round }])])))
      logs[round % 2].appendSync(sid, [{ type: 'z', round }])
    }
    const seqs = logs[1].read(sid, { limit: 1000 }).map((s) => s.seq)
    expect(seqs).toEqual(Array.from({ length: 30 * 4 }, (_, i) => i + 1))
    expect(results.flat()).toHaveLength(30 * 3)
  })
})
