import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import type { AgentCreateParams } from '@anthropic-ai/sdk/resources/beta/agents/agents'
import { startApiServer, type TestApiServer } from '../support/api-server'

let t: TestApiServer
let client: Anthropic

beforeAll(async () => {
  t = await startApiServer()
  client = t.client
})
afterAll(() => t.close())

const SONNET = 'claude-sonnet-4-6'
let n = 0
/** A single-threaded agent (the kind a roster may list). */
const agent = (over: Partial<AgentCreateParams> = {}) => client.beta.agents.create({ name: `worker-${++n}`, model: SONNET, ...over })

/** The 400 the SDK raises for a request: its message (tests check the field path and the rule in it). */
async function badRequest(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(Anthropic.BadRequestError)
  const body = (err as InstanceType<typeof Anthropic.BadRequestError>).error as { type: string; error: { type: string; message: string } }
  expect(body.error.type).toBe('invalid_request_error')
  return body.error.message
}

describe('the multiagent block through the official SDK: resolved rosters', () => {
  it('answers a create with every member filled in and every entry pinned, on create, retrieve, list and versions', async () => {
    const a = await agent()
    await client.beta.agents.update(a.id, { version: 1, system: 'two' })
    const b = await agent()
    const lead = await client.beta.agents.create({
      name: 'lead',
      model: SONNET,
      multiagent: {
        type: 'multiagent_20261001',
        subagents: { type: 'enabled', predefined_agents: [a.id, { type: 'agent', id: b.id }, { type: 'self' }] },
        advisor: { type: 'enabled', model: 'claude-opus-4-8' },
      },
    })
    const expected = {
      type: 'multiagent_20261001',
      subagents: {
        type: 'enabled',
        inline_agents: { type: 'enabled' },
        predefined_agents: [
          { type: 'agent', id: a.id, version: 2 },
          { type: 'agent', id: b.id, version: 1 },
          { type: 'agent', id: lead.id, version: 1 },
        ],
      },
      workflows: { type: 'enabled', inline_agents: { type: 'enabled' }, predefined_agents: [] },
      advisor: { type: 'enabled', model: 'claude-opus-4-8' },
    }
    expect(lead.multiagent).toEqual(expected)
    expect((await client.beta.agents.retrieve(lead.id)).multiagent).toEqual(expected)
    const listed = (await client.beta.agents.list({ limit: 100 })).data.find((x) => x.id === lead.id)
    expect(listed?.multiagent).toEqual(expected)
    // A later version of a listed agent does not move the pin of a saved roster.
    await client.beta.agents.update(b.id, { system: 'moved on' })
    expect((await client.beta.agents.retrieve(lead.id)).multiagent).toEqual(expected)
  })

  it('answers the legacy coordinator form pinned, with its advisor entry last', async () => {
    const a = await agent()
    const lead = await client.beta.agents.create({
      name: 'coord',
      model: SONNET,
      multiagent: { type: 'coordinator', agents: [{ type: 'advisor', model: 'claude-opus-4-8' }, a.id, { type: 'self' }] },
    })
    expect(lead.multiagent).toEqual({
      type: 'coordinator',
      agents: [
        { type: 'agent', id: a.id, version: 1 },
        { type: 'agent', id: lead.id, version: 1 },
        { type: 'advisor', model: 'claude-opus-4-8' },
      ],
    })
  })
})

