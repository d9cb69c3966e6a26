import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Engine } from '../../src/main/engine'
import { say, ScriptedModelServer, toolCall, toolResultsOf, type RecordedRequest, type ScriptStep } from '../support/model-server'
import { bwrapReq } from '../integration/hands/support'
import { isStatusDelta } from '../support/start-notes'

/*
 * A child thread's previews (spec multiagent §4, §5): a client that opens the child's stream
 * (`/threads/{tid}/stream`) with `event_deltas` hears the child's `event_start` / `event_delta`
 * previews, each naming the child (`session_thread_id`), concluded by the stored event with the
 * same id; the child's report (the final text of its turn) is never previewed; the session's
 * stream shows a child's previews to nobody, and a client that does not ask sees none. Real
 * engine, real bubblewrap sandbox for the child's bash call, the official SDK, scripted model.
 */

const LEAD = 'You are the lead.'
const WORKER = 'You are the worker.'
const COMMAND = 'for i in 1 2 3; do echo line$i; sleep 0.2; done'
const systemOf = (req: RecordedRequest) => req.body.system?.[0]?.text ?? ''

type Streamed = { type: string; id?: string; session_thread_id?: string | null; event?: { id: string; type: string; session_thread_id?: string }; event_id?: string; delta?: { content: { text: string } }; content?: { text: string }[] }

