import { afterEach, describe, expect, it } from 'vitest'
import { openHarnessFixture, typesOf, type HarnessFixture } from '../../support/harness-fixture'
import { callTool, say, toolResultsOf, type ScriptStep } from '../../support/model-server'

let fx: HarnessFixture | undefined
afterEach(async () => {
  await fx?.close()
  fx = undefined
})

const askingAgent = {
  tools: [
    {
      type: 'agent_toolset_20260401',
      default_config: { permission_policy: { type: 'always_ask' } },
      configs: [{ name: 'read', permission_policy: { type: 'always_allow' } }],
    },
  ],
}
const twoCalls: ScriptStep = {
  kind: 'message',
  blocks: [
    { type: 'tool_use', name: 'bash', input: { command: 'rm -rf build' } },
    { type: 'tool_use', name: 'write', input: { file_path: 'a.txt', content: 'x' } },
    { type: 'tool_use', name: 'read', input: { file_path: 'b.txt' } },
  ],
}

describe('permissions', () => {
  it('runs always_allow calls, idles with requires_action for always_ask ones, and re-idles with the rest after a partial confirmation', async () => {
    fx = await openHarnessFixture({ agent: askingAgent, script: [twoCalls, say('all settled')] })
    const id = await fx.createSession('clean up')
    const idle = await fx.waitForIdle(id)
    const uses = fx.events(id).filter((e) => e.type === 'agent.tool_use') as unknown as { id: string; name: string; evaluated_permission: string }[]
    expect(uses.map((u) => [u.name, u.evaluated_permission])).toEqual([
      ['bash', 'ask'],
      ['write', 'ask'],
      ['read', 'allow'],
    ])
    expect(idle.stop_reason).toEqual({ type: 'requires_action', event_ids: [uses[0].id, uses[1].id] })
    expect(fx.router.effects()).toEqual([uses[2].id])

    await fx.send(id, [{ type: 'user.tool_confirmation', tool_use_id: uses[0].id, result: 'deny', deny_message: 'never delete build' }])
    const second = await fx.waitForIdle(id)
    expect(second.stop_reason).toEqual({ type: 'requires_action', event_ids: [uses[1].id] })
    expect(fx.model.requests).toHaveLength(1)

    await fx.send(id, [{ type: 'user.tool_confirmation', tool_use_id: uses[1].id, result: 'allow' }])
    expect((await fx.waitForIdle(id)).stop_reason).toEqual({ type: 'end_turn' })
    expect(fx.router.effects().sort()).toEqual([uses[1].id, uses[2].id].sort())
    const results = toolResultsOf(fx.model.requests[1])
    expect(results).toEqual([
      { tool_use_id: uses[0].id, text: 'The user denied this call: never delete build', is_error: true },
      { tool_use_id: uses[1].id, text: 'ran write: {"file_path":"a.txt","content":"x"}', is_error: false },
      { tool_use_id: uses[2].id, text: 'ran read: {"file_path":"b.txt"}', is_error: false },
    ])
  })
})

describe('custom tools', () => {
  it('emits agent.custom_tool_use, idles with requires_action, and resumes the turn on user.custom_tool_result', async () => {
    fx = await openHarnessFixture({
      agent: { tools: [{ type: 'custom', name: 'get_weather', description: 'weather for a city', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }] },
      script: [callTool('get_weather', { city: 'Oslo' }), say('It is cold in Oslo.')],
    })
    const id = await fx.createSession('weather?')
    const idle = await fx.waitForIdle(id)
    const use = fx.events(id).find((e) => e.type === 'agent.custom_tool_use') as unknown as { id: string; name: string; input: unknown }
    expect(use).toMatchObject({ name: 'get_weather', input: { city: 'Oslo' } })
    expect(idle.stop_reason).toEqual({ type: 'requires_action', event_ids: [use.id] })
    expect(fx.model.requests[0].body.tools?.map((t) => t.name)).toContain('get_weather')
    await fx.send(id, [{ type: 'user.custom_tool_result', custom_tool_use_id: use.id, content: [{ type: 'text', text: '-12 C' }] }])
    expect((await fx.waitForIdle(id)).stop_reason.type).toBe('end_turn')
    expect(toolResultsOf(fx.model.requests[1])).toEqual([{ tool_use_id: use.id, text: '-12 C', is_error: false }])
    expect(fx.router.calls).toHaveLength(0)
  })
})

