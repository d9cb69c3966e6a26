import type { z } from 'zod'
import type { Statement } from 'better-sqlite3'
import type { Agent, Environment, Session, SessionCorralFields, SessionModelError, SessionMultiagent, SessionUsage } from '../../shared/api/types'
import type { eventParamsSchema, sessionCreateSchema, sessionListQuerySchema, sessionUpdateSchema } from '../../shared/api/schemas'
import { newId } from '../../shared/api/ids'
import { ANSWERS, STATUS_EVENTS, STATUS_EVENT_TYPES, answeredUseId, awaitsFromUser, isRequest, sessionStatusOf } from '../../shared/api/events'
import { CorralError, conflict, invalid, isCorralError, notFound } from '../../shared/errors'
import { MAX_SESSION_MEMORY_STORES, memoryMountPath } from '../../shared/api/memory-schemas'
import type { WorkStore } from './work-store'
import type { MemoryStore } from './memory-store'
import type { Db } from './database'
import type { AgentStore } from './agent-store'
import type { SessionSkill, SkillRefParams, SkillStore } from './skill-store'
import { mergeMetadata, normalizeAgent } from './agent-store'
import type { EnvironmentStore } from './environment-store'
import type { EventInput, RawEventInput, StoredEvent } from './event-log'
import type { SqliteEventLog } from './sqlite-event-log'
import { createdAtFilters, keysetList, type Page } from './pagination'
import { primaryThreadId } from '../../shared/api/ids'
import { fileMountPath, UPLOADS_DIR } from '../../shared/api/file-paths'
import { StoreChanges } from './store-changes'
import { stepModelError } from './model-error'
import { checkMcpServersReachable, checkToolNames, mcpReachProblem, sessionRoster, snapshotRoster, type McpReachNetworking, type SessionRoster } from './agent-roster'
import { activeOutcome, foldOutcomes, OUTCOME_DEFAULT_MAX_ITERATIONS, OUTCOME_EVENT_TYPES, OUTCOME_MAX_RUBRIC_CHARS, toOutcomeEvaluation, type OutcomeRecord } from '../../shared/api/outcomes'
import { budgetCents, listCostCents } from '../../shared/api/pricing'
import { isRunningRun, openWorkflowRuns, workflowRunOpenError } from './workflow-store'
import type { WorkflowRunFacts } from '../../shared/api/workflow-runs'

export type SessionCreateInput = z.infer<typeof sessionCreateSchema>
export type SessionUpdateInput = z.infer<typeof sessionUpdateSchema>
export type SessionListQuery = z.infer<typeof sessionListQuerySchema>
export type EventParamsInput = z.infer<typeof eventParamsSchema>

interface SessionRow {
  rid: number
  id: string
  status: Session['status']
  created_at: string
  updated_at: string
  archived_at: string | null
  deployment_id: string | null
  usage: string
  model_error: string | null
  data: string
}

/**
 * Session rows with `updated_at` as the later of the row's own and its last event's processed_at
 * (a PK lookup), so appending an event never has to rewrite the session row.
 */
const SESSION_ROWS = `(SELECT s.rid, s.id, s.agent_id, s.agent_version, s.environment_id, s.deployment_id, s.status, s.created_at, s.archived_at, s.deleting, s.usage, s.model_error, s.data,
  MAX(s.updated_at, COALESCE((SELECT e.processed_at FROM events e WHERE e.session_rid = s.rid ORDER BY e.seq DESC LIMIT 1), '')) AS updated_at
  FROM sessions s)`

/**
 * What a brain's run reads of its session (SessionStore.runSnapshot): the pinned agent, budget,
 * resources, environment and that environment's type. Frozen: one object serves every run until
 * the session's row changes.
 */
export interface SessionRunSnapshot {
  readonly id: string
  readonly agent: Session['agent']
  readonly budget: Session['budget'] | null
  readonly resources: Session['resources']
  readonly environment_id: string
  /** The environment's `config.type` ('cloud', 'self_hosted'; '' when the environment is gone). */
  readonly environment_type: string
}

/** Secret fields of session resources: kept by `SessionResourceSecrets`, never in SQLite. */
export type SessionResourceSecretField = 'authorization_token'

/** Where session resources' secrets go (the engine's: the keychain, for the egress proxy). */
export interface SessionResourceSecrets {
  /** Keeps one secret; throws (CorralError) when it cannot. */
  put(sessionId: string, resourceId: string, field: SessionResourceSecretField, value: string): Promise<void>
  /** Forgets the secrets of these resources. Not awaited by the store: the implementation reports its own failures. */
  delete(sessionId: string, resourceIds: readonly string[]): void
}

/** What the engine plugs into the session store. */
export interface SessionStoreHooks {
  /**
   * Where a github_repository's `authorization_token` goes at create (it never goes into the
   * database, an event or a response). Without it, a resource that carries a token is refused.
   */
  resourceSecrets?: SessionResourceSecrets
  /**
   * Checks the resources before anything is kept (the engine's: host folders against the
   * data directory, system and credential paths). Throws CorralError naming `resources[i]…`.
   */
  checkResources?: (resources: readonly Record<string, unknown>[]) => void
  /**
   * Called once a session is archived or deleted (the row change is committed): the engine
   * releases its hands. Not awaited; must not throw.
   */
  onRemoved?: (sessionId: string, how: 'archived' | 'deleted') => void
  /**
   * Runs inside the transaction that creates, archives or deletes a session, so what it writes
   * commits with the change (the webhooks' outbox: WebhookStore.enqueueSession). Throwing rolls
   * the change back.
   */
  inTransaction?: (sessionId: string, what: 'created' | 'archived' | 'deleted') => void
  /**
   * Corral's own file store, asked whether a `file` resource's `file_id` names a stored file
   * (openStores wires the FileStore). Without it no file_id names one, and a session with a file
   * resource is refused: a file's bytes never come from anywhere else (never a host path).
   */
  files?: { has(fileId: string): boolean; bytes?(fileId: string): Promise<Buffer> }
}

/** How a deployment's run creates its session (DeploymentStore): never reachable from a client. */
export interface SessionCreateOptions {
  /** The session's id, chosen by the caller (a deployment run reserves it in its record). */
  sessionId?: string
  /** The deployment that starts the session (`deployment_id`; `sessions.list({deployment_id})`). */
  deploymentId?: string
  /**
   * A write that commits in the session's own transaction, after its row is inserted (a run's
   * session_id): the session and the write exist together or not at all. Throwing aborts both.
   */
  inCommit?: (session: Session) => void
}

