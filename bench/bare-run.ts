/**
 * What a workflow run of the bench's shape costs on this machine with the official SDK and nothing
 * else, measured beside the workflows bench's figures so its `run_overhead_share` can be read
 * against it: a bare loop, no engine, against a model process of the same kind. The same two phases (500
 * `map i` agents, then 500 `combine a b` agents fed with the map's answers), 64 at a time, and per
 * agent what any durable implementation has to do and nothing more: a row committed to a WAL
 * database (synchronous=NORMAL) before the request (the call and its thread), the SDK's streamed
 * request over the model client's transport on the event loop, a row with the answer; the WAL is
 * fdatasynced behind the commits, two at a time as the engine does, never waited for (the engine's
 * run driver waits for the commit, not the disk). No scheduler, journal, QuickJS, threads' events
 * or status aggregate; each slot takes its next agent as soon as its last one answered. Timed as
 * the bench times the engine (the first call's row to the last answer's row; the model's own time
 * per request measured in its process). Not a proven lower bound under this load (a loop that
 * orders or batches its work otherwise may do better or worse): what the SDK and two WAL rows per
 * agent cost such a run here, beside what the engine costs it.
 */
import Anthropic from '@anthropic-ai/sdk'
import Database from 'better-sqlite3'
import { closeSync, fdatasync, mkdtempSync, openSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { nodeFetch } from '../src/main/harness/model-transport'
import { idealRunMs, slotRefillsMs, type WorkerRequest } from './run-figures'
import { p50ms, percentile, round3 } from './stats'
import { untilMessageStop } from './turn-floor'

export const BARE_RUN_DEFINITION =
  "the same run by a bare loop beside the engine (no engine: per agent a WAL row before the request, the official SDK's streamed request over the model client's transport on the event loop, a WAL row with the answer, the WAL fdatasynced behind the commits and never waited for; each of 64 slots takes its next agent when its last one answered), the two phases of 500 agents, against a model process of the same kind, once after the runs: `run_overhead_share` and `slot_refill_p50_ms` as defined for the engine, and its CPU per agent. What this machine and the SDK cost such a run with nothing else; not a proven lower bound"

export interface BareRun {
  wall_ms: number
  ideal_ms: number
  run_overhead_share: number
  slot_refill_p50_ms: number
  cpu_ms_per_agent: number
}

/**
 * Runs the two phases (`perPhase` agents each, `concurrent` at a time) against the model at `url`,
 * whose workers answer `map i` and `combine a b` prompts (test/support/workflow-model-process.ts);
 * `stats` fetches its request records afterwards. Takes about the run's ideal time.
 */
export async function measureBareRun(params: { url: string; system: string; perPhase: number; concurrent: number; stats: () => Promise<{ workers: WorkerRequest[] }> }): Promise<BareRun> {
  const dir = mkdtempSync(join(tmpdir(), 'corral-bench-bare-run-'))
  const db = new Database(join(dir, 'bare.db'))
  const client = new Anthropic({ apiKey: 'bench', baseURL: params.url, maxRetries: 0, fetch: nodeFetch as unknown as typeof fetch })
  let walFd = -1
  let inFlight = 0
  let dirty = false
  try {
    db.pragma('journal_mode = WAL')
    db.pragma('synchronous = NORMAL')
    db.exec('CREATE TABLE e (seq INTEGER PRIMARY KEY, thread TEXT, type TEXT, body TEXT); CREATE INDEX e_thread ON e (thread, seq)')
    const insert = db.prepare('INSERT INTO e (thread, type, body) VALUES (?, ?, ?)')
    // what was committed while two fsyncs ran shares the next one (as the log's WalSync does)
    const syncBehind = () => {
      dirty = true
      if (inFlight >= 2) return
      if (walFd < 0) walFd = openSync(join(dir, 'bare.db-wal'), 'r')
      dirty = false
      inFlight++
      fdatasync(walFd, () => {
        inFlight--
        if (dirty) syncBehind()
      })
    }
    const agent = async (thread: string, prompt: string): Promise<string> => {
      insert.run(thread, 'call', JSON.stringify({ prompt }))
      syncBehind()
      const stream = await client.messages.create({ model: 'claude-sonnet-4-6', max_tokens: 4096, system: [{ type: 'text', text: params.system }], messages: [{ role: 'user', content: [{ type: 'text', text: prompt }] }], stream: true })
      let text = ''
      await untilMessageStop(stream, (ev) => {
        if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text
      })
      insert.run(thread, 'answer', JSON.stringify({ text }))
      syncBehind()
      return text
    }
    /** `prompts` through `concurrent` slots, each taking the next prompt when its agent answers; the answers in order. */
    const pool = async (phase: string, prompts: string[]): Promise<string[]> => {
      const out: string[] = new Array(prompts.length)
      let next = 0
      const slot = async () => {
        while (next < prompts.length) {
          const i = next++
          out[i] = await agent(`${phase}-${i}`, prompts[i])
        }
      }
      await Promise.all(Array.from({ length: Math.min(params.concurrent, prompts.length) }, slot))
      return out
    }
    const n = params.perPhase
    const cpu0 = process.cpuUsage()
    const t0 = performance.timeOrigin + performance.now()
    const mapped = await pool('map', Array.from({ length: n }, (_, i) => `map ${i}`))
    await pool(
      'combine',
      mapped.map((a, i) => `combine ${a} ${mapped[(i + 1) % n]}`),
    )
    const t1 = performance.timeOrigin + performance.now()
    const cpu = process.cpuUsage(cpu0)
    const workers = (await params.stats()).workers.filter((w): w is { prompt: string; arrivedAbs: number; endedAbs: number } => w.arrivedAbs !== null && w.endedAbs !== null && w.arrivedAbs >= t0)
    const perAgent = percentile(
      workers.map((w) => w.endedAbs - w.arrivedAbs),
      50,
    )
    const wall = t1 - t0
    const ideal = idealRunMs(2 * n, params.concurrent, perAgent)
    return {
      wall_ms: Math.round(wall),
      ideal_ms: Math.round(ideal),
      run_overhead_share: round3((wall - ideal) / wall),
      slot_refill_p50_ms: p50ms(slotRefillsMs(workers, params.concurrent)),
      cpu_ms_per_agent: round3((cpu.user + cpu.system) / 1000 / (2 * n)),
    }
  } finally {
    while (inFlight > 0) await new Promise((r) => setTimeout(r, 1))
    if (walFd >= 0) closeSync(walFd)
    db.close()
    rmSync(dir, { recursive: true, force: true })
  }
}
