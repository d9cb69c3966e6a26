import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import { take } from '../support/polling'
import { startApiServer, type TestApiServer } from '../support/api-server'
import { primaryThreadId } from '../../src/shared/api/ids'

// The threads' API surface (spec §3, §4.4–§4.5, §5, §10) through the official SDK. A child's
// events are seeded through the log, as the runtime writes them: stored once under the child
// (session_thread_id), the primary-visible ones shown on the session stream with the same id.

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
let childCount = 0
const newChildId = () => `sthr_CHILD${String(++childCount).padStart(20, '0')}`

async function all<T>(pages: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const x of pages) out.push(x)
  return out
}


type ApiError = InstanceType<typeof Anthropic.APIError>
type Ev = { id: string; type: string; session_thread_id?: string | null }
const ids = (events: readonly unknown[]) => (events as Ev[]).map((e) => e.id)
/** Events the engine's own brain may add to the primary (a status change) are not what these tests look at. */
const seeded = (events: readonly unknown[], wanted: ReadonlySet<string>) => (events as Ev[]).filter((e) => wanted.has(e.id))

/** A child as the runtime starts it: created (the parent's event), then running, then its own events. */
async function startChild(sid: string, child: string, name = 'researcher') {
  return t.engine.services.log.append(sid, [
    { type: 'session.thread_created', session_thread_id: child, agent_name: name, workflow_run_id: null },
    { type: 'session.thread_status_running', session_thread_id: child, agent_name: name },
  ])
}

type StopReason = { type: 'end_turn' } | { type: 'requires_action'; event_ids: string[] }
const idle = (child: string, stopReason: StopReason = { type: 'end_turn' }) => ({
  type: 'session.thread_status_idle' as const,
  session_thread_id: child,
  agent_name: 'researcher',
  stop_reason: stopReason,
  stop_details: null,
})

describe('the session stream and list show the primary and exactly the primary-visible events of its children', () => {
  it("lists a child's lifecycle and its calls that wait on the client on the session, with the child's ids, and the rest only on the child's thread", async () => {
    const sid = await newSession()
    const child = newChildId()
    const sessionStream = await client.beta.sessions.events.stream(sid)
    const childStream = await client.beta.sessions.threads.events.stream(child, { session_id: sid }).catch((e: unknown) => e)
    // The child does not exist yet: its stream is a 404 until its thread_created is logged.
    expect(childStream).toBeInstanceOf(Anthropic.NotFoundError)
    const [created, running] = await startChild(sid, child)
    const liveChild = await client.beta.sessions.threads.events.stream(child, { session_id: sid })
    const sessionGot = take(sessionStream, 6)
    // Opened after the child's running event: it sees what comes after (no replay).
    const childGot = take(liveChild, 7)
    const stored = await t.engine.services.log.append(sid, [
      { type: 'agent.message', content: [{ type: 'text', text: 'primary speaks' }] },
      { type: 'agent.message', session_thread_id: child, content: [{ type: 'text', text: 'child speaks' }] },
      { type: 'agent.thinking', session_thread_id: child },
      { type: 'agent.tool_use', session_thread_id: child, name: 'read', input: { path: 'a' }, evaluated_permission: 'allow' },
      { type: 'agent.tool_use', session_thread_id: child, name: 'bash', input: { command: 'ls' }, evaluated_permission: 'ask' },
      { type: 'agent.mcp_tool_use', session_thread_id: child, name: 'search', mcp_server_name: 'docs', input: {}, evaluated_permission: 'deny' },
      { type: 'agent.custom_tool_use', session_thread_id: child, name: 'lookup_ticket', input: { ticket: 'T-9' } },
    ])
    const [primaryMsg, childMsg, thinking, allowed, ask, denied, custom] = stored.map((s) => s.event)
    const [requiresAction] = await t.engine.services.log.append(sid, [idle(child, { type: 'requires_action', event_ids: [ask.id, custom.id] })])
    const onSession = [created.event, running.event, primaryMsg, ask, custom, requiresAction.event]
    const onChild = [running.event, childMsg, thinking, allowed, ask, denied, custom, requiresAction.event]
    const wanted = new Set([...onSession, ...onChild].map((e) => e.id))

    const listed = await all(client.beta.sessions.events.list(sid))
    expect(ids(seeded(listed, wanted))).toEqual(ids(onSession))
    // The cross-posted copies are the child's own events: same id, naming the child.
    expect(seeded(listed, wanted).slice(3).every((e) => e.session_thread_id === child)).toBe(true)
    // A type filter keeps the view: the child's allowed call and denied MCP call are not the session's.
    const calls = await all(client.beta.sessions.events.list(sid, { types: ['agent.tool_use', 'agent.mcp_tool_use', 'agent.message'] }))
    expect(ids(seeded(calls, wanted))).toEqual([primaryMsg.id, ask.id])
    expect(ids(await all(client.beta.sessions.threads.events.list(child, { session_id: sid })))).toEqual(ids(onChild))
    // The primary thread's list is the session's.
    const primaryList = await all(client.beta.sessions.threads.events.list(primaryThreadId(sid), { session_id: sid }))
    expect(ids(seeded(primaryList, wanted))).toEqual(ids(onSession))

    expect(ids(seeded(await sessionGot, wanted))).toEqual(ids(onSession))
    expect(ids(await childGot)).toEqual(ids(onChild.slice(1)))
  })
})