/** What a SessionStore is built from (besides its database). */
export interface SessionStoreOptions {
  log: SqliteEventLog
  agents: AgentStore
  environments: EnvironmentStore
  /** Memory stores a session attaches at creation (absent: a memory_store resource is refused). */
  memory?: MemoryStore
  /** The work queue: a session on a `self_hosted` environment is queued in the transaction that creates it. */
  work?: WorkStore
  /** Skills a session's agent lists: pinned at creation, placed and announced from here (skillsOf). */
  skills?: SkillStore
  clock?: () => Date
  hooks?: SessionStoreHooks
}

/** An answer a client event gives (see SessionStore.checkPending); which request it answers and how is the shared answer table's (ANSWERS). */
interface PendingCheck {
  sessionId: string
  /** The event's index in the send, for the error's field path. */
  index: number
  answer: { type: ClientAnswerType; [field: string]: unknown }
  /** Requests answered earlier in this send. */
  answered: Set<string>
}

type ClientAnswerType = 'user.tool_confirmation' | 'user.custom_tool_result' | 'user.tool_result'

/**
 * Sessions: the resource rows, and the send path that validates client events against the log
 * before appending them. Status, usage, updated_at and `corral.model_error` (stepModelError) are
 * projections of the log, updated in the same transaction as the event they come from.
 */
export class SessionStore {
  /**
   * Notified after a committed update (vault_ids, agent, ...): running sessions' egress policies
   * follow it before the call returns. Archive and delete go to `hooks.onRemoved`.
   */
  readonly changes = new StoreChanges()
  /** Prepared once: a send retrieves its session twice (before and inside the append). */
  private byId?: Statement
  private environmentOf?: Statement
  private snapshotRow?: Statement
  /** runSnapshot's objects by session, with the row data each was made from (most recently used last). */
  private readonly snapshots = new Map<string, { data: string; value: SessionRunSnapshot }>()
  private readonly log: SqliteEventLog
  private readonly agents: AgentStore
  private readonly environments: EnvironmentStore
  private readonly memory?: MemoryStore
  private readonly skills?: SkillStore
  private readonly clock: () => Date
  private readonly hooks: SessionStoreHooks
  private readonly work?: WorkStore
  constructor(
    private readonly db: Db,
    options: SessionStoreOptions,
  ) {
    const log = (this.log = options.log)
    this.agents = options.agents
    this.environments = options.environments
    this.memory = options.memory
    this.skills = options.skills
    this.clock = options.clock ?? (() => new Date())
    this.work = options.work
    this.hooks = options.hooks ?? {}
    const setStatus = db.prepare('UPDATE sessions SET status = ?, updated_at = ? WHERE rid = ?')
    const getUsage = db.prepare('SELECT usage FROM sessions WHERE rid = ?').pluck()
    const setUsage = db.prepare('UPDATE sessions SET usage = ?, updated_at = ? WHERE rid = ?')
    const getModelError = db.prepare('SELECT model_error FROM sessions WHERE rid = ?').pluck()
    // writes the row only when the value changes (a successful request on a healthy session reads, never writes)
    const setModelError = db.prepare('UPDATE sessions SET model_error = ? WHERE rid = ? AND model_error IS NOT ?')
    // Once per append, not per event, and only when status or usage changes: a plain event
    // does not write the session row at all (its updated_at is read from the log's tip, see
    // SESSION_ROWS), which keeps the append path to one B-tree insert per event.
    log.addBatchProjector((rid, stored) => {
      let status: Session['status'] | undefined
      let usageDelta: Record<string, number>[] = []
      // the model-failure fold: undefined until an event of this batch changes it
      let modelError: SessionModelError | null | undefined
      let storedError: SessionModelError | null | undefined
      const prevError = () => (modelError !== undefined ? modelError : (storedError ??= parseModelError(getModelError.get(rid) as string | null)))
      for (const { event } of stored) {
        const st = sessionStatusOf(event)
        if (st) status = st
        else if (event.type === 'span.model_request_end') usageDelta.push((event as unknown as { model_usage?: Record<string, number> }).model_usage ?? {})
        // the grader's requests count toward the session's usage (spec §8.4: decided so)
        else if (event.type === 'span.outcome_evaluation_end') usageDelta.push((event as unknown as { usage?: Record<string, number> }).usage ?? {})
        const me = stepModelError(prevError, event as unknown as Record<string, unknown>)
        if (me !== undefined) modelError = me
      }
      if (modelError !== undefined) {
        const json = modelError ? JSON.stringify(modelError) : null
        setModelError.run(json, rid, json)
      }
      const at = stored[stored.length - 1].event.processed_at
      if (usageDelta.length > 0) {
        let usage = JSON.parse(getUsage.get(rid) as string) as SessionUsage
        for (const d of usageDelta) usage = addUsage(usage, d)
        setUsage.run(JSON.stringify(usage), at, rid)
        usageDelta = []
      }
      if (status) setStatus.run(status, at, rid)
    })
  }

  /** Creates the session, pinning a snapshot of its agent, then appends `initial_events`. */
  async create(input: SessionCreateInput, options: SessionCreateOptions = {}): Promise<Session> {
    this.checkResources(input.resources ?? [])
    const ids = { session: options.sessionId ?? newId('session'), resources: (input.resources ?? []).map(() => newId('resource')) }
    const kept = await this.keepResourceSecrets(ids, input.resources ?? [])
    try {
      return await this.insertSession(input, ids, options)
    } catch (err) {
      if (kept.length) this.hooks.resourceSecrets?.delete(ids.session, kept)
      throw err
    }
  }

  /**
   * Hands every resource's `authorization_token` to `resourceSecrets` (before the session exists,
   * so no session is ever without its token). Returns the ids of the resources whose token was kept.
   * Throws invalid_request_error when there is a token and nowhere to keep it.
   */
  private async keepResourceSecrets(ids: { session: string; resources: string[] }, resources: readonly Record<string, unknown>[]): Promise<string[]> {
    const tokens: { index: number; value: string }[] = []
    resources.forEach((r, index) => {
      if (typeof r.authorization_token === 'string' && r.authorization_token !== '') tokens.push({ index, value: r.authorization_token })
    })
    if (tokens.length === 0) return []
    const sink = this.hooks.resourceSecrets
    if (!sink) {
      throw invalid(
        `resources[${tokens[0].index}].authorization_token: cannot be kept because the keychain is unavailable in this Corral (a token is never written to the database); start Corral with a working OS keychain, or leave the token out for a public repository`,
      )
    }
    const kept: string[] = []
    try {
      for (const t of tokens) {
        await sink.put(ids.session, ids.resources[t.index], 'authorization_token', t.value)
        kept.push(ids.resources[t.index])
      }
    } catch (err) {
      if (kept.length) sink.delete(ids.session, kept)
      throw err
    }
    return kept
  }

  /**
   * The checks a session's resources get before anything is kept: every `file` names a stored
   * file (404 naming `resources[i].file_id`), and the engine's own (host folders). A deployment
   * runs them when it is saved, so a bad resource is refused then rather than at its first fire.
   */
  checkResources(resources: readonly Record<string, unknown>[]): void {
    this.checkFiles(resources)
    if (resources.length) this.hooks.checkResources?.(resources)
  }

