/**
 * The work queue of a self_hosted environment (issue #13):
 *   - tool round trip through the queue: a session's `bash true` calls answered by `corral worker`'s
 *     machinery (the official SDK's EnvironmentWorker over HTTP, each call in a Docker sandbox of
 *     the worker) — agent.tool_use → user.tool_result, from the log's processed_at — beside the
 *     same calls on the engine's own local Docker hands (agent.tool_use → agent.tool_result), same run;
 *   - queue throughput: sessions enqueued, then polled and acked by one poller with the
 *     environment key, items per second from the first enqueue to the last ack.
 * The brain runs against the scripted model (no first-token delay) in both cases.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { Engine } from '../src/main/engine'
import { runCorralWorker } from '../src/main/cli/worker'
import { say, ScriptedModelServer, toolResultsOf } from '../test/support/model-server'
import { summary } from './stats'

const CALLS = 40

interface Ev {
  type: string
  id: string
  tool_use_id?: string
  processed_at?: string
  stop_reason?: { type: string }
}

async function idle(engine: Engine, sessionId: string, timeoutMs = 180_000): Promise<Ev[]> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const events = engine.services.log.read(sessionId, { after: 0, limit: 10_000 }).map((r) => r.event as unknown as Ev)
    if (events.some((e) => e.type === 'session.status_idle' && e.stop_reason?.type === 'end_turn')) return events
    if (Date.now() > deadline) throw new Error(`session ${sessionId} did not finish`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

function roundTrips(events: Ev[], resultType: string): number[] {
  const at = new Map(events.filter((e) => e.type === 'agent.tool_use').map((e) => [e.id, Date.parse(e.processed_at!)]))
  return events.filter((e) => e.type === resultType).map((e) => Date.parse(e.processed_at!) - at.get(e.tool_use_id!)!)
}

export async function run(log: (m: string) => void): Promise<Record<string, unknown>> {
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-bench-worker-'))
  const workerDir = mkdtempSync(join(tmpdir(), 'corral-bench-worker-w-'))
  const model = await ScriptedModelServer.start((req) => {
    const n = toolResultsOf(req).length
    return n < CALLS ? { kind: 'message', blocks: [{ type: 'tool_use', name: 'bash', input: { command: 'true' } }] } : say('done')
  })
  const engine = Engine.open({ dataDir, token: 'bench-token', env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k', PATH: process.env.PATH }, log: () => {} })
  const stop = new AbortController()
  let worker: Promise<void> | undefined
  try {
    const url = (await engine.listen(0)).url
    const api = new Anthropic({ baseURL: url, apiKey: 'bench-token', maxRetries: 0 })
    const agent = await api.beta.agents.create({ name: 'bench', model: 'claude-sonnet-4-6', tools: [{ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_allow' } } }] })

    log(`local Docker hands: ${CALLS} bash true calls in one session`)
    const cloud = await api.beta.environments.create({ name: 'local', config: { type: 'cloud', corral: { backend: 'docker', pool_size: 0 } } as never })
    const local = await api.beta.sessions.create({ agent: agent.id, environment_id: cloud.id })
    await api.beta.sessions.events.send(local.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'go' }] }] })
    const localTrips = roundTrips(await idle(engine, local.id), 'agent.tool_result')

    log(`through the queue: ${CALLS} bash true calls answered by a worker with Docker sandboxes`)
    const env = await api.beta.environments.create({ name: 'queue', config: { type: 'self_hosted' } })
    const key = (await (await fetch(`${url}/v1/corral/environments/${env.id}/keys`, { method: 'POST', headers: { authorization: 'Bearer bench-token' } })).json()) as { key: string }
    worker = runCorralWorker({ url, environmentId: env.id, environmentKey: key.key, backend: 'docker', dataDir: workerDir, log: () => {}, signal: stop.signal, maxIdleMs: 200 })
    const remote = await api.beta.sessions.create({ agent: agent.id, environment_id: env.id })
    await api.beta.sessions.events.send(remote.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'go' }] }] })
    const queueTrips = roundTrips(await idle(engine, remote.id), 'user.tool_result')
    stop.abort()
    await worker.catch(() => {})
    worker = undefined

    const ITEMS = 200
    log(`queue throughput: ${ITEMS} sessions enqueued, polled and acked by one poller`)
    const tEnv = await api.beta.environments.create({ name: 'throughput', config: { type: 'self_hosted' } })
    const tKey = (await (await fetch(`${url}/v1/corral/environments/${tEnv.id}/keys`, { method: 'POST', headers: { authorization: 'Bearer bench-token' } })).json()) as { key: string }
    const poller = new Anthropic({ baseURL: url, apiKey: null, authToken: tKey.key, maxRetries: 0 })
    const t0 = performance.now()
    for (let i = 0; i < ITEMS; i++) await api.beta.sessions.create({ agent: agent.id, environment_id: tEnv.id })
    const enqueued = performance.now() - t0
    let acked = 0
    const ackMs: number[] = []
    while (acked < ITEMS) {
      const a0 = performance.now()
      const w = await poller.beta.environments.work.poll(tEnv.id, { block_ms: 999 })
      if (!w) continue
      await poller.beta.environments.work.ack(w.id, { environment_id: tEnv.id })
      ackMs.push(performance.now() - a0)
      acked++
    }
    const total = performance.now() - t0
    const r = (x: number) => Math.round(x * 10) / 10
    const l = summary(localTrips)
    const q = summary(queueTrips)
    return {
      calls: CALLS,
      local_docker_round_trip: l,
      queue_round_trip: q,
      queue_over_local_p50: r(q.p50_ms / l.p50_ms),
      throughput: {
        items: ITEMS,
        enqueue_ms: r(enqueued),
        enqueue_to_last_ack_ms: r(total),
        items_per_second: r((ITEMS * 1000) / total),
        poll_plus_ack: summary(ackMs),
      },
      note: 'round trips from the log\'s processed_at (1 ms resolution): agent.tool_use → the call\'s result event; the queue path includes the SSE hop to the worker, its Docker sandbox call and the result POST',
    }
  } finally {
    stop.abort()
    await worker?.catch(() => {})
    await engine.close()
    await model.close()
    rmSync(dataDir, { recursive: true, force: true })
    rmSync(workerDir, { recursive: true, force: true })
  }
}