describe('answers sent on the session endpoint are routed to the thread of their request', () => {
  it("routes a cross-posted confirmation and a custom tool result to the child's thread, echoing its session_thread_id, and ignores one the client supplies", async () => {
    const sid = await newSession()
    const child = newChildId()
    await startChild(sid, child)
    const [ask, custom] = (
      await t.engine.services.log.append(sid, [
        { type: 'agent.tool_use', session_thread_id: child, name: 'bash', input: { command: 'make' }, evaluated_permission: 'ask' },
        { type: 'agent.custom_tool_use', session_thread_id: child, name: 'lookup_ticket', input: { ticket: 'T-9' } },
      ])
    ).map((s) => s.event)
    await t.engine.services.log.append(sid, [idle(child, { type: 'requires_action', event_ids: [ask.id, custom.id] })])
    // Old guidance told clients to echo a thread id (the SDK's params have none): the server's routing wins.
    const stale = { type: 'user.custom_tool_result' as const, custom_tool_use_id: custom.id, content: [{ type: 'text' as const, text: 'open, P2' }], session_thread_id: primaryThreadId(sid) }
    const sent = await client.beta.sessions.events.send(sid, { events: [{ type: 'user.tool_confirmation', tool_use_id: ask.id, result: 'allow' }, stale] })
    expect(sent.data!.map((e) => [e.type, (e as Ev).session_thread_id])).toEqual([
      ['user.tool_confirmation', child],
      ['user.custom_tool_result', child],
    ])
    const answers = new Set(ids(sent.data! as Ev[]))
    expect(ids(seeded(await all(client.beta.sessions.events.list(sid)), answers))).toEqual([...answers])
    expect(ids(seeded(await all(client.beta.sessions.threads.events.list(child, { session_id: sid })), answers))).toEqual([...answers])
  })

  it("keeps the primary's answers on the primary thread, without a thread id even when the client sends one", async () => {
    const sid = await newSession()
    const child = newChildId()
    await startChild(sid, child)
    const [custom] = await t.engine.services.log.append(sid, [{ type: 'agent.custom_tool_use', name: 'lookup_ticket', input: {} }])
    const stale = { type: 'user.custom_tool_result' as const, custom_tool_use_id: custom.event.id, content: [{ type: 'text' as const, text: 'x' }], session_thread_id: child }
    const sent = await client.beta.sessions.events.send(sid, { events: [stale] })
    expect((sent.data![0] as Ev).session_thread_id).toBeUndefined()
    expect(await all(client.beta.sessions.threads.events.list(child, { session_id: sid }))).not.toContainEqual(expect.objectContaining({ id: sent.data![0].id }))
  })
})

