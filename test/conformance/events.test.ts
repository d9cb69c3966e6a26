import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import { take } from '../support/polling'
import { startApiServer, type TestApiServer } from '../support/api-server'
import { primaryThreadId } from '../../src/shared/api/ids'

let t: TestApiServer
let client: Anthropic
let agentId: string
let envId: string

beforeAll(async () => {
  t = await startApiServer()
  client = t.client
  agentId = (await client.beta.agents.create({ name: 'lead', model: 'claude-sonnet-4-6' })).id
  envId = (await client.beta.environments.create({ name: 'env' })).id
})
afterAll(() => t.close())

const newSession = async () => (await client.beta.sessions.create({ agent: agentId, environment_id: envId })).id
const userMessage = (text: string) => ({ type: 'user.message' as const, content: [{ type: 'text' as const, text }] })
const text = (e: unknown) => (e as { content?: { text?: string }[] }).content?.[0]?.text

async function all<T>(pages: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const x of pages) out.push(x)
  return out
}


describe('sending and listing events through the official SDK', () => {
  it('sends events and gets them back stored, with ids and processed_at', async () => {
    const sid = await newSession()
    const sent = await client.beta.sessions.events.send(sid, { events: [userMessage('one'), userMessage('two')] })
    expect(sent.data!).toHaveLength(2)
    for (const e of sent.data!) {
      expect(e.id).toMatch(/^sevt_/)
      expect(typeof e.processed_at).toBe('string')
    }
    const listed = await all(client.beta.sessions.events.list(sid))
    expect(listed.map((e) => e.id)).toEqual(sent.data!.map((e) => e.id))
    expect(listed.map(text)).toEqual(['one', 'two'])
  })

  it('lists events filtered by type, in either order, page by page', async () => {
    const sid = await newSession()
    const log = t.engine.services.log
    for (let i = 0; i < 12; i++) await log.append(sid, [i % 3 === 0 ? { type: 'agent.thinking', thinking: `t${i}` } : { type: 'agent.message', content: [{ type: 'text', text: `m${i}` }] }])
    const asc = await all(client.beta.sessions.events.list(sid, { limit: 5 }))
    expect(asc).toHaveLength(12)
    const firstPage = await client.beta.sessions.events.list(sid, { limit: 5 })
    expect(firstPage.data).toHaveLength(5)
    expect(firstPage.hasNextPage()).toBe(true)
    const desc = await all(client.beta.sessions.events.list(sid, { limit: 5, order: 'desc' }))
    expect(desc.map((e) => e.id)).toEqual(asc.map((e) => e.id).reverse())
    const messages = await all(client.beta.sessions.events.list(sid, { types: ['agent.message'], limit: 3 }))
    expect(messages.map(text)).toEqual(['m1', 'm2', 'm4', 'm5', 'm7', 'm8', 'm10', 'm11'])
    const thinkingDesc = await all(client.beta.sessions.events.list(sid, { types: ['agent.thinking'], order: 'desc', limit: 1 }))
    expect(thinkingDesc.map((e) => (e as { thinking?: string }).thinking)).toEqual(['t9', 't6', 't3', 't0'])
    const both = await all(client.beta.sessions.events.list(sid, { types: ['agent.thinking', 'agent.message'], limit: 100 }))
    expect(both).toHaveLength(12)
  })

  it('pages through exactly 1000-event pages without stopping early', async () => {
    const sid = await newSession()
    t.engine.stores.log.appendSync(sid, Array.from({ length: 2001 }, (_, i) => ({ type: 'agent.message', content: [{ type: 'text', text: `${i}` }] })))
    const page = await client.beta.sessions.events.list(sid, { limit: 1000 })
    expect(page.data).toHaveLength(1000)
    expect(page.hasNextPage()).toBe(true)
    expect(await all(client.beta.sessions.events.list(sid, { limit: 1000 }))).toHaveLength(2001)
  })

  it('filters events by created_at without short pages', async () => {
    let now = Date.parse('2026-05-01T00:00:00.000Z')
    const local = await startApiServer()
    try {
      const a = await local.client.beta.agents.create({ name: 'a', model: 'claude-sonnet-4-6' })
      const e = await local.client.beta.environments.create({ name: 'e' })
      const sid = (await local.client.beta.sessions.create({ agent: a.id, environment_id: e.id })).id
      const log = local.engine.services.log as unknown as { clock: () => Date }
      log.clock = () => new Date(now)
      for (let i = 0; i < 10; i++) {
        now += 1000
        await local.engine.services.log.append(sid, [{ type: 'agent.message', content: [{ type: 'text', text: `${i}` }] }])
      }
      const from = new Date(Date.parse('2026-05-01T00:00:05.000Z')).toISOString()
      const first = await local.client.beta.sessions.events.list(sid, { 'created_at[gte]': from, limit: 2 })
      expect(first.data.map(text)).toEqual(['4', '5'])
      const filtered = await all(local.client.beta.sessions.events.list(sid, { 'created_at[gte]': from, 'created_at[lt]': '2026-05-01T00:00:09Z', limit: 2 }))
      expect(filtered.map(text)).toEqual(['4', '5', '6', '7'])
    } finally {
      await local.close()
    }
  })
})