  /**
   * Why a session of this agent could not reach one of its MCP servers (its own, or a listed
   * agent's, the roster as a session would snapshot it now) from this environment (spec multiagent
   * §2.5), or undefined. Deployments check it when saved and before each run
   * (`mcp_egress_blocked_error`), so a schedule does not fire into a refusal.
   */
  mcpEgressProblem(agentRef: SessionCreateInput['agent'], environmentId: string): string | undefined {
    const agent = this.resolveAgent(agentRef)
    const env = this.environments.retrieve(environmentId)
    const multiagent = snapshotRoster({ agent, lookup: (id, version) => this.agents.find(id, version), tiers: this.agents.tiers() })
    return mcpReachProblem({ agent, roster: multiagent, networking: envNetworking(env), environmentId: env.id })
  }

  private async insertSession(input: SessionCreateInput, ids: { session: string; resources: string[] }, options: SessionCreateOptions = {}): Promise<Session> {
    const outcomes = (input.initial_events ?? []).flatMap((e, i) => (e.type === 'user.define_outcome' ? [i] : []))
    if (outcomes.length > 1) throw invalid(`initial_events[${outcomes[1]}]: at most one user.define_outcome in initial_events (initial_events[${outcomes[0]}] is one already)`)
    if (input.initial_events) await this.prepareOutcomes(input.initial_events, 'initial_events')
    const agent = this.resolveAgent(input.agent)
    // the snapshot pins each skill's version as of now (`latest` resolved): what the session places and announces
    agent.skills = this.agents.checkSkills((agent.skills ?? []) as SkillRefParams[], 'agent.skills', true) as unknown as Agent['skills']
    const env = this.environments.retrieve(input.environment_id)
    if (env.archived_at) throw conflict(`environment_id: environment ${env.id} is archived`)
    if (env.config.type === 'self_hosted') refuseSelfHostedResources(env.id, input.resources ?? [])
    this.checkVaults(input.vault_ids ?? [])
    const now = this.clock().toISOString()
    // The roster is copied whole (every listed agent's definition at its pinned version): later
    // edits or archival of those agents never reach this session.
    const multiagent = snapshotRoster({ agent, lookup: (id, version) => this.agents.find(id, version), tiers: this.agents.tiers() })
    checkMcpServersReachable({ agent, roster: multiagent, networking: envNetworking(env), environmentId: env.id })
    const { archived_at: _a, created_at: _c, updated_at: _u, metadata: _m, ...snapshot } = agent
    const session: Session = {
      type: 'session',
      id: ids.session,
      agent: { ...snapshot, multiagent } as unknown as Session['agent'],
      environment_id: env.id,
      status: 'idle',
      title: input.title ?? null,
      metadata: input.metadata ?? {},
      budget: input.budget ?? null,
      resources: this.attachMemoryStores(input.resources ?? []).map((r, i) => publicResource(r, now, ids.resources[i])),
      vault_ids: input.vault_ids ?? [],
      outcome_evaluations: [],
      deployment_id: options.deploymentId ?? null,
      stats: {},
      usage: {},
      created_at: now,
      updated_at: now,
      archived_at: null,
    }
    const insert = () => {
      this.db
        .prepare(
          'INSERT INTO sessions (id, agent_id, agent_version, environment_id, deployment_id, status, created_at, updated_at, archived_at, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)',
        )
        .run(session.id, agent.id, agent.version, env.id, options.deploymentId ?? null, 'idle', now, now, JSON.stringify(session))
      // a self_hosted session waits on its environment's queue from the moment it exists (spec resources.md §2.3, §5)
      if (env.config.type === 'self_hosted') this.workQueue().enqueueSession(env.id, session.id)
      this.hooks.inTransaction?.(session.id, 'created')
      options.inCommit?.(session)
    }
    // With initial events, the row and the events commit together: a crash leaves neither.
    if (input.initial_events?.length) await this.log.append(session.id, input.initial_events as EventInput[], { precheck: insert })
    else this.db.transaction(insert)()
    return this.retrieve(session.id)
  }

  /**
   * Resolves the `memory_store` resources (spec resources.md §6.3–§6.4): at most 8, each store
   * once, existing (404) and not archived (409); `access` defaults to read_write; the store's
   * name and description are snapshotted with its `mount_path`. Other resources pass as given.
   */
  private attachMemoryStores(resources: NonNullable<SessionCreateInput['resources']>): Record<string, unknown>[] {
    const seen = new Set<string>()
    const count = resources.filter((r) => r.type === 'memory_store').length
    if (count > MAX_SESSION_MEMORY_STORES) throw invalid(`resources: at most ${MAX_SESSION_MEMORY_STORES} memory_store resources per session (got ${count})`)
    return resources.map((r, i) => {
      if (r.type !== 'memory_store') return r as Record<string, unknown>
      const field = `resources[${i}].memory_store_id`
      if (seen.has(r.memory_store_id)) throw invalid(`${field}: memory store ${r.memory_store_id} is attached twice`)
      seen.add(r.memory_store_id)
      if (!this.memory) throw invalid(`${field}: this Corral has no memory stores`)
      let store
      try {
        store = this.memory.retrieveStore(r.memory_store_id)
      } catch (err) {
        if (isCorralError(err) && err.code === 'not_found_error') throw new CorralError('not_found_error', `${field}: memory store ${JSON.stringify(r.memory_store_id)} was not found`)
        throw err
      }
      if (store.archived_at) throw conflict(`${field}: memory store ${store.id} is archived and cannot be attached to a new session`)
      return {
        type: 'memory_store',
        memory_store_id: store.id,
        access: r.access ?? 'read_write',
        name: store.name,
        description: store.description,
        instructions: r.instructions ?? null,
        mount_path: memoryMountPath(store.name, store.id),
      }
    })
  }

  /** Every `file` resource must name a file in Corral's file store (404 naming `resources[i].file_id`). */
  private checkFiles(resources: readonly Record<string, unknown>[]): void {
    resources.forEach((r, i) => {
      if (r.type !== 'file') return
      const fileId = String(r.file_id)
      if (fileMountPath(r.mount_path as string | null | undefined, fileId) === null) {
        throw invalid(`resources[${i}].mount_path: ${JSON.stringify(r.mount_path)} must name a file inside ${UPLOADS_DIR} (taken relative to it)`)
      }
      if (this.hooks.files?.has(fileId)) return
      throw new CorralError(
        'not_found_error',
        `resources[${i}].file_id: file ${JSON.stringify(fileId)} was not found` + (this.hooks.files ? '' : ' (this Corral has no file store)'),
      )
    })
  }

