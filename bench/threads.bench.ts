/**
 * Threads benchmark (npm run bench -- threads): a lead fans out to 25 child threads that each
 * run 3 tool calls against the scripted model server (100 ms before each response's first byte).
 *  - wall time from the user's message to the session's final idle, against the ideal (the
 *    model's own latency on the critical path: lead request, 4 child requests, final lead request);
 *  - scheduler + harness overhead per thread step: from a child's model response leaving the
 *    server to that child's next model request arriving (fold, log appends, the tool call through
 *    the router, the next view), target p50 ≤ 5 ms. The 25 children's responses all come due
 *    at once, so this latency includes each step's wait behind the others' on one event loop;
 *    `busy_ms_per_request` (event-loop busy time over the fan-out per model request) is the
 *    work per step itself;
 *  - engine RSS (and heap) per idle child thread once all 25 are idle, target ≤ 1 MB.
 * The model server runs in this process (its CPU shares the event loop; it only sleeps and
 * writes a few SSE events per request).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { Engine } from '../src/main/engine'
import type { LoggedEvent } from '../src/main/session/event-log'
import { summary } from './stats'
import { ScriptedModelServer, say, type RecordedRequest, type ScriptStep } from '../test/support/model-server'
import { RecordingToolRouter } from '../test/support/harness-tool-router'

const CHILDREN = 25
const CALLS = 3
const FIRST_TOKEN_MS = 100
const LEAD = 'You are the lead.'

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

const userTexts = (req: RecordedRequest) =>
  req.body.messages.flatMap((m) => (m.role === 'user' && typeof m.content !== 'string' ? m.content.flatMap((b) => (b.type === 'text' ? [String(b.text)] : [])) : []))

export async function run(log: (msg: string) => void): Promise<Record<string, unknown>> {
  const dir = mkdtempSync(join(tmpdir(), 'corral-bench-threads-'))
  /** Per child (its task text): the server-side times of its requests. */
  const byChild = new Map<string, RecordedRequest[]>()
  const model = await ScriptedModelServer.start((req): ScriptStep => {
    const sys = req.body.system?.[0]?.text ?? ''
    if (sys === LEAD) {
      if (req.body.messages.length === 1) {
        return { kind: 'message', delayMs: FIRST_TOKEN_MS, blocks: Array.from({ length: CHILDREN }, (_, i) => ({ type: 'tool_use' as const, name: 'send_to_agent', input: { agent: 'worker', message: `task ${i}` } })) }
      }
      const reports = userTexts(req).filter((t) => t.startsWith('<message from=')).length
      return say(reports >= CHILDREN ? 'all done' : 'waiting', { delayMs: FIRST_TOKEN_MS })
    }
    if (sys !== 'You are a worker.') return say('warm', { delayMs: 1 })
    const task = userTexts(req)[0]
    const list = byChild.get(task) ?? []
    list.push(req)
    byChild.set(task, list)
    let results = 0
    for (const m of req.body.messages) if (m.role === 'user' && typeof m.content !== 'string') results += m.content.filter((b) => b.type === 'tool_result').length
    if (results >= CALLS) return say('finished', { delayMs: FIRST_TOKEN_MS })
    return { kind: 'message', delayMs: FIRST_TOKEN_MS, blocks: [{ type: 'tool_use', name: 'bash', input: { command: `echo ${results}` } }] }
  })
  model.keepRequests = 10_000
  const router = new RecordingToolRouter(join(dir, 'effects.log'), { delayMs: 0, durable: false })
  const engine = Engine.open({
    dataDir: dir,
    token: 'bench',
    env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k' },
    toolRouter: router,
    defaultHands: false,
    harness: { stallTimeoutMs: 10_000 },
    log: () => {},
  })
  try {
    const s = engine.services
    const worker = s.agents.create({ name: 'worker', model: 'claude-sonnet-5-5', system: 'You are a worker.', tools: [{ type: 'agent_toolset_20260401' }] } as never)
    const lead = s.agents.create({
      name: 'lead',
      model: 'claude-sonnet-5-5',
      system: LEAD,
      tools: [{ type: 'agent_toolset_20260401' }],
      multiagent: { type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: [worker.id] } },
    } as never)
    const single = s.agents.create({ name: 'single', model: 'claude-sonnet-5-5', system: 'warm-up', tools: [] } as never)
    const env = s.environments.create({ name: 'bench', config: { type: 'cloud' } })
    // the bench's own polling reads only what was appended since its last look (re-reading the
    // whole log every 2 ms cost ~300 ms of the event loop the engine shares, counted as overhead)
    const eventsOf = (id: string, out: LoggedEvent[] = []): LoggedEvent[] => {
      for (;;) {
        const page = s.log.read(id, { after: out.length, limit: 1000 })
        out.push(...page.map((p) => p.event))
        if (page.length < 1000) return out
      }
    }
    const idleAt = async (id: string, done: (e: LoggedEvent[]) => boolean) => {
      const evs: LoggedEvent[] = []
      for (;;) {
        eventsOf(id, evs)
        if (evs.at(-1)?.type === 'session.status_idle' && done(evs)) return evs
        await new Promise((r) => setTimeout(r, 5))
      }
    }
    // warm-up: one single-threaded session (the SDK client, the statements, the JIT)
    const warm = await s.sessions.create({ agent: single.id, environment_id: env.id, initial_events: [{ type: 'user.message', content: [{ type: 'text', text: 'hi' }] }] } as never)
    await idleAt(warm.id, (e) => e.at(-1)?.type === 'session.status_idle')
    gc()
    const rssBefore = process.memoryUsage()
    log(`fanning out to ${CHILDREN} children × ${CALLS} tool calls, ${FIRST_TOKEN_MS} ms first-token delay`)
    const elu0 = performance.eventLoopUtilization()
    const cpu0 = process.cpuUsage()
    const started = performance.now()
    const sess = await s.sessions.create({ agent: lead.id, environment_id: env.id, initial_events: [{ type: 'user.message', content: [{ type: 'text', text: 'fan out' }] }] } as never)
    const evs = await idleAt(sess.id, (e) => e.at(-1)?.type === 'session.status_idle' && e.some((x) => x.type === 'agent.message' && (x as unknown as { content: { text: string }[] }).content[0].text === 'all done'))
    const wallMs = performance.now() - started
    const elu = performance.eventLoopUtilization(elu0)
    const cpu = process.cpuUsage(cpu0)
    const idealMs = FIRST_TOKEN_MS * (1 + CALLS + 1 + 1)
    gc()
    const rssAfter = process.memoryUsage()
    // overhead per child step: its response's first byte (the delay is over; the rest is a few
    // SSE events) to its next request's arrival
    const gaps: number[] = []
    for (const reqs of byChild.values()) for (let i = 1; i < reqs.length; i++) if (reqs[i - 1].firstByteAt !== undefined) gaps.push(reqs[i].arrivedAt - reqs[i - 1].firstByteAt!)
    const children = evs.filter((e) => e.type === 'session.thread_created').length
    const result = {
      children,
      tool_calls: router.effects().length,
      events: evs.length,
      wall_ms: Math.round(wallMs),
      ideal_ms: idealMs,
      wall_over_ideal: Number((wallMs / idealMs).toFixed(2)),
      // latency of a child step: includes waiting behind the other 24 children's steps, which all
      // come due at the same instant (every response's delay ends together) on one event loop
      step_overhead: summary(gaps),
      // the work itself: the event loop's busy time (engine + the in-process model server's SSE
      // writing, its delays excluded: it sleeps) over the fan-out, per model request served
      busy_ms_per_request: Number((elu.active / Math.max(1, model.requests.length - 1)).toFixed(2)),
      cpu_ms_per_request: Number(((cpu.user + cpu.system) / 1000 / Math.max(1, model.requests.length - 1)).toFixed(2)),
      event_loop_utilization: Number(elu.utilization.toFixed(2)),
      rss_per_idle_child_mb: Number(((rssAfter.rss - rssBefore.rss) / children / 2 ** 20).toFixed(3)),
      heap_per_idle_child_mb: Number(((rssAfter.heapUsed - rssBefore.heapUsed) / children / 2 ** 20).toFixed(3)),
      // the machine's load while measuring (2 cores shared with other work inflate every figure)
      load_average_1m: Number(loadavg()[0].toFixed(2)),
      lead_requests: model.requests.filter((r) => (r.body.system?.[0]?.text ?? '') === LEAD).length,
    }
    log(JSON.stringify(result))
    if (process.env.CORRAL_BENCH_TRACE) {
      const tid = (evs.find((e) => e.type === 'session.thread_created') as unknown as { session_thread_id: string }).session_thread_id
      let prev = 0
      for (const e of s.log.read(sess.id, { threadId: tid, limit: 1000 })) {
        const t = Date.parse(e.event.processed_at)
        log(`${e.seq} ${e.event.type} +${prev ? t - prev : 0}`)
        prev = t
      }
      const reqs = [...byChild.values()][0]
      for (const r of reqs) log(`req arrived ${r.arrivedAt.toFixed(1)} firstByte ${r.firstByteAt?.toFixed(1)}`)
    }
    return result
  } finally {
    await engine.close()
    await model.close()
    rmSync(dir, { recursive: true, force: true })
  }
}
