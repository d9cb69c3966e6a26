import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { VaultStore } from '../../../src/main/session/vault-store'
import { primaryThreadId } from '../../../src/shared/api/ids'
import { memoryStores, type Stores } from './fixtures'

let t: Stores
beforeEach(() => {
  t = memoryStores()
})
afterEach(() => t.close())

describe('SessionStore vault references', () => {
  it('refuses an update naming a vault that does not exist or is archived', async () => {
    const vaults = new VaultStore(t.db)
    const live = vaults.create({ display_name: 'live' })
    const old = vaults.create({ display_name: 'old' })
    vaults.archive(old.id)
    const sid = await t.newSession()
    await expect(t.sessions.update(sid, { vault_ids: ['vlt_missing'] })).rejects.toThrow('vault_ids[0]: vault "vlt_missing" was not found')
    await expect(t.sessions.update(sid, { vault_ids: [live.id, old.id] })).rejects.toThrow(`vault_ids[1]: vault ${old.id} is archived`)
    expect((await t.sessions.update(sid, { vault_ids: [live.id] })).vault_ids).toEqual([live.id])
    expect(t.sessions.retrieve(sid).vault_ids).toEqual([live.id])
  })
})

describe('SessionStore routing of client events to threads', () => {
  it('routes a confirmation to the thread of the tool use it answers, whatever thread the client named', async () => {
    const sid = await t.newSession()
    const child = 'sthr_CHILD'
    const [, use] = await t.log.append(sid, [
      { type: 'session.thread_created', session_thread_id: child, agent_name: 'c', workflow_run_id: null },
      { type: 'agent.tool_use', session_thread_id: child, name: 'bash', input: {}, evaluated_permission: 'ask' },
    ])
    const [stored] = await t.sessions.sendEvents(sid, [{ type: 'user.tool_confirmation', tool_use_id: use.event.id, result: 'allow', session_thread_id: primaryThreadId(sid) }])
    expect(stored.event.session_thread_id).toBe(child)
    expect(t.log.read(sid, { threadId: child, types: ['user.tool_confirmation'] })).toHaveLength(1)
  })

  it('stores a primary-thread answer without a thread id', async () => {
    const sid = await t.newSession()
    const [use] = await t.log.append(sid, [{ type: 'agent.custom_tool_use', name: 'lookup', input: {} }])
    const [stored] = await t.sessions.sendEvents(sid, [{ type: 'user.custom_tool_result', custom_tool_use_id: use.event.id, content: [], session_thread_id: 'sthr_WHATEVER' }])
    expect(stored.event.session_thread_id).toBeUndefined()
    expect(t.log.read(sid, { threadId: null, types: ['user.custom_tool_result'] })).toHaveLength(1)
  })

  it('accepts an interrupt for the primary thread or a child thread and refuses an unknown thread', async () => {
    const sid = await t.newSession()
    await t.log.append(sid, [{ type: 'session.thread_created', session_thread_id: 'sthr_C', agent_name: 'c', workflow_run_id: null }])
    const [primary] = await t.sessions.sendEvents(sid, [{ type: 'user.interrupt', session_thread_id: primaryThreadId(sid) }])
    // Naming the primary keeps its id (the primary alone; no id is every thread), keyed under the primary.
    expect(primary.event.session_thread_id).toBe(primaryThreadId(sid))
    expect(t.log.read(sid, { threadId: null, types: ['user.interrupt'] }).map((s) => s.event.id)).toEqual([primary.event.id])
    const [child] = await t.sessions.sendEvents(sid, [{ type: 'user.interrupt', session_thread_id: 'sthr_C' }])
    expect(child.event.session_thread_id).toBe('sthr_C')
    const before = t.log.lastSeq(sid)
    await expect(t.sessions.sendEvents(sid, [{ type: 'user.interrupt' }, { type: 'user.interrupt', session_thread_id: 'sthr_NOPE' }])).rejects.toThrow(
      /events\[1\]\.session_thread_id: "sthr_NOPE" is not a thread of session/,
    )
    expect(t.log.lastSeq(sid)).toBe(before)
  })

  it('refuses an interrupt naming a terminated thread, and appends nothing of the send', async () => {
    const sid = await t.newSession()
    await t.log.append(sid, [
      { type: 'session.thread_created', session_thread_id: 'sthr_T', agent_name: 't', workflow_run_id: null },
      { type: 'session.thread_status_terminated', session_thread_id: 'sthr_T', agent_name: 't' },
    ])
    const before = t.log.lastSeq(sid)
    await expect(t.sessions.sendEvents(sid, [{ type: 'user.interrupt' }, { type: 'user.interrupt', session_thread_id: 'sthr_T' }])).rejects.toThrow(
      'events[1].session_thread_id: thread sthr_T is terminated; it accepts no input',
    )
    expect(t.log.lastSeq(sid)).toBe(before)
  })
})