  /** Every vault id must name an existing, unarchived vault. Returns the ids. */
  private checkVaults(ids: string[]): string[] {
    ids.forEach((vaultId, i) => {
      const row = this.db.prepare('SELECT archived_at FROM vaults WHERE id = ?').get(vaultId) as { archived_at: string | null } | undefined
      if (!row) throw invalid(`vault_ids[${i}]: vault ${JSON.stringify(vaultId)} was not found`)
      if (row.archived_at) throw invalid(`vault_ids[${i}]: vault ${vaultId} is archived`)
    })
    return ids
  }

  private resolveAgent(ref: SessionCreateInput['agent']): Agent {
    try {
      if (typeof ref === 'string') return this.agents.retrieve(ref)
      const base = this.agents.retrieve(ref.id, ref.version)
      if (ref.type === 'agent') return base
      const { type: _t, id: _i, version: _v, ...overrides } = ref
      const merged: Record<string, unknown> = { ...base }
      for (const [k, v] of Object.entries(overrides)) if (v !== undefined) merged[k] = v
      return normalizeAgent(merged as Parameters<typeof normalizeAgent>[0])
    } catch (err) {
      if ((err as { code?: string }).code === 'not_found_error') throw invalid(`agent: ${(err as Error).message}`)
      throw err
    }
  }

  /**
   * The skills of a session's agent as its snapshot pinned them, with the name and description of
   * each pinned version: what the hands place at /mnt/skills/<name> and the model is told about.
   * A version deleted since is left out. Throws not_found_error for an unknown session.
   */
  skillsOf(sessionId: string): SessionSkill[] {
    const refs = (this.retrieve(sessionId).agent.skills ?? []) as { type?: string; skill_id: string; version: string }[]
    if (refs.length === 0 || !this.skills) return []
    return this.skills.sessionSkills(refs)
  }

  /**
   * The agents a session's brains may start, as pinned at the session's creation (full
   * definitions; see SessionRoster), or null for a single-threaded session. Throws not_found_error.
   * `session`: the session as the caller just retrieved it (a brain's start reads it once).
   */
  rosterOf(sessionId: string, session: { agent: unknown } = this.retrieve(sessionId)): SessionRoster | null {
    return sessionRoster((session.agent as Session['agent']).multiagent)
  }

  /** A session agent's MCP servers against its environment's networking (spec §2.5), as at create. */
  private checkMcpReach(agent: Session['agent'], environmentId: string): void {
    const env = this.environments.retrieve(environmentId)
    checkMcpServersReachable({ agent, roster: (agent as { multiagent?: SessionMultiagent | null }).multiagent ?? null, networking: envNetworking(env), environmentId })
  }

  retrieve(id: string): Session {
    this.byId ??= this.db.prepare(`SELECT * FROM ${SESSION_ROWS} WHERE id = ? AND deleting = 0`)
    const row = this.byId.get(id) as SessionRow | undefined
    if (!row) throw notFound('session', id)
    return rowToSession(row)
  }

  /**
   * Applies an update and, when it changed anything, appends `session.updated` carrying the
   * changed fields, in the same transaction (the log is the truth: the harness picks up new
   * tools from the next turn). An update that changes nothing writes nothing.
   */
  async update(id: string, input: SessionUpdateInput): Promise<Session> {
    const event: RawEventInput = { type: 'session.updated' }
    // Metadata cleared to empty is a change the event shows by leaving `metadata` out (API rule).
    let changedWithoutField = false
    // A budget raised or removed resumes the workflow runs the budget paused (spec §9): each gets
    // its status_running in the update's batch, after session.updated. (A run is idle only at the
    // budget: Corral pauses no run for an interrupt.)
    const before = this.retrieve(id)
    const resumed: RawEventInput[] =
      input.budget !== undefined && before.budget ? openWorkflowRuns(this.log, id).filter((r) => r.status === 'idle' && r.started).map((r) => ({ type: 'workflow_run.status_running', workflow_run_id: r.id })) : []
    const apply = () => {
      changedWithoutField = false
      const cur = this.retrieve(id)
      if (cur.archived_at) throw conflict(`session ${id} is archived and cannot be updated`)
      // the whole request is refused while a run is open (spec §6.9): nothing else of it is applied
      if (input.agent !== undefined) {
        const open = openWorkflowRuns(this.log, id)
        if (open.length) throw workflowRunOpenError(`agent: session ${id} has ${open.length === 1 ? `workflow run ${open[0].id}` : `workflow runs ${open.map((r) => r.id).join(', ')}`} open; its agent cannot change until every run has ended (nothing of this update was applied)`)
      }
      for (const k of Object.keys(event)) if (k !== 'type') delete event[k]
      const next: Session = { ...cur }
      if (input.title !== undefined && input.title !== cur.title) event.title = next.title = input.title
      // checked even when it repeats the budget: one at or below the spend is never accepted
      if (input.budget !== undefined) this.checkBudgetChange(cur, input.budget)
      if (input.budget !== undefined && JSON.stringify(input.budget) !== JSON.stringify(cur.budget)) event.budget = next.budget = input.budget
      if (input.metadata !== undefined) {
        const metadata = mergeMetadata(cur.metadata, input.metadata)
        if (JSON.stringify(metadata) !== JSON.stringify(cur.metadata)) {
          next.metadata = metadata
          if (Object.keys(metadata).length > 0) event.metadata = metadata
          else changedWithoutField = true
        }
      }
      if (input.vault_ids !== undefined && JSON.stringify(input.vault_ids) !== JSON.stringify(cur.vault_ids)) event.vault_ids = next.vault_ids = this.checkVaults(input.vault_ids)
      if (input.agent?.tools) checkToolNames(input.agent.tools, 'agent.tools')
      if (input.agent && (input.agent.tools !== undefined || input.agent.mcp_servers !== undefined)) {
        const agent = updatedAgent(cur.agent, input.agent)
        if (input.agent.mcp_servers !== undefined) this.checkMcpReach(agent, cur.environment_id)
        if (JSON.stringify(agent) !== JSON.stringify(cur.agent)) event.agent = next.agent = agent
      }
      if (Object.keys(event).length === 1 && !changedWithoutField) throw NO_CHANGE
      next.updated_at = this.clock().toISOString()
      // `corral` is a projection read with the row, not part of the stored resource
      const { corral: _projected, ...data } = next as Session & { corral?: unknown }
      this.db.prepare('UPDATE sessions SET updated_at = ?, data = ? WHERE id = ?').run(next.updated_at, JSON.stringify(data), id)
    }
    try {
      await this.log.append(id, [event, ...resumed], {
        precheck: () => {
          apply()
          // a run paused at a budget that this update leaves as it is (checkBudgetChange refuses that while the spend is at it): nothing resumes
          if (resumed.length && !('budget' in event)) throw conflict(`session ${id}: budget: the same budget again resumes no paused workflow run; raise it or remove it`)
        },
      })
      this.changes.notify({ kind: 'session', id })
    } catch (err) {
      if (err !== NO_CHANGE) throw err
    }
    return this.retrieve(id)
  }

