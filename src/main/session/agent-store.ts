import type { z } from 'zod'
import type { Agent } from '../../shared/api/types'
import type { agentCreateSchema, agentUpdateSchema, listQuerySchema } from '../../shared/api/schemas'
import { newId } from '../../shared/api/ids'
import { conflict, invalid, notFound } from '../../shared/errors'
import type { Db } from './database'
import type { ResourceEvents } from './webhook-store'
import { createdAtFilters, keysetList, type Page } from './pagination'
import type { AdvisorTierTable } from '../../shared/api/advisor-tiers'
import { checkToolNames, mergeMultiagent, pinSelf, resolveMultiagent, type MultiagentParams } from './agent-roster'
import type { SkillRef, SkillRefParams, SkillStore } from './skill-store'

export type AgentCreateInput = z.infer<typeof agentCreateSchema>
export type AgentUpdateInput = z.infer<typeof agentUpdateSchema>
export type ListQuery = z.infer<typeof listQuerySchema>

export interface AgentStoreOptions {
  clock?: () => Date
  /** The advisor pairing table in effect (default: the built-in one); read at each save. */
  advisorTiers?: () => AdvisorTierTable
  /** The skills an agent's `skills` are checked against at save (absent: a custom skill is refused). */
  skills?: SkillStore
  /** Told of each creation, new version and archive inside its transaction (the webhooks' outbox). */
  events?: ResourceEvents
}

/**
 * Agents, versioned: every update that changes something makes a new version; an update that
 * names a stale `version` is refused (409). Every version is kept, so a session can pin one.
 * A save resolves and validates the `multiagent` block (agent-roster.ts): its roster comes back
 * pinned, `{type:'agent', id, version}` per entry.
 */
export class AgentStore {
  private readonly clock: () => Date
  private readonly advisorTiers?: () => AdvisorTierTable
  private readonly skills?: SkillStore
  private readonly events: ResourceEvents
  constructor(
    private readonly db: Db,
    options: AgentStoreOptions = {},
  ) {
    this.clock = options.clock ?? (() => new Date())
    this.advisorTiers = options.advisorTiers
    this.skills = options.skills
    this.events = options.events ?? (() => {})
  }

  /**
   * An agent's skills checked at save (SkillStore.resolveRefs: custom skills that exist, at a
   * version they have; Anthropic-built ones refused), each with its version (`latest` when none).
   */
  checkSkills(refs: readonly SkillRefParams[], field = 'skills', pin = false): SkillRef[] {
    if (refs.length === 0) return []
    if (!this.skills) throw invalid(`${field}[0]: this Corral has no skill store`)
    return this.skills.resolveRefs(refs, { field, pin })
  }

  /** The advisor pairing table in effect for a save or a session's checks. */
  tiers(): AdvisorTierTable | undefined {
    return this.advisorTiers?.()
  }

  create(input: AgentCreateInput): Agent {
    const now = this.clock().toISOString()
    const agent = this.resolve({
      ...input,
      skills: this.checkSkills(input.skills ?? []),
      multiagent: input.multiagent ?? null,
      id: newId('agent'),
      version: 1,
      created_at: now,
      updated_at: now,
      archived_at: null,
    })
    this.db.transaction(() => {
      this.db
        .prepare('INSERT INTO agents (id, version, created_at, updated_at, archived_at, data) VALUES (?, ?, ?, ?, NULL, ?)')
        .run(agent.id, 1, now, now, JSON.stringify(agent))
      this.db.prepare('INSERT INTO agent_versions (agent_id, version, data) VALUES (?, ?, ?)').run(agent.id, 1, JSON.stringify(agent))
      this.events('agent.created', agent.id)
    })()
    return agent
  }

  /**
   * Normalizes a draft and resolves its `multiagent` block (request form) against the stored
   * agents, checking the custom tool names (V10) and the roster rules (V2–V9, V11).
   */
  private resolve(draft: AgentDraft & { multiagent: MultiagentParams | null }): Agent {
    const agent = normalizeAgent({ ...draft, multiagent: null })
    checkToolNames(agent.tools)
    agent.multiagent = resolveMultiagent({
      multiagent: draft.multiagent,
      owner: { id: agent.id, version: agent.version, name: agent.name, model: agent.model },
      lookup: (id, version) => this.find(id, version),
      tiers: this.tiers(),
    })
    return agent
  }

