import { describe, expect, it } from 'vitest'
import type { Agent, Multiagent } from '../../../src/shared/api/types'
import { CorralError } from '../../../src/shared/errors'
import {
  checkToolNames,
  mergeMultiagent,
  resolveMultiagent,
  sessionRoster,
  snapshotRoster,
  type MultiagentParams,
  type MultiagentResolveParams,
} from '../../../src/main/session/agent-roster'

/** Agents by id, every version kept: the lookup the agent store gives the resolver, without a database. */
class Agents {
  private readonly versions = new Map<string, Agent[]>()
  add(name: string, over: Partial<Agent> = {}): Agent {
    const a = {
      type: 'agent',
      id: `agent_${name}`,
      version: 1,
      name,
      description: null,
      model: { id: 'claude-sonnet-4-6' },
      system: null,
      tools: [],
      mcp_servers: [],
      skills: [],
      multiagent: null,
      execution_identity: { type: 'service_account' },
      metadata: {},
      created_at: '2026-01-01T00:00:00Z',
      updated_at: '2026-01-01T00:00:00Z',
      archived_at: null,
      ...over,
    } as Agent
    const list = this.versions.get(a.id) ?? []
    list.push(a)
    this.versions.set(a.id, list)
    return a
  }
  /** A new version of `id` with these changes. */
  bump(id: string, over: Partial<Agent>): Agent {
    const list = this.versions.get(id)!
    const last = list[list.length - 1]
    const next = { ...last, ...over, version: last.version + 1 }
    list.push(next)
    return next
  }
  archive(id: string): void {
    for (const a of this.versions.get(id)!) a.archived_at = '2026-02-01T00:00:00Z'
  }
  lookup = (id: string, version?: number): Agent | undefined => {
    const list = this.versions.get(id)
    if (!list) return undefined
    return version === undefined ? list[list.length - 1] : list.find((a) => a.version === version)
  }
}

const owner = { id: 'agent_lead', version: 1, name: 'lead', model: { id: 'claude-sonnet-4-6' } }

function resolve(agents: Agents, multiagent: unknown, extra: Partial<MultiagentResolveParams> = {}): Multiagent | null {
  return resolveMultiagent({ multiagent: multiagent as MultiagentParams, owner, lookup: agents.lookup, ...extra })
}

/** The 400 a call throws: its message (the test then checks the path and the rule it names). */
function refusal(fn: () => unknown): string {
  try {
    fn()
  } catch (err) {
    expect(err).toBeInstanceOf(CorralError)
    expect((err as CorralError).code).toBe('invalid_request_error')
    return (err as Error).message
  }
  throw new Error('expected a 400, the call succeeded')
}

