/**
 * The session log: fsync cost of this disk, durable appends with 64 concurrent writers (group
 * commit, synchronous=FULL), bulk appends, and reading a page of 100 events at random positions
 * of a 1,000,000-event session, and of a 250,000-event multi-agent session through the session's
 * and a child's stream views. `npm run bench -- session`.
 */
import { closeSync, fsyncSync, mkdtempSync, openSync, rmSync, statSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { openDatabase, type Db } from '../src/main/session/database'
import { SqliteEventLog } from '../src/main/session/sqlite-event-log'
import type { SessionStore } from '../src/main/session/session-store'
import { openStores } from '../src/main/session/stores'
import { percentile, summary } from './stats'

const EVENT = { type: 'agent.message', content: [{ type: 'text', text: 'The quick brown fox jumps over the lazy dog. '.repeat(3) }] }
const TYPES = ['agent.message', 'agent.thinking', 'agent.tool_use', 'agent.tool_result', 'span.model_request_start', 'span.model_request_end', 'user.message', 'session.status_running', 'session.status_idle', 'agent.custom_tool_use']

interface Fixture {
  dir: string
  db: Db
  log: SqliteEventLog
  sessions: SessionStore
  newSession(): Promise<string>
  close(): void
}

function fixture(): Fixture {
  const dir = mkdtempSync(join(tmpdir(), 'corral-bench-'))
  const { db, log, agents, environments, sessions } = openStores(openDatabase({ path: join(dir, 'corral.db') }))
  const agent = agents.create({ name: 'bench', model: 'claude-sonnet-4-6' })
  const env = environments.create({ name: 'bench' })
  return {
    dir,
    db,
    log,
    sessions,
    newSession: async () => (await sessions.create({ agent: agent.id, environment_id: env.id })).id,
    close: () => {
      db.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

function fsyncCost(): ReturnType<typeof summary> {
  const dir = mkdtempSync(join(tmpdir(), 'corral-fsync-'))
  const fd = openSync(join(dir, 'f'), 'w')
  const page = Buffer.alloc(4096, 1)
  const sample: number[] = []
  for (let i = 0; i < 400; i++) {
    writeSync(fd, page)
    const t0 = performance.now()
    fsyncSync(fd)
    sample.push(performance.now() - t0)
  }
  closeSync(fd)
  rmSync(dir, { recursive: true, force: true })
  return summary(sample)
}

/**
 * Times each flush of `log`'s append side (log/append.ts): one commit group each, its whole time
 * on the event loop (BEGIN … COMMIT, and a checkpoint when the COMMIT runs one).
 */
function timeFlushes(log: SqliteEventLog): number[] {
  const appender = (log as unknown as { appender: { flush: () => void } }).appender
  const flush = appender.flush.bind(appender)
  const ms: number[] = []
  appender.flush = () => {
    const t = performance.now()
    flush()
    ms.push(performance.now() - t)
  }
  return ms
}

/**
 * `writers` async writers each appending one event at a time for `ms`; appends/s and CPU per append.
 * With `mixed`, each writer cycles through TYPES (dense and other types alike) instead of one
 * agent.message.
 */
async function durable(writers: number, sessionCount: number, ms: number, mixed = false): Promise<{ appends_per_s: number; cpu_us_per_append: number; commit_groups: number }> {
  const f = fixture()
  try {
    const ids: string[] = []
    for (let i = 0; i < sessionCount; i++) ids.push(await f.newSession())
    const flushes = timeFlushes(f.log)
    let n = 0
    const cpu0 = process.cpuUsage()
    const start = performance.now()
    await Promise.all(
      Array.from({ length: writers }, async (_, w) => {
        const sid = ids[w % ids.length]
        let k = w
        while (performance.now() - start < ms) {
          await f.log.append(sid, [mixed ? { ...EVENT, type: TYPES[k++ % TYPES.length] } : EVENT])
          n++
        }
      }),
    )
    const secs = (performance.now() - start) / 1000
    const cpu = process.cpuUsage(cpu0)
    return { appends_per_s: Math.round(n / secs), cpu_us_per_append: Math.round(((cpu.user + cpu.system) / n) * 10) / 10, commit_groups: flushes.length }
  } finally {
    f.close()
  }
}

async function bulk(perCall: number, ms: number): Promise<{ appends_per_s: number; cpu_us_per_event: number }> {
  const f = fixture()
  try {
    const sid = await f.newSession()
    const batch = Array.from({ length: perCall }, () => EVENT)
    let n = 0
    const cpu0 = process.cpuUsage()
    const start = performance.now()
    while (performance.now() - start < ms) {
      f.log.appendSync(sid, batch)
      n += perCall
    }
    const secs = (performance.now() - start) / 1000
    const cpu = process.cpuUsage(cpu0)
    return { appends_per_s: Math.round(n / secs), cpu_us_per_event: Math.round(((cpu.user + cpu.system) / n) * 100) / 100 }
  } finally {
    f.close()
  }
}

/**
 * The WAL's checkpoints against the event loop: `writers` async writers, each appending `perAppend`
 * events of ≈ 600 bytes and then waiting `thinkMs` (a turn's other work), for `ms`, on a log whose
 * checkpoints run on a worker thread (`offLoop`, log/wal-checkpoint.ts) or inside the COMMIT that
 * takes the WAL past wal_autocheckpoint (SQLite's own, on the event loop). Per group commit on the
 * event loop (its whole flush: BEGIN … COMMIT, and a checkpoint when the COMMIT runs one): p50,
 * p99, max and how many took over 10 ms; the event loop's longest delay; the WAL file's size.
 */
async function checkpointStall(offLoop: boolean, writers: number, perAppend: number, thinkMs: number, ms: number): Promise<Record<string, unknown>> {
  const f = fixture()
  try {
    const ids: string[] = []
    for (let i = 0; i < writers; i++) ids.push(await f.newSession())
    // in the COMMIT: as before log/wal-checkpoint.ts, SQLite's own every 4,000 frames (database.ts's backstop is 16,000)
    if (!offLoop) f.db.pragma('wal_autocheckpoint = 4000')
    const log = new SqliteEventLog(f.db, { checkpoint: offLoop ? {} : false })
    const flushes = timeFlushes(log)
    const event = { type: 'agent.tool_result', tool_use_id: 'toolu_bench', content: [{ type: 'text', text: 'ran: '.padEnd(560, 'x') }], is_error: false }
    const delay = monitorEventLoopDelay({ resolution: 1 })
    delay.enable()
    let appends = 0
    let walMax = 0
    const start = performance.now()
    await Promise.all(
      ids.map(async (sid) => {
        while (performance.now() - start < ms) {
          await log.append(sid, Array.from({ length: perAppend }, () => event))
          appends++
          if (appends % 256 === 0) walMax = Math.max(walMax, statSync(`${f.db.name}-wal`).size)
          if (thinkMs > 0) await new Promise((r) => setTimeout(r, thinkMs))
        }
      }),
    )
    delay.disable()
    const ck = (log as unknown as { appender: { checkpointer?: { stats: { checkpoints: number; workerMs: number } } } }).appender.checkpointer?.stats
    log.dispose()
    return {
      appends_per_s: Math.round(appends / ((performance.now() - start) / 1000)),
      group_commits: flushes.length,
      group_commit_ms: { p50: Number(percentile(flushes, 50).toFixed(3)), p99: Number(percentile(flushes, 99).toFixed(2)), max: Number(Math.max(...flushes).toFixed(1)) },
      group_commits_over_10_ms: flushes.filter((x) => x > 10).length,
      event_loop_delay_max_ms: Number((delay.max / 1e6).toFixed(1)),
      wal_max_mb: Number((walMax / 2 ** 20).toFixed(1)),
      ...(ck ? { worker_checkpoints: ck.checkpoints, worker_checkpoint_ms: Math.round(ck.workerMs) } : {}),
    }
  } finally {
    f.close()
  }
}

function median(xs: number[]): number {
  return percentile(xs, 50)
}

export async function run(log: (msg: string) => void): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {}
  out.fsync_4k_ms = fsyncCost()
  log(`fsync p50 ${(out.fsync_4k_ms as { p50_ms: number }).p50_ms} ms`)

  const REPS = 3
  for (const [label, sessions, mixed] of [
    ['durable_64_writers_64_sessions', 64, false],
    ['durable_64_writers_1_session', 1, false],
    // No target of its own: the same load with TYPES' mix, where 4 in 10 events are of types the
    // type index lists in full (so their appends write its leaf too).
    ['durable_64_writers_64_sessions_mixed_types', 64, true],
  ] as const) {
    const runs = []
    for (let r = 0; r < REPS; r++) runs.push(await durable(64, sessions, 3000, mixed))
    out[label] = {
      ...(mixed ? {} : { target_appends_per_s: 20_000 }),
      median_appends_per_s: median(runs.map((x) => x.appends_per_s)),
      median_cpu_us_per_append: median(runs.map((x) => x.cpu_us_per_append)),
      runs,
    }
    log(`${label}: ${JSON.stringify(out[label])}`)
  }

  // The WAL's checkpoints on the event loop or off it (log/wal-checkpoint.ts), alternating, under
  // the threads bench's shape of load (25 threads, a turn's three events, then its other work) and
  // under appends back to back (no pause for a checkpoint to finish with nothing after it)
  for (const [label, writers, perAppend, thinkMs] of [
    ['checkpoints_25_writers_3_events_2ms_apart', 25, 3, 2],
    ['checkpoints_64_writers_back_to_back', 64, 1, 0],
  ] as const) {
    const byMode: Record<string, Record<string, unknown>[]> = { worker_thread: [], in_commit: [] }
    for (let r = 0; r < 2; r++) {
      byMode.in_commit.push(await checkpointStall(false, writers, perAppend, thinkMs, 5000))
      byMode.worker_thread.push(await checkpointStall(true, writers, perAppend, thinkMs, 5000))
    }
    out[label] = byMode
    log(`${label}: ${JSON.stringify(byMode)}`)
  }

  const bulkRuns = []
  for (let r = 0; r < REPS; r++) bulkRuns.push(await bulk(1000, 2500))
  out.bulk_append_sync_1000_per_call = {
    target_appends_per_s: 200_000,
    median_appends_per_s: median(bulkRuns.map((x) => x.appends_per_s)),
    median_cpu_us_per_event: median(bulkRuns.map((x) => x.cpu_us_per_event)),
    runs: bulkRuns,
  }
  log(`bulk: ${JSON.stringify(out.bulk_append_sync_1000_per_call)}`)

  // A 1,000,000-event session: ten event types round-robin, plus a rare type every 1000th event,
  // and every 1000th another rare one that is of a dense type (its type index lists only a few).
  const f = fixture()
  try {
    const sid = await f.newSession()
    const N = 1_000_000
    const t0 = performance.now()
    const chunk = 10_000
    for (let base = 0; base < N; base += chunk) {
      f.log.appendSync(
        sid,
        Array.from({ length: chunk }, (_, i) => {
          const k = base + i
          if (k % 1000 === 999) return { type: 'session.error', n: k }
          if (k % 1000 === 499) return { type: 'agent.mcp_tool_result', n: k, content: [{ type: 'text', text: 'x'.repeat(60) }] }
          return { type: TYPES[k % TYPES.length], n: k, content: [{ type: 'text', text: 'x'.repeat(60) }] }
        }),
      )
    }
    out.build_1m_seconds = Math.round((performance.now() - t0) / 100) / 10
    log(`built 1M events in ${out.build_1m_seconds} s`)
    const pages: Record<string, unknown> = {}
    const SAMPLES = 1500
    const cases: [string, { order: 'asc' | 'desc'; types?: string[]; streamOf?: string | null }][] = [
      ['asc', { order: 'asc' }],
      ['desc', { order: 'desc' }],
      ['asc_types_10pct', { order: 'asc', types: ['agent.message'] }],
      ['desc_types_10pct', { order: 'desc', types: ['agent.message'] }],
      ['asc_types_2_of_10', { order: 'asc', types: ['agent.message', 'user.message'] }],
      ['asc_types_rare_0.1pct', { order: 'asc', types: ['session.error'] }],
      ['asc_types_dense_listed_rare_0.1pct', { order: 'asc', types: ['agent.mcp_tool_result'] }],
      ['desc_types_dense_listed_rare_0.1pct', { order: 'desc', types: ['agent.mcp_tool_result'] }],
      // What the session's list reads (its primary thread's view): the same pages through the
      // view's term (every event here is the primary's).
      ['asc_session_view', { order: 'asc', streamOf: null }],
      ['desc_session_view', { order: 'desc', streamOf: null }],
      ['asc_types_10pct_session_view', { order: 'asc', types: ['agent.message'], streamOf: null }],
      ['asc_types_dense_listed_rare_0.1pct_session_view', { order: 'asc', types: ['agent.mcp_tool_result'], streamOf: null }],
    ]
    for (const [name, p] of cases) {
      const sample: number[] = []
      let rows = 0
      for (let i = 0; i < SAMPLES + 50; i++) {
        const at = 1 + Math.floor(Math.random() * (N - 200))
        const t = performance.now()
        const page = f.log.read(sid, { ...p, limit: 100, ...(p.order === 'asc' ? { after: at } : { before: at }) })
        const dt = performance.now() - t
        if (i >= 50) {
          sample.push(dt)
          rows += page.length
        }
      }
      pages[name] = { ...summary(sample), mean_rows: Math.round(rows / SAMPLES) }
      log(`page of 100 ${name}: ${JSON.stringify(pages[name])}`)
    }
    out.page_of_100_in_1m_session = { target_p50_ms: 1, ...pages }
  } finally {
    f.close()
  }

  // A 250,000-event multi-agent session: three events in four are on one of 8 child threads, and
  // one child event in ten is primary-visible (a custom tool call). The session's view skips the
  // rest of the children's events; a child's view reads its own through the thread index.
  const g = fixture()
  try {
    const sid = await g.newSession()
    const N = 250_000
    const chunk = 10_000
    const children = Array.from({ length: 8 }, (_, i) => `sthr_BENCH${String(i).padStart(20, '0')}`)
    for (let base = 0; base < N; base += chunk) {
      g.log.appendSync(
        sid,
        Array.from({ length: chunk }, (_, i) => {
          const k = base + i
          if (k % 4 === 0) return { type: TYPES[(k / 4) % TYPES.length], n: k, content: [{ type: 'text', text: 'x'.repeat(60) }] }
          const child = children[k % children.length]
          if (k % 40 === 1) return { type: 'agent.custom_tool_use', session_thread_id: child, name: 'lookup', input: { n: k } }
          return { type: TYPES[k % 6], session_thread_id: child, n: k, content: [{ type: 'text', text: 'x'.repeat(60) }] }
        }),
      )
    }
    const views: [string, { order: 'asc' | 'desc'; types?: string[]; streamOf: string | null }][] = [
      ['asc_session_view', { order: 'asc', streamOf: null }],
      ['desc_session_view', { order: 'desc', streamOf: null }],
      ['asc_types_10pct_session_view', { order: 'asc', types: ['agent.message'], streamOf: null }],
      ['asc_cross_posted_custom_tool_use_session_view', { order: 'asc', types: ['agent.custom_tool_use'], streamOf: null }],
      ['asc_child_view', { order: 'asc', streamOf: children[3] }],
      ['desc_child_view', { order: 'desc', streamOf: children[3] }],
    ]
    const pages: Record<string, unknown> = {}
    const SAMPLES = 1000
    for (const [name, p] of views) {
      const sample: number[] = []
      let rows = 0
      for (let i = 0; i < SAMPLES + 50; i++) {
        const at = 1 + Math.floor(Math.random() * (N - 2000))
        const t = performance.now()
        const page = g.log.read(sid, { ...p, limit: 100, ...(p.order === 'asc' ? { after: at } : { before: at }) })
        const dt = performance.now() - t
        if (i >= 50) {
          sample.push(dt)
          rows += page.length
        }
      }
      pages[name] = { ...summary(sample), mean_rows: Math.round(rows / SAMPLES) }
      log(`threaded page of 100 ${name}: ${JSON.stringify(pages[name])}`)
    }
    out.page_of_100_in_250k_threaded_session = { target_p50_ms: 1, ...pages }
  } finally {
    g.close()
  }
  return out
}