describe('the multiagent block through the official SDK: the merge on update', () => {
  it('merges level by level: omitted keys stay, null resets to the default, a sent list replaces and is pinned now, self follows the new version', async () => {
    const a = await agent()
    const b = await agent()
    const lead = await client.beta.agents.create({
      name: 'merger',
      model: SONNET,
      multiagent: {
        type: 'multiagent_20261001',
        subagents: { type: 'enabled', inline_agents: { type: 'disabled' }, predefined_agents: [a.id, { type: 'self' }] },
        workflows: { type: 'disabled' },
        advisor: { type: 'enabled', model: 'claude-opus-4-8' },
      },
    })
    await client.beta.agents.update(a.id, { system: 'a v2' })
    // Only workflows: null is sent. Workflows come back enabled; subagents (with a's pin at 1) and the advisor stay.
    const v2 = await client.beta.agents.update(lead.id, { version: 1, multiagent: { type: 'multiagent_20261001', workflows: null } })
    expect(v2.version).toBe(2)
    expect(v2.multiagent).toEqual({
      type: 'multiagent_20261001',
      subagents: {
        type: 'enabled',
        inline_agents: { type: 'disabled' },
        predefined_agents: [
          { type: 'agent', id: a.id, version: 1 },
          { type: 'agent', id: lead.id, version: 2 },
        ],
      },
      workflows: { type: 'enabled', inline_agents: { type: 'enabled' }, predefined_agents: [] },
      advisor: { type: 'enabled', model: 'claude-opus-4-8' },
    })
    // A sent list replaces the stored one and pins to the current versions now.
    const v3 = await client.beta.agents.update(lead.id, { multiagent: { type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: [a.id, b.id] } } })
    expect(v3.multiagent).toMatchObject({
      subagents: { inline_agents: { type: 'disabled' }, predefined_agents: [{ id: a.id, version: 2 }, { id: b.id, version: 1 }] },
      advisor: { type: 'enabled' },
    })
    // Omitting multiagent keeps it; null clears it.
    expect((await client.beta.agents.update(lead.id, { description: 'kept' })).multiagent).toEqual(v3.multiagent)
    expect((await client.beta.agents.update(lead.id, { multiagent: null })).multiagent).toBeNull()
    // The version retrieved by number shows the roster that version saved.
    expect((await client.beta.agents.retrieve(lead.id, { version: 2 })).multiagent).toEqual(v2.multiagent)
  })

  it('replaces the whole block when the type changes, omitted members taking their defaults', async () => {
    const a = await agent()
    const lead = await client.beta.agents.create({ name: 'migrating', model: SONNET, multiagent: { type: 'coordinator', agents: [a.id, { type: 'advisor', model: 'claude-opus-4-8' }] } })
    const next = await client.beta.agents.update(lead.id, { multiagent: { type: 'multiagent_20261001' } })
    expect(next.multiagent).toEqual({
      type: 'multiagent_20261001',
      subagents: { type: 'enabled', inline_agents: { type: 'enabled' }, predefined_agents: [] },
      workflows: { type: 'enabled', inline_agents: { type: 'enabled' }, predefined_agents: [] },
      advisor: { type: 'disabled' },
    })
  })

  it('validates the merged result, and a refused update keeps the stored version', async () => {
    const lead = await client.beta.agents.create({ name: 'strict', model: SONNET, multiagent: { type: 'multiagent_20261001' } })
    const msg = await badRequest(client.beta.agents.update(lead.id, { multiagent: { type: 'multiagent_20261001', subagents: { type: 'enabled', inline_agents: { type: 'disabled' } } } }))
    expect(msg).toMatch(/multiagent\.subagents\.predefined_agents: .*\(V5\)/)
    const now = await client.beta.agents.retrieve(lead.id)
    expect(now.version).toBe(1)
    expect(now.multiagent).toEqual(lead.multiagent)
  })
})

