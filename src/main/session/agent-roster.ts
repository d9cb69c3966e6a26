/**
 * An agent's `multiagent` block (spec/multiagent.md §2): the level-by-level merge of an update
 * into the stored block (§2.3), and its resolution and validation at save (§2.2, §2.4 V1–V11).
 * Pure: the other agents are reached through a lookup the caller passes (the agent store's), so
 * every rule is unit-tested without a database. Each refusal is a CorralError
 * `invalid_request_error` (400) whose message starts with the field path and names the rule.
 */
import type { z } from 'zod'
import type { Agent, AgentReference, Multiagent, Session, SessionMultiagent, SessionThreadAgent } from '../../shared/api/types'
import { TOOLSET_TOOLS, type multiagentSchema } from '../../shared/api/schemas'
import { ADVISOR_TIERS, advisorPairingProblem, type AdvisorTierTable } from '../../shared/api/advisor-tiers'
import { invalid } from '../../shared/errors'
import { hostAllowed } from '../../shared/api/allowed-hosts'

/** The block as a request sends it (after boundary validation of its shape). */
export type MultiagentParams = z.infer<typeof multiagentSchema>
type Multiagent20261001Params = Extract<MultiagentParams, { type: 'multiagent_20261001' }>
type DelegationParams = NonNullable<Multiagent20261001Params['subagents']>
type RosterEntryParams = Extract<MultiagentParams, { type: 'coordinator' }>['agents'][number]
type Multiagent20261001 = Extract<Multiagent, { type: 'multiagent_20261001' }>
type Delegation = Multiagent20261001['subagents']
type SessionMultiagent20261001 = Extract<SessionMultiagent, { type: 'multiagent_20261001' }>

/** At most this many agents in one roster list (each of subagents / workflows / coordinator). */
export const MAX_LISTED_AGENTS = 20
/** The roster name the advisor occupies; no listed agent may carry it while the advisor is on (V8). */
export const ADVISOR_NAME = 'anthropic.advisor'
/** Tool names the platform offers itself: a custom tool may not take one (V10). */
export const RESERVED_TOOL_NAMES: readonly string[] = [...TOOLSET_TOOLS, 'list_agents', 'send_to_agent', 'session_history']
const RESERVED_TOOL_PREFIXES = ['ant__', 'mcp__']

/**
 * The block an update leads to (§2.3), still in request form (stored references are valid
 * request entries, so resolving them again keeps their pinned versions):
 * - `update` undefined: the stored block; null: no block (single-threaded);
 * - both `multiagent_20261001`: merged member by member: an omitted key keeps its stored value, a
 *   key sent as null takes its default with everything under it, a member sent with another
 *   `type` replaces the stored one (its omitted keys take defaults), a sent `predefined_agents`
 *   list replaces the stored list;
 * - otherwise (no stored block, a `coordinator` on either side, a change of type): `update` whole.
 */
export function mergeMultiagent(stored: Multiagent | null, update: MultiagentParams | null | undefined): MultiagentParams | null {
  if (update === undefined) return stored as MultiagentParams | null
  if (update === null) return null
  if (stored?.type !== 'multiagent_20261001' || update.type !== 'multiagent_20261001') return update
  return {
    type: 'multiagent_20261001',
    subagents: mergeDelegation(stored.subagents, update.subagents),
    workflows: mergeDelegation(stored.workflows, update.workflows),
    advisor: update.advisor === undefined ? stored.advisor : update.advisor,
  }
}

function mergeDelegation(stored: Delegation, update: DelegationParams | null | undefined): DelegationParams | null {
  if (update === undefined) return stored as DelegationParams
  if (update === null || update.type === 'disabled' || stored.type !== 'enabled') return update
  return {
    type: 'enabled',
    inline_agents: update.inline_agents === undefined ? stored.inline_agents : update.inline_agents,
    predefined_agents: update.predefined_agents === undefined ? stored.predefined_agents : update.predefined_agents,
  }
}

