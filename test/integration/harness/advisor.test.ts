import { afterEach, describe, expect, it } from 'vitest'
import { openHarnessFixture, type HarnessFixture } from '../../support/harness-fixture'
import { say, toolCall, toolResultsOf, type RecordedRequest, type Responder, type ScriptStep } from '../../support/model-server'
import type { LoggedEvent } from '../../../src/main/session/event-log'
import { primaryThreadId } from '../../../src/shared/api/ids'

// ant__advisor end to end (spec §7, docs/multiagent.md "The advisor at run time"): a real engine
// on SQLite, its brains against the scripted model server, which calls the tool from the schema
// it is offered.

let fx: HarnessFixture | undefined
afterEach(async () => {
  await fx?.close()
  fx = undefined
})

const LEAD_MODEL = 'claude-sonnet-5-5'
const ADVISOR_MODEL = 'claude-opus-5'
const ADVICE = 'Bisect the commits between the last green run and now.'
const TASK = 'Find the commit that broke the build.'

const field = <T>(e: LoggedEvent | undefined, k: string) => (e as unknown as Record<string, T> | undefined)?.[k]
const isAdvisorRequest = (req: RecordedRequest) => req.body.model !== LEAD_MODEL
const primaryRequests = (f: HarnessFixture) => f.model.requests.filter((r) => !isAdvisorRequest(r))
const advisorRequests = (f: HarnessFixture) => f.model.requests.filter(isAdvisorRequest)
const textOf = (req: RecordedRequest) => JSON.stringify(req.body.messages)

/** The lead agent: the advisor enabled, subagents and workflows off. */
function lead(f: HarnessFixture, extra: { model?: string; advisor?: string } = {}): string {
  return f.engine.services.agents.create({
    name: 'lead',
    model: extra.model ?? LEAD_MODEL,
    system: 'You are the lead.',
    tools: [{ type: 'agent_toolset_20260401' }],
    multiagent: { type: 'multiagent_20261001', subagents: { type: 'disabled' }, workflows: { type: 'disabled' }, advisor: { type: 'enabled', model: extra.advisor ?? ADVISOR_MODEL } },
  } as never).id
}

/**
 * The primary asks the advisor on its first request, then answers with the text it got back;
 * the advisor's requests get `advisor(req)`.
 */
function script(advisor: Responder, question: string | undefined = 'Where do I start?', leadModel = LEAD_MODEL): Responder {
  return (req) => {
    if (req.body.model !== leadModel) return advisor(req)
    const results = toolResultsOf(req)
    if (results.length === 0) return toolCall(req, 'ant__advisor', question === undefined ? {} : { question }, 'Let me ask the advisor.')
    return say(`Going on with: ${results[0].text}`, { usage: { input_tokens: 10, output_tokens: 5 } })
  }
}

const advisorThreadOf = (evs: LoggedEvent[]) => field<string>(evs.find((e) => e.type === 'session.thread_created' && field(e, 'agent_name') === 'anthropic.advisor'), 'session_thread_id')
/** The advisor's request has gone out (its span started on the advisor thread). */
const consulting = (evs: LoggedEvent[]) => {
  const tid = advisorThreadOf(evs)
  return tid !== undefined && evs.some((e) => e.type === 'span.model_request_start' && e.session_thread_id === tid)
}
const done = (evs: LoggedEvent[]) => evs.at(-1)?.type === 'session.status_idle'

