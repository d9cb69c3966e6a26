import { afterEach, describe, expect, it } from 'vitest'
import { openHarnessFixture, typesOf, type HarnessFixture } from '../../support/harness-fixture'
import { callTool, say, toolResultsOf } from '../../support/model-server'

let fx: HarnessFixture | undefined
afterEach(async () => {
  await fx?.close()
  fx = undefined
})

describe('the turn loop', () => {
  it('answers a user message with running, a model span with usage, the message, and idle end_turn', async () => {
    fx = await openHarnessFixture({ script: [say('Hello there, human.', { usage: { input_tokens: 42, output_tokens: 7 } })] })
    const id = await fx.createSession('hi')
    const idle = await fx.waitForIdle(id)
    expect(idle.stop_reason).toEqual({ type: 'end_turn' })
    const evs = fx.events(id)
    expect(typesOf(evs)).toEqual(['user.message', 'session.status_running', 'span.model_request_start', 'agent.message', 'span.model_request_end', 'session.usage', 'session.status_idle'])
    const end = evs[4] as unknown as { model_request_start_id: string; model_usage: Record<string, number>; is_error: boolean }
    expect(end.model_request_start_id).toBe(evs[2].id)
    expect(end.is_error).toBe(false)
    expect(end.model_usage).toMatchObject({ input_tokens: 42, output_tokens: 7 })
    expect((evs[3] as unknown as { content: unknown }).content).toEqual([{ type: 'text', text: 'Hello there, human.' }])
    const session = fx.engine.services.sessions.retrieve(id)
    expect(session.status).toBe('idle')
    expect(session.usage).toMatchObject({ input_tokens: 42, output_tokens: 7 })
    // the request the model saw: system and tools with cache breakpoints, the user's text at the tail
    const req = fx.model.requests[0].body
    expect(req.model).toBe('claude-sonnet-5-5')
    expect(req.system?.[0]).toMatchObject({ text: 'You are a test agent.' })
    expect(req.system?.at(-1)?.cache_control).toEqual({ type: 'ephemeral' })
    expect(req.tools?.at(-1)?.cache_control).toEqual({ type: 'ephemeral' })
    expect(req.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'hi', cache_control: { type: 'ephemeral' } }] }])
  })

  it('publishes event_start and event_delta previews carrying the id of the agent.message they become, and never stores them', async () => {
    fx = await openHarnessFixture({ script: [say('a fairly long answer streamed in pieces', { chunkSize: 5 })] })
    const previews: Record<string, unknown>[] = []
    const id = await fx.createSession()
    fx.engine.services.previews.subscribe(id, (p) => previews.push(p))
    await fx.send(id, [{ type: 'user.message', content: [{ type: 'text', text: 'go' }] }])
    await fx.waitForIdle(id)
    const message = fx.events(id).find((e) => e.type === 'agent.message')!
    expect(previews[0]).toEqual({ type: 'event_start', event: { id: message.id, type: 'agent.message' } })
    const deltas = previews.filter((p) => p.type === 'event_delta') as { event_id: string; delta: { content: { text: string } } }[]
    expect(deltas.length).toBeGreaterThan(3)
    expect(deltas.every((d) => d.event_id === message.id)).toBe(true)
    expect(deltas.map((d) => d.delta.content.text).join('')).toBe('a fairly long answer streamed in pieces')
    expect(typesOf(fx.events(id))).not.toContain('event_delta')
  })

  it('runs an always_allow tool call through the router and feeds its result back to the model', async () => {
    fx = await openHarnessFixture({ script: [callTool('bash', { command: 'echo 1' }, 'Let me run it.'), say('Done: 1')] })
    const id = await fx.createSession('run echo')
    expect((await fx.waitForIdle(id)).stop_reason.type).toBe('end_turn')
    const evs = fx.events(id)
    expect(typesOf(evs)).toEqual([
      'user.message',
      'session.status_running',
      'span.model_request_start',
      'agent.message',
      'agent.tool_use',
      'span.model_request_end',
      'agent.tool_result',
      'span.model_request_start',
      'agent.message',
      'span.model_request_end',
      'session.usage',
      'session.status_idle',
    ])
    const use = evs[4] as unknown as { id: string; name: string; input: unknown; evaluated_permission: string }
    expect(use).toMatchObject({ name: 'bash', input: { command: 'echo 1' }, evaluated_permission: 'allow' })
    expect(evs[6]).toMatchObject({ tool_use_id: use.id, is_error: false, content: [{ type: 'text', text: 'ran bash: echo 1' }], exit_code: 0 })
    expect(typeof (evs[6] as unknown as { duration_ms: unknown }).duration_ms).toBe('number')
    expect(fx.router.effects()).toEqual([use.id])
    expect(toolResultsOf(fx.model.requests[1])).toEqual([{ tool_use_id: use.id, text: 'ran bash: echo 1', is_error: false }])
    // the second request replays the first answer: text and tool_use in one assistant turn
    expect(fx.model.requests[1].body.messages[1]).toMatchObject({ role: 'assistant', content: [{ type: 'text' }, { type: 'tool_use', id: use.id, name: 'bash' }] })
  })

  it('stores thinking with its signature and replays it before the tool call', async () => {
    fx = await openHarnessFixture({
      script: [{ kind: 'message', blocks: [{ type: 'thinking', thinking: 'I should list files', signature: 'sig-1' }, { type: 'tool_use', name: 'bash', input: { command: 'ls' } }] }, say('ok')],
    })
    const id = await fx.createSession('list')
    await fx.waitForIdle(id)
    const thinking = fx.events(id).find((e) => e.type === 'agent.thinking')
    expect(thinking).toMatchObject({ thinking: 'I should list files', signature: 'sig-1' })
    expect((fx.model.requests[1].body.messages[1].content as { type: string }[]).map((b) => b.type)).toEqual(['thinking', 'tool_use'])
  })

  it('never calls the tool router before the first model call (lazy hands)', async () => {
    const order: string[] = []
    fx = await openHarnessFixture({
      script: (req) => {
        order.push(`model#${req.index}`)
        return req.index === 0 ? callTool('bash', { command: 'true' }) : say('fine')
      },
    })
    fx.router.beforeRun = () => void order.push('router.execute')
    const id = await fx.createSession('x')
    await fx.waitForIdle(id)
    expect(order).toEqual(['model#0', 'router.execute', 'model#1'])
  })

  it('runs many sessions at once and a slow model answer in one does not hold up the others', async () => {
    fx = await openHarnessFixture({
      script: (req) => {
        const text = JSON.stringify(req.body.messages)
        return text.includes('slow') ? say('slow answer', { delayMs: 700 }) : say('quick answer')
      },
    })
    const slow = await fx.createSession('slow please')
    const quick = await Promise.all(Array.from({ length: 8 }, (_, i) => fx!.createSession(`quick ${i}`)))
    await Promise.all(quick.map((id) => fx!.waitForIdle(id)))
    // every quick session finished while the slow one was still waiting for its model
    expect(fx.engine.services.sessions.retrieve(slow).status).toBe('running')
    await fx.waitForIdle(slow)
    expect(fx.events(slow).find((e) => e.type === 'agent.message')).toMatchObject({ content: [{ text: 'slow answer' }] })
  })

  it('answers a message that arrives while the previous answer is still streaming', async () => {
    fx = await openHarnessFixture({
      script: (req) => (JSON.stringify(req.body.messages).includes('second') ? say('answer two') : say('answer one, streamed slowly', { chunkSize: 2, chunkDelayMs: 15 })),
    })
    const id = await fx.createSession()
    const delta = fx.nextDelta(id)
    await fx.send(id, [{ type: 'user.message', content: [{ type: 'text', text: 'first' }] }])
    await delta
    await fx.send(id, [{ type: 'user.message', content: [{ type: 'text', text: 'second' }] }])
    await fx.waitFor(id, (e) => e.filter((x) => x.type === 'agent.message').length === 2 && e.at(-1)?.type === 'session.status_idle')
    const texts = fx.events(id).filter((e) => e.type === 'agent.message').map((e) => (e as unknown as { content: { text: string }[] }).content[0].text)
    expect(texts).toEqual(['answer one, streamed slowly', 'answer two'])
    expect(fx.model.requests).toHaveLength(2)
  })

  it('sends the conversation again after pause_turn and ends the turn when the model finishes', async () => {
    fx = await openHarnessFixture({ script: [say('part one', { stopReason: 'pause_turn' }), say('part two')] })
    const id = await fx.createSession('long task')
    await fx.waitFor(id, (e) => e.filter((x) => x.type === 'agent.message').length === 2 && e.at(-1)?.type === 'session.status_idle')
    expect(fx.model.requests).toHaveLength(2)
    expect(fx.model.requests[1].body.messages.at(-1)).toMatchObject({ role: 'assistant', content: [{ type: 'text', text: 'part one' }] })
    expect(fx.events(id).filter((e) => e.type === 'session.status_idle')).toHaveLength(1)
  })
})