/** The agent whose block is being saved. */
export interface RosterOwner {
  id: string
  /** The version being written (what a `self` entry reads back as). */
  version: number
  name: string
  model: Agent['model']
}

export interface MultiagentResolveParams {
  multiagent: MultiagentParams | null
  owner: RosterOwner
  /**
   * The agent `id` at `version` (its latest when absent), or undefined when there is no such
   * agent or version. Its `archived_at` must be the agent's own (an archived agent's old
   * versions count as archived).
   */
  lookup: (id: string, version?: number) => Agent | undefined
  /** The advisor pairing table in effect (the built-in one unless the settings extend it). */
  tiers?: AdvisorTierTable
}

/**
 * Resolves a block to the response shape (§2.2): every member present, every list entry a
 * `{type:'agent', id, version}` pinned to the listed agent's current version when none is given,
 * `self` (and an entry naming the owner's own id) as the owner at the version being written, the
 * coordinator's advisor entry last. Checks V2–V9 and V11 on the way; V1 (the type) is the
 * boundary schema's, V10 is `checkToolNames`'s.
 */
export function resolveMultiagent(p: MultiagentResolveParams): Multiagent | null {
  const m = p.multiagent
  if (m === null) return null
  const geo = new GeoCheck(p.owner)
  const tiers = p.tiers ?? ADVISOR_TIERS
  if (m.type === 'coordinator') {
    const where = 'multiagent.agents'
    if (m.agents.length === 0) throw invalid(`${where}: a coordinator roster lists 1 to ${MAX_LISTED_AGENTS} entries, not none (V2)`)
    const list = resolveList({ where, entries: m.agents, coordinator: true, p, geo, tiers })
    return { type: 'coordinator', agents: [...list.refs, ...list.advisors.map((model) => ({ type: 'advisor' as const, model }))] }
  }
  const advisor = m.advisor ?? { type: 'disabled' }
  if (advisor.type === 'enabled') checkAdvisor('multiagent.advisor.model', p.owner, advisor.model, tiers)
  const resolveDelegation = (key: 'subagents' | 'workflows'): Delegation => {
    const d = m[key]
    if (d?.type === 'disabled') return { type: 'disabled' }
    const where = `multiagent.${key}`
    const inline = d?.inline_agents ?? { type: 'enabled' as const }
    const list = resolveList({ where: `${where}.predefined_agents`, entries: d?.predefined_agents ?? [], coordinator: false, p, geo, tiers })
    if (inline.type === 'disabled' && list.refs.length === 0) {
      throw invalid(`${where}.predefined_agents: with ${where}.inline_agents disabled, at least one predefined agent must be listed (V5)`)
    }
    if (advisor.type === 'enabled') checkAdvisorName(list)
    return { type: 'enabled', inline_agents: { type: inline.type }, predefined_agents: list.refs }
  }
  return { type: 'multiagent_20261001', subagents: resolveDelegation('subagents'), workflows: resolveDelegation('workflows'), advisor }
}

interface ResolvedList {
  refs: AgentReference[]
  /** The listed agents' names, by the path of their entry. */
  names: { where: string; name: string }[]
  /** Advisor models (coordinator form only). */
  advisors: string[]
}

