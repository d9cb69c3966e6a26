import { afterEach, describe, expect, it } from 'vitest'
import { LEAD, openHarnessFixture, team, typesOf, type HarnessFixture } from '../../support/harness-fixture'
import { say, systemOf, toolCall, toolResultsOf, userTexts, type RecordedRequest, type ScriptStep } from '../../support/model-server'
import type { LoggedEvent } from '../../../src/main/session/event-log'

let fx: HarnessFixture | undefined
afterEach(async () => {
  await fx?.close()
  fx = undefined
})

const reportsSeen = (req: RecordedRequest) => userTexts(req).filter((t) => t.startsWith('<message from=')).length
/** A response calling several tools at once, each checked against what the request offers. */
const calls = (req: RecordedRequest, list: [string, Record<string, unknown>][]): ScriptStep => ({
  kind: 'message',
  blocks: list.flatMap(([name, input]) => (toolCall(req, name, input) as Extract<ScriptStep, { kind: 'message' }>).blocks),
})
const ofThread = (evs: LoggedEvent[], tid: string | null) => evs.filter((e) => (e.session_thread_id ?? null) === tid)
const field = <T>(e: LoggedEvent, k: string) => (e as unknown as Record<string, T>)[k]

const lastSessionIdle = (evs: LoggedEvent[]) => evs.filter((e) => e.type === 'session.status_idle').at(-1)

