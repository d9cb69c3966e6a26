import { describe, expect, it, vi } from 'vitest'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SqliteEventLog } from '../../../src/main/session/sqlite-event-log'
import { logFiles } from './log-files'
import type { WalCheckpointOptions, WalCheckpointResult } from '../../../src/main/session/log/wal-checkpoint'

/**
 * The WAL's checkpoints on a worker thread (session/log/wal-checkpoint.ts), on a real SQLite file.
 * SQLite's own checkpoint (the one a COMMIT on the event loop runs) is turned off where a test
 * needs to see that the worker alone keeps the WAL from growing.
 */
const files = logFiles('corral-walckpt-')

async function setup(checkpoint: WalCheckpointOptions | false, autocheckpoint: number) {
  const { db, log, sid } = await files.open({ checkpoint }, (d) => d.pragma(`wal_autocheckpoint = ${autocheckpoint}`))
  return { db, log, sid, walBytes: () => statSync(`${db.name}-wal`).size }
}

/** `rounds` bursts of appends (≈ 1.3 MB of WAL each: 40 commits of eight 4 KB events), a pause of `pauseMs` after each. */
async function bursts(log: SqliteEventLog, sid: string, rounds: number, pauseMs: number): Promise<void> {
  const text = 'x'.repeat(4000)
  for (let r = 0; r < rounds; r++) {
    for (let c = 0; c < 40; c++) await log.append(sid, Array.from({ length: 8 }, () => ({ type: 'agent.message', content: [{ type: 'text', text }] })) as never)
    await new Promise((res) => setTimeout(res, pauseMs))
  }
}

const MB = 2 ** 20

describe('the WAL checkpointed off the event loop', () => {
  it('keeps the WAL short with SQLite’s own checkpoint off: the worker copies it into the database file and the WAL starts over', async () => {
    const done: WalCheckpointResult[] = []
    const { db, log, sid, walBytes } = await setup({ minFrames: 256, pollMs: 10, onCheckpoint: (r) => done.push(r) }, 0)
    await bursts(log, sid, 12, 80)
    // ≈ 16 MB went through the WAL; 256 frames are 1 MB, a burst 1.3 MB
    expect(done.length).toBeGreaterThanOrEqual(4)
    expect(done.every((r) => r.checkpointedFrames > 0)).toBe(true)
    expect(walBytes()).toBeLessThan(4 * MB)
    // everything is still there, read back through SQLite
    expect((db.prepare("SELECT COUNT(*) AS n FROM events WHERE type = 'agent.message'").get() as { n: number }).n).toBe(12 * 40 * 8)

    // a checkpoint is not a commit: the event loop's connection sees no other writer (its recent windows stay trusted)
    const version = db.pragma('data_version', { simple: true })
    const before = done.length
    await bursts(log, sid, 1, 0)
    const afterCommits = db.pragma('data_version', { simple: true })
    await vi.waitFor(() => expect(done.length).toBeGreaterThan(before), { timeout: 5000, interval: 10 })
    expect(db.pragma('data_version', { simple: true })).toBe(afterCommits)
    expect(afterCommits).toBe(version)

    // disposed: no more checkpoints
    log.dispose()
    const n = done.length
    await bursts(new SqliteEventLog(db, { checkpoint: false }), sid, 2, 20)
    expect(done.length).toBe(n)
  })

  it('without it (SQLite’s own checkpoint off too) the same bursts grow the WAL past them all', async () => {
    const { log, sid, walBytes } = await setup(false, 0)
    await bursts(log, sid, 12, 80)
    expect(walBytes()).toBeGreaterThan(12 * MB)
  })

  it('with commits that never pause, holds one group commit while the worker copies the last frames, and the WAL starts over', async () => {
    const text = 'x'.repeat(4000)
    /** 8 writers appending back to back for `ms`, no pause anywhere; resolves with the appends made. */
    const continuous = async (log: SqliteEventLog, sids: string[], ms: number) => {
      let n = 0
      const start = performance.now()
      await Promise.all(
        sids.map(async (sid) => {
          while (performance.now() - start < ms) {
            await log.append(sid, [{ type: 'agent.message', content: [{ type: 'text', text }] }] as never)
            n++
          }
        }),
      )
      return n
    }
    const run = async (restartFrames: number) => {
      const done: WalCheckpointResult[] = []
      const { db, log, sid, walBytes } = await setup({ minFrames: 128, restartFrames, pollMs: 10, onCheckpoint: (r) => done.push(r) }, 0)
      const appends = await continuous(log, Array(8).fill(sid), 1500)
      expect((db.prepare("SELECT COUNT(*) AS n FROM events WHERE type = 'agent.message'").get() as { n: number }).n).toBe(appends)
      return { appends, wal: walBytes(), checkpoints: done.length }
    }
    const held = await run(512)
    // never started over: no commit ever began after a checkpoint that had copied everything
    const never = await run(1e9)
    expect(held.checkpoints).toBeGreaterThan(2)
    expect(never.checkpoints).toBeGreaterThan(2)
    expect(never.wal).toBeGreaterThan(2 * held.wal)
    expect(held.wal).toBeLessThan(12 * MB)
  })

  it('a worker that cannot start leaves SQLite’s own checkpoints, and the log goes on', async () => {
    const errors = vi.spyOn(console, 'error').mockImplementation(() => {})
    try {
      const { log, sid, walBytes } = await setup(
        {
          minFrames: 64,
          pollMs: 10,
          startWorker: () => {
            throw new Error('no threads here')
          },
        },
        256,
      )
      await bursts(log, sid, 6, 30)
      expect(errors.mock.calls.filter((c) => String(c[0]).includes('no threads here'))).toHaveLength(1)
      // SQLite checkpointed at 256 frames inside the commits
      expect(walBytes()).toBeLessThan(4 * MB)
    } finally {
      errors.mockRestore()
    }
  })

  it('lets the process exit once its work is done, without a dispose, after the worker has run', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'corral-walckpt-exit-'))
    try {
      const child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, '../../support/checkpoint-exit-child.ts'), join(dir, 'corral.db')], { stdio: ['ignore', 'pipe', 'pipe'] })
      let out = ''
      child.stdout!.on('data', (b: Buffer) => (out += b.toString()))
      child.stderr!.on('data', (b: Buffer) => (out += b.toString()))
      const code = await new Promise<number | string>((resolve) => {
        const timer = setTimeout(() => {
          child.kill('SIGKILL')
          resolve('still running 15 s after its work')
        }, 15_000)
        child.once('exit', (c) => {
          clearTimeout(timer)
          resolve(c ?? -1)
        })
      })
      expect(out).toContain('checkpointed')
      expect(code, out).toBe(0)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 30_000)
})