describe('archiving a thread', () => {
  it('archives an idle child: it stays listed, terminated, with archived_at, and its terminated event is on both streams', async () => {
    const sid = await newSession()
    const child = newChildId()
    await startChild(sid, child)
    await t.engine.services.log.append(sid, [idle(child)])
    expect(t.engine.services.threads.liveChildCount(sid)).toBe(1)
    const sessionStream = await client.beta.sessions.events.stream(sid)
    const childStream = await client.beta.sessions.threads.events.stream(child, { session_id: sid })
    const isTerminated = (e: { type: string }) => e.type === 'session.thread_status_terminated'
    const sessionGot = take(sessionStream, 1)
    const childGot = take(childStream, 1)
    const archived = await client.beta.sessions.threads.archive(child, { session_id: sid })
    expect(archived).toMatchObject({ id: child, type: 'session_thread', status: 'terminated', archived_at: expect.any(String) })
    const [onSession] = (await sessionGot).filter(isTerminated)
    const [onChild] = await childGot
    expect(onChild).toMatchObject({ type: 'session.thread_status_terminated', session_thread_id: child, agent_name: 'researcher' })
    expect((onSession as Ev).id).toBe((onChild as Ev).id)
    expect(archived.archived_at).toBe((onChild as { processed_at: string }).processed_at)
    expect(t.engine.services.threads.liveChildCount(sid)).toBe(0)
    const listed = await all(client.beta.sessions.threads.list(sid))
    expect(listed.map((x) => [x.id, x.status])).toEqual([
      [primaryThreadId(sid), expect.any(String)],
      [child, 'terminated'],
    ])
    expect(listed[1].archived_at).toBe(archived.archived_at)
  })

  it('answers 200 with the thread unchanged when it is archived again, writing nothing', async () => {
    const sid = await newSession()
    const child = newChildId()
    await startChild(sid, child)
    await t.engine.services.log.append(sid, [idle(child)])
    const first = await client.beta.sessions.threads.archive(child, { session_id: sid })
    const seq = t.engine.services.log.lastSeq(sid)
    const again = await client.beta.sessions.threads.archive(child, { session_id: sid })
    expect(again).toEqual(first)
    expect(t.engine.services.log.lastSeq(sid)).toBe(seq)
  })

  it('archives a child that waits on the client (requires_action counts as idle)', async () => {
    const sid = await newSession()
    const child = newChildId()
    await startChild(sid, child)
    const [custom] = await t.engine.services.log.append(sid, [{ type: 'agent.custom_tool_use', session_thread_id: child, name: 'lookup', input: {} }])
    await t.engine.services.log.append(sid, [idle(child, { type: 'requires_action', event_ids: [custom.event.id] })])
    expect((await client.beta.sessions.threads.archive(child, { session_id: sid })).status).toBe('terminated')
  })

  it('refuses a running thread with a 400 that names its status, and writes nothing', async () => {
    const sid = await newSession()
    const child = newChildId()
    await startChild(sid, child)
    const seq = t.engine.services.log.lastSeq(sid)
    const err = await client.beta.sessions.threads.archive(child, { session_id: sid }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(Anthropic.BadRequestError)
    expect((err as ApiError).error).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', message: expect.stringMatching(/is running; only an idle thread can be archived/) } })
    expect(t.engine.services.log.lastSeq(sid)).toBe(seq)
    expect((await client.beta.sessions.threads.retrieve(child, { session_id: sid })).status).toBe('running')
    expect(t.engine.services.threads.liveChildCount(sid)).toBe(1)
  })

  it('refuses the primary thread with a 400, and an unknown thread with a 404', async () => {
    const sid = await newSession()
    const err = await client.beta.sessions.threads.archive(primaryThreadId(sid), { session_id: sid }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(Anthropic.BadRequestError)
    expect((err as ApiError).message).toMatch(/primary thread .* cannot be archived/)
    await expect(client.beta.sessions.threads.archive('sthr_NOPE', { session_id: sid })).rejects.toBeInstanceOf(Anthropic.NotFoundError)
    await expect(client.beta.sessions.threads.archive('sthr_NOPE', { session_id: 'sesn_NOPE' })).rejects.toBeInstanceOf(Anthropic.NotFoundError)
  })
})

describe('user.interrupt naming a thread', () => {
  it('refuses a terminated thread with a 400 naming the field, and appends nothing from the send', async () => {
    const sid = await newSession()
    const child = newChildId()
    await startChild(sid, child)
    await t.engine.services.log.append(sid, [idle(child)])
    await client.beta.sessions.threads.archive(child, { session_id: sid })
    const seq = t.engine.services.log.lastSeq(sid)
    const err = await client.beta.sessions.events
      .send(sid, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'kept out too' }] }, { type: 'user.interrupt', session_thread_id: child }] })
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(Anthropic.BadRequestError)
    expect((err as ApiError).message).toMatch(new RegExp(`events\\[1\\]\\.session_thread_id: thread ${child} is terminated`))
    expect(t.engine.services.log.lastSeq(sid)).toBe(seq)
  })

  it('refuses a thread the session does not have with a 400 naming the field', async () => {
    const sid = await newSession()
    const err = await client.beta.sessions.events.send(sid, { events: [{ type: 'user.interrupt', session_thread_id: 'sthr_NOPE' }] }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(Anthropic.BadRequestError)
    expect((err as ApiError).message).toMatch(/events\[0\]\.session_thread_id: .*sthr_NOPE.* is not a thread of session/)
  })

  it("echoes the thread it names: a child's on both streams, the primary's on the primary only", async () => {
    const sid = await newSession()
    const child = newChildId()
    await startChild(sid, child)
    const [toChild] = (await client.beta.sessions.events.send(sid, { events: [{ type: 'user.interrupt', session_thread_id: child }] })).data! as Ev[]
    const [toPrimary] = (await client.beta.sessions.events.send(sid, { events: [{ type: 'user.interrupt', session_thread_id: primaryThreadId(sid) }] })).data! as Ev[]
    const [toAll] = (await client.beta.sessions.events.send(sid, { events: [{ type: 'user.interrupt' }] })).data! as Ev[]
    expect(toChild.session_thread_id).toBe(child)
    expect(toPrimary.session_thread_id).toBe(primaryThreadId(sid))
    expect(toAll.session_thread_id).toBeUndefined()
    const wanted = new Set([toChild.id, toPrimary.id, toAll.id])
    expect(ids(seeded(await all(client.beta.sessions.events.list(sid)), wanted))).toEqual([toChild.id, toPrimary.id, toAll.id])
    expect(ids(seeded(await all(client.beta.sessions.threads.events.list(child, { session_id: sid })), wanted))).toEqual([toChild.id])
  })
})