  /** Like retrieve, but undefined for a missing agent or version; `archived_at` is the agent's own at any version. */
  find(id: string, version?: number): Agent | undefined {
    const row = this.db.prepare('SELECT archived_at, data FROM agents WHERE id = ?').get(id) as { archived_at: string | null; data: string } | undefined
    if (!row) return undefined
    if (version === undefined) return parseAgent(row.data)
    const v = this.db.prepare('SELECT data FROM agent_versions WHERE agent_id = ? AND version = ?').get(id, version) as { data: string } | undefined
    return v ? { ...parseAgent(v.data), archived_at: row.archived_at } : undefined
  }

  /** The latest version, or the given one. Throws not_found_error. */
  retrieve(id: string, version?: number): Agent {
    if (version !== undefined) {
      const row = this.db.prepare('SELECT data FROM agent_versions WHERE agent_id = ? AND version = ?').get(id, version) as { data: string } | undefined
      if (!row) {
        this.retrieve(id) // not_found for the agent itself first
        throw notFound(`agent ${id} version`, String(version))
      }
      return parseAgent(row.data)
    }
    const row = this.db.prepare('SELECT data FROM agents WHERE id = ?').get(id) as { data: string } | undefined
    if (!row) throw notFound('agent', id)
    return parseAgent(row.data)
  }

  update(id: string, input: AgentUpdateInput): Agent {
    return this.db.transaction(() => {
      const current = this.retrieve(id)
      if (input.version !== undefined && input.version !== current.version) {
        throw conflict(`version: agent ${id} is at version ${current.version}, not ${input.version}; retrieve it and apply your change again`)
      }
      if (current.archived_at) throw conflict(`agent ${id} is archived and cannot be updated`)
      const { version: _v, metadata, multiagent, ...changes } = input
      if (changes.skills) changes.skills = this.checkSkills(changes.skills)
      const next: Record<string, unknown> = { ...current }
      for (const [k, v] of Object.entries(changes)) {
        if (v === undefined) continue
        next[k] = v === null ? nullValue(k) : v
      }
      if (metadata !== undefined) next.metadata = mergeMetadata(current.metadata, metadata)
      // The merged block is validated whole (spec §2.3): a stored roster is checked again too.
      next.multiagent = mergeMultiagent(current.multiagent, multiagent)
      const candidate = this.resolve(next as AgentDraft & { multiagent: MultiagentParams | null })
      if (sameContent(candidate, current)) return current
      const now = this.clock().toISOString()
      const version = current.version + 1
      const updated: Agent = { ...candidate, multiagent: pinSelf(candidate.multiagent, id, version), version, updated_at: now }
      this.db.prepare('UPDATE agents SET version = ?, updated_at = ?, data = ? WHERE id = ?').run(updated.version, now, JSON.stringify(updated), id)
      this.db.prepare('INSERT INTO agent_versions (agent_id, version, data) VALUES (?, ?, ?)').run(id, updated.version, JSON.stringify(updated))
      this.events('agent.updated', id)
      return updated
    })()
  }

  archive(id: string): Agent {
    const current = this.retrieve(id)
    if (current.archived_at) return current
    const now = this.clock().toISOString()
    const archived: Agent = { ...current, archived_at: now, updated_at: now }
    this.db.transaction(() => {
      this.db.prepare('UPDATE agents SET archived_at = ?, updated_at = ?, data = ? WHERE id = ?').run(now, now, JSON.stringify(archived), id)
      this.events('agent.archived', id)
    })()
    return archived
  }

  list(q: ListQuery): Page<Agent> {
    const where: string[] = []
    const args: unknown[] = []
    if (!q.include_archived) where.push('archived_at IS NULL')
    createdAtFilters(q, where, args)
    return keysetList<Agent>(this.db, { table: 'agents', where, args, order: q.order ?? 'desc', limit: q.limit ?? 20, page: q.page }, (row) => parseAgent(row.data))
  }

