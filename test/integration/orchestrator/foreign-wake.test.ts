import { afterEach, describe, expect, it } from 'vitest'
import { openHarnessFixture, type HarnessFixture, type HarnessFixtureParams } from '../../support/harness-fixture'
import { startApiServer, type TestApiServer } from '../../support/api-server'
import { say, toolCall, toolResultsOf, type RecordedRequest, type ScriptStep } from '../../support/model-server'

// Two engines on one data directory, as `corral run` (which runs its session's brains) beside the
// desktop or `corral serve` (where the person clicks Interrupt, types a follow-up or approves a
// call). Only the engine holding a session's lease runs its brains; the other can only append.
// Engine A here has brains (the scripted model); engine B has none and is driven through the
// official SDK, as the desktop's API is. What B appends must reach A's brains while they run.

let f: HarnessFixture | undefined
let b: TestApiServer | undefined
afterEach(async () => {
  await b?.close()
  await f?.close()
  b = f = undefined
})

async function twoEngines(script: (req: RecordedRequest) => ScriptStep, agent?: Record<string, unknown>, harness?: HarnessFixtureParams['harness']) {
  f = await openHarnessFixture({ script, ...(agent ? { agent } : {}), ...(harness ? { harness } : {}) })
  b = await startApiServer({ dataDir: f.dir, harness: { enabled: false }, defaultHands: false })
  return { a: f, client: b.client }
}

const textOf = (req: RecordedRequest) => JSON.stringify(req.body.messages)

describe('a session whose brains run in another engine on the same data directory', () => {
  it('an interrupt sent through the other engine stops the turn that is waiting on the model, at once', async () => {
    // (no stall timeout to cut the wait short: the brain would re-read its log at the retry)
    const { a, client } = await twoEngines(() => say('a long answer', { delayMs: 30_000 }), undefined, { stallTimeoutMs: 60_000 })
    const sid = await a.createSession('think for a long time')
    await a.waitFor(sid, (e) => e.some((x) => x.type === 'span.model_request_start'))
    const sent = Date.now()
    await client.beta.sessions.events.send(sid, { events: [{ type: 'user.interrupt' }] })
    const idle = await a.waitForIdle(sid, 5_000)
    expect(Date.now() - sent).toBeLessThan(5_000)
    expect(idle.stop_reason.type).toBe('end_turn')
    const types = a.events(sid).map((e) => e.type)
    expect(types).toContain('user.interrupt')
    expect(types).not.toContain('agent.message')
    expect(a.model.requests).toHaveLength(1)
    expect((await client.beta.sessions.retrieve(sid)).status).toBe('idle')
  })

  it('a message sent through the other engine to the idle session wakes the brain of the engine that holds its lease', async () => {
    const { a, client } = await twoEngines((req) => say(textOf(req).includes('and one more thing') ? 'the second answer' : 'the first answer'))
    const sid = await a.createSession('first question')
    await a.waitForIdle(sid, 8_000)
    expect(a.engine.brains.scheduler.holds(sid)).toBe(true)
    await client.beta.sessions.events.send(sid, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'and one more thing' }] }] })
    // well within the 5 s a lease is kept idle: nothing else would run the session meanwhile
    await a.waitFor(sid, (e) => e.some((x) => x.type === 'agent.message' && JSON.stringify(x).includes('the second answer')), 3_000)
    expect(a.model.requests).toHaveLength(2)
    expect(textOf(a.model.requests[1])).toContain('and one more thing')
  })

  it('a confirmation sent through the other engine runs the call the brain here is waiting on', async () => {
    const ask = { tools: [{ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_ask' } } }] }
    const { a, client } = await twoEngines((req) => (toolResultsOf(req).length ? say('it ran') : toolCall(req, 'bash', { command: 'echo approved elsewhere' })), ask)
    const sid = await a.createSession('run it')
    const waiting = await a.waitForIdle(sid, 8_000)
    expect(waiting.stop_reason.type).toBe('requires_action')
    const toolUseId = waiting.stop_reason.event_ids![0]
    await client.beta.sessions.events.send(sid, { events: [{ type: 'user.tool_confirmation', tool_use_id: toolUseId, result: 'allow' }] })
    await a.waitFor(sid, (e) => e.some((x) => x.type === 'agent.message' && JSON.stringify(x).includes('it ran')), 8_000)
    expect(a.router.calls.map((c) => c.input.command)).toEqual(['echo approved elsewhere'])
  })
})
