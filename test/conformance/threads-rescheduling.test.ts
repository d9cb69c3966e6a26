import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import { startApiServer, type TestApiServer } from '../support/api-server'
import { ScriptedModelServer, say, toolCall, type RecordedRequest } from '../support/model-server'

// A thread retrying a failed model request is `rescheduling` (spec multiagent §4.4, §4.6): its
// `session.thread_status_rescheduled` (own stream and, for a child, the session's), and the
// session is `rescheduling` while a thread retries and none runs (session.status_rescheduled),
// running again once the retry starts. A single-agent session says the same with session.status_*.

const LEAD = 'You are the lead.'
const WORKER = 'You are the worker.'
const SOLO = 'You work alone.'
const systemOf = (req: RecordedRequest) => req.body.system?.[0]?.text ?? ''

let t: TestApiServer
let model: ScriptedModelServer
let client: Anthropic
/** Requests of each system prompt so far. */
const seen = new Map<string, number>()

beforeAll(async () => {
  model = await ScriptedModelServer.start(async (req) => {
    const sys = systemOf(req)
    const n = (seen.get(sys) ?? 0) + 1
    seen.set(sys, n)
    if (sys === SOLO) return n === 1 ? { kind: 'error', status: 529, message: 'Overloaded' } : say('Done alone.')
    if (sys === LEAD) return req.body.messages.length === 1 ? toolCall(req, 'send_to_agent', { agent: 'worker', message: 'Do the work.' }) : say(JSON.stringify(req.body.messages).includes('Work done') ? 'All done.' : 'Delegated.')
    if (sys === WORKER) return n === 1 ? { kind: 'error', status: 529, message: 'Overloaded', delayMs: 300 } : say('Work done.')
    throw new Error(`unexpected request: ${sys}`)
  })
  t = await startApiServer({
    env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'test-key' },
    // a backoff long enough to look at the rescheduled state (300-600 ms)
    harness: { backoffBaseMs: 600, backoffMaxMs: 600, stallTimeoutMs: 2000, leaseTtlMs: 3000 },
  })
  client = t.client
})
afterAll(async () => {
  await t?.close()
  await model?.close()
})

type Ev = { id: string; type: string; session_thread_id?: string | null; [k: string]: unknown }

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
    await new Promise((r) => setTimeout(r, 15))
  }
}

const idleAfter = async (sid: string, type: string) =>
  until(`the session idle after ${type}`, async () => {
    const evs = (await all(client.beta.sessions.events.list(sid))) as Ev[]
    const at = evs.findIndex((e) => e.type === type)
    return at >= 0 && evs.at(-1)?.type === 'session.status_idle' && (await client.beta.sessions.retrieve(sid)).status === 'idle' ? evs : undefined
  })

describe('rescheduling', () => {
  it('is the status of a single-agent session waiting to retry its model request, with session.status_rescheduled after the error and running again before the retry', async () => {
    const agent = await client.beta.agents.create({ name: 'solo', model: 'claude-sonnet-4-6', system: SOLO })
    const env = await client.beta.environments.create({ name: 'solo env' })
    const sid = (await client.beta.sessions.create({ agent: agent.id, environment_id: env.id })).id
    await client.beta.sessions.events.send(sid, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'go' }] }] })
    await until('the session rescheduling', async () => ((await client.beta.sessions.retrieve(sid)).status === 'rescheduling' ? true : undefined))
    const evs = await idleAfter(sid, 'agent.message')
    const types = evs.map((e) => e.type)
    const err = types.indexOf('session.error')
    expect(types.slice(err, err + 4)).toEqual(['session.error', 'session.status_rescheduled', 'session.status_running', 'span.model_request_start'])
    expect(types.filter((x) => x === 'session.status_rescheduled')).toHaveLength(1)
    expect(evs.some((e) => e.type.startsWith('session.thread_status_'))).toBe(false)
  }, 30_000)

  it("is a child's status while it retries: on its own stream and the session's, and the session's while no other thread runs", async () => {
    const worker = await client.beta.agents.create({ name: 'worker', model: 'claude-sonnet-4-6', system: WORKER })
    const lead = await client.beta.agents.create({
      name: 'lead',
      model: 'claude-sonnet-4-6',
      system: LEAD,
      multiagent: { type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: [worker.id] } },
    } as Parameters<typeof client.beta.agents.create>[0])
    const env = await client.beta.environments.create({ name: 'team env' })
    const sid = (await client.beta.sessions.create({ agent: lead.id, environment_id: env.id })).id
    await client.beta.sessions.events.send(sid, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'Delegate.' }] }] })
    const child = await until('the child rescheduling', async () => {
      const threads = await all(client.beta.sessions.threads.list(sid))
      return threads.find((th) => th.parent_thread_id !== null && th.status === 'rescheduling')
    })
    expect((await client.beta.sessions.threads.retrieve(child.id, { session_id: sid })).status).toBe('rescheduling')
    await until('the session rescheduling', async () => ((await client.beta.sessions.retrieve(sid)).status === 'rescheduling' ? true : undefined))
    const evs = await idleAfter(sid, 'agent.thread_message_received')
    const types = evs.map((e) => `${e.type}${e.session_thread_id === child.id ? ' (child)' : ''}`)
    const r = types.indexOf('session.thread_status_rescheduled (child)')
    expect(r).toBeGreaterThan(0)
    // the session's rescheduled comes with the child's, once the primary is idle; running again when the child's retry starts
    expect(types.slice(r, r + 3)).toEqual(['session.thread_status_rescheduled (child)', 'session.status_rescheduled', 'session.thread_status_running (child)'])
    expect(types[r + 3]).toBe('session.status_running')
    const own = (await all(client.beta.sessions.threads.events.list(child.id, { session_id: sid }))) as Ev[]
    const ownTypes = own.map((e) => e.type)
    const e = ownTypes.indexOf('session.error')
    expect(ownTypes.slice(e, e + 3)).toEqual(['session.error', 'session.thread_status_rescheduled', 'session.thread_status_running'])
    expect(ownTypes).not.toContain('session.status_rescheduled')
    expect(model.violations).toEqual([])
  }, 30_000)
})