function resolveList(o: { where: string; entries: readonly RosterEntryParams[]; coordinator: boolean; p: MultiagentResolveParams; geo: GeoCheck; tiers: AdvisorTierTable }): ResolvedList {
  const { where, entries, p } = o
  const out: ResolvedList = { refs: [], names: [], advisors: [] }
  const seenIds = new Map<string, string>()
  const seenNames = new Map<string, string>()
  let selves = 0
  entries.forEach((entry, i) => {
    const at = `${where}[${i}]`
    if (typeof entry === 'object' && entry.type === 'advisor') {
      if (!o.coordinator) throw invalid(`${at}: the advisor is not an agent and cannot be listed; enable it with multiagent.advisor: {"type":"enabled","model":"…"} (V9)`)
      if (out.advisors.length > 0) throw invalid(`${at}: a coordinator roster has at most one advisor entry (V2)`)
      checkAdvisor(`${at}.model`, p.owner, entry.model, o.tiers)
      out.advisors.push(entry.model)
      return
    }
    const id = typeof entry === 'string' ? entry : entry.type === 'self' ? p.owner.id : entry.id
    const isSelf = id === p.owner.id
    if (isSelf && o.coordinator && ++selves > 1) throw invalid(`${at}: a coordinator roster has at most one self entry (V2)`)
    const prior = seenIds.get(id)
    if (prior) throw invalid(`${at}: agent ${id} is already listed at ${prior}; a list names distinct agents (V2)`)
    seenIds.set(id, at)
    if (seenIds.size > MAX_LISTED_AGENTS) throw invalid(`${where}: at most ${MAX_LISTED_AGENTS} agents per list; this one lists ${countAgents(entries)} (V2)`)
    let name: string
    let ref: AgentReference
    if (isSelf) {
      name = p.owner.name
      ref = { type: 'agent', id, version: p.owner.version }
    } else {
      const version = typeof entry === 'object' && entry.type === 'agent' ? entry.version : undefined
      const latest = p.lookup(id)
      if (!latest) throw invalid(`${at}: agent ${JSON.stringify(id)} was not found; every listed agent must exist and not be archived (V3)`)
      if (latest.archived_at) throw invalid(`${at}: agent ${id} is archived; every listed agent must exist and not be archived (V3)`)
      const pinned = version === undefined ? latest : p.lookup(id, version)
      if (!pinned) throw invalid(`${at}.version: agent ${id} has no version ${version} (its latest is ${latest.version}); every listed agent must exist (V3)`)
      if (pinned.multiagent) {
        throw invalid(`${at}: agent ${id} (version ${pinned.version}) has its own multiagent configuration; delegation is one level deep, so a listed agent must be single-threaded (V4)`)
      }
      o.geo.check(at, pinned)
      name = pinned.name
      ref = { type: 'agent', id, version: pinned.version }
    }
    if (o.coordinator && name === 'self') throw invalid(`${at}: agent ${id} is named "self", a name a coordinator roster reserves (V11)`)
    const sameName = seenNames.get(name)
    if (sameName) throw invalid(`${at}: agent ${id} is named ${JSON.stringify(name)} like the agent at ${sameName}; names within a list must be unique, the model addresses agents by name (V11)`)
    seenNames.set(name, at)
    out.names.push({ where: at, name })
    out.refs.push(ref)
  })
  if (o.coordinator) checkAdvisorName(out, out.advisors.length > 0)
  return out
}

function countAgents(entries: readonly RosterEntryParams[]): number {
  return entries.filter((e) => typeof e !== 'object' || e.type !== 'advisor').length
}

/** V8: with the advisor on, no listed agent is named `anthropic.advisor`. */
function checkAdvisorName(list: ResolvedList, advisorOn = true): void {
  if (!advisorOn) return
  const clash = list.names.find((n) => n.name === ADVISOR_NAME)
  if (clash) throw invalid(`${clash.where}: the name ${JSON.stringify(ADVISOR_NAME)} is reserved for the advisor while it is enabled; rename that agent or disable the advisor (V8)`)
}

/** V7: the advisor must be allowed to advise the owner's model (the tier table, advisor-tiers.ts). */
function checkAdvisor(where: string, owner: RosterOwner, advisorModel: string, tiers: AdvisorTierTable): void {
  const problem = advisorPairingProblem(owner.model.id, advisorModel, tiers)
  if (problem) throw invalid(`${where}: ${advisorModel} cannot advise ${owner.model.id}: ${problem} (V7, advisor pairing)`)
}