  /**
   * Archives a session. With a workflow run running (or about to start) it is a 400
   * `workflow_run_open` naming the run (spec multiagent §6.9); with open runs all idle (paused at
   * the budget) it succeeds and ends each with `stopped`: its open phases' `phase_ended`, then
   * its `status_ended`, in the archive's transaction, marked `session_archived: true` (listed, not
   * streamed). Without open runs nothing is appended and the archive is done when this returns
   * (before its promise settles).
   */
  archive(id: string): Promise<Session> {
    const cur = this.retrieve(id)
    if (cur.archived_at) return Promise.resolve(cur)
    const write = () => {
      const now = this.clock().toISOString()
      this.db.prepare('UPDATE sessions SET archived_at = ?, updated_at = ? WHERE id = ?').run(now, now, id)
      this.work?.stopSession(id)
      this.hooks.inTransaction?.(id, 'archived')
    }
    const open = openWorkflowRuns(this.log, id)
    this.refuseRunningRuns(id, open, 'archived')
    if (!open.length) {
      this.db.transaction(write)()
      this.hooks.onRemoved?.(id, 'archived')
      return Promise.resolve(this.retrieve(id))
    }
    const ends: RawEventInput[] = []
    for (const r of open) {
      for (const [phaseId, startedId] of r.openPhases) ends.push({ type: 'workflow_run.phase_ended', workflow_run_id: r.id, workflow_run_phase_id: phaseId, phase_started_id: startedId, session_archived: true })
      ends.push({ type: 'workflow_run.status_ended', workflow_run_id: r.id, result: { type: 'stopped' }, name: r.name, session_archived: true })
    }
    const ids = open.map((r) => r.id).join(',')
    return this.log
      .append(id, ends as EventInput[], {
        precheck: () => {
          const now = openWorkflowRuns(this.log, id)
          this.refuseRunningRuns(id, now, 'archived')
          if (this.retrieve(id).archived_at || now.map((r) => r.id).join(',') !== ids) throw conflict(`session ${id} changed while it was being archived (its workflow runs); retry`)
          write()
        },
      })
      .then(() => {
        this.hooks.onRemoved?.(id, 'archived')
        return this.retrieve(id)
      })
  }

  /** The 400 for archiving or deleting a session while one of its workflow runs is running (spec §6.9). */
  private refuseRunningRuns(id: string, open: readonly WorkflowRunFacts[], how: 'archived' | 'deleted'): void {
    const running = open.filter(isRunningRun)
    if (!running.length) return
    const named = running.length === 1 ? `workflow run ${running[0].id} is` : `workflow runs ${running.map((r) => r.id).join(', ')} are`
    throw workflowRunOpenError(`session ${id} cannot be ${how} while its ${named} running; stop ${running.length === 1 ? 'it' : 'them'} (ask the agent to) or wait for ${running.length === 1 ? 'it' : 'them'} to end`)
  }

  /**
   * Deletes a session and its log, at its owner's request. The append-only trigger lets the
   * events go only once the session is marked as being deleted, in the same transaction.
   */
  delete(id: string): { id: string; type: 'session_deleted' } {
    const cur = this.retrieve(id)
    // a running run keeps the session running: name the run first (spec §6.9); idle runs go with the log
    this.refuseRunningRuns(id, openWorkflowRuns(this.log, id), 'deleted')
    if (cur.status === 'running') throw conflict(`session ${id} is running; interrupt or archive it before deleting`)
    this.db.transaction(() => {
      const rid = (this.db.prepare('SELECT rid FROM sessions WHERE id = ?').get(id) as { rid: number }).rid
      this.db.prepare('UPDATE sessions SET deleting = 1 WHERE rid = ?').run(rid)
      this.db.prepare('DELETE FROM events WHERE session_rid = ?').run(rid)
      this.db.prepare('DELETE FROM sessions WHERE rid = ?').run(rid)
      this.work?.stopSession(id)
      this.hooks.inTransaction?.(id, 'deleted')
    })()
    this.log.forgetSession(id)
    this.snapshots.delete(id)
    if (cur.resources.length) this.hooks.resourceSecrets?.delete(id, cur.resources.map((r) => (r as { id: string }).id))
    this.hooks.onRemoved?.(id, 'deleted')
    return { id, type: 'session_deleted' }
  }

  /**
   * What a brain's run reads of its session (SessionRunSnapshot): the row is read every time (a
   * change is seen at once), but parsed only when its data changed since the last call; the
   * environment's type comes in the same statement. Every brain that starts asks, and a workflow
   * run starts a thousand: reading the whole session (retrieve) and then its environment's type
   * was ≈ 0.12 ms of each start.
   */
  runSnapshot(id: string): SessionRunSnapshot {
    this.snapshotRow ??= this.db.prepare(
      "SELECT s.environment_id, s.data, COALESCE(json_extract(e.data, '$.config.type'), '') AS environment_type FROM sessions s LEFT JOIN environments e ON e.id = s.environment_id WHERE s.id = ? AND s.deleting = 0",
    )
    const row = this.snapshotRow.get(id) as { environment_id: string; data: string; environment_type: string } | undefined
    if (!row) throw notFound('session', id)
    const kept = this.snapshots.get(id)
    if (kept) this.snapshots.delete(id)
    const value =
      kept && kept.data === row.data && kept.value.environment_type === row.environment_type
        ? kept.value
        : (() => {
            const s = JSON.parse(row.data) as Session
            return deepFreeze({ id, agent: s.agent, budget: s.budget ?? null, resources: s.resources ?? [], environment_id: row.environment_id, environment_type: row.environment_type })
          })()
    this.snapshots.set(id, { data: row.data, value })
    if (this.snapshots.size > 256) this.snapshots.delete(this.snapshots.keys().next().value as string)
    return value
  }

  /** Whether a worker of the session's self_hosted environment runs its toolset calls (its environment is self_hosted). */
  answeredByWorker(id: string, session?: { environment_id?: string; environment_type?: string }): boolean {
    // (a run snapshot knows its environment's type)
    if (session?.environment_type !== undefined) return session.environment_type === 'self_hosted'
    // (`session`: as the caller just retrieved it; else its environment's id is read, prepared
    // once: asked by every brain that starts, and a workflow run starts a thousand)
    let environmentId = session?.environment_id
    if (environmentId === undefined) {
      this.environmentOf ??= this.db.prepare('SELECT environment_id FROM sessions WHERE id = ?')
      environmentId = (this.environmentOf.get(id) as { environment_id: string } | undefined)?.environment_id
    }
    return environmentId !== undefined && this.environments.configType(environmentId) === 'self_hosted'
  }

