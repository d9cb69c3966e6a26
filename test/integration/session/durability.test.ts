import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import Database from 'better-sqlite3'
import { buildSync } from 'esbuild'
import { mulberry32 } from '../../support/random'

/**
 * Kill -9 at random instants: a child appends with group commit (its WAL fsynced before an ack) and prints
 * every acknowledged event; after each kill, every acknowledged event is in the database with
 * its seq and id, each session's seqs run 1..N without a gap, ids are unique, and
 * `PRAGMA integrity_check` is ok. The child is restarted on the same file each time.
 */
const KILLS = Number(process.env.DURABILITY_KILLS ?? 200)
const SEED = Number(process.env.DURABILITY_SEED ?? 4242)
const ROOT = resolve(__dirname, '../../..')

let dir: string
let bundle: string
let dbPath: string

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'corral-durability-'))
  bundle = join(dir, 'writer.cjs')
  dbPath = join(dir, 'corral.db')
  // One plain-JS bundle so each restart costs a node start, not a TypeScript transform.
  buildSync({ entryPoints: [join(__dirname, 'durability-writer.ts')], bundle: true, platform: 'node', format: 'cjs', target: 'node20', external: ['better-sqlite3'], outfile: bundle, logLevel: 'error' })
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

interface Ack {
  sessionId: string
  seq: number
  id: string
}

/**
 * Runs the writer and SIGKILLs it `killAfterMs` after it reported ready (its database open and
 * migrated), so the kill lands among appends; resolves with the acks it printed.
 */
function runAndKill(killAfterMs: number, mode = ''): Promise<{ acks: Ack[]; ready: boolean; stderr: string; checkpoints: number }> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [bundle, dbPath, mode], { env: { ...process.env, NODE_PATH: join(ROOT, 'node_modules') }, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let stderr = ''
    let timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      const wasReady = out.includes('ready\n')
      out += d
      if (!wasReady && out.includes('ready\n')) {
        clearTimeout(timer)
        timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs)
      }
    })
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
    child.on('error', reject)
    child.on('close', (_code, signal) => {
      clearTimeout(timer)
      if (signal !== 'SIGKILL') return reject(new Error(`writer exited on its own (${signal ?? _code}): ${stderr}`))
      const acks: Ack[] = []
      // A line cut by the kill (no trailing newline) was never fully acknowledged: ignore it.
      const lines = out.split('\n')
      lines.pop()
      for (const line of lines) {
        const [kind, sessionId, seq, id] = line.split(' ')
        if (kind === 'ack') acks.push({ sessionId, seq: Number(seq), id })
      }
      resolvePromise({ acks, ready: lines.includes('ready'), stderr, checkpoints: lines.filter((l) => l === 'ckpt').length })
    })
  })
}

