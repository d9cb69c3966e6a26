/**
 * Harness benchmarks (npm run bench -- harness):
 *  - overhead on time-to-first-token: from `user.message` acknowledged to the first
 *    `event_delta`, minus the scripted model server's own time to its first byte, at 1 and 64
 *    concurrent sessions (targets: p50 ≤ 5 ms, p95 ≤ 20 ms);
 *  - wake() of a 10,000-event session to its next model request (target ≤ 100 ms);
 *  - time-to-first-token with lazy sandboxes vs. provisioning a Docker sandbox first (eager).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { Engine } from '../src/main/engine'
import type { EventInput } from '../src/main/session/event-log'
import type { SqliteEventLog } from '../src/main/session/sqlite-event-log'
import { newId } from '../src/shared/api/ids'
import { summary } from './stats'
import { ScriptedModelServer, say } from '../test/support/model-server'
import { forkModel } from './child'

type Log = (msg: string) => void

/**
 * The scripted model server, reporting each response's own time to its first token: in a process of
 * its own (default), or in this process with CORRAL_BENCH_MODEL=inprocess (no IPC or second
 * process to schedule, but its CPU then shares this event loop).
 */
async function modelProcess(opts: { text?: string; delayMs?: number; chunkSize?: number; chunkDelayMs?: number } = {}) {
  if (process.env.CORRAL_BENCH_MODEL === 'inprocess') return modelInProcess(opts)
  const serverMs = new Map<string, number>()
  const arrivedAbs = new Map<string, number>()
  const waiters = new Map<string, () => void>()
  // it reports each request's time to its first token unasked, by the request's marker
  const model = await forkModel('model-server-process', 'test/support/model-server-process.ts', [JSON.stringify(opts)], (m) => {
    const r = m as { marker?: string; serverMs?: number; arrivedAbs?: number }
    if (r.marker === undefined) return
    serverMs.set(r.marker, r.serverMs ?? 0)
    if (r.arrivedAbs !== undefined) arrivedAbs.set(r.marker, r.arrivedAbs)
    waiters.get(r.marker)?.()
  })
  return {
    url: model.url,
    serverMs,
    arrivedAbs,
    /** Resolves when the server has reported the request carrying `marker`. */
    reported: (marker: string) => (serverMs.has(marker) ? Promise.resolve() : new Promise<void>((r) => waiters.set(marker, r))),
    close: () => model.close(),
  }
}

async function modelInProcess(opts: { text?: string; delayMs?: number; chunkSize?: number; chunkDelayMs?: number }) {
  const server = await ScriptedModelServer.start(() => say(opts.text ?? 'hello world', { delayMs: opts.delayMs ?? 5, chunkSize: opts.chunkSize, chunkDelayMs: opts.chunkDelayMs }))
  server.keepRequests = 0
  const serverMs = new Map<string, number>()
  const arrivedAbs = new Map<string, number>()
  const waiters = new Map<string, () => void>()
  server.onFirstToken = (req) => {
    const last = [...req.body.messages].reverse().find((m) => m.role === 'user')
    const texts = !last ? [] : typeof last.content === 'string' ? [last.content] : last.content.filter((b) => b.type === 'text').map((b) => String(b.text))
    const marker = texts.at(-1) ?? ''
    serverMs.set(marker, (req.firstTokenAt ?? req.receivedAt) - req.arrivedAt)
    arrivedAbs.set(marker, performance.timeOrigin + req.arrivedAt)
    waiters.get(marker)?.()
  }
  return {
    url: server.url,
    serverMs,
    arrivedAbs,
    reported: (marker: string) => (serverMs.has(marker) ? Promise.resolve() : new Promise<void>((r) => waiters.set(marker, r))),
    close: () => server.close(),
  }
}

type ModelProcess = Awaited<ReturnType<typeof modelProcess>>

/** When the SDK handed each request to fetch, by marker (to split the overhead into its parts). */
const dispatchedAt = new Map<string, number>()
const realFetch = globalThis.fetch
globalThis.fetch = ((input: Parameters<typeof fetch>[0], init?: RequestInit) => {
  const at = performance.now()
  if (typeof init?.body === 'string' && init.body.length < 2_000_000) {
    const m = /"text":"([^"]*)"(?:,"cache_control":\{"type":"ephemeral"\})?\}\]\}\](?:,"tools"|,"system"|\})/.exec(init.body)
    if (m) dispatchedAt.set(m[1], at)
  }
  return realFetch(input, init)
}) as typeof fetch