describe('the multiagent block through the official SDK: each rule is a 400 that names it', () => {
  const create = (multiagent: unknown, over: Record<string, unknown> = {}) =>
    client.beta.agents.create({ name: `rule-${++n}`, model: SONNET, multiagent, ...over } as unknown as AgentCreateParams)

  it('V1: a type other than multiagent_20261001 or coordinator', async () => {
    expect(await badRequest(create({ type: 'swarm' }))).toMatch(/multiagent\.type: must be multiagent_20261001 or coordinator \(V1\)/)
  })

  it('V2: more than 20 agents in one list, a duplicate, and an empty coordinator roster', async () => {
    const ids: string[] = []
    for (let i = 0; i < 21; i++) ids.push((await agent()).id)
    expect(await badRequest(create({ type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: ids } }))).toMatch(
      /multiagent\.subagents\.predefined_agents: at most 20 agents per list; this one lists 21 \(V2\)/,
    )
    expect(await badRequest(create({ type: 'multiagent_20261001', workflows: { type: 'enabled', predefined_agents: [ids[0], ids[0]] } }))).toMatch(
      /multiagent\.workflows\.predefined_agents\[1\]: agent \S+ is already listed .*\(V2\)/,
    )
    expect(await badRequest(create({ type: 'coordinator', agents: [] }))).toMatch(/multiagent\.agents: a coordinator roster lists 1 to 20 entries.*\(V2\)/)
  })

  it('V3: an unknown agent, an unknown version, an archived agent', async () => {
    const a = await agent()
    const gone = await agent()
    await client.beta.agents.archive(gone.id)
    const list = (entry: unknown) => ({ type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: [entry] } })
    expect(await badRequest(create(list('agent_does_not_exist')))).toMatch(/multiagent\.subagents\.predefined_agents\[0\]: agent "agent_does_not_exist" was not found.*\(V3\)/)
    expect(await badRequest(create(list({ type: 'agent', id: a.id, version: 4 })))).toMatch(/predefined_agents\[0\]\.version: agent \S+ has no version 4.*\(V3\)/)
    expect(await badRequest(create(list(gone.id)))).toMatch(/predefined_agents\[0\]: agent \S+ is archived.*\(V3\)/)
  })

  it('V4: a listed agent that delegates itself', async () => {
    const mid = await client.beta.agents.create({ name: 'mid', model: SONNET, multiagent: { type: 'multiagent_20261001' } })
    expect(await badRequest(create({ type: 'multiagent_20261001', workflows: { type: 'enabled', predefined_agents: [mid.id] } }))).toMatch(
      /multiagent\.workflows\.predefined_agents\[0\]: .*delegation is one level deep.*\(V4\)/,
    )
  })

  it('V5: inline agents disabled and nothing listed', async () => {
    expect(await badRequest(create({ type: 'multiagent_20261001', workflows: { type: 'enabled', inline_agents: { type: 'disabled' } } }))).toMatch(
      /multiagent\.workflows\.predefined_agents: with multiagent\.workflows\.inline_agents disabled, at least one predefined agent must be listed \(V5\)/,
    )
  })

  it('V6: a listed agent pinned to another inference geography', async () => {
    const eu = await agent({ model: { id: SONNET, inference_geo: 'eu' } as AgentCreateParams['model'] })
    expect(await badRequest(create({ type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: [eu.id] } }))).toMatch(
      /predefined_agents\[0\]: agent \S+ pins model\.inference_geo "eu" but \S+ pins none.*\(V6\)/,
    )
  })

  it('V7: an advisor weaker than the agent’s model, naming the pair', async () => {
    expect(await badRequest(create({ type: 'multiagent_20261001', advisor: { type: 'enabled', model: 'claude-sonnet-4-6' } }, { model: 'claude-opus-4-8' }))).toMatch(
      /multiagent\.advisor\.model: claude-sonnet-4-6 cannot advise claude-opus-4-8: .*\(V7, advisor pairing\)/,
    )
    // A model absent from the table (a local model) may be advised by any model.
    const local = await create({ type: 'multiagent_20261001', advisor: { type: 'enabled', model: 'claude-haiku-4-5' } }, { model: 'llama-3.1-70b' })
    expect(local.multiagent).toMatchObject({ advisor: { type: 'enabled', model: 'claude-haiku-4-5' } })
  })

  it('V8: a listed agent named anthropic.advisor while the advisor is enabled', async () => {
    const clash = await agent({ name: 'anthropic.advisor' })
    expect(
      await badRequest(create({ type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: [clash.id] }, advisor: { type: 'enabled', model: 'claude-opus-4-8' } })),
    ).toMatch(/multiagent\.subagents\.predefined_agents\[0\]: the name "anthropic\.advisor" is reserved.*\(V8\)/)
  })

  it('V9: the advisor listed as a predefined agent', async () => {
    expect(await badRequest(create({ type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: [{ type: 'advisor', model: 'claude-opus-4-8' }] } }))).toMatch(
      /multiagent\.subagents\.predefined_agents\[0\]: the advisor is not an agent and cannot be listed.*\(V9\)/,
    )
  })

  it('V10: a custom tool with a reserved name, on create and on update', async () => {
    const tool = (name: string) => [{ type: 'custom', name, description: 'd', input_schema: { type: 'object' } }]
    expect(await badRequest(create(null, { tools: tool('ant__advisor') }))).toMatch(/tools\[0\]\.name: "ant__advisor" is reserved.*\(V10\)/)
    const ok = await agent()
    expect(await badRequest(client.beta.agents.update(ok.id, { tools: tool('send_to_agent') as AgentCreateParams['tools'] }))).toMatch(/tools\[0\]\.name: "send_to_agent" is reserved.*\(V10\)/)
    // and on a mid-session update of the session's tools, which leaves the session as it was
    const env = await client.beta.environments.create({ name: `v10-env-${++n}` })
    const s = await client.beta.sessions.create({ agent: ok.id, environment_id: env.id })
    expect(await badRequest(client.beta.sessions.update(s.id, { agent: { tools: tool('mcp__files__read') as AgentCreateParams['tools'] } }))).toMatch(
      /agent\.tools\[0\]\.name: "mcp__files__read" is reserved.*\(V10\)/,
    )
    expect((await client.beta.sessions.retrieve(s.id)).agent.tools).toEqual(ok.tools)
  })

  it('V11: two listed agents with one name, and a coordinator roster member named self', async () => {
    const one = await agent({ name: 'twin' })
    const two = await agent({ name: 'twin' })
    const self = await agent({ name: 'self' })
    expect(await badRequest(create({ type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: [one.id, two.id] } }))).toMatch(
      /predefined_agents\[1\]: agent \S+ is named "twin" like the agent at multiagent\.subagents\.predefined_agents\[0\].*\(V11\)/,
    )
    expect(await badRequest(create({ type: 'coordinator', agents: [self.id] }))).toMatch(/multiagent\.agents\[0\]: agent \S+ is named "self".*\(V11\)/)
  })
})

