import { afterEach, describe, expect, it } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { migrate, openDatabase, upgradeDatabase, type Db } from '../../../src/main/session/database'
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

describe('migration 14 (the event log as a rowid table)', () => {
  const dirs: string[] = []
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
  })

  /** A version-13 database file with 3 sessions whose events were appended interleaved (20,001 each, some over 1 KB, some of a child thread). */
  function version13(): { path: string; sessions: string[] } {
    const dir = mkdtempSync(join(tmpdir(), 'corral-mig14-'))
    dirs.push(dir)
    const path = join(dir, 'corral.db')
    const old = openDatabase({ path, migrations: MIGRATIONS.filter((m) => m.version <= 13) })
    const agent = new AgentStore(old).create({ name: 'old', model: 'claude-sonnet-4-6' })
    const env = new EnvironmentStore(old).create({ name: 'old' })
    const sessions = ['sesn_A', 'sesn_B', 'sesn_C']
    for (const id of sessions) {
      old.prepare(
        "INSERT INTO sessions (id, agent_id, agent_version, environment_id, status, created_at, updated_at, data) VALUES (?, ?, 1, ?, 'idle', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', '{}')",
      ).run(id, agent.id, env.id)
    }
    const log = new SqliteEventLog(old)
    const types = ['agent.message', 'agent.tool_use', 'user.message', 'agent.tool_result']
    for (let round = 0; round < 667; round++) {
      old.transaction(() => {
        for (const id of sessions) {
          log.appendSync(
            id,
            Array.from({ length: round === 0 ? 31 : 30 }, (_, i) => ({
              type: types[(round + i) % 4],
              n: round * 100 + i,
              ...(i === 5 ? { session_thread_id: 'sthr_child' } : {}),
              ...(i === 7 ? { big: 'x'.repeat(3000) } : {}),
            })),
          )
        }
      })()
    }
    log.dispose()
    old.close()
    return { path, sessions }
  }

  function snapshot(path: string, sessions: string[]) {
    const d = openDatabase({ path, migrations: [] })
    const log = new SqliteEventLog(d)
    const readAll = (id: string) => {
      const all: ReturnType<typeof log.read> = []
      for (let page = log.read(id, { limit: 1000 }); page.length; page = log.read(id, { after: page.at(-1)!.seq, limit: 1000 })) all.push(...page)
      return all
    }
    const out = sessions.map((id) => ({
      all: readAll(id),
      lastTyped: log.read(id, { types: ['user.message'], order: 'desc', limit: 7 }),
      child: log.read(id, { streamOf: 'sthr_child', limit: 100 }),
      primary: log.read(id, { streamOf: null, after: 19_000, limit: 50 }),
    }))
    log.dispose()
    d.close()
    return out
  }

  it('rebuilds the log in steps with progress: every event kept in order, the same reads, constraints, triggers, and appends go on', async () => {
    const { path, sessions } = version13()
    const before = snapshot(path, sessions)
    expect(before[0].all).toHaveLength(20_011)

    const progress: { version: number; stage: string; done: number; total: number }[] = []
    expect(await upgradeDatabase(path, { onProgress: (p) => progress.push({ version: p.version, stage: p.stage, done: p.done, total: p.total }) })).toEqual({
      from: 13,
      to: MIGRATIONS[MIGRATIONS.length - 1].version,
    })
    const copies = progress.filter((p) => p.stage === 'copying the event log')
    expect(copies.map((p) => p.done)).toEqual([0, 25_000, 50_000, 60_033])
    expect(new Set(progress.map((p) => p.total))).toEqual(new Set([60_033]))
    expect(progress.at(-1)).toEqual({ version: 14, stage: 'indexing the event log', done: 60_033, total: 60_033 })

    db = openDatabase({ path })
    const tableSql = db.prepare("SELECT sql FROM sqlite_master WHERE name = 'events'").pluck().get() as string
    expect(tableSql).not.toMatch(/WITHOUT ROWID/i)
    expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'events_rowid'").get()).toBeUndefined()
    const indexes = (db.prepare("SELECT name, \"unique\" FROM pragma_index_list('events') ORDER BY name").all() as { name: string; unique: number }[])
    expect(indexes).toEqual([
      { name: 'events_id', unique: 1 },
      { name: 'events_seq', unique: 1 },
      { name: 'events_thread', unique: 0 },
      { name: 'events_type_marks', unique: 0 },
    ])
    // the copy is in (session, seq) order: each session's rows keep their order by rowid
    const outOfOrder = db.prepare('SELECT COUNT(*) FROM events a JOIN events b ON b.rowid = a.rowid + 1 WHERE (b.session_rid, b.seq) <= (a.session_rid, a.seq)').pluck().get()
    expect(outOfOrder).toBe(0)
    expect(snapshot(path, sessions)).toEqual(before)

    expect(() => db!.prepare("UPDATE events SET data = '{}' WHERE seq = 1").run()).toThrow(/append-only: UPDATE refused/)
    expect(() => db!.prepare('DELETE FROM events WHERE seq = 1').run()).toThrow(/append-only: DELETE refused/)
    expect(() =>
      db!.prepare("INSERT INTO events (session_rid, seq, id, type, processed_at, data) SELECT session_rid, seq, 'sevt_dup', type, processed_at, data FROM events WHERE seq = 1 LIMIT 1").run(),
    ).toThrow(/UNIQUE constraint failed: events.session_rid, events.seq/)
    const log = new SqliteEventLog(db)
    const added = log.appendSync('sesn_B', [{ type: 'agent.message', n: -1 }])
    expect(added[0].seq).toBe(20_012)
    expect(log.read('sesn_B', { after: 20_010 }).map((e) => (e.event as { n: number }).n)).toEqual([66629, -1])
    expect(log.get(added[0].event.id as string)?.seq).toBe(20_012)
    log.dispose()
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok')
  })

  it('stopped half-way, leaves the database as it was; the next start does it again', async () => {
    const { path, sessions } = version13()
    const before = snapshot(path, sessions)
    let steps = 0
    await expect(
      upgradeDatabase(path, {
        onProgress: () => {
          if (++steps === 3) throw new Error('stopped')
        },
      }),
    ).rejects.toThrow('stopped')
    db = openDatabase({ path, migrations: [] })
    expect(db.prepare('SELECT MAX(version) FROM schema_migrations').pluck().get()).toBe(13)
    expect(db.prepare("SELECT sql FROM sqlite_master WHERE name = 'events'").pluck().get()).toMatch(/WITHOUT ROWID/)
    expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'events_rowid'").get()).toBeUndefined()
    db.close()
    db = undefined
    expect(snapshot(path, sessions)).toEqual(before)
    expect((await upgradeDatabase(path)).to).toBe(14)
    expect(snapshot(path, sessions)).toEqual(before)
    // nothing left to do
    expect(await upgradeDatabase(path)).toEqual({ from: 14, to: 14 })
  })
})