/** V6: the owner and every listed agent pin the same `model.inference_geo`, or none pins one. */
class GeoCheck {
  private readonly geo: string | null
  constructor(private readonly owner: RosterOwner) {
    this.geo = owner.model.inference_geo ?? null
  }
  check(where: string, agent: Agent): void {
    const g = agent.model.inference_geo ?? null
    if (g === this.geo) return
    const show = (x: string | null) => (x === null ? 'none' : JSON.stringify(x))
    throw invalid(
      `${where}: agent ${agent.id} pins model.inference_geo ${show(g)} but ${this.owner.name} pins ${show(this.geo)}; the agent and every listed agent must pin the same inference_geo, or none may pin one (V6)`,
    )
  }
}

/**
 * V10: no custom tool takes a name the platform reserves (an `ant__` or `mcp__` prefix, or a
 * built-in tool's name). `where` prefixes the path (`tools`, `agent.tools`, …).
 */
export function checkToolNames(tools: readonly { type: string; name?: string }[], where = 'tools'): void {
  tools.forEach((t, i) => {
    if (t.type !== 'custom' || typeof t.name !== 'string') return
    const prefix = RESERVED_TOOL_PREFIXES.find((x) => t.name!.startsWith(x))
    if (prefix || RESERVED_TOOL_NAMES.includes(t.name)) {
      throw invalid(
        `${where}[${i}].name: ${JSON.stringify(t.name)} is reserved: a custom tool's name may not start with ant__ or mcp__ nor be a built-in tool's (${RESERVED_TOOL_NAMES.join(', ')}) (V10)`,
      )
    }
  })
}

/**
 * Rewrites the references to `ownerId` (its `self` entry) to `version`: an update that writes a
 * new version pins its self entry to that version.
 */
export function pinSelf(m: Multiagent | null, ownerId: string, version: number): Multiagent | null {
  if (!m) return m
  const pin = <T extends { type: string; id?: string }>(r: T): T => (r.type === 'agent' && r.id === ownerId ? { ...r, version } : r)
  if (m.type === 'coordinator') return { ...m, agents: m.agents.map(pin) }
  const d = (x: Delegation): Delegation => (x.type === 'enabled' ? { ...x, predefined_agents: x.predefined_agents.map(pin) } : x)
  return { ...m, subagents: d(m.subagents), workflows: d(m.workflows) }
}

/** Every agent reference of a resolved block (both lists, or the coordinator roster), in order, with its path. */
export function rosterReferences(m: Multiagent | null): { where: string; ref: AgentReference }[] {
  if (!m) return []
  if (m.type === 'coordinator') {
    return m.agents.flatMap((r, i) => (r.type === 'agent' ? [{ where: `multiagent.agents[${i}]`, ref: r }] : []))
  }
  const out: { where: string; ref: AgentReference }[] = []
  for (const key of ['subagents', 'workflows'] as const) {
    const d = m[key]
    if (d.type === 'enabled') d.predefined_agents.forEach((ref, i) => out.push({ where: `multiagent.${key}.predefined_agents[${i}]`, ref }))
  }
  return out
}

/** An agent's definition as a session pins it for a thread (the SDK's SessionThreadAgent). */
export function threadAgent(a: Agent | Session['agent']): SessionThreadAgent {
  return {
    type: 'agent',
    id: a.id,
    version: a.version,
    name: a.name,
    description: a.description,
    execution_identity: a.execution_identity ?? { type: 'service_account' },
    mcp_servers: a.mcp_servers,
    model: a.model,
    skills: a.skills,
    system: a.system,
    tools: a.tools,
  }
}

export interface RosterSnapshotParams {
  /** The session agent, with the session's overrides applied; its `multiagent` is the saved (resolved) block. */
  agent: Agent
  lookup: MultiagentResolveParams['lookup']
  tiers?: AdvisorTierTable
}

/**
 * The session's copy of the agent's roster (§2.5, §2.7): every listed agent's full definition
 * at its pinned version, `self` as the session agent itself (overrides included, without the
 * roster: a self copy cannot delegate), the advisor as `{type, model}`. Re-checks what the
 * session can change or what may have changed since the save: a listed agent archived since
 * (V3), inference geography (V6) and advisor pairing (V7) against an overridden model, and the
 * custom tool names of every agent it will run (V10). Refusals name `agent` and the roster path.
 */