  /** Whether a session with this id exists (archived ones included). */
  exists(id: string): boolean {
    return !!this.db.prepare('SELECT 1 FROM sessions WHERE id = ? AND deleting = 0').get(id)
  }

  /** The work queue, which a self_hosted session needs. */
  private workQueue(): WorkStore {
    if (!this.work) throw invalid('environment_id: this Corral has no work queue for self_hosted environments')
    return this.work
  }

  /** Ids of the sessions that are neither archived nor being deleted. */
  liveIds(): string[] {
    return this.db.prepare('SELECT id FROM sessions WHERE archived_at IS NULL AND deleting = 0').pluck().all() as string[]
  }

  /**
   * Live sessions that need a brain: the ones that were running (or rescheduling), and the ones
   * whose newest event is of one of `wakingTypes` (client input nobody answered yet).
   */
  needingBrains(wakingTypes: readonly string[]): string[] {
    const types = [...new Set(wakingTypes)]
    const newest = types.length
      ? ` OR (SELECT e.type FROM events e WHERE e.session_rid = s.rid ORDER BY e.seq DESC LIMIT 1) IN (${types.map(() => '?').join(',')})`
      : ''
    return this.db
      .prepare(`SELECT s.id FROM sessions s WHERE s.deleting = 0 AND s.archived_at IS NULL AND (s.status IN ('running', 'rescheduling')${newest})`)
      .pluck()
      .all(...types) as string[]
  }

  list(q: SessionListQuery): Page<Session> {
    const where: string[] = ['deleting = 0']
    const args: unknown[] = []
    if (!q.include_archived) where.push('archived_at IS NULL')
    if (q.agent_id) {
      where.push('agent_id = ?')
      args.push(q.agent_id)
    }
    if (q.agent_version) {
      where.push('agent_version = ?')
      args.push(q.agent_version)
    }
    if (q.statuses?.length) {
      where.push(`status IN (${q.statuses.map(() => '?').join(',')})`)
      args.push(...q.statuses)
    }
    if (q.memory_store_id) {
      where.push(`EXISTS (SELECT 1 FROM json_each(data, '$.resources') r WHERE json_extract(r.value, '$.type') = 'memory_store' AND json_extract(r.value, '$.memory_store_id') = ?)`)
      args.push(q.memory_store_id)
    }
    if (q.deployment_id) {
      where.push('deployment_id = ?')
      args.push(q.deployment_id)
    }
    createdAtFilters(q, where, args)
    return keysetList<Session, SessionRow>(this.db, { table: SESSION_ROWS, where, args, order: q.order ?? 'desc', limit: q.limit ?? 20, page: q.page }, rowToSession)
  }

  /**
   * Validates client events against the log and appends them, all or nothing: a tool
   * confirmation or custom tool result must answer a pending request of this session.
   */
  async sendEvents(sessionId: string, events: EventParamsInput[]): Promise<StoredEvent[]> {
    if (events.some((e) => e.type === 'user.define_outcome')) {
      this.retrieve(sessionId)
      await this.prepareOutcomes(events, 'events')
    }
    const check = () => {
      const session = this.retrieve(sessionId)
      if (session.archived_at) throw conflict(`session ${sessionId} is archived; it accepts no events`)
      if (session.status === 'terminated') throw conflict(`session ${sessionId} is terminated; it accepts no events`)
      this.checkBudgetPause(session, events)
      const answered = new Set<string>()
      const selfHosted = this.answeredByWorker(sessionId)
      let definedAt: number | undefined
      events.forEach((e, i) => {
        if (e.type === 'user.define_outcome') {
          if (definedAt !== undefined) throw invalid(`events[${i}]: one outcome at a time: events[${definedAt}] already defines one in this request`)
          definedAt = i
          const active = activeOutcome(this.outcomes(sessionId))
          if (active) {
            throw invalid(
              `events[${i}]: one outcome at a time: outcome ${active.outcome_id} is still active (${active.result}); define the next one after its span.outcome_evaluation_end with a terminal result, or send user.interrupt to end it`,
            )
          }
          return
        }
        let thread: string | null | undefined
        if (e.type === 'user.tool_result' && !selfHosted) {
          throw invalid(`events[${i}].type: user.tool_result answers a toolset call only in a session on a self_hosted environment (its worker runs the calls); session ${sessionId} runs them itself`)
        }
        if (e.type === 'user.tool_confirmation' || e.type === 'user.custom_tool_result' || e.type === 'user.tool_result') {
          thread = this.checkPending({ sessionId, index: i, answer: e, answered })
          if (e.type === 'user.tool_confirmation' && e.corral_allow_for_session) this.checkAllowForSession(i, e.tool_use_id, e.result)
        }
        else if (e.type === 'user.interrupt') {
          // The thread it names stays on the echo (the primary's id too: absent means every
          // thread, the primary's id the primary alone); the log keys the primary's under null.
          this.checkThread(sessionId, i, e.session_thread_id)
          if (!e.session_thread_id) delete (e as { session_thread_id?: string | null }).session_thread_id
          return
        } else return
        // An answer is routed to the thread of the request it answers (the API: "set by the
        // server"; one a client supplies is ignored, spec §4.5); the primary thread's events
        // carry no thread id, so they list under it.
        const ev = e as { session_thread_id?: string | null }
        if (thread) ev.session_thread_id = thread
        else delete ev.session_thread_id
      })
    }
    // Checked now for a fast answer, and again inside the append's transaction, so two
    // concurrent sends cannot both answer the same request (all-or-nothing per request).
    check()
    return this.log.append(sessionId, events as EventInput[], {
      precheck: () => {
        check()
        // new input for a self_hosted session with no live work item queues one (spec resources.md §5)
        if (this.work && events.some((e) => e.type === 'user.message' || e.type === 'user.define_outcome') && this.answeredByWorker(sessionId)) {
          this.work.enqueueSession(this.retrieve(sessionId).environment_id, sessionId)
        }
      },
    })
  }

  /**
   * A session's outcomes as its log tells them (oldest first): the API's
   * `Session.outcome_evaluations[]` (`outcomeEvaluations`) and the one-at-a-time rule read this.
   * An outcome not evaluated yet is `pending` until the agent's first model request after it.
   */
  outcomes(sessionId: string): OutcomeRecord[] {
    const rows = this.readAll(sessionId, { types: OUTCOME_EVENT_TYPES, threadId: null })
    if (rows.length === 0) return []
    const defineSeq = new Map(rows.flatMap((r) => (r.event.type === 'user.define_outcome' ? [[String((r.event as { outcome_id?: unknown }).outcome_id), r.seq] as const] : [])))
    const started = (outcomeId: string) => {
      const seq = defineSeq.get(outcomeId)
      return seq !== undefined && this.log.read(sessionId, { after: seq, types: ['span.model_request_start'], threadId: null, limit: 1 }).length > 0
    }
    return foldOutcomes(
      rows.map((r) => r.event as unknown as { id: string; type: string }),
      started,
    )
  }