describe('the thread list', () => {
  it('lists the primary first, then children by ascending created_at, all of them on one default page, filtered by statuses[]', async () => {
    const sid = await newSession()
    const children = Array.from({ length: 22 }, newChildId)
    for (const c of children) await startChild(sid, c)
    await t.engine.services.log.append(sid, [idle(children[3]), idle(children[7])])
    const page = await client.beta.sessions.threads.list(sid)
    expect(page.data.map((x) => x.id)).toEqual([primaryThreadId(sid), ...children])
    expect(page.hasNextPage()).toBe(false)
    const created = page.data.slice(1).map((x) => x.created_at)
    expect([...created].sort()).toEqual(created)
    const idleOnes = await client.beta.sessions.threads.list(sid, { statuses: ['idle'] })
    expect(idleOnes.data.map((x) => x.id).filter((id) => id !== primaryThreadId(sid))).toEqual([children[3], children[7]])
    const err = await client.beta.sessions.threads.list(sid, { statuses: ['asleep' as 'idle'] }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(Anthropic.BadRequestError)
    expect((err as ApiError).message).toMatch(/statuses/)
  })

  it('gives a child usage null until its first idle and stats null until its first status event, startup_seconds 0', async () => {
    const sid = await newSession()
    const child = newChildId()
    await t.engine.services.log.append(sid, [{ type: 'session.thread_created', session_thread_id: child, agent_name: 'researcher', workflow_run_id: null }])
    expect(await client.beta.sessions.threads.retrieve(child, { session_id: sid })).toMatchObject({ stats: null, usage: null })
    await t.engine.services.log.append(sid, [{ type: 'session.thread_status_running', session_thread_id: child, agent_name: 'researcher' }])
    const running = await client.beta.sessions.threads.retrieve(child, { session_id: sid })
    expect(running.usage).toBeNull()
    expect(running.stats).toMatchObject({ startup_seconds: 0, active_seconds: expect.any(Number), duration_seconds: expect.any(Number) })
    await t.engine.services.log.append(sid, [
      { type: 'span.model_request_end', session_thread_id: child, model_request_start_id: 'sevt_x', is_error: false, model_usage: { input_tokens: 11, output_tokens: 3, cache_read_input_tokens: 2, cache_creation_input_tokens: 0 } },
      idle(child),
    ])
    const done = await client.beta.sessions.threads.retrieve(child, { session_id: sid })
    expect(done.usage).toMatchObject({ input_tokens: 11, output_tokens: 3, cache_read_input_tokens: 2, active_seconds: expect.any(Number) })
    // The primary's usage does not include the child's.
    const primary = await client.beta.sessions.threads.retrieve(primaryThreadId(sid), { session_id: sid })
    expect(primary.usage?.input_tokens ?? 0).toBe(0)
  })

  it("shows the session's active time with concurrent threads counted once in usage and summed in stats", async () => {
    const sid = await newSession()
    const child = newChildId()
    const log = t.engine.services.log
    const pause = () => new Promise((r) => setTimeout(r, 40))
    await log.append(sid, [{ type: 'session.thread_status_running', session_thread_id: primaryThreadId(sid), agent_name: 'lead' }])
    await startChild(sid, child)
    await pause()
    await log.append(sid, [idle(child)])
    await pause()
    await log.append(sid, [{ type: 'session.thread_status_idle', session_thread_id: primaryThreadId(sid), agent_name: 'lead', stop_reason: { type: 'end_turn' }, stop_details: null }])
    const session = await client.beta.sessions.retrieve(sid)
    const threads = await all(client.beta.sessions.threads.list(sid))
    const own = threads.map((x) => x.stats?.active_seconds ?? 0)
    expect(own.every((x) => x > 0)).toBe(true)
    expect(session.stats.active_seconds).toBeCloseTo(own[0] + own[1], 6)
    // The child ran inside the primary's turn: the union is the primary's time alone.
    expect(session.usage.active_seconds).toBeCloseTo(own[0], 6)
    expect(session.usage.active_seconds!).toBeLessThan(session.stats.active_seconds!)
    const listed = (await client.beta.sessions.list({ limit: 100 })).data.find((x) => x.id === sid)
    expect(listed?.usage.active_seconds).toBeCloseTo(own[0], 6)
  })
})