describe('agent objects through the official SDK: execution_identity and tool config types', () => {
  it('shows execution_identity on every agent (service_account by default), keeps an aws_role, and resets it on null', async () => {
    const plain = await agent()
    expect(plain.execution_identity).toEqual({ type: 'service_account' })
    expect((await client.beta.agents.retrieve(plain.id)).execution_identity).toEqual({ type: 'service_account' })
    const role = { type: 'aws_role' as const, role_arn: 'arn:aws:iam::123456789012:role/my-agent-runner' }
    const aws = await agent({ execution_identity: role })
    expect(aws.execution_identity).toEqual(role)
    expect((await client.beta.agents.list({ limit: 100 })).data.find((x) => x.id === aws.id)?.execution_identity).toEqual(role)
    expect((await client.beta.agents.update(aws.id, { execution_identity: null })).execution_identity).toEqual({ type: 'service_account' })
    expect(await badRequest(agent({ execution_identity: { type: 'root' } as unknown as typeof role }))).toMatch(/execution_identity\.type: must be service_account or aws_role/)
  })

  it('keeps tools[].configs[].type (the tool name) and refuses a type that is not the name', async () => {
    const a = await agent({ tools: [{ type: 'agent_toolset_20260401', configs: [{ name: 'bash', type: 'bash', enabled: false }, { name: 'read' }] }] })
    const configs = (a.tools[0] as { configs: { name: string; type: string }[] }).configs
    expect(configs).toEqual([
      { name: 'bash', type: 'bash', enabled: false },
      { name: 'read', type: 'read' },
    ])
    expect((await client.beta.agents.retrieve(a.id)).tools).toEqual(a.tools)
    expect(await badRequest(agent({ tools: [{ type: 'agent_toolset_20260401', configs: [{ name: 'bash', type: 'read' } as never] }] }))).toMatch(/tools\[0\]\.configs\[0\]\.type: must equal name/)
  })
})