const bwrap = bwrapReq()
describe.skipIf(!bwrap.ok)("a child thread's previews", () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-thread-previews-'))
  let model: ScriptedModelServer
  let engine: Engine
  let client: Anthropic

  beforeAll(async () => {
    model = await ScriptedModelServer.start((req): ScriptStep => {
      const sys = systemOf(req)
      if (sys === LEAD) {
        if (req.body.messages.length === 1) return toolCall(req, 'send_to_agent', { agent: 'worker', message: 'Count to three.' })
        return say(JSON.stringify(req.body.messages).includes('Counted to three') ? 'The worker counted.' : 'Delegated to the worker.', { chunkSize: 4 })
      }
      if (sys !== WORKER) throw new Error(`unexpected request: ${sys}`)
      // the first answer waits a little, so the test opens the child's streams before it starts
      if (toolResultsOf(req).length === 0) return { ...(toolCall(req, 'bash', { command: COMMAND }, 'Counting now, step by step.') as Extract<ScriptStep, { kind: 'message' }>), delayMs: 500, chunkSize: 4, chunkDelayMs: 5 }
      return say('Counted to three: line1, line2, line3.', { chunkSize: 4, chunkDelayMs: 5 })
    })
    writeFileSync(join(dataDir, 'settings.json'), JSON.stringify({ sandboxBackend: 'bubblewrap' }))
    engine = Engine.open({ dataDir, token: 'test-token', env: { PATH: process.env.PATH, ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k' }, log: () => {} })
    const url = (await engine.listen(0)).url
    client = new Anthropic({ baseURL: url, apiKey: 'test-token', maxRetries: 0 })
  })
  afterAll(async () => {
    await engine?.close()
    await model?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  /** Collects a stream's events until `stop` says so. */
  async function collect(stream: AsyncIterable<unknown> & { controller: AbortController }, stop: (e: Streamed, seen: Streamed[]) => boolean): Promise<Streamed[]> {
    const seen: Streamed[] = []
    for await (const e of stream) {
      seen.push(e as Streamed)
      if (stop(e as Streamed, seen)) break
    }
    stream.controller.abort()
    return seen
  }
  const previewsOf = (evs: Streamed[]) => evs.filter((e) => e.type === 'event_start' || e.type === 'event_delta')
  const deltaText = (evs: Streamed[], id: string) =>
    evs
      .filter((e) => e.type === 'event_delta' && e.event_id === id && !isStatusDelta(e.delta as { stream?: string }))
      .map((e) => e.delta!.content.text)
      .join('')

  it("streams the child's previews on its own stream to a client that asks, never its report, and none of them on the session's stream", async () => {
    const worker = await client.beta.agents.create({ name: 'worker', model: 'claude-sonnet-4-6', system: WORKER, tools: [{ type: 'agent_toolset_20260401' }] })
    const lead = await client.beta.agents.create({
      name: 'lead',
      model: 'claude-sonnet-4-6',
      system: LEAD,
      multiagent: { type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: [worker.id] } },
    } as Parameters<typeof client.beta.agents.create>[0])
    const env = await client.beta.environments.create({ name: 'local', config: { type: 'cloud' } })
    const sid = (await client.beta.sessions.create({ agent: lead.id, environment_id: env.id })).id

    const sessionStream = await client.beta.sessions.events.stream(sid, { event_deltas: ['agent.message', 'agent.thinking', 'agent.tool_result' as never] })
    let childReady!: (id: string) => void
    const childId = new Promise<string>((r) => (childReady = r))
    const onSession = collect(sessionStream, (e, seen) => {
      if (e.type === 'session.thread_created') childReady(e.session_thread_id as string)
      return e.type === 'session.status_idle' && seen.some((x) => x.type === 'agent.thread_message_received')
    })
    await client.beta.sessions.events.send(sid, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'Get it counted.' }] }] })
    const child = await childId
    const childDone = (e: Streamed) => e.type === 'session.thread_status_idle'
    const optedIn = collect(await client.beta.sessions.threads.events.stream(child, { session_id: sid, event_deltas: ['agent.message', 'agent.tool_result' as never] }), childDone)
    const plain = collect(await client.beta.sessions.threads.events.stream(child, { session_id: sid }), childDone)
    const [onChild, onPlain, onPrimary] = await Promise.all([optedIn, plain, onSession])

    // the child's text of a response that calls a tool: previewed under the stored message's id, naming the child
    const message = onChild.find((e) => e.type === 'agent.message')!
    const start = onChild.find((e) => e.type === 'event_start' && e.event?.type === 'agent.message')!
    expect(start.event).toEqual({ id: message.id, type: 'agent.message', session_thread_id: child })
    expect(deltaText(onChild, message.id!)).toBe('Counting now, step by step.')
    expect(onChild.indexOf(message)).toBeGreaterThan(onChild.indexOf(start))
    // its bash call's output, on its own stream only
    const result = onChild.find((e) => e.type === 'agent.tool_result')!
    expect(onChild.find((e) => e.type === 'event_start' && e.event?.type === 'agent.tool_result')?.event).toMatchObject({ id: result.id, session_thread_id: child })
    expect(deltaText(onChild, result.id!)).toBe('line1\nline2\nline3\n')
    // the report is never previewed: one start per previewed event, none for the final text
    const report = onChild.find((e) => e.type === 'agent.thread_message_sent')!
    expect(report.content?.[0].text).toBe('Counted to three: line1, line2, line3.')
    expect(onChild.filter((e) => e.type === 'event_start').map((e) => e.event!.id).sort()).toEqual([message.id, result.id].sort())
    expect(previewsOf(onChild).some((e) => (e.delta?.content.text ?? '').includes('Counted'))).toBe(false)

    // a client that does not ask sees no preview
    expect(previewsOf(onPlain)).toEqual([])
    expect(onPlain.map((e) => e.type)).toContain('agent.message')
    // the session's stream: the primary's own previews, nothing of the child's
    const childEventIds = new Set(onChild.filter((e) => e.type !== 'event_start' && e.type !== 'event_delta').map((e) => e.id))
    const primaryPreviews = previewsOf(onPrimary)
    expect(primaryPreviews.filter((e) => e.type === 'event_start').every((e) => e.event!.session_thread_id === undefined && !childEventIds.has(e.event!.id))).toBe(true)
    expect(primaryPreviews.some((e) => childEventIds.has(e.event_id))).toBe(false)
    const leadMessage = onPrimary.find((e) => e.type === 'agent.message' && !e.session_thread_id)!
    expect(deltaText(onPrimary, leadMessage.id!)).toBe((leadMessage.content ?? [])[0].text)
    expect(model.violations).toEqual([])
  }, 60_000)
})
