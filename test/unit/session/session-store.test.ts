import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { VaultStore } from '../../../src/main/session/vault-store'
import { primaryThreadId } from '../../../src/main/session/thread-store'
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
    expect(() => t.sessions.update(sid, { vault_ids: ['vlt_missing'] })).toThrow('vault_ids[0]: vault "vlt_missing" was not found')
    expect(() => t.sessions.update(sid, { vault_ids: [live.id, old.id] })).toThrow(`vault_ids[1]: vault ${old.id} is archived`)
    expect(t.sessions.update(sid, { vault_ids: [live.id] }).vault_ids).toEqual([live.id])
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
    expect(primary.event.session_thread_id).toBeUndefined()
    const [child] = await t.sessions.sendEvents(sid, [{ type: 'user.interrupt', session_thread_id: 'sthr_C' }])
    expect(child.event.session_thread_id).toBe('sthr_C')
    const before = t.log.lastSeq(sid)
    await expect(t.sessions.sendEvents(sid, [{ type: 'user.interrupt' }, { type: 'user.interrupt', session_thread_id: 'sthr_NOPE' }])).rejects.toThrow(
      /events\[1\]\.session_thread_id: "sthr_NOPE" is not a thread of session/,
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
    t.sessions.update(sid, { metadata: full })
    expect(() => t.sessions.update(sid, { metadata: { extra: 'x' } })).toThrow(/at most 16 keys/)
    const vaults = new VaultStore(t.db)
    const v = vaults.create({ display_name: 'v', metadata: full })
    expect(() => vaults.update(v.id, { metadata: { extra: 'x' } })).toThrow(/at most 16 keys/)
    expect(t.agents.retrieve(agent.id).metadata).not.toHaveProperty('k0')
  })
})
