import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import { startApiServer, type TestApiServer } from '../support/api-server'
import { ScriptedModelServer, say, toolCall, type RecordedRequest } from '../support/model-server'
import { primaryThreadId } from '../../src/shared/api/ids'

// session.usage before every session idle of a multi-agent session; archiving the only child that waits on the client: the session's aggregate idle is re-written
// without the archived child's pending call, and no model turn is started for it.

const LEAD = 'You are the lead.'
const RESEARCHER = 'You are the researcher.'
const systemOf = (req: RecordedRequest) => req.body.system?.[0]?.text ?? ''

let t: TestApiServer
let model: ScriptedModelServer
let client: Anthropic

beforeAll(async () => {
  model = await ScriptedModelServer.start(async (req) => {
    if (systemOf(req) === LEAD) {
      if (req.body.messages.length === 1) {
        const ask = JSON.stringify(req.body.messages[0]).includes('Summarize') ? 'Summarize T-9.' : 'Look up ticket T-9.'
        return toolCall(req, 'send_to_agent', { agent: 'researcher', message: ask })
      }
      return say(JSON.stringify(req.body.messages).includes('T-9 is open') ? 'The researcher reported.' : 'Delegated.')
    }
    if (systemOf(req) !== RESEARCHER) throw new Error(`unexpected request: ${systemOf(req)}`)
    if (JSON.stringify(req.body.messages).includes('Summarize')) return say('T-9 is open, P2.')
    return toolCall(req, 'lookup_ticket', { ticket: 'T-9' })
  })
  t = await startApiServer({
    env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'test-key' },
    harness: { backoffBaseMs: 5, backoffMaxMs: 40, stallTimeoutMs: 2000, leaseTtlMs: 3000 },
  })
  client = t.client
})
afterAll(async () => {
  await t?.close()
  await model?.close()
})

type Ev = { id: string; type: string; session_thread_id?: string | null; stop_reason?: { type: string; event_ids?: string[] }; [k: string]: unknown }

async function all<T>(pages: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const x of pages) out.push(x)
  return out
}

async function until<T>(what: string, find: () => Promise<T | undefined>, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await find()
    if (v !== undefined) return v
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

async function delegatingSession(): Promise<string> {
  const researcher = await client.beta.agents.create({
    name: 'researcher',
    model: 'claude-sonnet-4-6',
    system: RESEARCHER,
    tools: [{ type: 'custom', name: 'lookup_ticket', description: 'a ticket by id', input_schema: { type: 'object', properties: { ticket: { type: 'string' } }, required: ['ticket'] } }],
  })
  const lead = await client.beta.agents.create({
    name: 'lead',
    model: 'claude-sonnet-4-6',
    system: LEAD,
    multiagent: { type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: [researcher.id] } },
  } as Parameters<typeof client.beta.agents.create>[0])
  const env = await client.beta.environments.create({ name: 'archive env' })
  return (await client.beta.sessions.create({ agent: lead.id, environment_id: env.id })).id
}

describe('session.usage in a multi-agent session', () => {
  it('comes immediately before every session.status_idle, with every thread\'s tokens, the list cost, the active seconds and the budget', async () => {
    const sid = await delegatingSession()
    await client.beta.sessions.events.send(sid, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'Summarize T-9.' }] }] })
    await until('the report and the session idle after it', async () => {
      const evs = (await all(client.beta.sessions.events.list(sid))) as Ev[]
      const report = evs.findIndex((e) => e.type === 'agent.thread_message_received')
      return report >= 0 && evs.slice(report).some((e) => e.type === 'session.status_idle') && (await client.beta.sessions.retrieve(sid)).status === 'idle' ? evs : undefined
    })
    await t.engine.brains.scheduler.settled()
    const evs = (await all(client.beta.sessions.events.list(sid))) as Ev[]
    const idles = evs.flatMap((e, i) => (e.type === 'session.status_idle' ? [i] : []))
    expect(idles.length).toBeGreaterThan(0)
    for (const i of idles) expect(evs[i - 1]?.type).toBe('session.usage')
    const last = evs[idles.at(-1)! - 1] as Ev & { usage: Record<string, unknown>; budget: unknown }
    const threads = await all(client.beta.sessions.threads.list(sid))
    const tokens = threads.reduce((n, th) => n + (th.usage?.input_tokens ?? 0), 0)
    expect(threads.length).toBe(2)
    expect(last.usage).toMatchObject({ input_tokens: tokens, output_tokens: expect.any(Number), list_cost: { amount: expect.stringMatching(/^(0|[1-9][0-9]*)$/), currency: 'USD' } })
    expect(last.usage.active_seconds).toBeGreaterThan(0)
    expect(last.budget).toBeNull()
    expect(model.violations).toEqual([])
  }, 30_000)
})

describe('archiving a child that waits on the client', () => {
  it("re-writes the session's idle without the archived child's pending call, and starts no model turn", async () => {
    const sid = await delegatingSession()
    await client.beta.sessions.events.send(sid, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'Find out about T-9.' }] }] })

    const lastIdle = async () => ((await all(client.beta.sessions.events.list(sid, { types: ['session.status_idle'] }))) as Ev[]).at(-1)
    const custom = await until('the child custom tool call', async () => ((await all(client.beta.sessions.events.list(sid, { types: ['agent.custom_tool_use'] }))) as Ev[]).at(0))
    const child = custom.session_thread_id as string
    expect(child).not.toBe(primaryThreadId(sid))
    const waiting = await until('the session waiting on the child call', async () => {
      const e = await lastIdle()
      return e?.stop_reason?.type === 'requires_action' && (await client.beta.sessions.retrieve(sid)).status === 'idle' ? e : undefined
    })
    expect(waiting.stop_reason).toEqual({ type: 'requires_action', event_ids: [custom.id] })
    const requestsBefore = model.requests.length

    await client.beta.sessions.threads.archive(child, { session_id: sid })

    const after = await until('the session idle re-written', async () => {
      const e = await lastIdle()
      return e && e.id !== waiting.id ? e : undefined
    })
    expect(after.stop_reason).toEqual({ type: 'end_turn' })
    expect(after.session_thread_id ?? null).toBeNull()
    const session = await client.beta.sessions.retrieve(sid)
    expect(session.status).toBe('idle')
    await t.engine.brains.scheduler.settled()
    expect(model.requests.length).toBe(requestsBefore)
    expect(model.violations).toEqual([])
  }, 30_000)
})
