import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import { startApiServer, type TestApiServer } from '../support/api-server'
import { ScriptedModelServer, say, toolCall, toolResultsOf } from '../support/model-server'

// session.usage immediately before every session.status_idle (spec multiagent §4.4, §9: the
// budgets documentation says so of every session): in a single-agent session too, with its
// tokens, list cost, active seconds and the budget echoed.

let t: TestApiServer
let model: ScriptedModelServer
let client: Anthropic

beforeAll(async () => {
  model = await ScriptedModelServer.start((req) =>
    toolResultsOf(req).length === 0 && JSON.stringify(req.body.messages).includes('ask me')
      ? { ...toolCall(req, 'confirm', { question: 'Go on?' }), usage: { input_tokens: 1000, output_tokens: 100 } }
      : say('Answered.', { usage: { input_tokens: 2000, output_tokens: 200 } }),
  )
  t = await startApiServer({ env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'test-key' }, harness: { backoffBaseMs: 5, backoffMaxMs: 40, stallTimeoutMs: 2000, leaseTtlMs: 3000 } })
  client = t.client
})
afterAll(async () => {
  await t?.close()
  await model?.close()
})

type Ev = { id: string; type: string; usage?: Record<string, unknown>; budget?: unknown; stop_reason?: { type: string } }

async function all<T>(pages: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const x of pages) out.push(x)
  return out
}

async function idles(sid: string, n: number): Promise<Ev[]> {
  const deadline = Date.now() + 15_000
  for (;;) {
    const evs = (await all(client.beta.sessions.events.list(sid))) as Ev[]
    if (evs.filter((e) => e.type === 'session.status_idle').length >= n && (await client.beta.sessions.retrieve(sid)).status === 'idle') return evs
    if (Date.now() > deadline) throw new Error(`timed out: ${evs.map((e) => e.type).join(', ')}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

describe('session.usage in a single-agent session', () => {
  it('comes immediately before every session.status_idle (end_turn and requires_action) with the cumulative tokens, list cost, active seconds and the budget', async () => {
    const agent = await client.beta.agents.create({
      name: 'solo',
      model: 'claude-sonnet-4-6',
      tools: [{ type: 'custom', name: 'confirm', description: 'ask the user', input_schema: { type: 'object', properties: { question: { type: 'string' } }, required: ['question'] } }],
    })
    const env = await client.beta.environments.create({ name: 'usage env' })
    const budget = { type: 'limit' as const, max_list_cost: { amount: '500', currency: 'USD' as const } }
    const sid = (await client.beta.sessions.create({ agent: agent.id, environment_id: env.id, budget } as Parameters<typeof client.beta.sessions.create>[0])).id
    await client.beta.sessions.events.send(sid, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'ask me first' }] }] })
    let evs = await idles(sid, 1)
    const use = evs.find((e) => e.type === 'agent.custom_tool_use')!
    await client.beta.sessions.events.send(sid, { events: [{ type: 'user.custom_tool_result', custom_tool_use_id: use.id, content: [{ type: 'text', text: 'yes' }] }] })
    evs = await idles(sid, 2)

    const at = evs.flatMap((e, i) => (e.type === 'session.status_idle' ? [i] : []))
    expect(at.map((i) => evs[i].stop_reason?.type)).toEqual(['requires_action', 'end_turn'])
    for (const i of at) expect(evs[i - 1].type).toBe('session.usage')
    expect(evs.filter((e) => e.type === 'session.usage')).toHaveLength(2)
    const [first, last] = at.map((i) => evs[i - 1])
    // cumulative: 1000 in / 100 out, then 3000 / 300; Sonnet list price $3 / $15 per MTok → 0.45 and 1.35 cents
    expect(first.usage).toMatchObject({ input_tokens: 1000, output_tokens: 100, list_cost: { amount: '0', currency: 'USD' } })
    expect(last.usage).toMatchObject({ input_tokens: 3000, output_tokens: 300, list_cost: { amount: '1', currency: 'USD' } })
    expect(last.usage?.active_seconds).toBeGreaterThan(0)
    expect(last.usage?.active_seconds as number).toBeGreaterThanOrEqual(first.usage?.active_seconds as number)
    expect(last.budget).toEqual(budget)
    const session = await client.beta.sessions.retrieve(sid)
    expect(session.usage).toMatchObject({ input_tokens: 3000, output_tokens: 300 })
    expect(model.violations).toEqual([])
  }, 30_000)
})