  /** `Session.outcome_evaluations[]`: one entry per `user.define_outcome`, with its live result. */
  outcomeEvaluations(sessionId: string): Session['outcome_evaluations'] {
    return this.outcomes(sessionId).map(toOutcomeEvaluation)
  }

  /** Every event of a read (the log caps one read at 1000). */
  private readAll(sessionId: string, params: { types: readonly string[]; threadId?: string | null }): StoredEvent[] {
    const out: StoredEvent[] = []
    for (let after = 0; ; ) {
      const page = this.log.read(sessionId, { ...params, after, limit: 1000 })
      out.push(...page)
      if (page.length < 1000) return out
      after = page[page.length - 1].seq
    }
  }

  /**
   * What the session has spent so far at list prices, in US cents (unrounded): every thread's
   * model requests and the grader's evaluations, each priced at the model it names (the session
   * agent's model when it names none).
   */
  spentCents(sessionId: string): number {
    const agentModel = this.retrieve(sessionId).agent.model
    const fallback = typeof agentModel === 'string' ? agentModel : ((agentModel as { id?: string } | undefined)?.id ?? '')
    let total = 0
    for (const r of this.readAll(sessionId, { types: ['span.model_request_end', 'span.outcome_evaluation_end'] })) {
      const e = r.event as unknown as { model?: unknown; model_usage?: Record<string, number>; usage?: Record<string, number> }
      const u = e.model_usage ?? e.usage
      if (!u) continue
      const n = (k: string) => (typeof u[k] === 'number' ? u[k] : 0)
      total += listCostCents(typeof e.model === 'string' && e.model ? e.model : fallback, {
        input_tokens: n('input_tokens'),
        output_tokens: n('output_tokens'),
        cache_creation_input_tokens: n('cache_creation_input_tokens'),
        cache_read_input_tokens: n('cache_read_input_tokens'),
      })
    }
    return total
  }

  /**
   * The rules of a budget change (spec multiagent §9): one set at create may be raised above
   * what the session has spent, or removed (null, for good); none can be added to a session that
   * has none. Throws invalid_request_error with `details.error_code` `budget_create_only` or
   * `budget_not_raised`.
   */
  private checkBudgetChange(cur: Session, next: SessionUpdateInput['budget']): void {
    if (next === null || next === undefined) return
    if (!cur.budget) {
      throw new CorralError(
        'invalid_request_error',
        `budget: session ${cur.id} has no budget, and a budget can only be set when a session is created (it was created without one, or its budget was removed); create a new session with a budget instead`,
        { fields: { details: { error_code: 'budget_create_only' } } },
      )
    }
    const asked = budgetCents(next) ?? 0
    const spent = this.spentCents(cur.id)
    if (asked <= spent) {
      throw new CorralError(
        'invalid_request_error',
        `budget.max_list_cost must be greater than the session's consumed list cost (${formatCents(spent)} spent; ${formatCents(asked)} asked)`,
        { fields: { details: { error_code: 'budget_not_raised' } } },
      )
    }
  }

  /**
   * A session paused at its budget (idle with budget_reached, and still at or over the cap)
   * accepts only the events that settle what is open (spec §9); work-starting events are refused
   * until the budget is raised or removed.
   */
  private checkBudgetPause(session: Session, events: readonly EventParamsInput[]): void {
    const i = events.findIndex((e) => e.type === 'user.message' || e.type === 'system.message' || e.type === 'user.define_outcome')
    if (i < 0 || session.status !== 'idle') return
    const limit = budgetCents(session.budget)
    if (limit === undefined) return
    const idle = this.log.read(session.id, { types: ['session.status_idle'], threadId: null, order: 'desc', limit: 1 })[0]
    if ((idle?.event as { stop_reason?: { type?: string } } | undefined)?.stop_reason?.type !== 'budget_reached') return
    if (this.spentCents(session.id) < limit) return
    throw invalid(
      `events[${i}]: session ${session.id} is paused at its budget (budget_reached, ${formatCents(limit)}); raise budget.max_list_cost (POST /v1/sessions/${session.id}) or remove the budget to continue. Until then it accepts only user.tool_confirmation, user.tool_result, user.custom_tool_result and user.interrupt`,
    )
  }

  /**
   * Gives each `user.define_outcome` of a send (or of initial_events) its server-side fields:
   * `outcome_id`, `max_iterations` (default 3), and a file rubric resolved to its text (the API
   * echoes file rubrics as text; the grader reads it from the log even if the file goes).
   */
  private async prepareOutcomes(events: readonly { type: string }[], field: string): Promise<void> {
    for (const [i, raw] of events.entries()) {
      if (raw.type !== 'user.define_outcome') continue
      const e = raw as Extract<EventParamsInput, { type: 'user.define_outcome' }> & { outcome_id?: string }
      e.outcome_id = newId('outcome')
      e.max_iterations = e.max_iterations ?? OUTCOME_DEFAULT_MAX_ITERATIONS
      if (e.rubric.type !== 'file') continue
      const where = `${field}[${i}].rubric.file_id`
      const files = this.hooks.files
      if (!files?.bytes || !files.has(e.rubric.file_id)) throw new CorralError('not_found_error', `${where}: file ${JSON.stringify(e.rubric.file_id)} was not found`)
      let text: string
      try {
        text = new TextDecoder('utf-8', { fatal: true }).decode(await files.bytes(e.rubric.file_id))
      } catch (err) {
        if (isCorralError(err)) throw err
        throw invalid(`${where}: file ${e.rubric.file_id} is not UTF-8 text; a rubric file must be plain text or markdown`, err)
      }
      if (text.trim().length === 0) throw invalid(`${where}: file ${e.rubric.file_id} is empty; a rubric needs at least one criterion`)
      if (text.length > OUTCOME_MAX_RUBRIC_CHARS) throw invalid(`${where}: file ${e.rubric.file_id} has ${text.length} characters; a rubric has at most ${OUTCOME_MAX_RUBRIC_CHARS}`)
      ;(e as { rubric: unknown }).rubric = { type: 'text', content: text }
    }
  }

  /** `corral_allow_for_session` remembers an exact bash command: only on an allow of a bash call with a command. */
  private checkAllowForSession(index: number, useId: string, result: string): void {
    const where = `events[${index}].corral_allow_for_session`
    if (result !== 'allow') throw invalid(`${where}: only an allow can be remembered for the session (result is ${JSON.stringify(result)})`)
    const req = this.log.get(useId)?.event as { type?: string; name?: string; input?: { command?: unknown } } | undefined
    if (req?.type !== 'agent.tool_use' || req.name !== 'bash' || typeof req.input?.command !== 'string') {
      throw invalid(`${where}: only a bash call's command can be allowed for the session (${useId} is ${req?.type === 'agent.tool_use' ? `a ${JSON.stringify(req.name)} call` : 'not a toolset call'})`)
    }
  }