describe('metadata patches', () => {
  it('refuses an update that would leave more than 16 metadata keys, on every resource that merges them', async () => {
    const full = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, 'v']))
    const agent = t.agents.create({ name: 'm', model: 'claude-sonnet-4-6', metadata: full })
    expect(() => t.agents.update(agent.id, { metadata: { extra: 'x' } })).toThrow('metadata: at most 16 keys; this update would leave 17')
    expect(t.agents.update(agent.id, { metadata: { k0: null, extra: 'x' } }).metadata).toMatchObject({ extra: 'x' })
    const env = t.environments.create({ name: 'e', metadata: full })
    expect(() => t.environments.update(env.id, { metadata: { extra: 'x' } })).toThrow(/at most 16 keys/)
    const sid = await t.newSession()
    await t.sessions.update(sid, { metadata: full })
    await expect(t.sessions.update(sid, { metadata: { extra: 'x' } })).rejects.toThrow(/at most 16 keys/)
    const vaults = new VaultStore(t.db)
    const v = vaults.create({ display_name: 'v', metadata: full })
    expect(() => vaults.update(v.id, { metadata: { extra: 'x' } })).toThrow(/at most 16 keys/)
    expect(t.agents.retrieve(agent.id).metadata).not.toHaveProperty('k0')
  })
})

describe('SessionStore.update', () => {
  it('appends session.updated with exactly the changed fields, in the same commit as the row', async () => {
    const sid = await t.newSession()
    const seen: string[] = []
    t.log.subscribeAll((s) => seen.push(`${s.event.type}:${JSON.stringify(t.sessions.retrieve(sid).title)}`))
    const updated = await t.sessions.update(sid, { title: 'Renamed', metadata: { team: 'a' }, agent: { tools: [{ type: 'agent_toolset_20260401' }] } })
    expect(updated.title).toBe('Renamed')
    expect(updated.agent.tools[0]).toMatchObject({ type: 'agent_toolset_20260401', default_config: { enabled: true } })
    const [event] = t.log.read(sid, { types: ['session.updated'] })
    expect(Object.keys(event.event).sort()).toEqual(['agent', 'id', 'metadata', 'processed_at', 'title', 'type'])
    expect(event.event).toMatchObject({ title: 'Renamed', metadata: { team: 'a' }, agent: { id: updated.agent.id, tools: updated.agent.tools } })
    // Subscribers hear of the event only once the row says the same.
    expect(seen).toEqual(['session.updated:"Renamed"'])
    expect(updated.updated_at).toBe(event.event.processed_at)
  })

  it('appends nothing for an update that changes nothing, and leaves metadata out when it is cleared', async () => {
    const sid = await t.newSession()
    await t.sessions.update(sid, { title: 'Same', metadata: { a: '1' } })
    await t.sessions.update(sid, { title: 'Same', metadata: { a: '1' } })
    expect(t.log.read(sid, { types: ['session.updated'] })).toHaveLength(1)
    await t.sessions.update(sid, { metadata: null })
    const events = t.log.read(sid, { types: ['session.updated'] })
    expect(events).toHaveLength(2)
    expect(events[1].event).not.toHaveProperty('metadata')
    expect(t.sessions.retrieve(sid).metadata).toEqual({})
  })

  it('refuses to update an archived session and appends nothing', async () => {
    const sid = await t.newSession()
    t.sessions.archive(sid)
    await expect(t.sessions.update(sid, { title: 'x' })).rejects.toMatchObject({ code: 'conflict_error' })
    expect(t.log.lastSeq(sid)).toBe(0)
  })
})

describe('SessionStore.create', () => {
  it('commits a new session and its initial events together: when the events fail, there is no session', async () => {
    t.log.addProjector((_rid, s) => {
      if ((s.event as unknown as { content?: { text?: string }[] }).content?.[0]?.text === 'poison') throw new Error('projection failed')
    })
    const agent = t.agents.create({ name: 'c', model: 'claude-sonnet-4-6' })
    const env = t.environments.create({ name: 'e' })
    const before = t.sessions.list({}).data.length
    await expect(
      t.sessions.create({ agent: agent.id, environment_id: env.id, initial_events: [{ type: 'user.message', content: [{ type: 'text', text: 'poison' }] }] }),
    ).rejects.toThrow(/projection failed/)
    expect(t.sessions.list({}).data.length).toBe(before)
    const ok = await t.sessions.create({ agent: agent.id, environment_id: env.id, initial_events: [{ type: 'user.message', content: [{ type: 'text', text: 'hello' }] }] })
    expect(t.log.read(ok.id).map((s) => s.event.type)).toEqual(['user.message'])
    expect(t.sessions.list({}).data.length).toBe(before + 1)
  })
})

