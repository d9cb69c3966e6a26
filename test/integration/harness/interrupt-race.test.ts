import { afterEach, describe, expect, it } from 'vitest'
import { openHarnessFixture, typesOf, type HarnessFixture } from '../../support/harness-fixture'
import { say, toolCall } from '../../support/model-server'
import type { ModelClient } from '../../../src/main/harness/model-client'

// An interrupt that reaches the log while the model request is in flight wins over the request's
// answer even when the answer finishes first: the interrupt is committed after the response
// arrived and before the harness records it (the narrowest window of the race).

let fx: HarnessFixture | undefined
afterEach(async () => {
  await fx?.close()
  fx = undefined
})

/**
 * A model client that, for the first request after `arm()` whose system prompt is `system`, commits
 * `user.interrupt` after the response arrived and before handing it to the harness.
 */
function interruptingAfterResponse(send: () => Promise<void>, system: string): { wrap: (inner: ModelClient) => ModelClient; arm: () => void } {
  let armed = false
  return {
    arm: () => (armed = true),
    wrap: (inner) => ({
      async stream(request, handlers) {
        const response = await inner.stream(request, handlers)
        if (armed && JSON.stringify(request.system ?? '').includes(system)) {
          armed = false
          await send()
        }
        return response
      },
    }),
  }
}

describe('an interrupt while the model request is in flight', () => {
  it('wins over a response that finished first: its tool calls are not run, each gets an interrupted result, and the turn idles end_turn after the interrupt', async () => {
    let sessionId = ''
    const race = interruptingAfterResponse(() => fx!.send(sessionId, [{ type: 'user.interrupt' }]), 'You are a test agent.')
    fx = await openHarnessFixture({
      wrapModel: race.wrap,
      script: (req) => (req.body.messages.length === 1 ? { ...toolCall(req, 'bash', { command: 'echo ran' }), delayMs: 50 } : say('should never be asked')),
    })
    sessionId = await fx.createSession()
    race.arm()
    await fx.send(sessionId, [{ type: 'user.message', content: [{ type: 'text', text: 'run it' }] }])
    const idle = await fx.waitForIdle(sessionId)
    await fx.engine.brains.scheduler.settled()
    expect(idle.stop_reason).toEqual({ type: 'end_turn' })
    const evs = fx.events(sessionId)
    const types = typesOf(evs)
    expect(types.indexOf('user.interrupt')).toBeGreaterThan(types.indexOf('span.model_request_start'))
    expect(types.lastIndexOf('session.status_idle')).toBeGreaterThan(types.indexOf('user.interrupt'))
    expect(fx.router.calls).toEqual([])
    const use = evs.find((e) => e.type === 'agent.tool_use')!
    const results = evs.filter((e) => e.type === 'agent.tool_result') as unknown as { tool_use_id: string; is_error: boolean; content: { text: string }[] }[]
    expect(results).toHaveLength(1)
    expect(results[0]).toMatchObject({ tool_use_id: use.id, is_error: true })
    expect(results[0].content[0].text).toContain('interrupted')
    expect(fx.model.requests).toHaveLength(1)
    expect(fx.engine.services.sessions.retrieve(sessionId).status).toBe('idle')
  })

  it("keeps a child's final text as its own message and sends no report when the interrupt naming it comes in while its last request is in flight", async () => {
    let sessionId = ''
    let childId = ''
    const race = interruptingAfterResponse(() => fx!.send(sessionId, [{ type: 'user.interrupt', session_thread_id: childId }]), 'You are the worker.')
    fx = await openHarnessFixture({
      wrapModel: race.wrap,
      script: (req) => {
        const system = req.body.system?.[0]?.text ?? ''
        if (system === 'You are the lead.') return req.body.messages.length === 1 ? toolCall(req, 'send_to_agent', { agent: 'worker', message: 'Work.' }) : say('Delegated.')
        return say('The work is done.', { delayMs: 50 })
      },
    })
    const worker = fx.engine.services.agents.create({ name: 'worker', model: 'claude-sonnet-5-5', system: 'You are the worker.', tools: [{ type: 'agent_toolset_20260401' }] } as never).id
    const lead = fx.engine.services.agents.create({
      name: 'lead',
      model: 'claude-sonnet-5-5',
      system: 'You are the lead.',
      tools: [{ type: 'agent_toolset_20260401' }],
      multiagent: { type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: [worker] } },
    } as never).id
    sessionId = await fx.createSession(undefined, { agent: lead })
    // the child's first request is the one raced: arm once the child exists
    const unsubscribe = fx.engine.services.log.subscribeAll((stored) => {
      if (stored.sessionId !== sessionId || stored.event.type !== 'session.thread_created') return
      childId = stored.event.session_thread_id as string
      race.arm()
    })
    await fx.send(sessionId, [{ type: 'user.message', content: [{ type: 'text', text: 'Delegate it.' }] }])
    const evs = await fx.waitFor(sessionId, (e) => e.some((x) => x.type === 'session.thread_status_idle' && x.session_thread_id === childId) && e.at(-1)?.type === 'session.status_idle')
    unsubscribe()
    await fx.engine.brains.scheduler.settled()
    const child = fx.events(sessionId).filter((e) => e.session_thread_id === childId)
    expect(child.some((e) => e.type === 'user.interrupt')).toBe(true)
    expect(child.filter((e) => e.type === 'agent.message').map((e) => (e as unknown as { content: { text: string }[] }).content[0].text)).toEqual(['The work is done.'])
    expect(child.some((e) => e.type === 'agent.thread_message_sent')).toBe(false)
    expect(evs.some((e) => e.type === 'agent.thread_message_received' && !e.session_thread_id)).toBe(false)
    expect(child.filter((e) => e.type === 'session.thread_status_idle').at(-1)).toMatchObject({ stop_reason: { type: 'end_turn' } })
    expect(fx.model.violations).toEqual([])
  })
})
