import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import { startApiServer, type TestApiServer } from '../support/api-server'
import { ScriptedModelServer, say, toolCall, type RecordedRequest } from '../support/model-server'
import { RecordingToolRouter } from '../support/harness-tool-router'
import { primaryThreadId } from '../../src/shared/api/ids'

// End to end: the runtime really delegates (the scripted model calls send_to_agent as offered),
// and the client sees it only through the official SDK: the thread list, the two streams, the
// child's custom tool call and confirmation answered on the session endpoint and routed to the
// child, the report, then archive and an interrupt naming the archived thread.

const LEAD = 'You are the lead.'
const RESEARCHER = 'You are the researcher.'
const systemOf = (req: RecordedRequest) => req.body.system?.[0]?.text ?? ''
const lastUserTurn = (req: RecordedRequest) => req.body.messages.at(-1)
const answeredCustom = (req: RecordedRequest) => JSON.stringify(lastUserTurn(req)).includes('open, P2')

let t: TestApiServer
let model: ScriptedModelServer
let client: Anthropic
let dir: string

beforeAll(async () => {
  model = await ScriptedModelServer.start(async (req) => {
    if (systemOf(req) === LEAD) {
      if (req.index === 0) return toolCall(req, 'send_to_agent', { agent: 'researcher', message: 'Look up ticket T-9.' })
      return say(JSON.stringify(req.body.messages).includes('T-9 is open') ? 'The researcher reported.' : 'Delegated.')
    }
    if (systemOf(req) !== RESEARCHER) throw new Error(`unexpected request: ${systemOf(req)}`)
    const turns = req.body.messages.length
    if (turns === 1) return toolCall(req, 'lookup_ticket', { ticket: 'T-9' })
    if (answeredCustom(req)) return toolCall(req, 'bash', { command: 'echo checked' })
    return say('T-9 is open, P2.')
  })
  dir = mkdtempSync(join(tmpdir(), 'corral-deleg-'))
  t = await startApiServer({
    env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'test-key' },
    toolRouter: new RecordingToolRouter(join(dir, 'effects.log')),
    harness: { backoffBaseMs: 5, backoffMaxMs: 40, stallTimeoutMs: 2000, leaseTtlMs: 3000 },
  })
  client = t.client
})
afterAll(async () => {
  await t?.close()
  await model?.close()
  rmSync(dir, { recursive: true, force: true })
})

type Ev = { id: string; type: string; session_thread_id?: string | null; [k: string]: unknown }

async function all<T>(pages: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const x of pages) out.push(x)
  return out
}

/** Collects a stream's events in the background until stopped. */
function collect(stream: AsyncIterable<unknown> & { controller: AbortController }) {
  const got: Ev[] = []
  const done = (async () => {
    try {
      for await (const e of stream) got.push(e as Ev)
    } catch (err) {
      if (!(err instanceof Anthropic.APIUserAbortError) && (err as Error).name !== 'AbortError') throw err
    }
  })()
  return {
    got,
    async stop() {
      stream.controller.abort()
      await done
    },
  }
}