describe('streaming events over SSE through the official SDK', () => {
  it('delivers the events appended after the stream opened, not the ones before', async () => {
    const sid = await newSession()
    await client.beta.sessions.events.send(sid, { events: [userMessage('before')] })
    const stream = await client.beta.sessions.events.stream(sid)
    const received = take(stream, 3)
    await client.beta.sessions.events.send(sid, { events: [userMessage('after-1')] })
    await t.engine.stores.log.append(sid, [{ type: 'agent.message', content: [{ type: 'text', text: 'from the harness' }] }, { type: 'session.status_idle', stop_reason: { type: 'end_turn' } }])
    const got = await received
    expect(got.map((e) => e.type)).toEqual(['user.message', 'agent.message', 'session.status_idle'])
    expect(text(got[0])).toBe('after-1')
    expect(text(got[1])).toBe('from the harness')
  })

  it('streams event_start/event_delta previews only for the opted-in types, then the stored event with the same id', async () => {
    const sid = await newSession()
    const { previews, log } = t.engine.services
    const optedIn = await client.beta.sessions.events.stream(sid, { event_deltas: ['agent.message'] })
    const plain = await client.beta.sessions.events.stream(sid)
    const inGot = take(optedIn, 4)
    const plainGot = take(plain, 1)
    const id = 'sevt_PREVIEW000000000000000001'
    const thinkingId = 'sevt_PREVIEW000000000000000002'
    previews.publish(sid, { type: 'event_start', event: { id: thinkingId, type: 'agent.thinking' } })
    previews.publish(sid, { type: 'event_delta', event_id: thinkingId, delta: { type: 'content_delta', content: { type: 'text', text: 'hm' } } })
    previews.publish(sid, { type: 'event_start', event: { id, type: 'agent.message' } })
    previews.publish(sid, { type: 'event_delta', event_id: id, delta: { type: 'content_delta', content: { type: 'text', text: 'Hel' }, index: 0 } })
    previews.publish(sid, { type: 'event_delta', event_id: id, delta: { type: 'content_delta', content: { type: 'text', text: 'lo' }, index: 0 } })
    await log.append(sid, [{ id, type: 'agent.message', content: [{ type: 'text', text: 'Hello' }] }])
    const got = await inGot
    expect(got.map((e) => e.type)).toEqual(['event_start', 'event_delta', 'event_delta', 'agent.message'])
    expect((got[0] as { event: { id: string } }).event.id).toBe(id)
    expect((got[3] as { id: string }).id).toBe(id)
    const plainEvents = await plainGot
    expect(plainEvents.map((e) => e.type)).toEqual(['agent.message'])
    // Previews are never stored.
    expect((await all(client.beta.sessions.events.list(sid))).map((e) => e.type)).toEqual(['agent.message'])
  })

  it("streams one thread's events on its thread stream, and the primary thread's on the primary stream", async () => {
    const sid = await newSession()
    const log = t.engine.services.log
    const child = 'sthr_CHILD00000000000000000001'
    await log.append(sid, [{ type: 'session.thread_created', session_thread_id: child, agent_name: 'helper', workflow_run_id: null }])
    const childStream = await client.beta.sessions.threads.events.stream(child, { session_id: sid })
    const primaryStream = await client.beta.sessions.threads.events.stream(primaryThreadId(sid), { session_id: sid })
    const childGot = take(childStream, 2)
    const primaryGot = take(primaryStream, 2)
    await log.append(sid, [
      { type: 'agent.message', content: [{ type: 'text', text: 'primary-1' }] },
      { type: 'agent.message', session_thread_id: child, content: [{ type: 'text', text: 'child-1' }] },
      { type: 'agent.message', content: [{ type: 'text', text: 'primary-2' }] },
      { type: 'agent.message', session_thread_id: child, content: [{ type: 'text', text: 'child-2' }] },
    ])
    expect((await childGot).map(text)).toEqual(['child-1', 'child-2'])
    expect((await primaryGot).map(text)).toEqual(['primary-1', 'primary-2'])
    const childEvents = await all(client.beta.sessions.threads.events.list(child, { session_id: sid }))
    // session.thread_created is the parent's event (spec §5): the child's list starts after it.
    expect(childEvents.map((e) => e.type)).toEqual(['agent.message', 'agent.message'])
    await expect(client.beta.sessions.threads.events.list('sthr_NOPE', { session_id: sid })).rejects.toBeInstanceOf(Anthropic.NotFoundError)
  })
})

