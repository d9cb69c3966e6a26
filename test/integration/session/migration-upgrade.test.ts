import { afterEach, describe, expect, it } from 'vitest'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openDatabase, upgradeDatabase, type Db } from '../../../src/main/session/database'
import { MIGRATIONS } from '../../../src/main/session/migrations'
import { SqliteEventLog } from '../../../src/main/session/sqlite-event-log'
import { AgentStore } from '../../../src/main/session/agent-store'
import { EnvironmentStore } from '../../../src/main/session/environment-store'

const LATEST = MIGRATIONS[MIGRATIONS.length - 1].version
let db: Db | undefined
afterEach(() => {
  db?.close()
  db = undefined
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
    expect(log.read('sesn_B', { after: 20_010 }).map((e) => (e.event as unknown as { n: number }).n)).toEqual([66629, -1])
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
    expect((await upgradeDatabase(path)).to).toBe(LATEST)
    expect(snapshot(path, sessions)).toEqual(before)
    // nothing left to do
    expect(await upgradeDatabase(path)).toEqual({ from: LATEST, to: LATEST })
  })

  it('is done once when two processes upgrade the same database at once: the second waits, then finds it done', async () => {
    const { path, sessions } = version13()
    const before = snapshot(path, sessions)
    const child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, '../../support/upgrade-child.ts'), path], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stderr!.on('data', (b: Buffer) => (err += b.toString()))
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
    // once the other process is copying the log (inside its write transaction), this one upgrades too
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on('data', (b: Buffer) => {
        out += b.toString()
        if (out.includes('step copying the event log 25000')) resolve()
      })
      void exited.then(() => reject(new Error(`the other upgrade ended first:\n${out}${err}`)))
    })
    expect(await upgradeDatabase(path)).toEqual({ from: 13, to: LATEST })
    expect(await exited).toBe(0)
    expect(out).toContain(`done 13 ${LATEST}`)
    expect(snapshot(path, sessions)).toEqual(before)
    db = openDatabase({ path, migrations: [] })
    expect(db.prepare('SELECT version FROM schema_migrations WHERE version > 13 ORDER BY version').pluck().all()).toEqual(MIGRATIONS.filter((m) => m.version > 13).map((m) => m.version))
  })
})