describe('threads: a brain per thread', () => {
  it('delegates to two agents that run at the same time, delivers each report once to the primary, and gives the primary a new turn', async () => {
    let arrived = 0
    let release!: () => void
    const bothArrived = new Promise<void>((r) => (release = r))
    fx = await openHarnessFixture({
      script: async (req) => {
        const sys = systemOf(req)
        if (sys === LEAD) {
          if (req.index === 0)
            return calls(req, [
              ['send_to_agent', { agent: 'researcher', message: 'Find the facts.' }],
              ['send_to_agent', { agent: 'writer', message: 'Draft the text.' }],
            ])
          const n = reportsSeen(req)
          return say(n === 0 ? 'Waiting for my agents.' : `I have ${n} report(s).`)
        }
        // each child's request waits until the other child's request has arrived too: a brain
        // that ran the children one after the other would never get here
        if (++arrived === 2) release()
        await bothArrived
        return say(sys === 'You are the researcher.' ? 'The facts: 42.' : 'The draft: hello.')
      },
    })
    const t = team(fx, ['researcher', 'writer'])
    const sid = await fx.createSession('Research and write.', { agent: t.lead })
    const evs = await fx.waitFor(sid, (e) => {
      const last = e.at(-1)
      return last?.type === 'session.status_idle' && e.filter((x) => x.type === 'agent.thread_message_received' && !x.session_thread_id).length === 2
    })
    expect(fx.model.violations).toEqual([])
    const created = evs.filter((e) => e.type === 'session.thread_created')
    expect(created.map((e) => field(e, 'agent_name')).sort()).toEqual(['researcher', 'writer'])
    const primaryId = 'sthr_' + sid.slice('sesn_'.length)
    for (const c of created) {
      expect(field(c, 'parent_thread_id')).toBe(primaryId)
      expect(field<{ system: string; id: string }>(c, 'agent')).toMatchObject({ system: `You are the ${field(c, 'agent_name')}.`, id: t.agents[field<string>(c, 'agent_name')] })
      const tid = field<string>(c, 'session_thread_id')
      const own = ofThread(evs, tid)
      // the child's final text is its report, not an agent.message
      expect(typesOf(own)).not.toContain('agent.message')
      const sent = own.filter((e) => e.type === 'agent.thread_message_sent')
      expect(sent).toHaveLength(1)
      expect(field(sent[0], 'to_session_thread_id')).toBe(primaryId)
      expect(own.find((e) => e.type === 'agent.thread_message_received')).toMatchObject({ from_session_thread_id: primaryId })
      expect(own.filter((e) => e.type === 'session.thread_status_idle').at(-1)).toMatchObject({ stop_reason: { type: 'end_turn' } })
      // delivered to the primary exactly once, naming the sender
      const got = ofThread(evs, null).filter((e) => e.type === 'agent.thread_message_received' && field(e, 'from_session_thread_id') === tid)
      expect(got).toHaveLength(1)
      expect(got[0]).toMatchObject({ from_agent_name: field(c, 'agent_name'), content: field(sent[0], 'content') })
    }
    // the tool results say which thread each call started
    const results = evs.filter((e) => e.type === 'agent.tool_result').map((e) => JSON.parse(field<{ text: string }[]>(e, 'content')[0].text) as { session_thread_id: string })
    expect(results.map((r) => r.session_thread_id).sort()).toEqual(created.map((c) => field<string>(c, 'session_thread_id')).sort())
    // the primary's own thread status comes before any child's
    const firstThreadStatus = evs.find((e) => e.type.startsWith('session.thread_status_'))!
    expect(field(firstThreadStatus, 'session_thread_id')).toBe(primaryId)
    // the session went idle once, at the end, after every thread
    expect(evs.filter((e) => e.type === 'session.status_idle')).toHaveLength(1)
    expect(lastSessionIdle(evs)).toMatchObject({ stop_reason: { type: 'end_turn' } })
    expect(fx.engine.services.sessions.retrieve(sid).status).toBe('idle')
    // the lead's model saw the reports as user-turn text naming sender and thread
    const last = fx.model.requests.filter((r) => systemOf(r) === LEAD).at(-1)!
    const texts = userTexts(last).filter((x) => x.startsWith('<message from='))
    expect(texts.join('\n')).toContain('The facts: 42.')
    expect(texts.join('\n')).toContain('The draft: hello.')
    expect(texts.some((x) => x.startsWith('<message from="researcher (thread sthr_'))).toBe(true)
    // the children were offered no delegation tools (one level deep)
    for (const r of fx.model.requests.filter((x) => systemOf(x) !== LEAD)) expect(r.body.tools?.map((x) => x.name)).not.toContain('send_to_agent')
  })

  it('sends a follow-up to a thread that remembers its earlier turn, and refuses a name that is not on the roster', async () => {
    let childRequests: RecordedRequest[] = []
    fx = await openHarnessFixture({
      script: (req) => {
        if (systemOf(req) === LEAD) {
          const results = toolResultsOf(req)
          const reports = reportsSeen(req)
          if (req.index === 0) return toolCall(req, 'send_to_agent', { agent: 'nobody', message: 'hi' })
          if (results.length === 1) return toolCall(req, 'send_to_agent', { agent: 'researcher', message: 'What is the answer?' })
          if (results.length === 2 && reports === 0) return say('Waiting.')
          if (results.length === 2 && reports === 1) {
            const tid = (JSON.parse(results[1].text) as { session_thread_id: string }).session_thread_id
            return toolCall(req, 'send_to_agent', { session_thread_id: tid, message: 'And why?' })
          }
          return say(reports >= 2 ? 'Done.' : 'Waiting.')
        }
        childRequests.push(req)
        return say(childRequests.length === 1 ? 'It is 42.' : 'Because 6 times 7.')
      },
    })
    const t = team(fx, ['researcher'], { inline_agents: { type: 'disabled' } })
    const sid = await fx.createSession('Ask the researcher.', { agent: t.lead })
    await fx.waitFor(sid, (e) => e.at(-1)?.type === 'session.status_idle' && e.filter((x) => x.type === 'agent.thread_message_received' && !x.session_thread_id).length === 2)
    const results = toolResultsOf(fx.model.requests.filter((r) => systemOf(r) === LEAD).at(-1)!)
    expect(results[0].is_error).toBe(true)
    expect(results[0].text).toContain('"nobody" is not on this session\'s roster (listed: researcher)')
    expect(results[0].text).toContain('inline agents are not enabled')
    // one thread, two turns; the second request carries the first task, the first report, the follow-up
    const evs = fx.events(sid)
    expect(evs.filter((e) => e.type === 'session.thread_created')).toHaveLength(1)
    expect(childRequests).toHaveLength(2)
    const second = childRequests[1].body.messages
    expect(second.map((m) => m.role)).toEqual(['user', 'assistant', 'user'])
    expect(JSON.stringify(second[0].content)).toContain('What is the answer?')
    expect(JSON.stringify(second[1].content)).toContain('It is 42.')
    expect(JSON.stringify(second[2].content)).toContain('And why?')
    childRequests = []
  })

  it('refuses a 26th live child thread with a tool error naming the limit', async () => {
    fx = await openHarnessFixture({
      script: (req) => {
        if (systemOf(req) !== LEAD) return say('ok')
        if (req.index === 0) return calls(req, Array.from({ length: 26 }, (_, i) => ['send_to_agent', { agent: `w${i}`, system: `You are w${i}.`, message: 'go' }] as [string, Record<string, unknown>]))
        return say('noted')
      },
    })
    const t = team(fx, [])
    const sid = await fx.createSession('Fan out.', { agent: t.lead })
    await fx.waitFor(sid, (e) => e.at(-1)?.type === 'session.status_idle' && e.filter((x) => x.type === 'agent.thread_message_received' && !x.session_thread_id).length === 25, 30_000)
    const evs = fx.events(sid)
    expect(evs.filter((e) => e.type === 'session.thread_created')).toHaveLength(25)
    const results = evs.filter((e) => e.type === 'agent.tool_result' && !e.session_thread_id)
    const errors = results.filter((e) => field(e, 'is_error'))
    expect(errors).toHaveLength(1)
    expect(field<{ text: string }[]>(errors[0], 'content')[0].text).toContain('the limit is 25 at a time')
    expect(created(evs).every((c) => field<{ type: string }>(c, 'agent').type === 'inline')).toBe(true)
  })

  it('interrupts one child waiting on a confirmation: its call gets an error result, and it idles end_turn without a model call or a report', async () => {
    fx = await openHarnessFixture({
      script: (req) => {
        const sys = systemOf(req)
        if (sys === LEAD) return req.index === 0 ? toolCall(req, 'send_to_agent', { agent: 'careful', message: 'Delete the file.' }) : say('Waiting.')
        return toolCall(req, 'bash', { command: 'rm x' })
      },
    })
    const t = team(fx, ['careful'], {}, { tools: [{ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_ask' } } }] })
    const sid = await fx.createSession('Go.', { agent: t.lead })
    const evs = await fx.waitFor(sid, (e) => lastSessionIdle(e)?.type === 'session.status_idle' && (lastSessionIdle(e) as unknown as { stop_reason: { type: string } }).stop_reason.type === 'requires_action')
    const tid = field<string>(evs.find((e) => e.type === 'session.thread_created')!, 'session_thread_id')
    const use = ofThread(evs, tid).find((e) => e.type === 'agent.tool_use')!
    expect(field(use, 'evaluated_permission')).toBe('ask')
    expect(lastSessionIdle(evs)).toMatchObject({ stop_reason: { type: 'requires_action', event_ids: [use.id] } })
    const requestsBefore = fx.model.requests.length
    await fx.send(sid, [{ type: 'user.interrupt', session_thread_id: tid }])
    const after = await fx.waitFor(sid, (e) => lastSessionIdle(e)!.id !== lastSessionIdle(evs)!.id)
    const own = ofThread(after, tid)
    const result = own.find((e) => e.type === 'agent.tool_result')!
    expect(result).toMatchObject({ tool_use_id: use.id, is_error: true })
    expect(own.filter((e) => e.type === 'session.thread_status_idle').at(-1)).toMatchObject({ stop_reason: { type: 'end_turn' } })
    expect(typesOf(own)).not.toContain('agent.thread_message_sent')
    expect(fx.model.requests.length).toBe(requestsBefore)
    expect(lastSessionIdle(after)).toMatchObject({ stop_reason: { type: 'end_turn' } })
  })

  it('terminates a child whose model requests fail for good: idle retries_exhausted, then terminated, no report, and the session still goes idle', async () => {
    fx = await openHarnessFixture({
      script: (req) => {
        if (systemOf(req) === LEAD) return req.index === 0 ? toolCall(req, 'send_to_agent', { agent: 'fragile', message: 'Try.' }) : say('Waiting.')
        return { kind: 'error', status: 400, message: 'scripted: this request is refused' }
      },
    })
    const t = team(fx, ['fragile'])
    const sid = await fx.createSession('Go.', { agent: t.lead })
    const evs = await fx.waitFor(sid, (e) => e.at(-1)?.type === 'session.status_idle' && e.some((x) => x.type === 'session.thread_status_terminated'))
    const tid = field<string>(created(evs)[0], 'session_thread_id')
    const own = ofThread(evs, tid)
    const tail = typesOf(own).slice(-3)
    expect(tail).toEqual(['session.error', 'session.thread_status_idle', 'session.thread_status_terminated'])
    expect(own.find((e) => e.type === 'session.thread_status_idle')).toMatchObject({ stop_reason: { type: 'retries_exhausted' } })
    expect(typesOf(own)).not.toContain('agent.thread_message_sent')
    expect(lastSessionIdle(evs)).toMatchObject({ stop_reason: { type: 'end_turn' } })
    // a terminated thread takes no follow-up: the lead is told which rule it hit
    fx.model.respondWith((req) => {
      if (systemOf(req) !== LEAD) return say('unexpected')
      return toolResultsOf(req).length === 1 ? toolCall(req, 'send_to_agent', { session_thread_id: tid, message: 'Again.' }) : say('Understood.')
    })
    await fx.send(sid, [{ type: 'user.message', content: [{ type: 'text', text: 'Try it again.' }] }])
    await fx.waitFor(sid, (e) => toolResultsOf(fx!.model.requests.at(-1)!).length === 2 && e.at(-1)?.type === 'session.status_idle')
    const again = toolResultsOf(fx.model.requests.at(-1)!)[1]
    expect(again.is_error).toBe(true)
    expect(again.text).toContain(`thread ${tid} (fragile) is terminated`)
  })

  it('shares one budget across threads: a child past the cap pauses before its next request with budget_reached, then the session idles budget_reached', async () => {
    fx = await openHarnessFixture({
      script: (req) => {
        if (systemOf(req) === LEAD) return req.index === 0 ? toolCall(req, 'send_to_agent', { agent: 'spender', message: 'Spend.' }) : say('Waiting.')
        // one very large response: far past the session's 1 cent cap
        return { ...toolCall(req, 'bash', { command: 'echo big' }), usage: { input_tokens: 2_000_000, output_tokens: 10 } } as ScriptStep
      },
    })
    const t = team(fx, ['spender'])
    const sid = await fx.createSession('Go.', { agent: t.lead, budget: { type: 'limit', max_list_cost: { amount: '1', currency: 'USD' } } })
    const evs = await fx.waitFor(sid, (e) => (lastSessionIdle(e) as unknown as { stop_reason?: { type: string } } | undefined)?.stop_reason?.type === 'budget_reached')
    const tid = field<string>(created(evs)[0], 'session_thread_id')
    const own = ofThread(evs, tid)
    expect(fx.model.requests.filter((r) => systemOf(r) !== LEAD)).toHaveLength(1)
    const childIdle = own.filter((e) => e.type === 'session.thread_status_idle').at(-1)!
    expect(childIdle).toMatchObject({ stop_reason: { type: 'budget_reached' } })
    // the thread's pause comes before the session's
    expect(evs.indexOf(childIdle)).toBeLessThan(evs.indexOf(lastSessionIdle(evs)!))
  })
})

const created = (evs: LoggedEvent[]) => evs.filter((e) => e.type === 'session.thread_created')
