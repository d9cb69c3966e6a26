import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Engine } from '../../src/main/engine'
import { callTool, say, ScriptedModelServer, toolResultsOf } from '../support/model-server'
import { bwrapReq } from '../integration/hands/support'
import { waitForIdle } from '../integration/engine/support'
import { isStatusDelta } from '../support/start-notes'

/*
 * Corral's tool-output previews: while a bash call runs, a stream that asks for
 * `event_deltas=agent.tool_result` hears its output as `event_start` / `event_delta` previews of
 * the result, which the stored `agent.tool_result` with the same id concludes. A client that does
 * not ask (the official SDK's plain stream, or one asking only for the API's preview types) sees
 * exactly the API's events. Real engine, real bubblewrap sandbox, scripted model.
 */

const COMMAND = 'for i in 1 2 3; do echo line$i; sleep 0.3; done'

interface SseMessage {
  type: string
  data: Record<string, unknown>
}

/** Reads a raw SSE stream (the SDK's types do not name Corral's preview type) until `until` says stop. */
async function readSse(url: string, token: string, until: (m: SseMessage) => boolean, signal: AbortSignal): Promise<{ messages: SseMessage[]; at: number[] }> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' }, signal })
  if (!res.ok || !res.body) throw new Error(`stream: HTTP ${res.status}`)
  const messages: SseMessage[] = []
  const at: number[] = []
  const decoder = new TextDecoder()
  let buf = ''
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buf += decoder.decode(chunk, { stream: true })
    let end: number
    while ((end = buf.indexOf('\n\n')) !== -1) {
      const block = buf.slice(0, end)
      buf = buf.slice(end + 2)
      const type = /^event: (.*)$/m.exec(block)?.[1]
      const data = /^data: (.*)$/m.exec(block)?.[1]
      if (!type || !data) continue
      const m = { type, data: JSON.parse(data) as Record<string, unknown> }
      messages.push(m)
      at.push(Date.now())
      if (until(m)) return { messages, at }
    }
  }
  return { messages, at }
}