/** Polls until `find` returns something (the runtime works in the background). */
async function until<T>(what: string, find: () => Promise<T | undefined>, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await find()
    if (v !== undefined) return v
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

describe('a real delegation, seen through the official SDK', () => {
  it("shows the child's lifecycle and blocking calls on the session stream with the child's ids, routes the answers to the child, and archives it once idle", async () => {
    const researcher = await client.beta.agents.create({
      name: 'researcher',
      model: 'claude-sonnet-4-6',
      system: RESEARCHER,
      tools: [
        { type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_ask' } } },
        { type: 'custom', name: 'lookup_ticket', description: 'a ticket by id', input_schema: { type: 'object', properties: { ticket: { type: 'string' } }, required: ['ticket'] } },
      ],
    })
    const lead = await client.beta.agents.create({
      name: 'lead',
      model: 'claude-sonnet-4-6',
      system: LEAD,
      multiagent: { type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: [researcher.id] } },
    } as Parameters<typeof client.beta.agents.create>[0])
    const env = await client.beta.environments.create({ name: 'delegation env' })
    const session = await client.beta.sessions.create({ agent: lead.id, environment_id: env.id })
    const sid = session.id
    const primary = primaryThreadId(sid)
    const sessionStream = collect(await client.beta.sessions.events.stream(sid))
    await client.beta.sessions.events.send(sid, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'Find out about T-9.' }] }] })

    // The child appears in the thread list, its custom tool call on the session's list.
    const child = await until('the child thread', async () => (await all(client.beta.sessions.threads.list(sid))).find((x) => x.parent_thread_id === primary))
    expect(child).toMatchObject({ type: 'session_thread', agent: { type: 'agent', id: researcher.id, name: 'researcher' } })
    const custom = await until('the cross-posted custom tool call', async () =>
      ((await all(client.beta.sessions.events.list(sid, { types: ['agent.custom_tool_use'] }))) as Ev[]).find((e) => e.session_thread_id === child.id),
    )
    const childEvents = async () => (await all(client.beta.sessions.threads.events.list(child.id, { session_id: sid }))) as Ev[]
    expect((await childEvents()).find((e) => e.type === 'agent.custom_tool_use')?.id).toBe(custom.id)
    const waiting = await until('the child waiting on the client', async () =>
      ((await all(client.beta.sessions.events.list(sid, { types: ['session.thread_status_idle'] }))) as Ev[]).find((e) => e.session_thread_id === child.id),
    )
    expect(waiting).toMatchObject({ agent_name: 'researcher', stop_reason: { type: 'requires_action', event_ids: [custom.id] } })
    const [result] = (await client.beta.sessions.events.send(sid, { events: [{ type: 'user.custom_tool_result', custom_tool_use_id: custom.id, content: [{ type: 'text', text: 'open, P2' }] }] })).data as Ev[]
    expect(result.session_thread_id).toBe(child.id)

    // Then a call that asks for confirmation, cross-posted too, allowed on the session endpoint.
    const ask = await until('the cross-posted confirmation', async () =>
      ((await all(client.beta.sessions.events.list(sid, { types: ['agent.tool_use'] }))) as Ev[]).find((e) => e.session_thread_id === child.id && e.evaluated_permission === 'ask'),
    )
    const [allow] = (await client.beta.sessions.events.send(sid, { events: [{ type: 'user.tool_confirmation', tool_use_id: ask.id, result: 'allow' }] })).data as Ev[]
    expect(allow.session_thread_id).toBe(child.id)

    // The report reaches the primary, and the session goes idle after every thread.
    await until('the report on the primary', async () =>
      ((await all(client.beta.sessions.events.list(sid, { types: ['agent.thread_message_received'] }))) as Ev[]).find((e) => e.from_session_thread_id === child.id),
    )
    await until('the child idle with end_turn', async () => {
      const c = await client.beta.sessions.threads.retrieve(child.id, { session_id: sid })
      return c.status === 'idle' ? c : undefined
    })
    await until('the session idle', async () => {
      const s = await client.beta.sessions.retrieve(sid)
      return s.status === 'idle' && (await all(client.beta.sessions.events.list(sid, { types: ['session.status_idle'] }))).length > 0 ? s : undefined
    })
    expect(model.violations).toEqual([])

    // What each stream shows: the session's, nothing of the child but its lifecycle, blocking
    // calls and the answers to them; the child's, its whole turn with the same ids.
    const onSession = (await all(client.beta.sessions.events.list(sid))) as Ev[]
    const fromChild = onSession.filter((e) => e.session_thread_id === child.id)
    expect(new Set(fromChild.map((e) => e.type))).toEqual(
      new Set(['session.thread_created', 'session.thread_status_running', 'session.thread_status_idle', 'agent.custom_tool_use', 'agent.tool_use', 'user.custom_tool_result', 'user.tool_confirmation']),
    )
    const own = await childEvents()
    expect(own.map((e) => e.type)).toEqual(expect.arrayContaining(['agent.thread_message_received', 'agent.tool_result', 'agent.thread_message_sent', 'span.model_request_end']))
    expect(own.map((e) => e.type)).not.toContain('session.thread_created')
    for (const e of fromChild.filter((x) => x.type !== 'session.thread_created')) expect(own.map((x) => x.id)).toContain(e.id)
    await sessionStream.stop()
    expect(sessionStream.got.filter((e) => e.session_thread_id === child.id).map((e) => e.id)).toEqual(fromChild.map((e) => e.id))
    expect(sessionStream.got.some((e) => e.type === 'agent.thread_message_received' && e.from_session_thread_id === child.id)).toBe(true)
    expect(sessionStream.got.some((e) => e.type === 'span.model_request_end' && e.session_thread_id === child.id)).toBe(false)

    // Per-thread usage: the child's own requests.
    const idleChild = await client.beta.sessions.threads.retrieve(child.id, { session_id: sid })
    expect(idleChild.usage?.input_tokens).toBeGreaterThan(0)
    expect(idleChild.stats).toMatchObject({ startup_seconds: 0 })

    // Archive the idle child; then an interrupt naming it is refused.
    const archived = await client.beta.sessions.threads.archive(child.id, { session_id: sid })
    expect(archived).toMatchObject({ status: 'terminated', archived_at: expect.any(String) })
    expect(t.engine.services.threads.liveChildCount(sid)).toBe(0)
    const err = await client.beta.sessions.events.send(sid, { events: [{ type: 'user.interrupt', session_thread_id: child.id }] }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(Anthropic.BadRequestError)
    expect((err as InstanceType<typeof Anthropic.APIError>).message).toMatch(/session_thread_id: thread .* is terminated/)
  }, 30_000)
})