describe('resolving a multiagent block at save', () => {
  it('fills every default when only the type is sent: subagents and workflows enabled with inline agents only, advisor disabled', () => {
    expect(resolve(new Agents(), { type: 'multiagent_20261001' })).toEqual({
      type: 'multiagent_20261001',
      subagents: { type: 'enabled', inline_agents: { type: 'enabled' }, predefined_agents: [] },
      workflows: { type: 'enabled', inline_agents: { type: 'enabled' }, predefined_agents: [] },
      advisor: { type: 'disabled' },
    })
  })

  it('pins a bare id and a reference without version to the current version, keeps an explicit version, and reads self as the owner at the version being written', () => {
    const agents = new Agents()
    agents.add('a')
    agents.bump('agent_a', { system: 'two' })
    agents.add('b')
    agents.bump('agent_b', { system: 'two' })
    const m = resolve(agents, {
      type: 'multiagent_20261001',
      subagents: { type: 'enabled', predefined_agents: ['agent_a', { type: 'agent', id: 'agent_b', version: 1 }, { type: 'self' }] },
      workflows: { type: 'enabled', predefined_agents: [{ type: 'agent', id: 'agent_b' }] },
    })
    expect(m).toMatchObject({
      subagents: {
        predefined_agents: [
          { type: 'agent', id: 'agent_a', version: 2 },
          { type: 'agent', id: 'agent_b', version: 1 },
          { type: 'agent', id: 'agent_lead', version: 1 },
        ],
      },
      workflows: { predefined_agents: [{ type: 'agent', id: 'agent_b', version: 2 }] },
    })
  })

  it('echoes a legacy coordinator roster with its advisor entry last, whatever its position', () => {
    const agents = new Agents()
    agents.add('a')
    const m = resolve(agents, { type: 'coordinator', agents: [{ type: 'advisor', model: 'claude-opus-4-8' }, 'agent_a', { type: 'self' }] })
    expect(m).toEqual({
      type: 'coordinator',
      agents: [
        { type: 'agent', id: 'agent_a', version: 1 },
        { type: 'agent', id: 'agent_lead', version: 1 },
        { type: 'advisor', model: 'claude-opus-4-8' },
      ],
    })
  })

  it('refuses more than 20 agents in one list, naming the list and V2', () => {
    const agents = new Agents()
    const ids = Array.from({ length: 21 }, (_, i) => agents.add(`a${i}`).id)
    const msg = refusal(() => resolve(agents, { type: 'multiagent_20261001', workflows: { type: 'enabled', predefined_agents: ids } }))
    expect(msg).toMatch(/^multiagent\.workflows\.predefined_agents: at most 20 agents per list; this one lists 21 \(V2\)/)
  })

  it('counts each list on its own: 20 in subagents and 20 other agents in workflows are accepted', () => {
    const agents = new Agents()
    const a = Array.from({ length: 20 }, (_, i) => agents.add(`s${i}`).id)
    const b = Array.from({ length: 20 }, (_, i) => agents.add(`w${i}`).id)
    const m = resolve(agents, { type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: a }, workflows: { type: 'enabled', predefined_agents: b } })
    expect(m?.type === 'multiagent_20261001' && m.subagents.type === 'enabled' && m.subagents.predefined_agents).toHaveLength(20)
  })

  it('refuses the same agent twice in a list, also when one entry is self and the other the owner id (V2)', () => {
    const agents = new Agents()
    agents.add('a')
    expect(refusal(() => resolve(agents, { type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: ['agent_a', { type: 'agent', id: 'agent_a', version: 1 }] } }))).toMatch(
      /^multiagent\.subagents\.predefined_agents\[1\]: agent agent_a is already listed at multiagent\.subagents\.predefined_agents\[0\].*\(V2\)/,
    )
    expect(refusal(() => resolve(agents, { type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: [{ type: 'self' }, 'agent_lead'] } }))).toMatch(/\[1\]: .*\(V2\)/)
  })

  it('refuses an empty coordinator roster, two self entries and two advisor entries in one (V2)', () => {
    const agents = new Agents()
    expect(refusal(() => resolve(agents, { type: 'coordinator', agents: [] }))).toMatch(/^multiagent\.agents: a coordinator roster lists 1 to 20 entries.*\(V2\)/)
    expect(refusal(() => resolve(agents, { type: 'coordinator', agents: [{ type: 'self' }, { type: 'self' }] }))).toMatch(/^multiagent\.agents\[1\]: a coordinator roster has at most one self entry \(V2\)/)
    expect(
      refusal(() => resolve(agents, { type: 'coordinator', agents: [{ type: 'advisor', model: 'claude-opus-4-8' }, { type: 'advisor', model: 'claude-opus-5' }] })),
    ).toMatch(/^multiagent\.agents\[1\]: a coordinator roster has at most one advisor entry \(V2\)/)
  })

  it('refuses an unknown agent, an unknown version and an archived agent, naming the entry and V3', () => {
    const agents = new Agents()
    agents.add('gone')
    agents.archive('agent_gone')
    const m = (entry: unknown) => ({ type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: [entry] } })
    expect(refusal(() => resolve(agents, m('agent_nope')))).toMatch(/^multiagent\.subagents\.predefined_agents\[0\]: agent "agent_nope" was not found.*\(V3\)/)
    agents.add('a')
    expect(refusal(() => resolve(agents, m({ type: 'agent', id: 'agent_a', version: 7 })))).toMatch(/^multiagent\.subagents\.predefined_agents\[0\]\.version: agent agent_a has no version 7.*\(V3\)/)
    expect(refusal(() => resolve(agents, m('agent_gone')))).toMatch(/^multiagent\.subagents\.predefined_agents\[0\]: agent agent_gone is archived.*\(V3\)/)
  })

  it('refuses a listed agent that has its own multiagent block at the pinned version, but not at an older single-threaded one (V4)', () => {
    const agents = new Agents()
    agents.add('a')
    agents.bump('agent_a', { multiagent: { type: 'multiagent_20261001' } as unknown as Multiagent })
    const m = (entry: unknown) => ({ type: 'multiagent_20261001', workflows: { type: 'enabled', predefined_agents: [entry] } })
    expect(refusal(() => resolve(agents, m('agent_a')))).toMatch(/^multiagent\.workflows\.predefined_agents\[0\]: agent agent_a \(version 2\) has its own multiagent configuration; delegation is one level deep.*\(V4\)/)
    expect(resolve(agents, m({ type: 'agent', id: 'agent_a', version: 1 }))).toMatchObject({ workflows: { predefined_agents: [{ id: 'agent_a', version: 1 }] } })
  })

  it('refuses inline agents disabled with nothing listed, per member (V5)', () => {
    expect(refusal(() => resolve(new Agents(), { type: 'multiagent_20261001', subagents: { type: 'enabled', inline_agents: { type: 'disabled' } } }))).toMatch(
      /^multiagent\.subagents\.predefined_agents: with multiagent\.subagents\.inline_agents disabled, at least one predefined agent must be listed \(V5\)/,
    )
    expect(refusal(() => resolve(new Agents(), { type: 'multiagent_20261001', workflows: { type: 'enabled', inline_agents: { type: 'disabled' }, predefined_agents: [] } }))).toMatch(/\(V5\)/)
  })

  it('refuses a listed agent whose inference_geo differs from the owner, in either direction (V6)', () => {
    const agents = new Agents()
    agents.add('eu', { model: { id: 'claude-sonnet-4-6', inference_geo: 'eu' } })
    agents.add('plain')
    expect(refusal(() => resolve(agents, { type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: ['agent_eu'] } }))).toMatch(
      /^multiagent\.subagents\.predefined_agents\[0\]: agent agent_eu pins model\.inference_geo "eu" but lead pins none.*\(V6\)/,
    )
    const euOwner = { ...owner, model: { id: 'claude-sonnet-4-6', inference_geo: 'eu' } }
    expect(resolve(agents, { type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: ['agent_eu'] } }, { owner: euOwner })).not.toBeNull()
    expect(refusal(() => resolve(agents, { type: 'multiagent_20261001', workflows: { type: 'enabled', predefined_agents: ['agent_plain'] } }, { owner: euOwner }))).toMatch(/\(V6\)/)
  })

  it('refuses an advisor weaker than the agent, naming the pair and V7, in both forms', () => {
    const opus = { ...owner, model: { id: 'claude-opus-4-8' } }
    expect(refusal(() => resolve(new Agents(), { type: 'multiagent_20261001', advisor: { type: 'enabled', model: 'claude-sonnet-4-6' } }, { owner: opus }))).toMatch(
      /^multiagent\.advisor\.model: claude-sonnet-4-6 cannot advise claude-opus-4-8: .*weaker.*\(V7, advisor pairing\)/,
    )
    expect(refusal(() => resolve(new Agents(), { type: 'coordinator', agents: [{ type: 'advisor', model: 'claude-haiku-4-5' }] }))).toMatch(/^multiagent\.agents\[0\]\.model: claude-haiku-4-5 cannot advise claude-sonnet-4-6: .*floor.*\(V7/)
    expect(resolve(new Agents(), { type: 'multiagent_20261001', advisor: { type: 'enabled', model: 'claude-opus-5' } }, { owner: opus })).toMatchObject({ advisor: { type: 'enabled', model: 'claude-opus-5' } })
  })

  it('lets any model advise an agent whose model is not in the tier table, and the user table extend who may advise', () => {
    const local = { ...owner, model: { id: 'llama-3-70b' } }
    expect(resolve(new Agents(), { type: 'multiagent_20261001', advisor: { type: 'enabled', model: 'qwen-2' } }, { owner: local })).toMatchObject({ advisor: { model: 'qwen-2' } })
    expect(refusal(() => resolve(new Agents(), { type: 'multiagent_20261001', advisor: { type: 'enabled', model: 'qwen-2' } }))).toMatch(/not in the advisor tier table.*\(V7/)
    const tiers = { 'claude-sonnet-4-6': 1, 'qwen-2': 3 }
    expect(resolve(new Agents(), { type: 'multiagent_20261001', advisor: { type: 'enabled', model: 'qwen-2' } }, { tiers })).toMatchObject({ advisor: { model: 'qwen-2' } })
  })

  it('reserves the name anthropic.advisor in either list while the advisor is enabled (V8)', () => {
    const agents = new Agents()
    agents.add('x', { name: 'anthropic.advisor' })
    const m = { type: 'multiagent_20261001', workflows: { type: 'enabled', predefined_agents: ['agent_x'] } }
    expect(resolve(agents, m)).not.toBeNull()
    expect(refusal(() => resolve(agents, { ...m, advisor: { type: 'enabled', model: 'claude-opus-4-8' } }))).toMatch(/^multiagent\.workflows\.predefined_agents\[0\]: the name "anthropic\.advisor" is reserved.*\(V8\)/)
    expect(refusal(() => resolve(agents, { type: 'coordinator', agents: ['agent_x', { type: 'advisor', model: 'claude-opus-4-8' }] }))).toMatch(/^multiagent\.agents\[0\]: .*\(V8\)/)
  })

  it('refuses the advisor as a predefined agent (V9)', () => {
    expect(refusal(() => resolve(new Agents(), { type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: [{ type: 'advisor', model: 'claude-opus-4-8' }] } }))).toMatch(
      /^multiagent\.subagents\.predefined_agents\[0\]: the advisor is not an agent and cannot be listed.*\(V9\)/,
    )
  })

  it('refuses two listed agents with the same name, and in a coordinator roster an agent named self (V11)', () => {
    const agents = new Agents()
    agents.add('one', { name: 'reviewer' })
    agents.add('two', { name: 'reviewer' })
    agents.add('s', { name: 'self' })
    expect(refusal(() => resolve(agents, { type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: ['agent_one', 'agent_two'] } }))).toMatch(
      /^multiagent\.subagents\.predefined_agents\[1\]: agent agent_two is named "reviewer" like the agent at multiagent\.subagents\.predefined_agents\[0\].*\(V11\)/,
    )
    expect(refusal(() => resolve(agents, { type: 'coordinator', agents: ['agent_s'] }))).toMatch(/^multiagent\.agents\[0\]: agent agent_s is named "self".*\(V11\)/)
  })
})