describe('user.interrupt', () => {
  it('aborts a streaming model response: no half message is stored, the span is closed, and the session idles', async () => {
    fx = await openHarnessFixture({ script: [say('x'.repeat(400), { chunkSize: 4, chunkDelayMs: 10 })] })
    const id = await fx.createSession()
    const delta = fx.nextDelta(id)
    await fx.send(id, [{ type: 'user.message', content: [{ type: 'text', text: 'talk a lot' }] }])
    await delta
    await fx.send(id, [{ type: 'user.interrupt' }])
    const idle = await fx.waitForIdle(id)
    expect(idle.stop_reason).toEqual({ type: 'end_turn' })
    const evs = fx.events(id)
    expect(typesOf(evs)).toEqual(['user.message', 'session.status_running', 'span.model_request_start', 'user.interrupt', 'span.model_request_end', 'session.usage', 'session.status_idle'])
    expect(evs[4]).toMatchObject({ model_request_start_id: evs[2].id, is_error: true })
    expect(fx.engine.services.sessions.retrieve(id).status).toBe('idle')
  })

  it('cancels a running tool call through its AbortSignal and gives every tool call exactly one result', async () => {
    fx = await openHarnessFixture({
      toolDelayMs: 30_000,
      script: [{ kind: 'message', blocks: [{ type: 'tool_use', name: 'bash', input: { command: 'sleep 30' } }, { type: 'tool_use', name: 'bash', input: { command: 'echo never' } }] }],
    })
    let running!: () => void
    const started = new Promise<void>((r) => (running = r))
    fx.router.beforeRun = () => running()
    const id = await fx.createSession('slow tool')
    await started
    await fx.send(id, [{ type: 'user.interrupt' }])
    expect((await fx.waitForIdle(id)).stop_reason.type).toBe('end_turn')
    const evs = fx.events(id)
    const uses = evs.filter((e) => e.type === 'agent.tool_use')
    const results = evs.filter((e) => e.type === 'agent.tool_result') as unknown as { tool_use_id: string; is_error: boolean; content: { text: string }[] }[]
    expect(results.map((r) => r.tool_use_id)).toEqual(uses.map((u) => u.id))
    expect(results.every((r) => r.is_error)).toBe(true)
    expect(results[0].content[0].text).toContain('cancelled')
    expect(results[1].content[0].text).toContain('interrupted')
    expect(fx.router.calls[0].signal?.aborted).toBe(true)
    expect(fx.router.effects()).toEqual([])
  })

  it('answers a message sent together with the interrupt, and not the interrupted one', async () => {
    fx = await openHarnessFixture({
      script: (req) => (JSON.stringify(req.body.messages).includes('second') ? say('answer to second') : say('y'.repeat(400), { chunkSize: 2, chunkDelayMs: 10 })),
    })
    const id = await fx.createSession()
    const delta = fx.nextDelta(id)
    await fx.send(id, [{ type: 'user.message', content: [{ type: 'text', text: 'first' }] }])
    await delta
    await fx.send(id, [{ type: 'user.interrupt' }, { type: 'user.message', content: [{ type: 'text', text: 'second' }] }])
    await fx.waitFor(id, (e) => e.some((x) => x.type === 'agent.message'))
    await fx.waitFor(id, (e) => e.at(-1)?.type === 'session.status_idle')
    const messages = fx.events(id).filter((e) => e.type === 'agent.message') as unknown as { content: { text: string }[] }[]
    expect(messages.map((m) => m.content[0].text)).toEqual(['answer to second'])
  })
})

describe('model endpoint faults', () => {
  it('retries 429, 529, 500, a cut stream and a stalled socket, reporting each as session.error retrying, then answers once', async () => {
    fx = await openHarnessFixture({
      harness: { stallTimeoutMs: 300, maxRetries: 6 },
      script: [
        { kind: 'error', status: 429, retryAfterSec: 0 },
        { kind: 'error', status: 529 },
        { kind: 'error', status: 500 },
        { kind: 'cut', blocks: [{ type: 'text', text: 'partial answer that never ends' }], afterEvents: 3 },
        { kind: 'stall', blocks: [{ type: 'text', text: 'stalled answer' }], afterEvents: 2 },
        say('finally'),
      ],
    })
    const id = await fx.createSession('hello')
    expect((await fx.waitForIdle(id)).stop_reason.type).toBe('end_turn')
    const evs = fx.events(id)
    const errors = evs.filter((e) => e.type === 'session.error') as unknown as { error: { type: string; retry_status: { type: string } } }[]
    expect(errors.map((e) => [e.error.type, e.error.retry_status.type])).toEqual([
      ['model_rate_limited_error', 'retrying'],
      ['model_overloaded_error', 'retrying'],
      ['model_request_failed_error', 'retrying'],
      ['model_request_failed_error', 'retrying'],
      ['model_request_failed_error', 'retrying'],
    ])
    expect(evs.filter((e) => e.type === 'agent.message')).toHaveLength(1)
    expect(evs.filter((e) => e.type === 'span.model_request_start')).toHaveLength(6)
    expect(evs.filter((e) => e.type === 'span.model_request_end')).toHaveLength(6)
  })

  it('ends in retries_exhausted with a session.error marked exhausted when the endpoint keeps failing', async () => {
    fx = await openHarnessFixture({ harness: { maxRetries: 2 }, script: [{ kind: 'error', status: 529 }, { kind: 'error', status: 529 }, { kind: 'error', status: 529 }, say('unused')] })
    const id = await fx.createSession('hello')
    expect((await fx.waitForIdle(id)).stop_reason).toEqual({ type: 'retries_exhausted' })
    const errors = fx.events(id).filter((e) => e.type === 'session.error') as unknown as { error: { retry_status: { type: string } } }[]
    expect(errors.map((e) => e.error.retry_status.type)).toEqual(['retrying', 'retrying', 'exhausted'])
    expect(fx.model.requests).toHaveLength(3)
  })

  it('does not retry a 400 and reports it as exhausted', async () => {
    fx = await openHarnessFixture({ script: [{ kind: 'error', status: 400, message: 'messages: bad' }] })
    const id = await fx.createSession('hello')
    expect((await fx.waitForIdle(id)).stop_reason).toEqual({ type: 'retries_exhausted' })
    expect(fx.model.requests).toHaveLength(1)
  })
})

describe('budget', () => {
  it('stops with budget_reached once the list cost of the session reaches its budget', async () => {
    // Sonnet list price: 1M output tokens = $15; 200k output tokens = $3.00 = 300 cents
    fx = await openHarnessFixture({ script: [{ ...callTool('bash', { command: 'true' }), usage: { input_tokens: 10, output_tokens: 200_000 } } as ScriptStep, say('unused')] })
    const id = await fx.createSession('spend', { budget: { type: 'limit', max_list_cost: { amount: '250', currency: 'USD' } } })
    expect((await fx.waitForIdle(id)).stop_reason).toEqual({ type: 'budget_reached' })
    expect(fx.model.requests).toHaveLength(1)
    expect(fx.router.effects()).toHaveLength(1)
  })
})
