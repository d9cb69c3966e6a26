/**
 * What the machine itself charges a turn, measured beside the engine's figures so they can be
 * read against it: the log's two disk steps (a WAL commit with synchronous=NORMAL, then the
 * WAL's fdatasync: what session/log/append.ts does per group) timed back to back and after the
 * machine sat idle for 100 ms, as a thread's turn does while its model answers. On a virtual
 * machine whose idle vCPUs halt (the Firecracker VMs these benches ran on), both steps cost several
 * times more after the idle wait than back to back: that penalty is in every turn the threads
 * and workflows benches time and is not the engine's code.
 */
import Database from 'better-sqlite3'
import { fdatasyncSync, mkdtempSync, openSync, closeSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { p50ms } from './stats'

export const MACHINE_DEFINITION =
  "the log's disk steps on this machine, outside the engine: a WAL commit (synchronous=NORMAL, two 2 KB rows in an indexed table) and the WAL's fdatasync, p50 ms back to back and after 100 ms of idle (a turn's wait for its model)"

export interface MachineProbe {
  commit_ms: { back_to_back: number; after_idle_100ms: number }
  fdatasync_ms: { back_to_back: number; after_idle_100ms: number }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** Takes ≈ 2 s (15 samples after an idle wait of 100 ms each). */
export async function probeMachine(): Promise<MachineProbe> {
  const dir = mkdtempSync(join(tmpdir(), 'corral-bench-machine-'))
  const db = new Database(join(dir, 'probe.db'))
  try {
    db.pragma('journal_mode = WAL')
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT, data TEXT); CREATE INDEX t_k ON t (k)')
    db.pragma('synchronous = NORMAL')
    const insert = db.prepare('INSERT INTO t (k, data) VALUES (?, ?)')
    const payload = 'x'.repeat(2048)
    let n = 0
    const commit = db.transaction(() => {
      insert.run(`k${n++}`, payload)
      insert.run(`k${n++}`, payload)
    })
    commit()
    const fd = openSync(join(dir, 'probe.db-wal'), 'r')
    const sample = async (count: number, idleMs: number) => {
      const commits: number[] = []
      const syncs: number[] = []
      for (let i = 0; i < count; i++) {
        if (idleMs) await sleep(idleMs)
        else await new Promise<void>((r) => setImmediate(r))
        const t0 = performance.now()
        commit()
        const t1 = performance.now()
        fdatasyncSync(fd)
        commits.push(t1 - t0)
        syncs.push(performance.now() - t1)
      }
      return { commit: p50ms(commits), sync: p50ms(syncs) }
    }
    await sample(20, 0) // warm the statements
    const hot = await sample(100, 0)
    const idle = await sample(15, 100)
    closeSync(fd)
    return { commit_ms: { back_to_back: hot.commit, after_idle_100ms: idle.commit }, fdatasync_ms: { back_to_back: hot.sync, after_idle_100ms: idle.sync } }
  } finally {
    db.close()
    rmSync(dir, { recursive: true, force: true })
  }
}