/** `kills` runs of the writer (`mode`: its argv[3]), each killed at a random instant, checked after each kill and at the end. */
async function killAndCheck(kills: number, mode: string, seed: number, window = { from: 0, to: 100 }): Promise<{ killsMidAppend: number; totalAcks: number; checkpoints: number; runsWithCheckpoints: number }> {
  const rand = mulberry32(seed)
  let checkpoints = 0
  let runsWithCheckpoints = 0
  const acked = new Map<string, Map<number, string>>()
  let totalAcks = 0
  let killsMidAppend = 0
  for (let k = 0; k < kills; k++) {
    // 0–100 ms into the appending (by default): mid-transaction, mid-fsync, between commit and ack, ...
    const { acks, stderr, checkpoints: c } = await runAndKill(window.from + Math.floor(rand() * (window.to - window.from)), mode)
    expect(stderr, `kill ${k}: the writer reported an error`).toBe('')
    checkpoints += c
    if (c > 0) runsWithCheckpoints++
    if (acks.length > 0) killsMidAppend++
    for (const a of acks) {
      let m = acked.get(a.sessionId)
      if (!m) acked.set(a.sessionId, (m = new Map()))
      const prior = m.get(a.seq)
      expect(prior === undefined || prior === a.id, `kill ${k}: seq ${a.seq} of ${a.sessionId} acknowledged twice with different ids`).toBe(true)
      m.set(a.seq, a.id)
    }
    totalAcks += acks.length

    const db = new Database(dbPath)
    try {
      expect(db.pragma('integrity_check', { simple: true }), `kill ${k}: integrity_check`).toBe('ok')
      if (!db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'events'").get()) {
        // Killed before the first migration committed: nothing can have been acknowledged.
        expect(totalAcks).toBe(0)
        continue
      }
      const find = db.prepare('SELECT e.id FROM events e JOIN sessions s ON s.rid = e.session_rid WHERE s.id = ? AND e.seq = ?').pluck()
      for (const a of acks) expect(find.get(a.sessionId, a.seq), `kill ${k}: acknowledged event ${a.sessionId}#${a.seq} is missing`).toBe(a.id)
      const perSession = db.prepare('SELECT session_rid AS rid, COUNT(*) AS n, MIN(seq) AS lo, MAX(seq) AS hi FROM events GROUP BY session_rid').all() as { rid: number; n: number; lo: number; hi: number }[]
      for (const s of perSession) expect({ lo: s.lo, hi: s.hi }, `kill ${k}: session rid ${s.rid} has a gap`).toEqual({ lo: 1, hi: s.n })
      const ids = db.prepare('SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS d FROM events').get() as { n: number; d: number }
      expect(ids.d, `kill ${k}: duplicate event ids`).toBe(ids.n)
    } finally {
      db.close()
    }
  }

  // Finally every acknowledgement from every run, all at once.
  const db = new Database(dbPath, { readonly: true })
  try {
    const find = db.prepare('SELECT e.id FROM events e JOIN sessions s ON s.rid = e.session_rid WHERE s.id = ? AND e.seq = ?').pluck()
    for (const [sid, m] of acked) for (const [seq, id] of m) expect(find.get(sid, seq)).toBe(id)
  } finally {
    db.close()
  }
  console.log(`[durability] ${kills} kills${mode ? ` (${mode})` : ''}, ${killsMidAppend} while appending, ${totalAcks} acknowledged events verified, ${checkpoints} worker checkpoints in ${runsWithCheckpoints} runs`)
  return { killsMidAppend, totalAcks, checkpoints, runsWithCheckpoints }
}

describe('the session log under kill -9', () => {
  it(`keeps every acknowledged event across ${KILLS} kills at random instants (seed ${SEED})`, async () => {
    const { killsMidAppend } = await killAndCheck(KILLS, '', SEED)
    // Most kills must land while appends are in flight (a kill in the first ms after `ready`
    // acknowledges nothing yet; under CPU contention more of them do). Half is a floor that a
    // loaded 2-core CI machine still clears, with ≥ 100 kills mid-append.
    expect(killsMidAppend).toBeGreaterThanOrEqual(KILLS * 0.5)
  }, 300_000)

  it('keeps them too with the WAL checkpointed on a worker thread and group commits held for it, all through each run', async () => {
    rmSync(dbPath, { force: true })
    for (const ext of ['-wal', '-shm']) rmSync(dbPath + ext, { force: true })
    const kills = Math.max(20, Math.round(KILLS / 5))
    // 50–350 ms into the appending: the worker starts at the first checkpoint (tens of ms, more on a
    // loaded machine), so each run lives long enough for checkpoints and held commits to happen in it
    const { killsMidAppend, runsWithCheckpoints } = await killAndCheck(kills, 'checkpoints', SEED + 1, { from: 50, to: 350 })
    expect(killsMidAppend).toBeGreaterThanOrEqual(kills * 0.5)
    expect(runsWithCheckpoints).toBeGreaterThanOrEqual(kills / 4)
  }, 300_000)
})