describe('custom tool names (V10)', () => {
  it('refuses a custom tool named with ant__ or mcp__ or after a built-in tool, naming the tool', () => {
    const custom = (name: string) => [{ type: 'agent_toolset_20260401' }, { type: 'custom', name }]
    expect(refusal(() => checkToolNames(custom('ant__advisor')))).toMatch(/^tools\[1\]\.name: "ant__advisor" is reserved.*\(V10\)/)
    expect(refusal(() => checkToolNames(custom('mcp__x')))).toMatch(/\(V10\)/)
    expect(refusal(() => checkToolNames(custom('send_to_agent')))).toMatch(/\(V10\)/)
    expect(refusal(() => checkToolNames(custom('bash')))).toMatch(/\(V10\)/)
    expect(() => checkToolNames(custom('lookup_ticket'))).not.toThrow()
    expect(refusal(() => checkToolNames(custom('bash'), 'agent: tools'))).toMatch(/^agent: tools\[1\]\.name/)
  })
})

describe('merging an update into the stored block', () => {
  const agents = new Agents()
  agents.add('a')
  agents.add('b')
  agents.bump('agent_a', { system: 'later' })
  const stored = resolve(agents, {
    type: 'multiagent_20261001',
    subagents: { type: 'enabled', inline_agents: { type: 'disabled' }, predefined_agents: [{ type: 'agent', id: 'agent_a', version: 1 }] },
    workflows: { type: 'disabled' },
    advisor: { type: 'enabled', model: 'claude-opus-4-8' },
  })
  const merged = (update: unknown) => resolve(agents, mergeMultiagent(stored, update as MultiagentParams))

  it('keeps every omitted key, including the pinned versions of a list that is not sent', () => {
    expect(merged({ type: 'multiagent_20261001' })).toEqual(stored)
    expect(merged({ type: 'multiagent_20261001', subagents: { type: 'enabled' } })).toEqual(stored)
  })

  it('resets a key sent as null to its default with everything under it: workflows null enables workflows', () => {
    expect(merged({ type: 'multiagent_20261001', workflows: null })).toMatchObject({ workflows: { type: 'enabled', inline_agents: { type: 'enabled' }, predefined_agents: [] } })
    expect(merged({ type: 'multiagent_20261001', advisor: null })).toMatchObject({ advisor: { type: 'disabled' } })
    // inline null → enabled; the list stays
    expect(merged({ type: 'multiagent_20261001', subagents: { type: 'enabled', inline_agents: null } })).toMatchObject({
      subagents: { inline_agents: { type: 'enabled' }, predefined_agents: [{ id: 'agent_a', version: 1 }] },
    })
  })

  it('replaces a sent list (resolving it now) and a member sent with another type, whose omitted keys take defaults', () => {
    expect(merged({ type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: ['agent_a', 'agent_b'] } })).toMatchObject({
      subagents: { inline_agents: { type: 'disabled' }, predefined_agents: [{ id: 'agent_a', version: 2 }, { id: 'agent_b', version: 1 }] },
    })
    expect(merged({ type: 'multiagent_20261001', workflows: { type: 'enabled' } })).toMatchObject({ workflows: { type: 'enabled', inline_agents: { type: 'enabled' }, predefined_agents: [] } })
    expect(merged({ type: 'multiagent_20261001', subagents: { type: 'disabled' } })).toMatchObject({ subagents: { type: 'disabled' } })
  })

  it('validates the merged result: disabling inline agents of a member whose stored list is empty is V5', () => {
    const plain = resolve(agents, { type: 'multiagent_20261001' })
    expect(refusal(() => resolve(agents, mergeMultiagent(plain, { type: 'multiagent_20261001', workflows: { type: 'enabled', inline_agents: { type: 'disabled' } } })))).toMatch(
      /^multiagent\.workflows\.predefined_agents: .*\(V5\)/,
    )
  })

  it('replaces the whole block on a change of type, clears it on null, and keeps it when omitted', () => {
    expect(merged({ type: 'coordinator', agents: ['agent_b'] })).toEqual({ type: 'coordinator', agents: [{ type: 'agent', id: 'agent_b', version: 1 }] })
    const coord = resolve(agents, { type: 'coordinator', agents: ['agent_b'] })
    expect(resolve(agents, mergeMultiagent(coord, { type: 'multiagent_20261001' }))).toMatchObject({ subagents: { predefined_agents: [] }, advisor: { type: 'disabled' } })
    expect(mergeMultiagent(stored, null)).toBeNull()
    expect(mergeMultiagent(stored, undefined)).toEqual(stored)
  })
})

