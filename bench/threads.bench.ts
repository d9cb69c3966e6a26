/**
 * Threads benchmark (npm run bench -- threads): a lead fans out to 25 child threads that each
 * run 3 tool calls against the scripted model server (100 ms before each response's first byte).
 *  - wall time from the user's message to the session's final idle, against the ideal (the
 *    model's own latency on the critical path: lead request, 4 child requests, final lead request);
 *  - overhead per thread turn (issue #11's target: p50 ≤ 5 ms), `turn_overhead`: for each child
 *    model response, from the moment its last byte left the model server (res.end()) to the
 *    child's next model request arriving at the server, minus the execution time of the tool call
 *    in between (the router's execute(), start to resolve); for the child's last response, to
 *    the commit of its report (`agent.thread_message_received` on the primary). It is everything
 *    Corral does for a turn: parse the stream, fold, log appends and their fsyncs, the tool journal,
 *    the next context view and request. The 25 children's responses come due at nearly the same
 *    instant, so it includes each turn's wait behind the other children's on one event loop;
 *    `busy_ms_per_request` (event-loop busy time over the fan-out per model request) is the work
 *    per turn itself;
 *  - engine RSS (and heap) per idle child thread once all 25 are idle, target ≤ 1 MB, on one more
 *    fan-out after the timed ones, between two full GCs (MEMORY_DEFINITION: the timed ones force none);
 *  - `cpu_ms_per_request_by_thread` (Linux): the process's CPU per model request split between the
 *    event loop's thread and the others (V8's optimizing compiler and GC helpers, libuv's pool where
 *    the WAL is fsynced): how much the JIT still compiles shows in `others`, fan-out by fan-out.
 * The fan-out runs CORRAL_BENCH_FANOUTS times (default 5) on one engine: the first in a fresh
 * process (cold: nothing compiled by the JIT yet) is reported as `cold`, the targets are held
 * against the medians of the others (warm), as a desktop runs after its first minutes.
 * The scripted model runs in a process of its own (bench/threads-model.ts), as a real model is
 * never in the engine's process; the two share the machine's cores. CORRAL_BENCH_PROFILE=<file> writes a CPU profile of the
 * last fan-out (bench/profile.ts); CORRAL_BENCH_SQL=1 counts the SQLite statements it runs (=top also lists the most run ones);
 * CORRAL_BENCH_CHILDREN=n fans out to n children instead of 25 (1 measures an uncontended turn);
 * CORRAL_BENCH_STREAM=<chars>[:<ms>] streams the children's responses (see STREAM).
 * CORRAL_BENCH_TIMELINE=<file> appends each fan-out's model requests (arrival and end times, in
 * CLOCK_MONOTONIC ms, by child task) and its reports' commit times to <file>, one JSON line each.
 * After the fan-outs, one more with V8's CPU profiler on gives `cpu_by_room` (bench/cpu-rooms.ts:
 * the event loop's CPU per model request by the part of Corral that spent it), and `turn_floor`
 * (bench/turn-floor.ts) times the same turn done by a bare loop with no engine, against the same
 * model process: what this machine and the SDK cost a turn.
 */