describe('threads through the official SDK', () => {
  it('lists the implicit primary thread and the threads the log created, with their status', async () => {
    const sid = await newSession()
    const log = t.engine.services.log
    const a = 'sthr_A0000000000000000000000001'
    const b = 'sthr_B0000000000000000000000001'
    await log.append(sid, [
      { type: 'session.status_running' },
      { type: 'session.thread_created', session_thread_id: a, agent_name: 'lead', workflow_run_id: null },
      { type: 'session.thread_created', session_thread_id: b, agent_name: 'researcher', workflow_run_id: null },
      { type: 'span.model_request_end', session_thread_id: a, model_request_start_id: 'sevt_x', is_error: false, model_usage: { input_tokens: 5, output_tokens: 7, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 } },
      { type: 'session.thread_status_idle', session_thread_id: a, agent_name: 'lead', stop_reason: { type: 'end_turn' }, stop_details: null },
      { type: 'session.thread_status_terminated', session_thread_id: b, agent_name: 'researcher' },
    ])
    const threads = await all(client.beta.sessions.threads.list(sid, { limit: 1 }))
    expect(threads.map((x) => [x.id, x.status, x.parent_thread_id])).toEqual([
      [primaryThreadId(sid), 'running', null],
      [a, 'idle', primaryThreadId(sid)],
      [b, 'terminated', primaryThreadId(sid)],
    ])
    expect(threads[0].agent).toMatchObject({ type: 'agent', id: agentId, name: 'lead' })
    expect(threads[1].agent).toMatchObject({ type: 'agent', name: 'lead' })
    expect(threads[2].agent).toMatchObject({ type: 'inline', name: 'researcher' })
    expect(threads[1].usage).toMatchObject({ input_tokens: 5, output_tokens: 7 })
    expect(threads[2].usage).toBeNull()
    expect(threads.every((x) => x.type === 'session_thread' && x.session_id === sid)).toBe(true)
    const idle = await all(client.beta.sessions.threads.list(sid, { statuses: ['idle', 'terminated'] }))
    expect(idle.map((x) => x.id)).toEqual([a, b])
    const one = await client.beta.sessions.threads.retrieve(a, { session_id: sid })
    // duration_seconds is time since creation, so it moves between two reads.
    expect({ ...one, stats: null }).toEqual({ ...threads[1], stats: null })
    expect(one.stats).toMatchObject({ active_seconds: expect.any(Number), startup_seconds: 0 })
    await expect(client.beta.sessions.threads.retrieve('sthr_UNKNOWN', { session_id: sid })).rejects.toBeInstanceOf(Anthropic.NotFoundError)
    await expect(client.beta.sessions.threads.list('sesn_UNKNOWN')).rejects.toBeInstanceOf(Anthropic.NotFoundError)
  })
})