describe('sessions through the official SDK: the roster snapshot', () => {
  it('copies every listed agent’s full definition at session create; later edits and archival never reach the session', async () => {
    const env = await client.beta.environments.create({ name: `roster-env-${++n}` })
    const helper = await agent({ system: 'helper v1', tools: [{ type: 'agent_toolset_20260401' }] })
    const planner = await agent({ system: 'planner v1' })
    const lead = await client.beta.agents.create({
      name: 'snap-lead',
      model: SONNET,
      system: 'lead',
      multiagent: {
        type: 'multiagent_20261001',
        subagents: { type: 'enabled', predefined_agents: [helper.id, { type: 'self' }] },
        workflows: { type: 'enabled', inline_agents: { type: 'disabled' }, predefined_agents: [planner.id] },
        advisor: { type: 'enabled', model: 'claude-opus-4-8' },
      },
    })
    const session = await client.beta.sessions.create({ agent: { type: 'agent_with_overrides', id: lead.id, system: 'lead, overridden' }, environment_id: env.id })
    const definition = (a: typeof helper) => ({
      type: 'agent',
      id: a.id,
      version: a.version,
      name: a.name,
      description: a.description,
      execution_identity: { type: 'service_account' },
      mcp_servers: a.mcp_servers,
      model: a.model,
      skills: a.skills,
      system: a.system,
      tools: a.tools,
    })
    const expected = {
      type: 'multiagent_20261001',
      subagents: {
        type: 'enabled',
        inline_agents: { type: 'enabled' },
        // self is the session agent as this session runs it (overrides included)
        predefined_agents: [definition(helper), { ...definition(lead), system: 'lead, overridden' }],
      },
      workflows: { type: 'enabled', inline_agents: { type: 'disabled' }, predefined_agents: [definition(planner)] },
      advisor: { type: 'enabled', model: 'claude-opus-4-8' },
    }
    expect(session.agent.multiagent).toEqual(expected)
    // Edit one listed agent, archive the other, change the lead's roster: the session keeps its copy.
    await client.beta.agents.update(helper.id, { system: 'helper v2', tools: [] })
    await client.beta.agents.archive(planner.id)
    // The lead's stored workflows list still names the archived planner: the merged result is
    // validated whole, so an update that keeps that list is refused until it drops the agent.
    expect(await badRequest(client.beta.agents.update(lead.id, { multiagent: { type: 'multiagent_20261001', subagents: { type: 'disabled' } } }))).toMatch(
      /multiagent\.workflows\.predefined_agents\[0\]: agent \S+ is archived.*\(V3\)/,
    )
    await client.beta.agents.update(lead.id, { multiagent: { type: 'multiagent_20261001', subagents: { type: 'disabled' }, workflows: { type: 'disabled' } } })
    expect((await client.beta.sessions.retrieve(session.id)).agent.multiagent).toEqual(expected)
    const roster = t.engine.services.sessions.rosterOf(session.id)
    expect(roster?.subagents.agents.map((a) => [a.id, a.system])).toEqual([
      [helper.id, 'helper v1'],
      [lead.id, 'lead, overridden'],
    ])
    expect(roster?.workflows).toMatchObject({ enabled: true, inlineAgents: false, agents: [{ id: planner.id, system: 'planner v1' }] })
    expect(roster?.advisor).toBe('claude-opus-4-8')
  })

  it('refuses a session whose agent lists an agent archived since the roster was saved, naming agent and the entry', async () => {
    const env = await client.beta.environments.create({ name: `roster-env-${++n}` })
    const w = await agent()
    const lead = await client.beta.agents.create({ name: 'stale-lead', model: SONNET, multiagent: { type: 'coordinator', agents: [w.id] } })
    await client.beta.agents.archive(w.id)
    expect(await badRequest(client.beta.sessions.create({ agent: lead.id, environment_id: env.id }))).toMatch(
      /^agent: \S+'s multiagent\.agents\[0\]: agent \S+ has been archived since the roster was saved.*\(V3\)/,
    )
  })

  it('re-checks the advisor pairing against a session override of the model (V7)', async () => {
    const env = await client.beta.environments.create({ name: `roster-env-${++n}` })
    const lead = await client.beta.agents.create({ name: 'paired', model: SONNET, multiagent: { type: 'multiagent_20261001', advisor: { type: 'enabled', model: 'claude-opus-4-8' } } })
    expect(await badRequest(client.beta.sessions.create({ agent: { type: 'agent_with_overrides', id: lead.id, model: 'claude-opus-5' }, environment_id: env.id }))).toMatch(
      /^agent: multiagent\.advisor\.model: claude-opus-4-8 cannot advise claude-opus-5.*\(V7/,
    )
  })

  it('shows a single-threaded session agent with multiagent null and execution_identity filled', async () => {
    const env = await client.beta.environments.create({ name: `roster-env-${++n}` })
    const a = await agent()
    const s = await client.beta.sessions.create({ agent: a.id, environment_id: env.id })
    expect(s.agent.multiagent).toBeNull()
    expect(s.agent.execution_identity).toEqual({ type: 'service_account' })
    expect(t.engine.services.sessions.rosterOf(s.id)).toBeNull()
  })
})

describe("sessions through the official SDK: MCP servers a limited environment cannot reach (spec §2.5)", () => {
  const mcp = (name: string, url: string) => ({ mcp_servers: [{ type: 'url' as const, name, url }] })
  const limited = (networking: Record<string, unknown>) => client.beta.environments.create({ name: `mcp-env-${++n}`, config: { type: 'cloud', networking: { type: 'limited', ...networking } } as never })
  const sessionCount = async () => (await client.beta.sessions.list({ limit: 100 })).data.length

  it("refuses a session whose agent's MCP server host is not on allowed_hosts, naming the agent, the server, the host and both fixes, and creates nothing", async () => {
    const a = await agent(mcp('tickets', 'https://mcp.tickets.example/sse'))
    const before = await sessionCount()
    for (const env of [await client.beta.environments.create({ name: `mcp-env-${++n}` }), await limited({ allowed_hosts: ['api.example.com', '*.mcp.tickets.example'] })]) {
      const message = await badRequest(client.beta.sessions.create({ agent: a.id, environment_id: env.id }))
      expect(message).toMatch(new RegExp(`^agent: mcp_servers\\[0\\]: agent ${a.id} \\("${a.name}"\\) declares MCP server "tickets" at host mcp\\.tickets\\.example, which environment ${env.id} cannot reach`))
      expect(message).toContain('add the host to allowed_hosts or set allow_mcp_servers: true')
    }
    expect(await sessionCount()).toBe(before)
  })

  it('creates the session when the host is allowed (exactly or by a wildcard), when the environment allows MCP servers, or when its network is unrestricted', async () => {
    const a = await agent(mcp('tickets', 'https://mcp.tickets.example/sse'))
    const b = await agent(mcp('deep', 'https://a.b.tickets.example/mcp'))
    const envs = [
      await limited({ allowed_hosts: ['mcp.tickets.example'] }),
      await limited({ allowed_hosts: [], allow_mcp_servers: true }),
      await client.beta.environments.create({ name: `mcp-env-${++n}`, config: { type: 'cloud', networking: { type: 'unrestricted' } } }),
    ]
    for (const env of envs) expect((await client.beta.sessions.create({ agent: a.id, environment_id: env.id })).agent.mcp_servers).toEqual([{ type: 'url', name: 'tickets', url: 'https://mcp.tickets.example/sse' }])
    const wildcard = await limited({ allowed_hosts: ['*.tickets.example'] })
    expect((await client.beta.sessions.create({ agent: b.id, environment_id: wildcard.id })).status).toBe('idle')
  })

  it('checks every listed agent too (a subagent, a workflow agent, a coordinator roster member), naming its place in the roster', async () => {
    const env = await limited({ allowed_hosts: ['ok.example'] })
    const fine = await agent(mcp('fine', 'https://ok.example/mcp'))
    const far = await agent(mcp('far', 'http://10.0.0.7:8080/mcp'))
    const sub = await client.beta.agents.create({ name: 'mcp-lead-sub', model: SONNET, ...mcp('fine', 'https://ok.example/mcp'), multiagent: { type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: [fine.id, far.id] } } })
    expect(await badRequest(client.beta.sessions.create({ agent: sub.id, environment_id: env.id }))).toMatch(
      new RegExp(`^agent: multiagent\\.subagents\\.predefined_agents\\[1\\]: mcp_servers\\[0\\]: agent ${far.id} \\("${far.name}"\\) declares MCP server "far" at host 10\\.0\\.0\\.7`),
    )
    const wf = await client.beta.agents.create({ name: 'mcp-lead-wf', model: SONNET, multiagent: { type: 'multiagent_20261001', workflows: { type: 'enabled', predefined_agents: [far.id] } } })
    expect(await badRequest(client.beta.sessions.create({ agent: wf.id, environment_id: env.id }))).toMatch(/^agent: multiagent\.workflows\.predefined_agents\[0\]: mcp_servers\[0\]: .*"far" at host 10\.0\.0\.7/)
    const coord = await client.beta.agents.create({ name: 'mcp-coord', model: SONNET, multiagent: { type: 'coordinator', agents: [fine.id, far.id] } })
    expect(await badRequest(client.beta.sessions.create({ agent: coord.id, environment_id: env.id }))).toMatch(/^agent: multiagent\.agents\[1\]: mcp_servers\[0\]: /)
    // the same roster in an environment that allows MCP servers starts
    const open = await limited({ allow_mcp_servers: true })
    expect((await client.beta.sessions.create({ agent: sub.id, environment_id: open.id })).agent.multiagent).not.toBeNull()
  })

  it("checks a session override of the agent's MCP servers, at create and on update (a refused update changes nothing)", async () => {
    const env = await limited({ allowed_hosts: ['ok.example'] })
    const a = await agent(mcp('fine', 'https://ok.example/mcp'))
    expect(await badRequest(client.beta.sessions.create({ agent: { type: 'agent_with_overrides', id: a.id, ...mcp('other', 'https://other.example/mcp') }, environment_id: env.id } as never))).toMatch(/^agent: mcp_servers\[0\]: .*"other" at host other\.example/)
    const s = await client.beta.sessions.create({ agent: a.id, environment_id: env.id })
    expect(await badRequest(client.beta.sessions.update(s.id, { title: 'renamed', agent: mcp('other', 'https://other.example/mcp') } as never))).toMatch(/^agent: mcp_servers\[0\]: .*"other" at host other\.example/)
    const after = await client.beta.sessions.retrieve(s.id)
    expect(after.title).toBeNull()
    expect(after.agent.mcp_servers).toEqual([{ type: 'url', name: 'fine', url: 'https://ok.example/mcp' }])
    expect((await client.beta.sessions.update(s.id, { agent: mcp('fine2', 'https://ok.example/v2') } as never)).agent.mcp_servers).toEqual([{ type: 'url', name: 'fine2', url: 'https://ok.example/v2' }])
  })
})