export function snapshotRoster(p: RosterSnapshotParams): SessionMultiagent | null {
  checkToolNames(p.agent.tools, 'agent: tools')
  if (!p.agent.multiagent) return null
  const owner: RosterOwner = { id: p.agent.id, version: p.agent.version, name: p.agent.name, model: p.agent.model }
  // A block saved before rosters were resolved at save (stored as sent) is resolved now.
  const m = isResolved(p.agent.multiagent)
    ? p.agent.multiagent
    : resolveMultiagent({ multiagent: p.agent.multiagent as unknown as MultiagentParams, owner, lookup: p.lookup, tiers: p.tiers })
  if (!m) return null
  const geo = new GeoCheck(owner)
  const tiers = p.tiers ?? ADVISOR_TIERS
  const self = threadAgent(p.agent)
  const expand = (where: string, ref: AgentReference): SessionThreadAgent => {
    if (ref.id === p.agent.id) return self
    const at = `agent: ${p.agent.id}'s ${where}`
    const latest = p.lookup(ref.id)
    const pinned = latest && p.lookup(ref.id, ref.version)
    if (!latest || !pinned) throw invalid(`${at}: agent ${ref.id} version ${ref.version} was not found (V3)`)
    if (latest.archived_at) throw invalid(`${at}: agent ${ref.id} has been archived since the roster was saved; every listed agent must exist and not be archived, so update the roster before starting a session (V3)`)
    geo.check(at, pinned)
    checkToolNames(pinned.tools, `${at} (agent ${ref.id}) tools`)
    return threadAgent(pinned)
  }
  if (m.type === 'coordinator') {
    return {
      type: 'coordinator',
      agents: m.agents.map((r, i) => {
        if (r.type === 'agent') return expand(`multiagent.agents[${i}]`, r)
        checkAdvisor(`agent: multiagent.agents[${i}].model`, owner, r.model, tiers)
        return { type: 'advisor', model: r.model }
      }),
    }
  }
  if (m.advisor.type === 'enabled') checkAdvisor('agent: multiagent.advisor.model', owner, m.advisor.model, tiers)
  const list = (key: 'subagents' | 'workflows') => {
    const d = m[key]
    if (d.type === 'disabled') return d
    return { type: 'enabled' as const, inline_agents: d.inline_agents, predefined_agents: d.predefined_agents.map((ref, i) => expand(`multiagent.${key}.predefined_agents[${i}]`, ref)) }
  }
  return { type: 'multiagent_20261001', subagents: list('subagents'), workflows: list('workflows'), advisor: m.advisor }
}

/** Whether a stored block has the resolved shape (every member present, every entry pinned). */
function isResolved(m: Multiagent): boolean {
  const pinned = (r: unknown) => typeof r === 'object' && r !== null && ((r as { type?: unknown }).type === 'advisor' || typeof (r as { version?: unknown }).version === 'number')
  if (m.type === 'coordinator') return Array.isArray(m.agents) && m.agents.every(pinned)
  const member = (d: Delegation | undefined) => !!d && (d.type === 'disabled' || (!!d.inline_agents && Array.isArray(d.predefined_agents) && d.predefined_agents.every(pinned)))
  return member(m.subagents) && member(m.workflows) && !!m.advisor
}

/**
 * What a session's brains may delegate to, read from its snapshot: the agents each mode may
 * start (full pinned definitions), whether inline agents are allowed, and the advisor model.
 * A legacy `coordinator` roster reads as subagents with inline agents off, workflows off, and
 * its advisor entry as the advisor.
 */
export interface SessionRoster {
  subagents: { enabled: boolean; inlineAgents: boolean; agents: SessionThreadAgent[] }
  workflows: { enabled: boolean; inlineAgents: boolean; agents: SessionThreadAgent[] }
  /** The advisor model, or null when the advisor is off. */
  advisor: string | null
}