async function openBench(model: ModelProcess, params: { enabled?: boolean } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'corral-bench-harness-'))
  const engine = Engine.open({
    dataDir: dir,
    token: 'bench',
    env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'bench' },
    harness: { enabled: params.enabled ?? true },
    // no default sandboxes: their Docker sweep would be counted as harness CPU
    defaultHands: false,
  })
  if (process.env.CORRAL_BENCH_TRACE) {
    const l = (engine.stores.log as unknown as { appender: { flush: () => void } }).appender
    const orig = l.flush.bind(l)
    l.flush = () => {
      const t = performance.now()
      orig()
      console.error(`flush ${(performance.now() - t).toFixed(2)} ms at ${t.toFixed(1)}`)
    }
  }
  const agent = engine.services.agents.create({ name: 'bench', model: 'claude-sonnet-5-5', system: 'Bench.', tools: [{ type: 'agent_toolset_20260401' }] } as never)
  const env = engine.services.environments.create({ name: 'bench', config: { type: 'cloud' } })
  return {
    dir,
    model,
    engine,
    envId: env.id,
    async newSession() {
      return (await engine.services.sessions.create({ agent: agent.id, environment_id: env.id } as never)).id
    },
    async close() {
      await engine.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

type Bench = Awaited<ReturnType<typeof openBench>>

/**
 * One turn of one session: sends a user message, and resolves with (ack → first delta) and the
 * model server's own time to its first token (content delta) for that request, once the session is idle again.
 * `beforeModel` runs between the acknowledgement and waking the brain (the eager sandbox).
 */
async function turn(b: Bench, sessionId: string, marker: string, opts: { beforeModel?: () => Promise<void>; wakeManually?: boolean } = {}) {
  const s = b.engine.services
  let firstDelta = 0
  let idle!: () => void
  const idleP = new Promise<void>((r) => (idle = r))
  const stopPreviews = s.previews.subscribe(sessionId, (p) => {
    if (p.type === 'event_delta' && !firstDelta) firstDelta = performance.now()
  })
  const stopTail = s.log.tail(sessionId, s.log.lastSeq(sessionId), ({ event }) => {
    if (event.type === 'session.status_idle') idle()
  })
  await s.sessions.sendEvents(sessionId, [{ type: 'user.message', content: [{ type: 'text', text: marker }] }])
  const acked = performance.now()
  if (opts.beforeModel) await opts.beforeModel()
  if (opts.wakeManually) b.engine.brains.scheduler.wake(sessionId)
  await idleP
  stopPreviews()
  stopTail()
  await b.model.reported(marker)
  if (!firstDelta) throw new Error(`no event_delta for ${marker}`)
  const serverMs = b.model.serverMs.get(marker)!
  b.model.serverMs.delete(marker)
  const dispatched = dispatchedAt.get(marker)
  dispatchedAt.delete(marker)
  const arrived = b.model.arrivedAbs.get(marker)
  b.model.arrivedAbs.delete(marker)
  if (process.env.CORRAL_BENCH_TRACE && dispatched !== undefined && arrived !== undefined) {
    const arr = arrived - performance.timeOrigin
    console.error(`trace ${marker}: ack→dispatch ${(dispatched - acked).toFixed(2)} dispatch→arrive ${(arr - dispatched).toFixed(2)} server ${serverMs.toFixed(2)} firsttoken→delta ${(firstDelta - arr - serverMs).toFixed(2)}`)
  }
  return { ttft: firstDelta - acked, serverMs, overhead: firstDelta - acked - serverMs, toDispatch: dispatched !== undefined ? dispatched - acked : undefined }
}

/** Every session sends its next message at the same instant (worst case: 64 requests queue on 2 cores). */
async function ttftBurst(log: Log, concurrency: number, rounds: number) {
  const model = await modelProcess({ delayMs: 5 })
  const b = await openBench(model)
  try {
    const sessions = await Promise.all(Array.from({ length: concurrency }, () => b.newSession()))
    const overhead: number[] = []
    const ttft: number[] = []
    for (let r = 0; r <= rounds; r++) {
      const out = await Promise.all(sessions.map((id, i) => turn(b, id, `burst ${i} round ${r}`)))
      if (r === 0) continue // warm-up: JIT, first lease, first connection
      for (const o of out) {
        overhead.push(o.overhead)
        ttft.push(o.ttft)
      }
    }
    log(`ttft overhead, ${concurrency} sessions in lockstep: ${JSON.stringify(summary(overhead))}`)
    return { overhead: summary(overhead), ttft_including_model_server: summary(ttft) }
  } finally {
    await b.close()
    await model.close()
  }
}

/**
 * `concurrency` sessions each in a loop (think time 0–400 ms, then a message whose answer
 * streams ~70 characters in 12-character deltas every 15 ms, about Claude's pace): at any moment many sessions are mid-turn, and each new message's
 * first token is timed.
 */
async function ttftConcurrent(log: Log, concurrency: number, turnsPerSession: number) {
  const model = await modelProcess({ delayMs: 5, text: 'a streamed answer of some length, about eighty characters long in total.', chunkSize: 12, chunkDelayMs: 15 })
  const b = await openBench(model)
  try {
    const sessions = await Promise.all(Array.from({ length: concurrency }, () => b.newSession()))
    await Promise.all(sessions.map((id, i) => turn(b, id, `warm ${i}`)))
    const overhead: number[] = []
    const ttft: number[] = []
    const toDispatch: number[] = []
    const cpu0 = process.cpuUsage()
    await Promise.all(
      sessions.map(async (id, i) => {
        for (let t = 0; t < turnsPerSession; t++) {
          await new Promise((r) => setTimeout(r, Math.random() * 400))
          const o = await turn(b, id, `s${i} t${t}`)
          overhead.push(o.overhead)
          ttft.push(o.ttft)
          if (o.toDispatch !== undefined) toDispatch.push(o.toDispatch)
        }
      }),
    )
    const cpu = process.cpuUsage(cpu0)
    // CPU of this process (engine + SDK + bench bookkeeping; the model server runs elsewhere) per turn
    const cpuPerTurnMs = Math.round(((cpu.user + cpu.system) / 1000 / overhead.length) * 100) / 100
    log(`ttft overhead, ${concurrency} concurrent sessions: ${JSON.stringify(summary(overhead))}; ack→request dispatched ${JSON.stringify(summary(toDispatch))}; cpu per turn ${cpuPerTurnMs} ms`)
    return { overhead: summary(overhead), ack_to_request_dispatched: summary(toDispatch), ttft_including_model_server: summary(ttft), cpu_ms_per_turn: cpuPerTurnMs, load_average_1m: Math.round(loadavg()[0] * 100) / 100 }
  } finally {
    await b.close()
    await model.close()
  }
}

async function wakeLargeSession(log: Log, samples: number) {
  const model = await modelProcess({ delayMs: 5 })
  const b = await openBench(model, { enabled: false })
  try {
    const times: number[] = []
    const eventsPerSession = 10_000
    for (let i = 0; i < samples; i++) {
      const id = await b.newSession()
      const events: EventInput[] = []
      const usage = { input_tokens: 100, output_tokens: 20, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
      while (events.length < eventsPerSession - 1) {
        const start = newId('event')
        events.push(
          { type: 'user.message', content: [{ type: 'text', text: `question ${events.length}: what is the status of the build?` }] },
          { type: 'session.status_running' },
          { id: start, type: 'span.model_request_start' },
          { type: 'agent.message', content: [{ type: 'text', text: `The build is green as of step ${events.length}.` }] },
          { type: 'span.model_request_end', model_request_start_id: start, is_error: false, model_usage: usage, model: 'claude-sonnet-5-5', stop_reason: 'end_turn' },
          { type: 'session.status_idle', stop_reason: { type: 'end_turn' }, stop_details: null },
        )
      }
      events.length = eventsPerSession - 1
      const marker = `wake sample ${i}`
      events.push({ type: 'user.message', content: [{ type: 'text', text: marker }] })
      ;(b.engine.services.log as SqliteEventLog).appendSync(id, events)
      // a fresh brain: nothing of this session is cached in this process
      const t0 = performance.timeOrigin + performance.now()
      b.engine.brains.scheduler.wake(id)
      await b.model.reported(marker)
      times.push(b.model.arrivedAbs.get(marker)! - t0)
      await b.engine.brains.scheduler.settled()
    }
    log(`wake of a ${eventsPerSession}-event session: ${JSON.stringify(summary(times))}`)
    return { events: eventsPerSession, wake_to_model_request: summary(times) }
  } finally {
    await b.close()
    await model.close()
  }
}

async function lazyVsEager(log: Log, samples: number): Promise<Record<string, unknown>> {
  let hands: typeof import('../src/main/hands')
  try {
    hands = await import('../src/main/hands')
  } catch (err) {
    return { measured: false, reason: `src/main/hands could not be loaded: ${(err as Error).message}` }
  }
  const provider = new hands.DockerSandboxProvider({})
  const available = await provider.available()
  if (!available.ok) return { measured: false, reason: `Docker sandbox unavailable: ${available.reason}` }
  const model = await modelProcess({ delayMs: 5 })
  const b = await openBench(model, { enabled: false })
  try {
    const lazy: number[] = []
    const eager: number[] = []
    const provisionMs: number[] = []
    for (let i = 0; i <= samples; i++) {
      const lazyId = await b.newSession()
      const l = await turn(b, lazyId, `lazy ${i}`, { wakeManually: true })
      const eagerId = await b.newSession()
      const sandbox = provider.create({ sessionId: eagerId, environmentId: b.envId, config: { type: 'cloud' } })
      let p0 = 0
      const e = await turn(b, eagerId, `eager ${i}`, {
        wakeManually: true,
        beforeModel: async () => {
          p0 = performance.now()
          await sandbox.provision()
          provisionMs.push(performance.now() - p0)
        },
      })
      await sandbox.dispose({ removeWorkspace: true })
      if (i === 0) {
        provisionMs.pop()
        continue
      }
      lazy.push(l.ttft)
      eager.push(e.ttft)
    }
    const ls = summary(lazy)
    const es = summary(eager)
    log(`ttft lazy ${JSON.stringify(ls)} eager ${JSON.stringify(es)}`)
    return {
      measured: true,
      backend: 'docker',
      lazy_ttft: ls,
      eager_ttft: es,
      docker_provision: summary(provisionMs),
      p50_reduction_pct: Math.round((1 - ls.p50_ms / es.p50_ms) * 1000) / 10,
      p95_reduction_pct: Math.round((1 - ls.p95_ms / es.p95_ms) * 1000) / 10,
    }
  } finally {
    await b.close()
    await model.close()
    await provider.dispose()
  }
}

/** CORRAL_BENCH_HARNESS=ttft,burst,wake,sandbox runs a subset (default: all; ttft64: only the 64-session TTFT). */
export async function run(log: Log): Promise<Record<string, unknown>> {
  const only = new Set((process.env.CORRAL_BENCH_HARNESS ?? 'ttft,burst,wake,sandbox').split(','))
  const out: Record<string, unknown> = { targets: { overhead_p50_ms: 5, overhead_p95_ms: 20, wake_ms: 100 } }
  if (only.has('ttft64')) out.ttft_overhead_64_concurrent_sessions = await ttftConcurrent(log, 64, 6)
  if (only.has('ttft')) {
    out.ttft_overhead_1_session = await ttftConcurrent(log, 1, 100)
    if (!process.env.CORRAL_BENCH_TRACE) out.ttft_overhead_64_concurrent_sessions = await ttftConcurrent(log, 64, 6)
  }
  if (only.has('burst')) out.ttft_overhead_64_sessions_in_lockstep = await ttftBurst(log, 64, 4)
  if (only.has('wake')) out.wake_10k_events = await wakeLargeSession(log, 5)
  if (only.has('sandbox')) out.lazy_vs_eager_sandbox = await lazyVsEager(log, 15)
  return out
}