describe('SessionStore.list filters', () => {
  it('filters by memory_store_id, and by deployment_id only the sessions that deployment started', async () => {
    const agent = t.agents.create({ name: 'l', model: 'claude-sonnet-4-6' })
    const env = t.environments.create({ name: 'e' })
    const [a, b] = [t.memory.createStore({ name: 'A' }), t.memory.createStore({ name: 'B' })]
    const withStore = await t.sessions.create({ agent: agent.id, environment_id: env.id, resources: [{ type: 'memory_store', memory_store_id: a.id }] })
    await t.sessions.create({ agent: agent.id, environment_id: env.id, resources: [{ type: 'memory_store', memory_store_id: b.id }] })
    await t.sessions.create({ agent: agent.id, environment_id: env.id })
    expect(t.sessions.list({ memory_store_id: a.id }).data.map((s) => s.id)).toEqual([withStore.id])
    expect(t.sessions.list({ deployment_id: 'depl_1' }).data).toEqual([])
    expect(t.sessions.list({}).data).toHaveLength(3)
    const d = t.deployments.create({ name: 'd', agent: agent.id, environment_id: env.id, initial_events: [{ type: 'user.message', content: [{ type: 'text', text: 'go' }] }] })
    const run = await t.deployments.run(d.id)
    expect(t.sessions.list({ deployment_id: d.id }).data.map((s) => [s.id, s.deployment_id])).toEqual([[run.session_id, d.id]])
    expect(t.sessions.list({}).data.filter((s) => s.deployment_id === null)).toHaveLength(3)
  })
})

describe('SessionStore queries for the engine and the scheduler', () => {
  it('lists as live every session that is neither archived nor deleted', async () => {
    const [kept, archived, deleted] = [await t.newSession(), await t.newSession(), await t.newSession()]
    t.sessions.archive(archived)
    t.sessions.delete(deleted)
    expect(t.sessions.liveIds()).toEqual([kept])
  })

  it('names as needing a brain the running or rescheduling sessions and those whose newest event is one of the waking types, never an archived one', async () => {
    const [running, rescheduling, asked, answered, quiet, archived] = await Promise.all(Array.from({ length: 6 }, () => t.newSession()))
    await t.log.append(running, [{ type: 'session.status_running' }])
    await t.log.append(rescheduling, [{ type: 'session.status_rescheduled' }])
    await t.log.append(asked, [{ type: 'user.message', content: [] }])
    await t.log.append(answered, [{ type: 'user.message', content: [] }, { type: 'session.status_idle' }])
    await t.log.append(archived, [{ type: 'user.message', content: [] }])
    t.sessions.archive(archived)
    expect(t.sessions.needingBrains(['user.message']).sort()).toEqual([running, rescheduling, asked].sort())
    expect(t.sessions.needingBrains([]).sort()).toEqual([running, rescheduling].sort())
    expect(t.sessions.needingBrains([]).includes(quiet)).toBe(false)
  })
})

describe('SessionStore.runSnapshot', () => {
  it('serves one frozen object while the session is unchanged, and a new one as soon as an update changes it', async () => {
    const sid = await t.newSession()
    const a = t.sessions.runSnapshot(sid)
    expect(a).toMatchObject({ id: sid, budget: null, resources: [], environment_type: 'cloud' })
    expect((a.agent as { name: string }).name).toBe('tester')
    expect(t.sessions.runSnapshot(sid)).toBe(a)
    expect(Object.isFrozen(a) && Object.isFrozen(a.agent) && Object.isFrozen(a.resources)).toBe(true)
    // an update the log records reaches the next run at once
    await t.sessions.update(sid, { title: 'Renamed', agent: { tools: [{ type: 'agent_toolset_20260401' }] } })
    const b = t.sessions.runSnapshot(sid)
    expect(b).not.toBe(a)
    expect((b.agent as { tools: { type: string }[] }).tools.map((x) => x.type)).toEqual(['agent_toolset_20260401'])
    expect(t.sessions.runSnapshot(sid)).toBe(b)
    // what retrieve says, field for field
    const full = t.sessions.retrieve(sid)
    expect({ agent: b.agent, budget: b.budget, resources: b.resources, environment_id: b.environment_id }).toEqual({ agent: full.agent, budget: full.budget ?? null, resources: full.resources, environment_id: full.environment_id })
    // gone with the session
    await t.sessions.delete(sid)
    expect(() => t.sessions.runSnapshot(sid)).toThrow(/not found|was not found/)
  })

  it("knows a self_hosted environment's sessions are answered by its worker", async () => {
    const agent = t.agents.create({ name: 'w', model: 'claude-sonnet-4-6' })
    const env = t.environments.create({ name: 'remote', config: { type: 'self_hosted' } } as never)
    const sid = (await t.sessions.create({ agent: agent.id, environment_id: env.id })).id
    const snap = t.sessions.runSnapshot(sid)
    expect(snap.environment_type).toBe('self_hosted')
    expect(t.sessions.answeredByWorker(sid, snap)).toBe(true)
    expect(t.sessions.answeredByWorker(await t.newSession())).toBe(false)
  })
})