import { appendFileSync, mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { Engine } from '../src/main/engine'
import type { LoggedEvent } from '../src/main/session/event-log'
import { MACHINE_DEFINITION, probeMachine } from './machine'
import { measureTurnFloor, TURN_FLOOR_DEFINITION } from './turn-floor'
import { profileWindow } from './profile'
import { countStatements } from './sql-count'
import { percentile, summary } from './stats'
import type { ThreadsModelOptions, ThreadsModelRequest } from './threads-model'
import type { ToolCall, ToolOutcome, ToolRecovery, ToolRouter } from '../src/main/hands/tool-router'
import { forkModel } from './child'
import { eventLoopThreadCpuMs, ROOMS_DEFINITION, startRoomsWindow, type RoomSplit } from './cpu-rooms'

const FAN_OUT_DEFINITION =
  'the fan-out runs CORRAL_BENCH_FANOUTS times (default 5) on one engine, each in a new session; `cold` is the first (a fresh process: the JIT has not compiled the engine, the SDK or the HTTP client yet), the top-level figures are the medians over the others (warm: what a desktop that has run for a few minutes does); `runs` has each'

const MEMORY_DEFINITION =
  "engine RSS and heap per idle child thread: one more fan-out after the others, between two full GCs (before it starts, and once its 25 children are idle), the growth over its children. The timed fan-outs force no GC: a full GC between them threw away the code V8 had optimized for the last one (its objects' maps died with them: `--trace-deopt` showed 60 'weak objects' deoptimizations per forced GC), so every timed fan-out compiled the engine's hot paths again, on the same two cores"

const TURN_OVERHEAD_DEFINITION =
  "per child model response: from its last byte leaving the model server to the child's next model request arriving, minus the tool call's execute() time in between; for the last response, to the commit of the child's report on the primary"

/**
 * The bench's hands: each call's side effect is one line appended to a file (no fsync, no delay),
 * timed exactly (that time is the tool's execution, subtracted from a turn's overhead).
 */
class TimedToolRouter implements ToolRouter {
  readonly executeMs = new Map<string, number>()
  private readonly done = new Map<string, ToolOutcome>()
  constructor(private readonly file: string) {}
  execute(call: ToolCall): Promise<ToolOutcome> {
    const t = performance.now()
    const content = `ran ${call.name}: ${String(call.input.command ?? JSON.stringify(call.input))}`
    appendFileSync(this.file, `effect ${call.toolUseId} ${content}\n`)
    const outcome: ToolOutcome = { content, isError: false, durationMs: 0, exitCode: 0 }
    this.done.set(call.toolUseId, outcome)
    this.executeMs.set(call.toolUseId, performance.now() - t)
    return Promise.resolve(outcome)
  }
  recover(call: Omit<ToolCall, 'signal' | 'onOutput'>): Promise<ToolRecovery> {
    const outcome = this.done.get(call.toolUseId)
    return Promise.resolve(outcome ? { state: 'finished', outcome } : { state: 'not_started' })
  }
  release(): Promise<void> {
    return Promise.resolve()
  }
}

const CHILDREN = Math.max(1, Number(process.env.CORRAL_BENCH_CHILDREN ?? 25))
/** Fan-outs run one after another on one engine (CORRAL_BENCH_FANOUTS, default 5): the first is cold, the others warm. */
const FANOUTS = Math.max(1, Number(process.env.CORRAL_BENCH_FANOUTS ?? 5))
const CALLS = 3
/**
 * Streamed responses (CORRAL_BENCH_STREAM=<chars>[:<ms>]): each child response carries that many
 * characters of text (8 per delta) before its tool call and in its final answer, with <ms> between
 * SSE events, as a real model streams; by default every response is six events written at once.
 * `ideal_ms` counts the first-token delays only, not the streaming.
 */
const STREAM = ((v) => ({ textChars: Number(v[0]) || 0, chunkDelayMs: Number(v[1]) || 0 }))((process.env.CORRAL_BENCH_STREAM ?? '').split(':'))
const FIRST_TOKEN_MS = 100
/** The model's own latency on the critical path: lead request, the children's 4 requests, the final lead request. */
const IDEAL_MS = FIRST_TOKEN_MS * (1 + CALLS + 1 + 1)
const LEAD = 'You are the lead.'
const WORKER = 'You are a worker.'
const MODEL_THREAD = process.env.CORRAL_BENCH_MODEL_THREAD === 'worker' ? 'worker' : 'inline'

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

/** The scripted model in its own process (bench/threads-model.ts); `collect()` fetches its request records. */
async function startModel(opts: ThreadsModelOptions): Promise<{ url: string; collect: () => Promise<ThreadsModelRequest[]>; cpuMs: () => Promise<number>; close: () => Promise<void> }> {
  const model = await forkModel('threads-model', 'bench/threads-model.ts', [JSON.stringify(opts)])
  const collect = async () => {
    const m = await model.ask<{ requests: ThreadsModelRequest[]; violations?: string[] }>({ collect: true }, 'requests')
    if (m.violations?.length) throw new Error(`the scripted model saw calls off the offered schemas: ${m.violations.join('; ')}`)
    return m.requests
  }
  return { ...model, collect }
}

/** Milliseconds on CLOCK_MONOTONIC, which the model's process reads too. */
const monotonicMs = () => Number(process.hrtime.bigint()) / 1e6

export async function run(log: (msg: string) => void): Promise<Record<string, unknown>> {
  const dir = mkdtempSync(join(tmpdir(), 'corral-bench-threads-'))
  const model = await startModel({ children: CHILDREN, calls: CALLS, firstTokenMs: FIRST_TOKEN_MS, lead: LEAD, worker: WORKER, textChars: STREAM.textChars, chunkDelayMs: STREAM.chunkDelayMs })
  const router = new TimedToolRouter(join(dir, 'effects.log'))
  const engine = Engine.open({
    dataDir: dir,
    token: 'bench',
    env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k' },
    toolRouter: router,
    defaultHands: false,
    // the desktop's and `corral serve`'s model client: on the event loop (CORRAL_BENCH_MODEL_THREAD=worker: on a thread of its own)
    harness: { stallTimeoutMs: 10_000, modelThread: MODEL_THREAD },
    log: () => {},
  })
  try {
    const s = engine.services
    const worker = s.agents.create({ name: 'worker', model: 'claude-sonnet-5-5', system: WORKER, tools: [{ type: 'agent_toolset_20260401' }] } as never)
    const lead = s.agents.create({
      name: 'lead',
      model: 'claude-sonnet-5-5',
      system: LEAD,
      tools: [{ type: 'agent_toolset_20260401' }],
      multiagent: { type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: [worker.id] } },
    } as never)
    const single = s.agents.create({ name: 'single', model: 'claude-sonnet-5-5', system: 'warm-up', tools: [] } as never)
    const env = s.environments.create({ name: 'bench', config: { type: 'cloud' } })
    // the bench follows the session through a tail of the log (told once per commit, in order):
    // polling it every few ms was the bench's own CPU on the event loop the engine shares
    const idleAt = (id: string, done: (e: LoggedEvent[]) => boolean) =>
      new Promise<LoggedEvent[]>((resolve) => {
        const evs: LoggedEvent[] = []
        let finished = false
        const stop = s.log.tail(id, 0, ({ event }) => {
          evs.push(event)
          if (finished || event.type !== 'session.status_idle' || !done(evs)) return
          finished = true
          queueMicrotask(() => stop())
          resolve(evs)
        })
      })
    // a first single-threaded session (the SDK client, the statements)
    const warm = await s.sessions.create({ agent: single.id, environment_id: env.id, initial_events: [{ type: 'user.message', content: [{ type: 'text', text: 'hi' }] }] } as never)
    await idleAt(warm.id, (e) => e.at(-1)?.type === 'session.status_idle')
    const fanOutDone = (e: LoggedEvent[]) => e.at(-1)?.type === 'session.status_idle' && e.some((x) => x.type === 'agent.message' && (x as unknown as { content: { text: string }[] }).content[0].text === 'all done')
    // when each child's report committed (by the child's task text), told at the commit (before its
    // fsync), as the primary's brain is
    const taskOfThread = new Map<string, string>()
    let reportedAt = new Map<string, number>()
    const stopWatch = s.log.subscribeCommitted(({ event }) => {
      if (event.type !== 'agent.thread_message_received') return
      const e = event as unknown as { session_thread_id?: string; from_session_thread_id?: string; content: { type: string; text?: string }[] }
      if (e.session_thread_id) taskOfThread.set(e.session_thread_id, e.content[0]?.text ?? '')
      else if (e.from_session_thread_id && taskOfThread.has(e.from_session_thread_id)) reportedAt.set(taskOfThread.get(e.from_session_thread_id)!, monotonicMs())
    })
    /**
     * One fan-out (a new session of the lead) on this engine, measured. `memory`: between two full
     * GCs, for the RSS and heap per idle child; the timed fan-outs force none (see MEMORY_DEFINITION).
     */
    const fanOut = async (last: boolean, rooms = false, memory = false) => {
      reportedAt = new Map()
      // what the timed fan-outs left is collected, and the pages it held given back, before the baseline
      if (memory) for (let i = 0; i < 3; i++) gc(), await new Promise((r) => setTimeout(r, 20))
      const rssBefore = process.memoryUsage()
      const statements = process.env.CORRAL_BENCH_SQL && last ? countStatements(engine) : undefined
      const stopProfile = last ? await profileWindow() : async () => {}
      const stopRooms = rooms ? await startRoomsWindow() : undefined
      const modelCpu0 = await model.cpuMs()
      const elu0 = performance.eventLoopUtilization()
      const cpu0 = process.cpuUsage()
      const loopCpu0 = eventLoopThreadCpuMs()
      const started = performance.now()
      const startedMono = monotonicMs()
      const sess = await s.sessions.create({ agent: lead.id, environment_id: env.id, initial_events: [{ type: 'user.message', content: [{ type: 'text', text: 'fan out' }] }] } as never)
      const evs = await idleAt(sess.id, fanOutDone)
      const wallMs = performance.now() - started
      const elu = performance.eventLoopUtilization(elu0)
      const cpu = process.cpuUsage(cpu0)
      const loopCpu1 = eventLoopThreadCpuMs()
      const split: RoomSplit | undefined = await stopRooms?.()
      const modelCpuMs = (await model.cpuMs()) - modelCpu0
      await stopProfile()
      const sqlStatements = statements?.stop()
      if (process.env.CORRAL_BENCH_SQL === 'top' && statements) for (const { sql, n, ms } of statements.top(25)) log(`${n}\t${ms.toFixed(1)} ms\t${sql}`)
      if (memory) gc()
      const rssAfter = process.memoryUsage()
      // overhead per thread turn (TURN_OVERHEAD_DEFINITION), of this fan-out's requests only
      const requests = (await model.collect()).filter((r) => r.arrivedAt >= startedMono)
      if (process.env.CORRAL_BENCH_TIMELINE) appendFileSync(process.env.CORRAL_BENCH_TIMELINE, JSON.stringify({ fan_out_started_at: startedMono, requests, reported_at: Object.fromEntries(reportedAt) }) + '\n')
      const byChild = new Map<string, ThreadsModelRequest[]>()
      for (const r of requests) if (r.role === 'worker' && r.task !== undefined) byChild.set(r.task, [...(byChild.get(r.task) ?? []), r])
      const turns: number[] = []
      const byRound: number[][] = Array.from({ length: CALLS + 1 }, () => [])
      const toolMs: number[] = []
      for (const [task, reqs] of byChild) {
        for (let i = 0; i < reqs.length; i++) {
          const ended = reqs[i].endedAt
          if (ended === undefined) continue
          let turn: number | undefined
          if (i + 1 < reqs.length) {
            const tool = router.executeMs.get(reqs[i + 1].lastToolResultId ?? '') ?? 0
            toolMs.push(tool)
            turn = reqs[i + 1].arrivedAt - ended - tool
          } else if (reportedAt.has(task)) turn = reportedAt.get(task)! - ended
          if (turn === undefined) continue
          turns.push(turn)
          byRound[i]?.push(turn)
        }
      }
      const children = evs.filter((e) => e.type === 'session.thread_created').length
      const modelRequests = Math.max(1, requests.filter((r) => r.role !== 'other').length)
      return {
        events: evs,
        children,
        figures: {
          wall_ms: Math.round(wallMs),
          wall_over_ideal: Number((wallMs / IDEAL_MS).toFixed(2)),
          // latency of a child turn: includes waiting behind the other 24 children's turns, which all
          // come due at nearly the same instant (every response's delay ends together) on one event loop
          turn_overhead: summary(turns),
          // by the child's response: the 1st comes due for all 25 at once, later ones spread out
          turn_overhead_by_response: byRound.map((r) => summary(r)),
          tool_execute: summary(toolMs),
          // the work itself: the engine's event-loop busy time over the fan-out, per model request
          busy_ms_per_request: Number((elu.active / modelRequests).toFixed(2)),
          cpu_ms_per_request: Number(((cpu.user + cpu.system) / 1000 / modelRequests).toFixed(2)),
          ...(loopCpu0 !== undefined && loopCpu1 !== undefined
            ? {
                cpu_ms_per_request_by_thread: {
                  event_loop: Number(((loopCpu1 - loopCpu0) / modelRequests).toFixed(2)),
                  others: Number(((cpu.user + cpu.system) / 1000 / modelRequests - (loopCpu1 - loopCpu0) / modelRequests).toFixed(2)),
                },
              }
            : {}),
          // the scripted model's process (not the engine's, but on the same two cores: a real model's is not)
          model_cpu_ms_per_request: Number((modelCpuMs / modelRequests).toFixed(2)),
          event_loop_utilization: Number(elu.utilization.toFixed(2)),
          // CORRAL_BENCH_SQL=1: SQLite statements run (reads, writes, BEGIN/COMMIT) per model request, a
          // figure the machine's load does not move (counting them costs a little time of its own)
          ...(sqlStatements !== undefined ? { sql_statements_per_request: Number((sqlStatements / modelRequests).toFixed(1)) } : {}),
          ...(memory
            ? {
                rss_per_idle_child_mb: Number(((rssAfter.rss - rssBefore.rss) / children / 2 ** 20).toFixed(3)),
                heap_per_idle_child_mb: Number(((rssAfter.heapUsed - rssBefore.heapUsed) / children / 2 ** 20).toFixed(3)),
              }
            : {}),
          lead_requests: requests.filter((r) => r.role === 'lead').length,
          ...(split
            ? {
                cpu_by_room_ms_per_request: Object.fromEntries(Object.entries(split.byRoom).map(([k, v]) => [k, Number((v / modelRequests).toFixed(3))])),
                cpu_over_sampled: split.cpuOverSampled === null ? null : Number(split.cpuOverSampled.toFixed(2)),
              }
            : {}),
        },
      }
    }
    log(`fanning out to ${CHILDREN} children × ${CALLS} tool calls, ${FIRST_TOKEN_MS} ms first-token delay, ${FANOUTS} times on one engine`)
    const runs: Awaited<ReturnType<typeof fanOut>>[] = []
    for (let i = 0; i < FANOUTS; i++) {
      runs.push(await fanOut(i === FANOUTS - 1))
      log(`fan-out ${i + 1}: ${JSON.stringify(runs[i].figures)}`)
    }
    // one more, profiled (bench/cpu-rooms.ts), after the timed ones so the profiler's cost is in none of them
    const profiled = await fanOut(false, true)
    // and one between two full GCs, for the memory figures
    const memoryRun = await fanOut(false, false, true)
    stopWatch()
    const warmRuns = runs.length > 1 ? runs.slice(1) : runs
    const median = (xs: number[]) => percentile(xs, 50)
    const lastRun = runs[runs.length - 1]
    const result = {
      children: lastRun.children,
      model_thread: MODEL_THREAD,
      fan_outs: FANOUTS,
      tool_calls: router.executeMs.size,
      events: lastRun.events.length,
      ideal_ms: IDEAL_MS,
      targets: { turn_overhead_p50_ms: 5, rss_per_idle_child_mb: 1 },
      turn_overhead_definition: TURN_OVERHEAD_DEFINITION,
      fan_out_definition: FAN_OUT_DEFINITION,
      machine_definition: MACHINE_DEFINITION,
      turn_floor_definition: TURN_FLOOR_DEFINITION,
      cpu_by_room_definition: `one more fan-out after the timed ones, profiled (the profiler's cost is in none of the timed figures): per model request, ${ROOMS_DEFINITION}; \`turn_overhead_p50_ms\` here is the profiled fan-out's`,
      // the figures the targets are held against: the medians over the warm fan-outs (2nd and later)
      turn_overhead_p50_ms: median(warmRuns.map((r) => r.figures.turn_overhead.p50_ms)),
      turn_overhead_p95_ms: median(warmRuns.map((r) => r.figures.turn_overhead.p95_ms)),
      busy_ms_per_request: median(warmRuns.map((r) => r.figures.busy_ms_per_request)),
      cpu_ms_per_request: median(warmRuns.map((r) => r.figures.cpu_ms_per_request)),
      model_cpu_ms_per_request: median(warmRuns.map((r) => r.figures.model_cpu_ms_per_request)),
      wall_ms: median(warmRuns.map((r) => r.figures.wall_ms)),
      cpu_ms_per_request_by_thread: warmRuns[0].figures.cpu_ms_per_request_by_thread
        ? {
            event_loop: median(warmRuns.map((r) => r.figures.cpu_ms_per_request_by_thread?.event_loop ?? NaN)),
            others: median(warmRuns.map((r) => r.figures.cpu_ms_per_request_by_thread?.others ?? NaN)),
          }
        : null,
      memory_definition: MEMORY_DEFINITION,
      rss_per_idle_child_mb: memoryRun.figures.rss_per_idle_child_mb,
      heap_per_idle_child_mb: memoryRun.figures.heap_per_idle_child_mb,
      cpu_by_room: { ...profiled.figures.cpu_by_room_ms_per_request, cpu_over_sampled: profiled.figures.cpu_over_sampled, turn_overhead_p50_ms: profiled.figures.turn_overhead.p50_ms },
      // the process's first fan-out, before the JIT compiled the engine's code
      cold: runs[0].figures,
      runs: runs.map((r) => r.figures),
      // the machine's load while measuring (2 cores shared with other work inflate every figure)
      load_average_1m: Number(loadavg()[0].toFixed(2)),
      // after the fan-outs, so they do not disturb them
      turn_floor: await measureTurnFloor({ url: model.url, system: WORKER, chains: 16, collect: model.collect }),
      machine: await probeMachine(),
    }
    log(JSON.stringify(result))
    return result
  } finally {
    await engine.close()
    await model.close()
    rmSync(dir, { recursive: true, force: true })
  }
}