describe('answering pending requests through the official SDK', () => {
  it('accepts one confirmation per tool use that asked, refuses a second, and appends nothing from a rejected send', async () => {
    const sid = await newSession()
    const [ask, allowed] = await t.engine.services.log.append(sid, [
      { type: 'agent.tool_use', name: 'bash', input: { command: 'ls' }, evaluated_permission: 'ask' },
      { type: 'agent.tool_use', name: 'read', input: { path: 'x' }, evaluated_permission: 'allow' },
    ])
    const before = (await all(client.beta.sessions.events.list(sid))).length
    // A send that mixes a valid message with an invalid confirmation appends neither.
    const mixed = await client.beta.sessions.events
      .send(sid, { events: [userMessage('kept?'), { type: 'user.tool_confirmation', tool_use_id: allowed.event.id, result: 'allow' }] })
      .catch((e: unknown) => e)
    expect(mixed).toBeInstanceOf(Anthropic.BadRequestError)
    expect((mixed as Error).message).toMatch(/events\[1\]\.tool_use_id: tool use .* did not ask for confirmation/)
    expect((await all(client.beta.sessions.events.list(sid))).length).toBe(before)
    const ok = await client.beta.sessions.events.send(sid, { events: [{ type: 'user.tool_confirmation', tool_use_id: ask.event.id, result: 'deny', deny_message: 'no' }] })
    expect(ok.data![0]).toMatchObject({ type: 'user.tool_confirmation', tool_use_id: ask.event.id, result: 'deny' })
    const again = await client.beta.sessions.events.send(sid, { events: [{ type: 'user.tool_confirmation', tool_use_id: ask.event.id, result: 'allow' }] }).catch((e: unknown) => e)
    expect(again).toBeInstanceOf(Anthropic.BadRequestError)
    expect((again as Error).message).toMatch(/already been answered/)
  })

  it('lets exactly one of two concurrent confirmations of the same tool use through', async () => {
    const sid = await newSession()
    const [ask] = await t.engine.services.log.append(sid, [{ type: 'agent.tool_use', name: 'bash', input: {}, evaluated_permission: 'ask' }])
    const send = () => client.beta.sessions.events.send(sid, { events: [{ type: 'user.tool_confirmation', tool_use_id: ask.event.id, result: 'allow' }] })
    const results = await Promise.allSettled([send(), send(), send()])
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1)
    for (const r of results.filter((x) => x.status === 'rejected')) expect((r as PromiseRejectedResult).reason).toBeInstanceOf(Anthropic.BadRequestError)
    const confirmations = await all(client.beta.sessions.events.list(sid, { types: ['user.tool_confirmation'] }))
    expect(confirmations).toHaveLength(1)
  })

  it('accepts a custom tool result for a pending custom tool use', async () => {
    const sid = await newSession()
    const [use] = await t.engine.services.log.append(sid, [{ type: 'agent.custom_tool_use', name: 'lookup', input: {} }])
    const sent = await client.beta.sessions.events.send(sid, {
      events: [{ type: 'user.custom_tool_result', custom_tool_use_id: use.event.id, content: [{ type: 'text', text: '42' }] }],
    })
    expect(sent.data![0].type).toBe('user.custom_tool_result')
    await expect(
      client.beta.sessions.events.send(sid, { events: [{ type: 'user.custom_tool_result', custom_tool_use_id: 'sevt_NOPE', content: [] }] }),
    ).rejects.toBeInstanceOf(Anthropic.BadRequestError)
  })
})