  /**
   * A thread named by a client event must be one of the session's and not terminated (archived,
   * or ended by a failure: it accepts no input, spec §3.5); the primary one maps to null.
   */
  private checkThread(sessionId: string, index: number, threadId: string | null | undefined): string | null {
    if (!threadId || threadId === primaryThreadId(sessionId)) return null
    const where = `events[${index}].session_thread_id`
    const created = this.log.read(sessionId, { types: ['session.thread_created'], threadId, limit: 1 })
    if (created.length === 0) throw invalid(`${where}: ${JSON.stringify(threadId)} is not a thread of session ${sessionId}`)
    const last = this.log.read(sessionId, { types: THREAD_STATUS_TYPES, threadId, order: 'desc', limit: 1 })[0]
    if (last?.event.type === 'session.thread_status_terminated') throw invalid(`${where}: thread ${threadId} is terminated; it accepts no input`)
    return threadId
  }

  /** Checks that an answer matches a pending request; returns the request's thread (null: primary). */
  private checkPending({ sessionId, index, answer, answered }: PendingCheck): string | null {
    const { field, answers: requestTypes, kind } = ANSWERS[answer.type]
    const useId = String(answeredUseId(answer))
    const where = `events[${index}].${field}`
    const req = this.log.get(useId)
    if (!req || req.sessionId !== sessionId || !isRequest(req.event) || !(requestTypes as readonly string[]).includes(req.event.type)) {
      throw invalid(`${where}: ${JSON.stringify(useId)} is not a ${requestTypes.join(' or ')} event of session ${sessionId}`)
    }
    // a confirmation answers only a call that asks for one (its evaluated permission as written)
    if (kind === 'confirmation' && awaitsFromUser(req.event.type, 'evaluated_permission' in req.event ? req.event.evaluated_permission : undefined) !== 'confirmation') {
      throw invalid(`${where}: tool use ${useId} did not ask for confirmation`)
    }
    const prior = this.log.hasAnswer({ sessionId, after: req.seq, type: answer.type, field, id: useId })
    if (prior || answered.has(useId)) throw invalid(`${where}: ${useId} has already been answered`)
    answered.add(useId)
    return typeof req.event.session_thread_id === 'string' ? req.event.session_thread_id : null
  }
}

/** The status events of a thread (the last one is its status). */
const THREAD_STATUS_TYPES = STATUS_EVENT_TYPES.filter((t) => STATUS_EVENTS[t].scope === 'thread')

/** An environment's `config.networking` (none for a self-hosted environment). */
function envNetworking(env: Environment): McpReachNetworking | undefined {
  return env.config.type === 'cloud' ? ((env.config as { networking?: McpReachNetworking }).networking ?? undefined) : undefined
}

/** Freezes an object and everything it holds (a value shared by every caller, which none may change). */
function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const v of Object.values(value)) deepFreeze(v)
  }
  return value
}

function rowToSession(row: SessionRow): Session {
  const s = JSON.parse(row.data) as Session
  s.status = row.status
  s.updated_at = row.updated_at
  s.archived_at = row.archived_at
  s.deployment_id = row.deployment_id
  s.usage = JSON.parse(row.usage) as SessionUsage
  const corral: SessionCorralFields = { model_error: parseModelError(row.model_error) }
  ;(s as Session & { corral: SessionCorralFields }).corral = corral
  return s
}

function parseModelError(json: string | null): SessionModelError | null {
  return json ? (JSON.parse(json) as SessionModelError) : null
}

function publicResource(r: Record<string, unknown>, now: string, id: string): Session['resources'][number] {
  // The authorization token is a secret: it never goes into this database (create hands it to
  // resourceSecrets, the keychain). Everything else is kept as given.
  const { authorization_token: _secret, ...rest } = r
  // a file's mount_path is where it appears: /mnt/session/uploads/<file_id>, or mount_path taken relative to that folder
  if (r.type === 'file') rest.mount_path = fileMountPath(r.mount_path as string | null | undefined, String(r.file_id))
  return { ...rest, id, created_at: now, updated_at: now } as unknown as Session['resources'][number]
}

function addUsage(usage: SessionUsage, delta: Record<string, number> | undefined): SessionUsage {
  if (!delta) return usage
  const out: Record<string, unknown> = { ...usage }
  for (const k of ['input_tokens', 'output_tokens', 'cache_read_input_tokens'] as const) {
    if (typeof delta[k] === 'number') out[k] = ((out[k] as number | undefined) ?? 0) + delta[k]
  }
  if (typeof delta.cache_creation_input_tokens === 'number') {
    const cc = { ...((out.cache_creation as Record<string, number>) ?? {}) }
    cc.ephemeral_5m_input_tokens = (cc.ephemeral_5m_input_tokens ?? 0) + delta.cache_creation_input_tokens
    out.cache_creation = cc
  }
  return out as SessionUsage
}

/** Cents as dollars for a message: 1234.5 → "$12.35". */
function formatCents(cents: number): string {
  return `$${(cents / 100).toFixed(2)}`
}

/** Thrown from an update's precheck when nothing changed: nothing is appended or written. */
const NO_CHANGE = new CorralError('invalid_request_error', 'the update changes nothing')

/** The session agent with `tools` / `mcp_servers` replaced (normalized as on an agent). */
function updatedAgent(cur: Session['agent'], patch: NonNullable<SessionUpdateInput['agent']>): Session['agent'] {
  const draft = {
    ...(cur as unknown as Record<string, unknown>),
    ...(patch.tools !== undefined ? { tools: patch.tools } : {}),
    ...(patch.mcp_servers !== undefined ? { mcp_servers: patch.mcp_servers } : {}),
    created_at: '',
    updated_at: '',
    archived_at: null,
  }
  const normalized = normalizeAgent(draft as unknown as Parameters<typeof normalizeAgent>[0]) as unknown as Record<string, unknown>
  return { ...cur, tools: normalized.tools, mcp_servers: normalized.mcp_servers } as Session['agent']
}

/**
 * A self_hosted session takes only memory stores (spec resources.md §5): its files and
 * repositories would have to be staged on a worker Corral does not reach. 400 naming the first
 * other resource.
 */
function refuseSelfHostedResources(environmentId: string, resources: readonly Record<string, unknown>[]): void {
  const i = resources.findIndex((r) => r.type !== 'memory_store')
  if (i < 0) return
  throw invalid(
    `resources[${i}].type: a session on the self_hosted environment ${environmentId} takes only memory_store resources (got ${JSON.stringify(resources[i].type)}); its tools run on a worker, so stage files there yourself (pass their locations in the session's metadata)`,
  )
}