describe('the advisor tier table extended in settings.json', () => {
  it('lets a model the user ranks in advisorTiers advise a model of the built-in table, and refuses to start on a bad entry', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'corral-tiers-'))
    try {
      writeFileSync(join(dataDir, 'settings.json'), JSON.stringify({ advisorTiers: { 'qwen-3-235b': 5 } }))
      const s = await startApiServer({ dataDir })
      try {
        const ok = await s.client.beta.agents.create({ name: 'local-advised', model: 'claude-opus-4-8', multiagent: { type: 'multiagent_20261001', advisor: { type: 'enabled', model: 'qwen-3-235b' } } })
        expect(ok.multiagent).toMatchObject({ advisor: { type: 'enabled', model: 'qwen-3-235b' } })
        // still the table's rule: tier 5 may not advise a tier-6 model
        expect(
          await badRequest(s.client.beta.agents.create({ name: 'over', model: 'claude-opus-5', multiagent: { type: 'multiagent_20261001', advisor: { type: 'enabled', model: 'qwen-3-235b' } } })),
        ).toMatch(/multiagent\.advisor\.model: qwen-3-235b cannot advise claude-opus-5: .*weaker.*\(V7/)
      } finally {
        await s.close()
      }
      // without the entry, the built-in table refuses it
      expect(await badRequest(client.beta.agents.create({ name: 'unranked', model: 'claude-opus-4-8', multiagent: { type: 'multiagent_20261001', advisor: { type: 'enabled', model: 'qwen-3-235b' } } }))).toMatch(
        /qwen-3-235b is not in the advisor tier table.*\(V7/,
      )
      writeFileSync(join(dataDir, 'settings.json'), JSON.stringify({ advisorTiers: { 'qwen-3-235b': 'high' } }))
      await expect(startApiServer({ dataDir })).rejects.toThrow(/settings\.json: advisorTiers\.qwen-3-235b: a whole number/)
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  })
})