const bwrap = bwrapReq()
describe.skipIf(!bwrap.ok)('tool output previews on the stream', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-tool-previews-'))
  let model: ScriptedModelServer
  let engine: Engine
  let client: Anthropic
  let url: string
  let agentId: string
  let envId: string

  beforeAll(async () => {
    model = await ScriptedModelServer.start((req) => (toolResultsOf(req).length === 0 ? callTool('bash', { command: COMMAND }, 'Counting.') : say('Done.')))
    writeFileSync(join(dataDir, 'settings.json'), JSON.stringify({ sandboxBackend: 'bubblewrap' }))
    engine = Engine.open({ dataDir, token: 'test-token', env: { PATH: process.env.PATH, ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k' }, log: () => {} })
    url = (await engine.listen(0)).url
    client = new Anthropic({ baseURL: url, apiKey: 'test-token', maxRetries: 0 })
    agentId = (await client.beta.agents.create({ name: 'counter', model: 'claude-sonnet-4-6', tools: [{ type: 'agent_toolset_20260401' }] })).id
    envId = (await client.beta.environments.create({ name: 'local', config: { type: 'cloud' } })).id
  })
  afterAll(async () => {
    await engine?.close()
    await model?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  it("streams a running bash call's output line by line to a client that opts in, concluded by the stored result with the same id, and shows a client that does not opt in none of it", async () => {
    const session = await client.beta.sessions.create({ agent: agentId, environment_id: envId })
    const ac = new AbortController()
    const stop = (m: SseMessage) => m.type === 'session.status_idle'
    const optedIn = readSse(`${url}/v1/sessions/${session.id}/events/stream?event_deltas=agent.tool_result`, 'test-token', stop, ac.signal)
    const apiTypesOnly = readSse(`${url}/v1/sessions/${session.id}/events/stream?event_deltas=agent.message&event_deltas=agent.thinking`, 'test-token', stop, ac.signal)
    // The official SDK's plain stream.
    const sdkStream = await client.beta.sessions.events.stream(session.id)
    const sdkTypes = (async () => {
      const types: string[] = []
      for await (const e of sdkStream) {
        types.push(e.type)
        if (e.type === 'session.status_idle') break
      }
      return types
    })()
    await new Promise((r) => setTimeout(r, 200)) // the streams are subscribed
    await client.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'count' }] }] })
    const timer = setTimeout(() => ac.abort(), 60_000)
    const [inGot, apiGot, sdkGot] = await Promise.all([optedIn, apiTypesOnly, sdkTypes])
    clearTimeout(timer)
    sdkStream.controller.abort()
    const events = await waitForIdle(engine, session.id)

    const stored = events.find((e) => e.type === 'agent.tool_result') as unknown as { id: string; tool_use_id: string; content: { text: string }[] }
    const use = events.find((e) => e.type === 'agent.tool_use') as unknown as { id: string }
    const starts = inGot.messages.filter((m) => m.type === 'event_start')
    expect(starts).toHaveLength(1)
    expect(starts[0].data.event).toEqual({ id: stored.id, type: 'agent.tool_result', tool_use_id: use.id })
    type Delta = { event_id: string; delta: { type: string; content: { type: string; text: string }; stream?: string } }
    const deltaIdx = inGot.messages.map((m, i) => (m.type === 'event_delta' && !isStatusDelta((m.data as Delta).delta) ? i : -1)).filter((i) => i >= 0)
    const deltas = deltaIdx.map((i) => inGot.messages[i].data as Delta)
    expect(deltas.every((d) => d.event_id === stored.id && d.delta.type === 'content_delta' && d.delta.content.type === 'text')).toBe(true)
    expect(deltas.map((d) => d.delta.content.text).join('')).toBe('line1\nline2\nline3\n')
    // The lines came one by one while the command ran: the first before the last was written,
    // and all of them before the stored result.
    const firstLineAt = inGot.at[deltaIdx[deltas.findIndex((d) => d.delta.content.text.includes('line1'))]]
    const lastLineAt = inGot.at[deltaIdx[deltas.findIndex((d) => d.delta.content.text.includes('line3'))]]
    expect(lastLineAt - firstLineAt).toBeGreaterThan(300)
    const resultIdx = inGot.messages.findIndex((m) => m.type === 'agent.tool_result')
    expect(resultIdx).toBeGreaterThan(deltaIdx[deltaIdx.length - 1])
    expect(inGot.messages[resultIdx].data.id).toBe(stored.id)
    expect(stored.content[0].text).toBe('line1\nline2\nline3')

    // Clients that did not ask for tool output previews see the API's events only.
    expect(apiGot.messages.some((m) => (m.type === 'event_start' || m.type === 'event_delta') && (m.data.event_id === stored.id || (m.data.event as { id?: string } | undefined)?.id === stored.id))).toBe(false)
    expect(sdkGot).not.toContain('event_start')
    expect(sdkGot).not.toContain('event_delta')
    expect(sdkGot).toContain('agent.tool_result')
    // Previews are never stored.
    const listed: string[] = []
    for await (const e of client.beta.sessions.events.list(session.id)) listed.push(e.type)
    expect(listed).not.toContain('event_start')
    expect(listed).not.toContain('event_delta')
  })

  it('refuses an unknown event_deltas type with a 400 naming the field', async () => {
    const session = await client.beta.sessions.create({ agent: agentId, environment_id: envId })
    const res = await fetch(`${url}/v1/sessions/${session.id}/events/stream?event_deltas=agent.tool_use`, { headers: { authorization: 'Bearer test-token' } })
    expect(res.status).toBe(400)
    const body = (await res.json()) as { type: string; error: { type: string; message: string } }
    expect(body.type).toBe('error')
    expect(body.error.type).toBe('invalid_request_error')
    expect(body.error.message).toMatch(/event_deltas/)
  })
})