describe('the session snapshot of a roster', () => {
  it('copies every listed agent at its pinned version and the session agent itself for self', () => {
    const agents = new Agents()
    agents.add('a', { system: 'v1' })
    agents.bump('agent_a', { system: 'v2' })
    const lead = agents.add('lead', { system: 'lead', multiagent: resolve(agents, { type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: [{ type: 'agent', id: 'agent_a', version: 1 }, { type: 'self' }] } }) })
    const snap = snapshotRoster({ agent: { ...lead, system: 'overridden' }, lookup: agents.lookup })
    expect(snap).toMatchObject({
      type: 'multiagent_20261001',
      subagents: { predefined_agents: [{ type: 'agent', id: 'agent_a', version: 1, system: 'v1', name: 'a' }, { id: 'agent_lead', system: 'overridden' }] },
      workflows: { type: 'enabled', predefined_agents: [] },
    })
    expect(Object.keys((snap as { subagents: { predefined_agents: object[] } }).subagents.predefined_agents[0]).sort()).toEqual(
      ['description', 'execution_identity', 'id', 'mcp_servers', 'model', 'name', 'skills', 'system', 'tools', 'type', 'version'].sort(),
    )
    expect(sessionRoster(snap)).toMatchObject({ subagents: { enabled: true, inlineAgents: true, agents: [{ id: 'agent_a' }, { id: 'agent_lead' }] }, workflows: { enabled: true, agents: [] }, advisor: null })
  })

  it('resolves a block stored as sent (saved before rosters were resolved) when a session copies it', () => {
    const agents = new Agents()
    agents.add('a')
    const lead = agents.add('old-lead', { multiagent: { type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: ['agent_a'] } } as unknown as Multiagent })
    expect(snapshotRoster({ agent: lead, lookup: agents.lookup })).toMatchObject({
      subagents: { type: 'enabled', inline_agents: { type: 'enabled' }, predefined_agents: [{ type: 'agent', id: 'agent_a', version: 1, name: 'a' }] },
      workflows: { type: 'enabled', predefined_agents: [] },
      advisor: { type: 'disabled' },
    })
  })

  it('refuses a session whose roster lists an agent archived since the save, and an override model the advisor may not advise', () => {
    const agents = new Agents()
    agents.add('a')
    const lead = agents.add('lead', { multiagent: resolve(agents, { type: 'coordinator', agents: ['agent_a', { type: 'advisor', model: 'claude-opus-4-8' }] }) })
    expect(sessionRoster(snapshotRoster({ agent: lead, lookup: agents.lookup }))).toMatchObject({ subagents: { inlineAgents: false }, workflows: { enabled: false }, advisor: 'claude-opus-4-8' })
    expect(refusal(() => snapshotRoster({ agent: { ...lead, model: { id: 'claude-mythos-5-1' } }, lookup: agents.lookup }))).toMatch(/^agent: multiagent\.agents\[1\]\.model: claude-opus-4-8 cannot advise claude-mythos-5-1.*\(V7/)
    agents.archive('agent_a')
    expect(refusal(() => snapshotRoster({ agent: lead, lookup: agents.lookup }))).toMatch(/^agent: agent_lead's multiagent\.agents\[0\]: agent agent_a has been archived since.*\(V3\)/)
  })
})
