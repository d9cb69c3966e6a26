import { afterEach, describe, expect, it } from 'vitest'
import { migrate, openDatabase, type Db } from '../../../src/main/session/database'
import { MIGRATIONS } from '../../../src/main/session/migrations'
import { SqliteEventLog } from '../../../src/main/session/sqlite-event-log'
import { AgentStore } from '../../../src/main/session/agent-store'
import { EnvironmentStore } from '../../../src/main/session/environment-store'
import { SessionStore } from '../../../src/main/session/session-store'

let db: Db | undefined
afterEach(() => db?.close())

describe('migration 4 (type index lists marked events only)', () => {
  it('upgrades a version-3 database in place: its events read as before, stay listed by type, and the log goes on', async () => {
    db = openDatabase({ path: ':memory:', migrations: MIGRATIONS.filter((m) => m.version <= 3) })
    const agents = new AgentStore(db)
    const environments = new EnvironmentStore(db)
    const agent = agents.create({ name: 'old', model: 'claude-sonnet-4-6' })
    const env = environments.create({ name: 'old' })
    // A session and 100 events as version 3 stored them: the whole event as JSON in `data`.
    db.prepare(
      "INSERT INTO sessions (id, agent_id, agent_version, environment_id, status, created_at, updated_at, data) VALUES ('sesn_OLD', ?, 1, ?, 'idle', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', '{}')",
    ).run(agent.id, env.id)
    const rid = (db.prepare("SELECT rid FROM sessions WHERE id = 'sesn_OLD'").get() as { rid: number }).rid
    const types = ['agent.message', 'agent.tool_use', 'user.message', 'agent.message']
    const old = Array.from({ length: 100 }, (_, i) => ({
      type: types[i % 4],
      n: i,
      ...(i % 10 === 0 ? { session_thread_id: 'sthr_child' } : {}),
      id: `sevt_OLD${String(i).padStart(23, '0')}`,
      processed_at: '2026-01-01T00:00:01.000Z',
    }))
    const insert = db.prepare('INSERT INTO events (session_rid, seq, id, thread_id, type, processed_at, data) VALUES (?, ?, ?, ?, ?, ?, ?)')
    old.forEach((e, i) => insert.run(rid, i + 1, e.id, e.session_thread_id ?? null, e.type, e.processed_at, JSON.stringify(e)))

    expect(migrate(db, MIGRATIONS)).toBe(MIGRATIONS[MIGRATIONS.length - 1].version)
    const indexes = (db.prepare("SELECT name FROM pragma_index_list('events')").all() as { name: string }[]).map((r) => r.name)
    expect(indexes).toContain('events_type_marks')
    expect(indexes).not.toContain('events_type')
    // Every old event is listed in the new index (type_mark NULL counts as marked).
    expect((db.prepare('SELECT COUNT(*) AS n FROM events WHERE type_mark IS NULL').get() as { n: number }).n).toBe(100)
    expect((db.prepare('SELECT COUNT(*) AS n FROM events INDEXED BY events_type_marks WHERE session_rid = ? AND type > ? AND type_mark IS NOT 0').get(rid, '') as { n: number }).n).toBe(100)

    const log = new SqliteEventLog(db)
    new SessionStore(db, { log, agents, environments })
    const n = (rows: { event: unknown }[]) => rows.map((r) => (r.event as { n: number }).n)
    expect(log.read('sesn_OLD', { limit: 1000 }).map((s) => s.event)).toEqual(old)
    expect(log.get(old[7].id)).toEqual({ seq: 8, sessionId: 'sesn_OLD', event: old[7] })
    expect(n(log.read('sesn_OLD', { types: ['agent.message'], after: 90 }))).toEqual([91, 92, 95, 96, 99])
    expect(n(log.read('sesn_OLD', { types: ['user.message'], order: 'desc', limit: 3 }))).toEqual([98, 94, 90])
    expect(n(log.read('sesn_OLD', { types: ['agent.tool_use'], threadId: 'sthr_child' }))).toEqual([])
    expect(n(log.read('sesn_OLD', { types: ['agent.message'], threadId: 'sthr_child', limit: 3 }))).toEqual([0, 20, 40])

    // New events continue the sequence, in the new format, and read together with the old ones.
    const added = log.appendSync('sesn_OLD', [
      { type: 'agent.message', n: 100 },
      { type: 'agent.message', n: 101 },
      { type: 'user.message', n: 102 },
    ])
    expect(added.map((s) => s.seq)).toEqual([101, 102, 103])
    expect(n(log.read('sesn_OLD', { types: ['agent.message', 'user.message'], after: 94 }))).toEqual([94, 95, 96, 98, 99, 100, 101, 102])
    expect(n(log.read('sesn_OLD', { types: ['agent.message'], order: 'desc', limit: 4 }))).toEqual([101, 100, 99, 96])
    expect((db.prepare('SELECT type_mark FROM events WHERE seq > 100 ORDER BY seq').all() as { type_mark: number }[]).map((r) => r.type_mark)).toEqual([2, 1, 2])
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok')
  })
})

