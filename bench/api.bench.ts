/**
 * The local API: append → SSE delivery latency to a subscriber, and the send round trip over
 * HTTP (raw keep-alive client, and the official SDK). `npm run bench -- api`.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Agent, request, type IncomingMessage } from 'node:http'
import Anthropic from '@anthropic-ai/sdk'
import { Engine } from '../src/main/engine'
import { summary } from './stats'

function post(agent: Agent, port: number, path: string, token: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, method: 'POST', agent, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        res.resume()
        res.on('end', () => resolve(res.statusCode ?? 0))
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

export async function run(log: (msg: string) => void): Promise<Record<string, unknown>> {
  const dir = mkdtempSync(join(tmpdir(), 'corral-api-bench-'))
  const token = 'bench-token'
  const engine = Engine.open({ dataDir: dir, token, env: {}, log: () => {} })
  const server = await engine.listen(0)
  const client = new Anthropic({ baseURL: server.url, apiKey: token, maxRetries: 0 })
  const out: Record<string, unknown> = {}
  try {
    const agentId = (await client.beta.agents.create({ name: 'bench', model: 'claude-sonnet-4-6' })).id
    const envId = (await client.beta.environments.create({ name: 'bench' })).id
    const sid = (await client.beta.sessions.create({ agent: agentId, environment_id: envId })).id
    const { log: eventLog } = engine.services

    // --- append → SSE delivery: a raw SSE subscriber; time from append() to the chunk arriving.
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: server.port, path: `/v1/sessions/${sid}/events/stream`, headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } }, resolve)
      req.on('error', reject)
      req.end()
    })
    res.setEncoding('utf8')
    let waiting: { marker: string; resolve: (t: number) => void } | undefined
    let buf = ''
    res.on('data', (chunk: string) => {
      buf += chunk
      if (waiting && buf.includes(waiting.marker)) {
        const w = waiting
        waiting = undefined
        buf = ''
        w.resolve(performance.now())
      }
    })
    const sse: number[] = []
    const SSE_SAMPLES = 600
    for (let i = 0; i < SSE_SAMPLES + 50; i++) {
      const marker = `m-${i}-${Math.random()}`
      const arrived = new Promise<number>((resolve) => (waiting = { marker, resolve }))
      const t0 = performance.now()
      await eventLog.append(sid, [{ type: 'agent.message', content: [{ type: 'text', text: marker }] }])
      const t1 = await arrived
      if (i >= 50) sse.push(t1 - t0)
    }
    res.destroy()
    out.append_to_sse_delivery = { target_p50_ms: 5, ...summary(sse) }
    log(`append → SSE: ${JSON.stringify(out.append_to_sse_delivery)}`)

    // --- send round trip over HTTP (keep-alive), a user.message each time.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    const send: number[] = []
    const SEND_SAMPLES = 600
    for (let i = 0; i < SEND_SAMPLES + 50; i++) {
      const body = JSON.stringify({ events: [{ type: 'user.message', content: [{ type: 'text', text: `hello ${i}` }] }] })
      const t0 = performance.now()
      const status = await post(agent, server.port, `/v1/sessions/${sid}/events?beta=true`, token, body)
      if (status !== 200) throw new Error(`send answered ${status}`)
      if (i >= 50) send.push(performance.now() - t0)
    }
    agent.destroy()
    out.send_round_trip_http = { target_p50_ms: 5, ...summary(send) }
    log(`send round trip: ${JSON.stringify(out.send_round_trip_http)}`)

    // --- the same through the official SDK (what a user's program pays).
    const sdk: number[] = []
    for (let i = 0; i < 300 + 30; i++) {
      const t0 = performance.now()
      await client.beta.sessions.events.send(sid, { events: [{ type: 'user.message', content: [{ type: 'text', text: `sdk ${i}` }] }] })
      if (i >= 30) sdk.push(performance.now() - t0)
    }
    out.send_round_trip_sdk = summary(sdk)
    log(`send round trip (SDK): ${JSON.stringify(out.send_round_trip_sdk)}`)

    // --- 16 concurrent senders on 16 sessions: throughput and latency under group commit.
    const sessions: string[] = []
    for (let i = 0; i < 16; i++) sessions.push((await client.beta.sessions.create({ agent: agentId, environment_id: envId })).id)
    const conc: number[] = []
    const pool = new Agent({ keepAlive: true, maxSockets: 16 })
    const start = performance.now()
    await Promise.all(
      sessions.map(async (s) => {
        for (let i = 0; i < 150; i++) {
          const t0 = performance.now()
          await post(pool, server.port, `/v1/sessions/${s}/events`, token, JSON.stringify({ events: [{ type: 'user.message', content: [{ type: 'text', text: `c ${i}` }] }] }))
          conc.push(performance.now() - t0)
        }
      }),
    )
    pool.destroy()
    out.send_16_concurrent = { sends_per_s: Math.round(conc.length / ((performance.now() - start) / 1000)), ...summary(conc) }
    log(`16 concurrent senders: ${JSON.stringify(out.send_16_concurrent)}`)
  } finally {
    await engine.close()
    rmSync(dir, { recursive: true, force: true })
  }
  return out
}