export function sessionRoster(m: SessionMultiagent | null): SessionRoster | null {
  if (!m) return null
  if (m.type === 'coordinator') {
    const agents = m.agents.filter((a): a is SessionThreadAgent => a.type === 'agent')
    const advisor = m.agents.find((a) => a.type === 'advisor')
    return {
      subagents: { enabled: true, inlineAgents: false, agents },
      workflows: { enabled: false, inlineAgents: false, agents: [] },
      advisor: advisor?.type === 'advisor' ? advisor.model : null,
    }
  }
  const mode = (d: SessionMultiagent20261001['subagents']) =>
    d.type === 'enabled' ? { enabled: true, inlineAgents: d.inline_agents.type === 'enabled', agents: d.predefined_agents } : { enabled: false, inlineAgents: false, agents: [] }
  return { subagents: mode(m.subagents), workflows: mode(m.workflows), advisor: m.advisor.type === 'enabled' ? m.advisor.model : null }
}

/** The part of an environment's stored `config.networking` the MCP check reads. */
export interface McpReachNetworking {
  type?: string
  allowed_hosts?: readonly string[] | null
  allow_mcp_servers?: boolean | null
}

/** An agent as the MCP check reads it. */
type McpDeclaring = { id: string; name: string; mcp_servers?: readonly { name: string; url: string }[] | null }

/**
 * Spec §2.5: in an environment whose networking is `limited` and does not set
 * `allow_mcp_servers`, a session is refused when the session agent (its overrides applied) or an
 * agent its roster lists declares an MCP server whose host is not on `allowed_hosts`: that agent
 * could not reach it. `self` copies and inline agents run the session agent's servers, checked
 * with it. The refusal names the agent, the server and its host, and both ways to allow it.
 */
export function checkMcpServersReachable(p: McpReachParams): void {
  const problem = mcpReachProblem(p)
  if (problem) throw invalid(problem)
}

export interface McpReachParams {
  agent: McpDeclaring
  roster: SessionMultiagent | null
  networking: McpReachNetworking | null | undefined
  environmentId: string
}

/** checkMcpServersReachable's finding as a message (the first server that cannot be reached), or undefined. */
export function mcpReachProblem(p: McpReachParams): string | undefined {
  const n = p.networking
  if (n?.type !== 'limited' || n.allow_mcp_servers) return undefined
  const allowed = n.allowed_hosts ?? []
  const check = (where: string, a: McpDeclaring): string | undefined => {
    const servers = a.mcp_servers ?? []
    for (let i = 0; i < servers.length; i++) {
      const server = servers[i]
      let host: string
      try {
        host = new URL(server.url).hostname.replace(/^\[|\]$/g, '')
      } catch {
        return `${where}mcp_servers[${i}].url: ${JSON.stringify(server.url)} is not a URL`
      }
      if (hostAllowed(host, allowed)) continue
      return `${where}mcp_servers[${i}]: agent ${a.id} ("${a.name}") declares MCP server "${server.name}" at host ${host}, which environment ${p.environmentId} cannot reach: its networking is limited, ${host} is not in config.networking.allowed_hosts and allow_mcp_servers is not set; add the host to allowed_hosts or set allow_mcp_servers: true (spec multiagent §2.5)`
    }
    return undefined
  }
  const own = check('agent: ', p.agent)
  const m = p.roster
  if (own || !m) return own
  if (m.type === 'coordinator') {
    for (const [i, a] of m.agents.entries()) {
      const problem = a.type === 'agent' && a.id !== p.agent.id ? check(`agent: multiagent.agents[${i}]: `, a) : undefined
      if (problem) return problem
    }
    return undefined
  }
  for (const key of ['subagents', 'workflows'] as const) {
    const d = m[key]
    if (d.type !== 'enabled') continue
    for (const [i, a] of d.predefined_agents.entries()) {
      const problem = a.id !== p.agent.id ? check(`agent: multiagent.${key}.predefined_agents[${i}]: `, a) : undefined
      if (problem) return problem
    }
  }
  return undefined
}
