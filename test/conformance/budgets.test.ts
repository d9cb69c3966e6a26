import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import { startApiServer, type TestApiServer } from '../support/api-server'
import { say, toolCall, toolResultsOf, type RecordedRequest, type ScriptStep, ScriptedModelServer } from '../support/model-server'

// Budgets you can see and raise (spec multiagent §9, issue #18) through the official SDK: a
// session paused at its budget accepts only settle events, a raise must be above what it spent
// (`budget_not_raised`), a budget cannot be added to a session without one (`budget_create_only`),
// and an accepted raise resumes the paused work by itself. The scripted agent reads its own
// history once (no sandbox) with a response that costs $3.00 at Sonnet's list price
// (200k output tokens), then answers.

const BIG = { input_tokens: 10, output_tokens: 200_000 } // 300 cents at $15 / M output
const SMALL = { input_tokens: 10, output_tokens: 10 }

let t: TestApiServer
let client: Anthropic
let model: ScriptedModelServer
let agentId: string
let envId: string

const respond = (req: RecordedRequest): ScriptStep =>
  toolResultsOf(req).length === 0 ? ({ ...toolCall(req, 'session_history', {}), usage: BIG } as ScriptStep) : ({ ...say('Done within budget.'), usage: SMALL } as ScriptStep)

type Ev = { id: string; type: string; [k: string]: unknown }
async function all<T>(pages: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const x of pages) out.push(x)
  return out
}
async function waitForIdle(sid: string, reason: string, after = 0): Promise<Ev[]> {
  const deadline = Date.now() + 15_000
  for (;;) {
    const events = (await all(client.beta.sessions.events.list(sid))) as unknown as Ev[]
    const idles = events.filter((e) => e.type === 'session.status_idle')
    if (idles.length > after && (idles.at(-1)!.stop_reason as { type: string }).type === reason && events.at(-1)?.type === 'session.status_idle') return events
    if (Date.now() > deadline) throw new Error(`no ${reason} idle: ${events.map((e) => e.type).join(', ')}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}
const budget = (amount: string) => ({ type: 'limit' as const, max_list_cost: { amount, currency: 'USD' as const } })

async function pausedSession(): Promise<string> {
  const sid = (await client.beta.sessions.create({ agent: agentId, environment_id: envId, budget: budget('250') })).id
  await client.beta.sessions.events.send(sid, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'Go.' }] }] })
  await waitForIdle(sid, 'budget_reached')
  return sid
}

async function rejection(p: Promise<unknown>): Promise<InstanceType<typeof Anthropic.APIError>> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(Anthropic.APIError)
  return err as InstanceType<typeof Anthropic.APIError>
}

beforeAll(async () => {
  model = await ScriptedModelServer.start(respond)
  t = await startApiServer({ env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'test-key' }, harness: { backoffBaseMs: 5, backoffMaxMs: 20, maxRetries: 1, leaseTtlMs: 3000 } })
  client = t.client
  agentId = (await client.beta.agents.create({ name: 'spender', model: 'claude-sonnet-4-6' })).id
  envId = (await client.beta.environments.create({ name: 'env' })).id
})
afterAll(async () => {
  await t?.close()
  await model?.close()
})

describe('session budgets through the SDK', () => {
  it('refuses a raise at or below the spend with budget_not_raised, and keeps the budget as it was', async () => {
    const sid = await pausedSession()
    for (const amount of ['250', '300']) {
      const err = await rejection(client.beta.sessions.update(sid, { budget: budget(amount) }))
      expect(err).toBeInstanceOf(Anthropic.BadRequestError)
      expect(err.errorCode).toBe('budget_not_raised')
      expect(err.apiMessage).toContain("budget.max_list_cost must be greater than the session's consumed list cost ($3.00 spent")
    }
    expect((await client.beta.sessions.retrieve(sid)).budget).toEqual(budget('250'))
  })

  it('refuses work-starting events while paused at the budget, naming the events it accepts', async () => {
    const sid = await pausedSession()
    const err = await rejection(client.beta.sessions.events.send(sid, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'more' }] }] }))
    expect(err).toBeInstanceOf(Anthropic.BadRequestError)
    expect(err.apiMessage).toContain('paused at its budget')
    expect(err.apiMessage).toContain('user.tool_confirmation, user.tool_result, user.custom_tool_result and user.interrupt')
    // an interrupt is a settle event: accepted
    await client.beta.sessions.events.send(sid, { events: [{ type: 'user.interrupt' }] })
  })

  it('resumes the paused work by itself once the budget is raised above the spend, and session.updated carries the new budget', async () => {
    const sid = await pausedSession()
    const before = model.requests.length
    const updated = await client.beta.sessions.update(sid, { budget: budget('1000') })
    expect(updated.budget).toEqual(budget('1000'))
    const events = await waitForIdle(sid, 'end_turn')
    expect(events.find((e) => e.type === 'session.updated')).toMatchObject({ budget: budget('1000') })
    expect(model.requests.length).toBe(before + 1)
    expect(events.filter((e) => e.type === 'agent.message').map((e) => (e.content as { text: string }[])[0].text)).toEqual(['Done within budget.'])
  })

  it('refuses to add a budget to a session created without one, and to re-add one after it was removed, with budget_create_only', async () => {
    const plain = (await client.beta.sessions.create({ agent: agentId, environment_id: envId })).id
    const err = await rejection(client.beta.sessions.update(plain, { budget: budget('500') }))
    expect(err).toBeInstanceOf(Anthropic.BadRequestError)
    expect(err.errorCode).toBe('budget_create_only')
    expect(err.apiMessage).toMatch(/^budget: session sesn_\w+ has no budget/)
    const capped = (await client.beta.sessions.create({ agent: agentId, environment_id: envId, budget: budget('500') })).id
    expect((await client.beta.sessions.update(capped, { budget: null })).budget).toBeNull()
    expect((await rejection(client.beta.sessions.update(capped, { budget: budget('900') }))).errorCode).toBe('budget_create_only')
  })

  it('refuses a budget amount that is not whole cents, naming the field', async () => {
    for (const amount of ['2.50', '0', '007']) {
      const err = await rejection(client.beta.sessions.create({ agent: agentId, environment_id: envId, budget: budget(amount) }))
      expect(err).toBeInstanceOf(Anthropic.BadRequestError)
      expect(err.apiMessage).toContain('budget.max_list_cost.amount')
    }
  })
})