  versions(id: string, q: { limit?: number; page?: string }): Page<Agent> {
    this.retrieve(id)
    const limit = q.limit ?? 20
    let before = Number.MAX_SAFE_INTEGER
    if (q.page) {
      const n = Number(Buffer.from(q.page, 'base64url').toString())
      if (!Number.isInteger(n) || n < 1) throw invalid('page: not a cursor this server issued')
      before = n
    }
    const rows = this.db
      .prepare('SELECT version, data FROM agent_versions WHERE agent_id = ? AND version < ? ORDER BY version DESC LIMIT ?')
      .all(id, before, limit + 1) as { version: number; data: string }[]
    const more = rows.length > limit
    if (more) rows.pop()
    const last = rows[rows.length - 1]
    return {
      data: rows.map((r) => parseAgent(r.data)),
      next_page: more && last ? Buffer.from(String(last.version)).toString('base64url') : null,
    }
  }
}

type AgentDraft = Omit<AgentCreateInput, 'model' | 'multiagent'> & {
  multiagent?: Agent['multiagent'] | MultiagentParams | null
  id: string
  version: number
  created_at: string
  updated_at: string
  archived_at: string | null
  model: AgentCreateInput['model'] | Agent['model']
}

/**
 * A stored agent as the API shows it. Agents saved before execution_identity was filled in have
 * null there; they read as the default (`service_account`), as every agent object must show one.
 */
function parseAgent(data: string): Agent {
  const a = JSON.parse(data) as Agent
  a.execution_identity ??= { type: 'service_account' }
  return a
}

function nullValue(key: string): unknown {
  return ['tools', 'mcp_servers', 'skills'].includes(key) ? [] : null
}

export function mergeMetadata(current: Record<string, string>, patch: Record<string, string | null> | null): Record<string, string> {
  if (patch === null) return {}
  const out = { ...current }
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k]
    else out[k] = v
  }
  // The patch alone is checked at the boundary; the merged result must keep the same limit.
  const n = Object.keys(out).length
  if (n > MAX_METADATA_KEYS) throw invalid(`metadata: at most ${MAX_METADATA_KEYS} keys; this update would leave ${n}`)
  return out
}

const MAX_METADATA_KEYS = 16

/** Fills the defaults the API shows on an agent (model object, toolset configs, empty lists). */
export function normalizeAgent(d: AgentDraft): Agent {
  const model = typeof d.model === 'string' ? { id: d.model } : { ...d.model }
  for (const k of Object.keys(model) as (keyof typeof model)[]) if (model[k] === null || model[k] === undefined) delete model[k]
  const tools = (d.tools ?? []).map((t) => {
    if (t.type === 'agent_toolset_20260401') {
      const dc = t.default_config ?? {}
      return {
        type: t.type,
        default_config: { enabled: dc.enabled ?? true, permission_policy: dc.permission_policy ?? { type: 'always_allow' } },
        configs: (t.configs ?? []).map((c) => ({
          name: c.name,
          type: c.name,
          ...(c.enabled != null ? { enabled: c.enabled } : {}),
          ...(c.permission_policy ? { permission_policy: c.permission_policy } : {}),
        })),
      }
    }
    if (t.type === 'mcp_toolset') {
      const dc = t.default_config ?? {}
      return {
        type: t.type,
        mcp_server_name: t.mcp_server_name,
        default_config: { enabled: dc.enabled ?? true, permission_policy: dc.permission_policy ?? { type: 'always_ask' } },
        configs: t.configs ?? [],
      }
    }
    return t
  })
  return {
    type: 'agent',
    id: d.id,
    version: d.version,
    name: d.name,
    description: d.description ?? null,
    model,
    system: d.system ?? null,
    tools,
    mcp_servers: d.mcp_servers ?? [],
    skills: d.skills ?? [],
    multiagent: d.multiagent ?? null,
    execution_identity: d.execution_identity ?? { type: 'service_account' },
    metadata: d.metadata ?? {},
    created_at: d.created_at,
    updated_at: d.updated_at,
    archived_at: d.archived_at,
  } as unknown as Agent
}

function sameContent(a: Agent, b: Agent): boolean {
  const strip = (x: Agent) => JSON.stringify({ ...x, version: 0, updated_at: '' })
  return strip(a) === strip(b)
}