describe('the advisor (ant__advisor)', () => {
  it("answers the call in the same primary turn with the advice of the advisor model, which saw the primary's conversation and no tools", async () => {
    fx = await openHarnessFixture({ script: script(() => say(ADVICE, { usage: { input_tokens: 700, output_tokens: 30 } })) })
    const sid = await fx.createSession(TASK, { agent: lead(fx) })
    const evs = await fx.waitFor(sid, done)
    expect(fx.model.violations).toEqual([])

    const [adv] = advisorRequests(fx)
    expect(advisorRequests(fx)).toHaveLength(1)
    expect(adv.body.model).toBe(ADVISOR_MODEL)
    expect(adv.body.tools).toBeUndefined()
    expect(textOf(adv)).toContain(TASK)
    expect(textOf(adv)).toContain('Let me ask the advisor.')
    expect(textOf(adv)).toContain('Where do I start?')
    // the primary's own first request was offered the tool; the answer came back as its result
    expect(primaryRequests(fx)[0].body.tools?.map((t) => t.name)).toContain('ant__advisor')
    const second = primaryRequests(fx)[1]
    expect(toolResultsOf(second)).toEqual([expect.objectContaining({ text: ADVICE, is_error: false })])
    // read once, as the tool result: not also as a message from the advisor thread
    expect(textOf(second).split(ADVICE)).toHaveLength(2)
    // one turn: two primary requests, one session idle
    expect(primaryRequests(fx)).toHaveLength(2)
    expect(evs.filter((e) => e.type === 'session.status_idle')).toHaveLength(1)
    expect(field(evs.find((e) => e.type === 'agent.message' && JSON.stringify(e).includes('Going on with')), 'content')).toEqual([{ type: 'text', text: `Going on with: ${ADVICE}` }])
  })

  it('writes the consultation as an anthropic.advisor thread in the order of spec §7.3, the advice sent on it and received on the primary', async () => {
    fx = await openHarnessFixture({ script: script(() => say(ADVICE)) })
    const sid = await fx.createSession(TASK, { agent: lead(fx) })
    const evs = await fx.waitFor(sid, done)
    const tid = advisorThreadOf(evs)!
    expect(tid).toMatch(/^sthr_/)
    const use = evs.find((e) => e.type === 'agent.tool_use' && field(e, 'name') === 'ant__advisor')!
    const consultation = evs.filter((e) => e.session_thread_id === tid || (e.type === 'agent.thread_message_received' && field(e, 'from_session_thread_id') === tid))
    expect(consultation.map((e) => e.type)).toEqual([
      'session.thread_created',
      'session.thread_status_running',
      'span.model_request_start',
      'span.model_request_end',
      'agent.thread_message_sent',
      'agent.thread_message_received',
      'session.thread_status_idle',
      'session.thread_status_terminated',
    ])
    const [created, , , , sent, received, idle] = consultation
    expect(created).toMatchObject({ agent_name: 'anthropic.advisor', workflow_run_id: null, agent: { type: 'advisor', model: ADVISOR_MODEL }, parent_thread_id: primaryThreadId(sid) })
    expect(sent).toMatchObject({ to_session_thread_id: primaryThreadId(sid), content: [{ type: 'text', text: ADVICE }] })
    expect(received.session_thread_id ?? null).toBeNull()
    expect(received).toMatchObject({ from_agent_name: 'anthropic.advisor', content: [{ type: 'text', text: ADVICE }] })
    expect(idle).toMatchObject({ agent_name: 'anthropic.advisor', stop_reason: { type: 'end_turn' } })
    // all between the call and its result
    const result = evs.find((e) => e.type === 'agent.tool_result' && field(e, 'tool_use_id') === use.id)!
    const pos = (e: LoggedEvent) => evs.indexOf(e)
    expect(pos(use)).toBeLessThan(pos(created))
    expect(pos(consultation.at(-1)!)).toBeLessThan(pos(result))
  })

  it("records the consultation's usage on the advisor thread at the advisor model, and the thread list shows it terminated", async () => {
    fx = await openHarnessFixture({ script: script(() => say(ADVICE, { usage: { input_tokens: 700, output_tokens: 30 } })) })
    const sid = await fx.createSession(TASK, { agent: lead(fx) })
    const evs = await fx.waitFor(sid, done)
    const tid = advisorThreadOf(evs)!
    const span = evs.find((e) => e.type === 'span.model_request_end' && e.session_thread_id === tid)
    expect(span).toMatchObject({ model: ADVISOR_MODEL, is_error: false, model_usage: { input_tokens: 700, output_tokens: 30 } })
    const threads = fx.engine.services.threads.list(sid, {}).data
    const t = threads.find((x) => x.id === tid)
    expect(t).toMatchObject({ status: 'terminated', parent_thread_id: primaryThreadId(sid), agent: { type: 'advisor', model: ADVISOR_MODEL } })
    expect(t?.usage).toMatchObject({ input_tokens: 700, output_tokens: 30 })
  })

  it("counts the advisor's usage at its own price against the session's one budget", async () => {
    // 1M input tokens of claude-opus-5 cost $5: over a $1 budget, so the primary's next request is refused
    fx = await openHarnessFixture({ script: script(() => say(ADVICE, { usage: { input_tokens: 1_000_000, output_tokens: 10 } })) })
    const sid = await fx.createSession(TASK, { agent: lead(fx), budget: { type: 'limit', max_list_cost: { amount: '100', currency: 'USD' } } })
    const evs = await fx.waitFor(sid, done)
    expect(primaryRequests(fx)).toHaveLength(1)
    expect(evs.at(-1)).toMatchObject({ type: 'session.status_idle', stop_reason: { type: 'budget_reached' } })
  })

  it("checks the session's budget before the advisor's request: a spent budget gives the notice and no consultation", async () => {
    // the primary's own first request (1M input tokens of claude-sonnet-5-5: $3) spends a $1 budget
    fx = await openHarnessFixture({
      script: (req) => {
        if (req.body.model !== LEAD_MODEL) return say(ADVICE)
        return { ...(toolCall(req, 'ant__advisor', {}) as Extract<ScriptStep, { kind: 'message' }>), usage: { input_tokens: 1_000_000, output_tokens: 1 } }
      },
    })
    const sid = await fx.createSession(TASK, { agent: lead(fx), budget: { type: 'limit', max_list_cost: { amount: '100', currency: 'USD' } } })
    const evs = await fx.waitFor(sid, done)
    expect(advisorRequests(fx)).toHaveLength(0)
    expect(evs.some((e) => e.type === 'session.thread_created')).toBe(false)
    const result = evs.find((e) => e.type === 'agent.tool_result')
    expect(field(result, 'content')).toEqual([{ type: 'text', text: "No advice: the session's budget is reached. Carry on without the advisor." }])
    expect(evs.at(-1)).toMatchObject({ type: 'session.status_idle', stop_reason: { type: 'budget_reached' } })
  })

  it('returns the failure notice when the advisor endpoint keeps failing, and the turn carries on', async () => {
    fx = await openHarnessFixture({ script: script(() => ({ kind: 'error', status: 500, message: 'advisor down' }) as ScriptStep), harness: { maxRetries: 1 } })
    const sid = await fx.createSession(TASK, { agent: lead(fx) })
    const evs = await fx.waitFor(sid, done)
    expect(advisorRequests(fx)).toHaveLength(2) // the first try and one retry
    const [result] = toolResultsOf(primaryRequests(fx)[1])
    expect(result.is_error).toBe(true)
    expect(result.text).toMatch(/^No advice: the advisor's model request failed \(.*\)\. Carry on without the advisor\.$/)
    expect(primaryRequests(fx)).toHaveLength(2)
    const tid = advisorThreadOf(evs)!
    const own = evs.filter((e) => e.session_thread_id === tid)
    expect(own.filter((e) => e.type === 'session.error').map((e) => field<{ retry_status: { type: string } }>(e, 'error')!.retry_status.type)).toEqual(['retrying', 'exhausted'])
    expect(own.slice(-2).map((e) => e.type)).toEqual(['session.thread_status_idle', 'session.thread_status_terminated'])
    expect(own.at(-2)).toMatchObject({ stop_reason: { type: 'retries_exhausted' } })
    expect(evs.some((e) => e.type === 'agent.thread_message_received')).toBe(false)
    expect(evs.at(-1)).toMatchObject({ type: 'session.status_idle', stop_reason: { type: 'end_turn' } })
  })

  it('ends only the consultation on an interrupt naming the advisor thread: the notice comes back and the primary goes on', async () => {
    fx = await openHarnessFixture({ script: script(() => say(ADVICE, { delayMs: 30_000 })), harness: { stallTimeoutMs: 60_000 } })
    const sid = await fx.createSession(TASK, { agent: lead(fx) })
    const started = await fx.waitFor(sid, consulting)
    const tid = advisorThreadOf(started)!
    await fx.send(sid, [{ type: 'user.interrupt', session_thread_id: tid }])
    const evs = await fx.waitFor(sid, done)
    const [result] = toolResultsOf(primaryRequests(fx)[1])
    expect(result).toMatchObject({ is_error: true, text: 'No advice: the consultation was interrupted. Carry on without the advisor.' })
    const own = evs.filter((e) => e.session_thread_id === tid)
    expect(own.find((e) => e.type === 'span.model_request_end')).toMatchObject({ is_error: true, interrupted: true })
    expect(own.slice(-2).map((e) => e.type)).toEqual(['session.thread_status_idle', 'session.thread_status_terminated'])
    expect(evs.some((e) => e.type === 'agent.thread_message_received')).toBe(false)
    expect(evs.at(-1)).toMatchObject({ type: 'session.status_idle', stop_reason: { type: 'end_turn' } })
  })

  it('terminates the advisor thread with no advice on an interrupt of the whole session, and the turn stops', async () => {
    fx = await openHarnessFixture({ script: script(() => say(ADVICE, { delayMs: 30_000 })), harness: { stallTimeoutMs: 60_000 } })
    const sid = await fx.createSession(TASK, { agent: lead(fx) })
    const started = await fx.waitFor(sid, consulting)
    const tid = advisorThreadOf(started)!
    await fx.send(sid, [{ type: 'user.interrupt' }])
    const evs = await fx.waitFor(sid, done)
    expect(evs.filter((e) => e.session_thread_id === tid).at(-1)?.type).toBe('session.thread_status_terminated')
    expect(evs.some((e) => e.type === 'agent.thread_message_received' || e.type === 'agent.thread_message_sent')).toBe(false)
    expect(primaryRequests(fx)).toHaveLength(1)
    expect(evs.at(-1)).toMatchObject({ type: 'session.status_idle', stop_reason: { type: 'end_turn' } })
  })

  it('refuses a consultation whose pair the tier table no longer allows, starting no thread, and the turn carries on', async () => {
    fx = await openHarnessFixture({ script: script(() => say(ADVICE)) })
    const sid = await fx.createSession(undefined, { agent: lead(fx) })
    // after the save and the session's create: the user ranks the advisor below the floor
    await fx.engine.services.admin!.updateSettings({ advisor_tiers: { [ADVISOR_MODEL]: 0 } })
    await fx.send(sid, [{ type: 'user.message', content: [{ type: 'text', text: TASK }] }])
    const evs = await fx.waitFor(sid, done)
    expect(advisorRequests(fx)).toHaveLength(0)
    expect(evs.some((e) => e.type === 'session.thread_created')).toBe(false)
    const [result] = toolResultsOf(primaryRequests(fx)[1])
    expect(result.is_error).toBe(true)
    expect(result.text).toBe(`No advice: the advisor model may not advise this agent's model (${ADVISOR_MODEL} is below the advisor floor (an advisor must be claude-sonnet-4-6 or more capable)). Carry on without the advisor.`)
  })

  it("lets a model the user ranked in settings advise, at agent save and at consultation", async () => {
    const local = 'qwen-3-235b-local'
    fx = await openHarnessFixture({ script: script(() => say(ADVICE), 'Check my plan.', 'claude-opus-4-8') })
    // unranked, it may not advise a ranked model: the save is refused naming V7
    expect(() => lead(fx!, { model: 'claude-opus-4-8', advisor: local })).toThrow(/V7/)
    await fx.engine.services.admin!.updateSettings({ advisor_tiers: { [local]: 7 } })
    const sid = await fx.createSession(TASK, { agent: lead(fx, { model: 'claude-opus-4-8', advisor: local }) })
    await fx.waitFor(sid, done)
    expect(fx.model.requests.map((r) => r.body.model)).toEqual(['claude-opus-4-8', local, 'claude-opus-4-8'])
    expect(toolResultsOf(fx.model.requests.filter((r) => r.body.model === 'claude-opus-4-8')[1])).toEqual([expect.objectContaining({ text: ADVICE, is_error: false })])
  })

  it('is offered to the primary thread only: a child thread of the same session is not, and list_agents does not show consultations', async () => {
    const CHILD = 'You are a helper.'
    fx = await openHarnessFixture({
      script: (req) => {
        if (req.body.model === ADVISOR_MODEL) return say(ADVICE)
        if (req.body.system?.[0]?.text === CHILD) return say('Helped.')
        const results = toolResultsOf(req)
        if (results.length === 0) return toolCall(req, 'ant__advisor', {})
        if (results.length === 1) return toolCall(req, 'send_to_agent', { agent: 'helper', system: CHILD, message: 'Help.' })
        if (results.length === 2) return toolCall(req, 'list_agents', {})
        return say('Done.')
      },
    })
    const id = fx.engine.services.agents.create({
      name: 'lead',
      model: LEAD_MODEL,
      system: 'You are the lead.',
      tools: [{ type: 'agent_toolset_20260401' }],
      multiagent: { type: 'multiagent_20261001', workflows: { type: 'disabled' }, advisor: { type: 'enabled', model: ADVISOR_MODEL } },
    } as never).id
    const sid = await fx.createSession(TASK, { agent: id })
    await fx.waitFor(sid, (evs) => evs.some((e) => e.type === 'agent.thread_message_received' && field(e, 'from_agent_name') === 'helper') && done(evs))
    expect(fx.model.violations).toEqual([])
    const offered = (req: RecordedRequest) => (req.body.tools ?? []).map((x) => x.name)
    const child = fx.model.requests.find((r) => r.body.system?.[0]?.text === CHILD)!
    expect(offered(child)).not.toContain('ant__advisor')
    expect(offered(primaryRequests(fx)[0])).toContain('ant__advisor')
    const listing = primaryRequests(fx).flatMap((r) => toolResultsOf(r)).find((x) => x.text.startsWith('{"agents"'))!
    const listed = JSON.parse(listing.text) as { threads: { agent_name: string }[] }
    expect(listed.threads.map((x) => x.agent_name)).toEqual(['helper'])
  })
})