describe('migration 5 (model-failure projection)', () => {
  it('upgrades a version-4 database: its sessions read with no model error, and the next failure is folded in', async () => {
    db = openDatabase({ path: ':memory:', migrations: MIGRATIONS.filter((m) => m.version <= 4) })
    const agents = new AgentStore(db)
    const environments = new EnvironmentStore(db)
    const agent = agents.create({ name: 'old', model: 'claude-sonnet-4-6' })
    const env = environments.create({ name: 'old' })
    db.prepare(
      "INSERT INTO sessions (id, agent_id, agent_version, environment_id, status, created_at, updated_at, data) VALUES ('sesn_OLD', ?, 1, ?, 'idle', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', '{}')",
    ).run(agent.id, env.id)
    expect(migrate(db, MIGRATIONS)).toBe(MIGRATIONS[MIGRATIONS.length - 1].version)
    const log = new SqliteEventLog(db)
    const sessions = new SessionStore(db, { log, agents, environments })
    const corral = () => (sessions.retrieve('sesn_OLD') as unknown as { corral: unknown }).corral
    expect(corral()).toEqual({ model_error: null })
    log.appendSync('sesn_OLD', [
      { type: 'session.error', error: { type: 'model_overloaded_error', message: 'Overloaded', retry_status: { type: 'exhausted' } }, attempt: 1, max_attempts: 1 },
      { type: 'session.status_idle', stop_reason: { type: 'retries_exhausted' }, stop_details: null },
    ])
    expect(corral()).toEqual({ model_error: { state: 'failed', type: 'model_overloaded_error', message: 'Overloaded', attempt: 1, max_attempts: 1 } })
  })
})

describe('migration 6 (primary-visible mark)', () => {
  it("upgrades a version-5 database: its events stay on the session stream, and new ones of a child are marked at append", async () => {
    db = openDatabase({ path: ':memory:', migrations: MIGRATIONS.filter((m) => m.version <= 5) })
    const agents = new AgentStore(db)
    const environments = new EnvironmentStore(db)
    const agent = agents.create({ name: 'old', model: 'claude-sonnet-4-6' })
    const env = environments.create({ name: 'old' })
    db.prepare(
      "INSERT INTO sessions (id, agent_id, agent_version, environment_id, status, created_at, updated_at, data) VALUES ('sesn_OLD', ?, 1, ?, 'idle', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', '{}')",
    ).run(agent.id, env.id)
    db.prepare(
      "INSERT INTO events (session_rid, seq, id, thread_id, type, processed_at, data, type_mark) SELECT rid, 1, 'sevt_OLD', NULL, 'agent.message', '2026-01-01T00:00:01.000Z', '{\"content\":[]}', 2 FROM sessions WHERE id = 'sesn_OLD'",
    ).run()
    expect(migrate(db, MIGRATIONS)).toBe(MIGRATIONS[MIGRATIONS.length - 1].version)
    const log = new SqliteEventLog(db)
    log.appendSync('sesn_OLD', [
      { type: 'session.thread_created', session_thread_id: 'sthr_C', agent_name: 'c', workflow_run_id: null },
      { type: 'agent.message', session_thread_id: 'sthr_C', content: [] },
      { type: 'agent.custom_tool_use', session_thread_id: 'sthr_C', name: 'x', input: {} },
    ])
    expect(log.read('sesn_OLD', { streamOf: null }).map((s) => s.seq)).toEqual([1, 2, 4])
    expect(log.read('sesn_OLD', { streamOf: 'sthr_C' }).map((s) => s.seq)).toEqual([3, 4])
  })
})
