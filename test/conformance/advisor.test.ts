import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type Anthropic from '@anthropic-ai/sdk'
import { startApiServer, type TestApiServer } from '../support/api-server'
import { say, toolCall, toolResultsOf, type RecordedRequest, ScriptedModelServer } from '../support/model-server'
import { primaryThreadId } from '../../src/shared/api/ids'

// The advisor through the official SDK (spec §7, docs/multiagent.md "The advisor at run time"):
// a real engine and its brains against the scripted model server, which calls ant__advisor from
// the schema it is offered. The client sees the consultation thread in the thread list, its
// lifecycle on the session's event list, its own events on the thread's list.

const LEAD_MODEL = 'claude-sonnet-5-5'
const ADVISOR_MODEL = 'claude-opus-5'
const ADVICE = 'Write the failing test first.'

let t: TestApiServer
let client: Anthropic
let model: ScriptedModelServer
let envId: string
/** Advisor requests: answered with the advice, or with an endpoint error when the question says so. */
const respond = (req: RecordedRequest) => {
  if (req.body.model === ADVISOR_MODEL) return JSON.stringify(req.body.messages).includes('please fail') ? { kind: 'error' as const, status: 500, message: 'advisor down' } : say(ADVICE)
  const results = toolResultsOf(req)
  const question = JSON.stringify(req.body.messages).includes('fail the advisor') ? 'please fail' : 'How do I start?'
  if (results.length === 0) return toolCall(req, 'ant__advisor', { question })
  return say(`Noted: ${results[0].text}`)
}

beforeAll(async () => {
  model = await ScriptedModelServer.start(respond)
  t = await startApiServer({ env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'test-key' }, harness: { backoffBaseMs: 5, backoffMaxMs: 20, maxRetries: 1, leaseTtlMs: 3000 } })
  client = t.client
  envId = (await client.beta.environments.create({ name: 'env' })).id
})
afterAll(async () => {
  await t.close()
  await model.close()
})

async function all<T>(pages: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const x of pages) out.push(x)
  return out
}

type Ev = { id: string; type: string; session_thread_id?: string | null; [k: string]: unknown }

/** Runs a session of an advisor-enabled lead on `text` until it idles; returns its session events. */
async function consultOnce(text: string): Promise<{ sid: string; events: Ev[] }> {
  const lead = await client.beta.agents.create({
    name: 'lead',
    model: LEAD_MODEL,
    multiagent: { type: 'multiagent_20261001', subagents: { type: 'disabled' }, workflows: { type: 'disabled' }, advisor: { type: 'enabled', model: ADVISOR_MODEL } },
  })
  const sid = (await client.beta.sessions.create({ agent: lead.id, environment_id: envId })).id
  await client.beta.sessions.events.send(sid, { events: [{ type: 'user.message', content: [{ type: 'text', text }] }] })
  const deadline = Date.now() + 15_000
  for (;;) {
    const events = (await all(client.beta.sessions.events.list(sid))) as unknown as Ev[]
    if (events.at(-1)?.type === 'session.status_idle') return { sid, events }
    if (Date.now() > deadline) throw new Error(`no idle: ${events.map((e) => e.type).join(', ')}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

describe('the advisor through the SDK', () => {
  it('lists the consultation as an anthropic.advisor thread of the primary, terminated, with its usage', async () => {
    const { sid } = await consultOnce('Plan the fix.')
    const threads = await all(client.beta.sessions.threads.list(sid))
    expect(threads.map((x) => x.id)[0]).toBe(primaryThreadId(sid))
    const advisor = threads.find((x) => x.agent.type === 'advisor')
    expect(advisor).toMatchObject({ type: 'session_thread', parent_thread_id: primaryThreadId(sid), status: 'terminated', agent: { type: 'advisor', model: ADVISOR_MODEL }, workflow_run_id: null })
    expect(advisor!.usage?.input_tokens).toBeGreaterThan(0)
    const retrieved = await client.beta.sessions.threads.retrieve(advisor!.id, { session_id: sid })
    expect(retrieved.agent).toEqual({ type: 'advisor', model: ADVISOR_MODEL })
  })

  it("shows the consultation's lifecycle and the advice received on the session's events, and its own span and sent advice on the thread's", async () => {
    const { sid, events } = await consultOnce('Plan the fix.')
    const created = events.find((e) => e.type === 'session.thread_created')!
    const tid = created.session_thread_id!
    const consultation = events.filter((e) => e.session_thread_id === tid || e.type === 'agent.thread_message_received')
    expect(consultation.map((e) => e.type)).toEqual([
      'session.thread_created',
      'session.thread_status_running',
      'agent.thread_message_received',
      'session.thread_status_idle',
      'session.thread_status_terminated',
    ])
    expect(created).toMatchObject({ agent_name: 'anthropic.advisor', workflow_run_id: null })
    expect(consultation[2]).toMatchObject({ from_session_thread_id: tid, from_agent_name: 'anthropic.advisor', content: [{ type: 'text', text: ADVICE }] })
    expect(events.some((e) => e.type === 'agent.thread_message_sent')).toBe(false)
    const own = (await all(client.beta.sessions.threads.events.list(tid, { session_id: sid }))) as unknown as Ev[]
    expect(own.map((e) => e.type)).toEqual(['session.thread_status_running', 'span.model_request_start', 'span.model_request_end', 'agent.thread_message_sent', 'session.thread_status_idle', 'session.thread_status_terminated'])
    expect(own.find((e) => e.type === 'span.model_request_end')).toMatchObject({ model: ADVISOR_MODEL })
    expect(own.find((e) => e.type === 'agent.thread_message_sent')).toMatchObject({ to_session_thread_id: primaryThreadId(sid), content: [{ type: 'text', text: ADVICE }] })
    // the advice is the ant__advisor call's result on the primary, in the same turn
    const use = events.find((e) => e.type === 'agent.tool_use' && e.name === 'ant__advisor')!
    expect(events.find((e) => e.type === 'agent.tool_result' && e.tool_use_id === use.id)).toMatchObject({ is_error: false, content: [{ type: 'text', text: ADVICE }] })
    expect(events.filter((e) => e.type === 'session.status_idle')).toHaveLength(1)
  })

  it('gives the failure notice as the tool result when the advisor endpoint fails, and the turn ends normally', async () => {
    const { sid, events } = await consultOnce('Plan it, and fail the advisor.')
    const use = events.find((e) => e.type === 'agent.tool_use' && e.name === 'ant__advisor')!
    const result = events.find((e) => e.type === 'agent.tool_result' && e.tool_use_id === use.id)!
    expect(result.is_error).toBe(true)
    expect((result.content as { text: string }[])[0].text).toMatch(/^No advice: the advisor's model request failed \(.+\)\. Carry on without the advisor\.$/)
    expect(events.some((e) => e.type === 'agent.thread_message_received')).toBe(false)
    expect(events.at(-1)).toMatchObject({ type: 'session.status_idle', stop_reason: { type: 'end_turn' } })
    const advisor = (await all(client.beta.sessions.threads.list(sid))).find((x) => x.agent.type === 'advisor')
    expect(advisor?.status).toBe('terminated')
    expect(model.violations).toEqual([])
  })
})
