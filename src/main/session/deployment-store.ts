import type { z } from 'zod'
import type { Deployment, DeploymentPausedReasonError, DeploymentRun, Environment, Session } from '../../shared/api/types'
import type { deploymentCreateSchema, deploymentListQuerySchema, deploymentRunListQuerySchema, deploymentUpdateSchema } from '../../shared/api/deployment-schemas'
import { CronCache, cronKey, deploymentJitterMs, type CronSpec } from '../../shared/api/cron'
import { newId } from '../../shared/api/ids'
import { CorralError, conflict, invalid, isCorralError, notFound } from '../../shared/errors'
import type { Db } from './database'
import type { ResourceEvents } from './webhook-store'
import type { AgentStore } from './agent-store'
import { mergeMetadata } from './agent-store'
import type { EnvironmentStore } from './environment-store'
import type { SessionCreateInput, SessionStore } from './session-store'
import type { VaultStore } from './vault-store'
import type { MemoryStore } from './memory-store'
import { createdAtFilters, keysetList, type Page } from './pagination'
import { StoreChanges } from './store-changes'

export type DeploymentCreateInput = z.infer<typeof deploymentCreateSchema>
export type DeploymentUpdateInput = z.infer<typeof deploymentUpdateSchema>
export type DeploymentListQuery = z.infer<typeof deploymentListQuerySchema>
export type DeploymentRunListQuery = z.infer<typeof deploymentRunListQuerySchema>

/** A run's error type (the SDK's run error union). */
export type DeploymentRunErrorType = NonNullable<DeploymentRun['error']>['type']

/**
 * The run errors that pause their deployment (spec resources.md §10.4): everything but a rate
 * limit (the schedule keeps firing) and a rejected session create (a validation error of that one
 * session).
 */
export const AUTO_PAUSE_ERRORS: ReadonlySet<DeploymentRunErrorType> = new Set<DeploymentRunErrorType>([
  'environment_archived_error',
  'agent_archived_error',
  'environment_not_found_error',
  'vault_not_found_error',
  'file_not_found_error',
  'session_resource_not_found_error',
  'workspace_archived_error',
  'organization_disabled_error',
  'memory_store_archived_error',
  'skill_not_found_error',
  'vault_archived_error',
  'unknown_error',
  'self_hosted_resources_unsupported_error',
  'mcp_egress_blocked_error',
])

/**
 * Corral's addition on a run (`corral`): `catch_up` is non-null when the run is the one catch-up
 * fire for scheduled instants that passed while the computer slept or Corral was not running
 * (docs/schedules.md): `reason` says which, `missed_since` is the first instant that was not run
 * on time; only the latest one (this run's `scheduled_at`) is run, once.
 */
export interface DeploymentRunCorralFields {
  catch_up: { reason: 'asleep' | 'not_running'; missed_since: string } | null
}

export type DeploymentRunView = DeploymentRun & { corral: DeploymentRunCorralFields }

/** How a scheduled fire is asked for (DeploymentScheduler). */
export interface ScheduledFireParams {
  deploymentId: string
  /** The scheduled instant (before jitter). */
  scheduledAt: Date
  catchUp?: DeploymentRunCorralFields['catch_up']
}

/** What the scheduler needs to know of one active, scheduled deployment. */
export interface ScheduledDeployment {
  id: string
  schedule: CronSpec
  /** The latest scheduled instant already dealt with; occurrences after it are due. */
  firedThrough: Date
  jitterMs: number
}

export interface DeploymentStoreOptions {
  /** Told of each deployment's and run's change inside its transaction (the webhooks' outbox). */
  events?: ResourceEvents
  agents: AgentStore
  environments: EnvironmentStore
  sessions: SessionStore
  vaults: VaultStore
  memory?: MemoryStore
  /** Whether a file id names a stored file (the file store); without it a file resource is refused. */
  files?: { has(fileId: string): boolean }
  clock?: () => Date
  /**
   * Called once a run's record has committed and before its session is created (tests kill the
   * process here to prove the recovery: `completePending` finishes it, exactly once).
   */
  afterRunRecorded?: (run: DeploymentRunView) => void
}

interface DeploymentRow {
  id: string
  created_at: string
  updated_at: string
  archived_at: string | null
  agent_id: string
  status: 'active' | 'paused'
  fired_through: string | null
  last_run_at: string | null
  data: string
}

interface RunRow {
  id: string
  deployment_id: string
  created_at: string
  trigger_type: 'schedule' | 'manual'
  scheduled_at: string | null
  session_id: string | null
  error: string | null
  data: string
}

/** What a run keeps besides its columns: its public fields and, internal, the session it creates. */
interface RunData {
  agent: DeploymentRun['agent']
  trigger_context: DeploymentRun['trigger_context']
  corral: DeploymentRunCorralFields
  /** The session id reserved for the run and the create input it was recorded with (never shown). */
  plan: { session_id: string; input: SessionCreateInput }
}

/** The stored definition: the API object without what is computed on read. */
type StoredDeployment = Omit<Deployment, 'schedule' | 'status' | 'paused_reason'> & {
  schedule: { type: 'cron'; expression: string; timezone: string } | null
  paused_reason: Deployment['paused_reason']
}

/**
 * Deployments and their runs (spec resources.md §10). A run is recorded (its row, unique per
 * scheduled instant) before its session is created, and the session's creation fills the run's
 * `session_id` in the session's own transaction: after a crash between the two, `completePending`
 * creates the session with the id the run reserved, so a run is neither lost nor doubled.
 */
export class DeploymentStore {
  /** Notified after each committed create, update, pause, unpause, archive (the scheduler re-plans). */
  readonly changes = new StoreChanges()
  private readonly clock: () => Date
  private readonly crons = new CronCache()
  private readonly upcomingCache = new Map<string, { from: number; runs: string[] }>()

  private readonly events: ResourceEvents

  constructor(
    private readonly db: Db,
    private readonly o: DeploymentStoreOptions,
  ) {
    this.clock = o.clock ?? (() => new Date())
    this.events = o.events ?? (() => {})
  }

  create(input: DeploymentCreateInput): Deployment {
    const agent = this.resolveAgent(input.agent)
    this.checkReferences({ environment_id: input.environment_id, vault_ids: input.vault_ids ?? [], resources: input.resources ?? [] })
    this.checkMcpReach(agent, input.environment_id)
    const now = this.clock().toISOString()
    const d: StoredDeployment = {
      type: 'deployment',
      id: newId('deployment', this.clock().getTime()),
      agent,
      environment_id: input.environment_id,
      name: input.name,
      description: input.description ?? null,
      initial_events: input.initial_events as Deployment['initial_events'],
      resources: (input.resources ?? []) as unknown as Deployment['resources'],
      vault_ids: input.vault_ids ?? [],
      metadata: input.metadata ?? {},
      ...(input.budget ? { budget: input.budget } : {}),
      schedule: input.schedule ? { type: 'cron', expression: input.schedule.expression.trim(), timezone: input.schedule.timezone } : null,
      paused_reason: null,
      created_at: now,
      updated_at: now,
      archived_at: null,
    }
    this.db.transaction(() => {
      this.db
        .prepare('INSERT INTO deployments (id, created_at, updated_at, archived_at, agent_id, status, fired_through, last_run_at, data) VALUES (?, ?, ?, NULL, ?, ?, ?, NULL, ?)')
        .run(d.id, now, now, agent.id, 'active', d.schedule ? now : null, JSON.stringify(d))
      this.events('deployment.created', d.id)
    })()
    this.changes.notify({ kind: 'deployment', id: d.id })
    return this.retrieve(d.id)
  }

  retrieve(id: string): Deployment {
    return this.view(this.row(id))
  }

  update(id: string, input: DeploymentUpdateInput): Deployment {
    this.db.transaction(() => {
      const row = this.row(id)
      if (row.archived_at) throw conflict(`deployment ${id} is archived and cannot be updated`)
      const cur = JSON.parse(row.data) as StoredDeployment
      const next: StoredDeployment = { ...cur }
      if (input.agent !== undefined) next.agent = this.resolveAgent(input.agent)
      if (input.environment_id !== undefined) next.environment_id = input.environment_id
      if (input.name !== undefined) next.name = input.name
      if (input.description !== undefined) next.description = input.description === '' ? null : input.description
      if (input.initial_events !== undefined) next.initial_events = input.initial_events as Deployment['initial_events']
      if (input.resources !== undefined) next.resources = (input.resources ?? []) as unknown as Deployment['resources']
      if (input.vault_ids !== undefined) next.vault_ids = input.vault_ids ?? []
      if (input.metadata !== undefined) next.metadata = mergeMetadata(cur.metadata, input.metadata)
      if (input.budget !== undefined) {
        if (input.budget === null) delete next.budget
        else next.budget = input.budget
      }
      let firedThrough = row.fired_through
      if (input.schedule !== undefined) {
        next.schedule = input.schedule ? { type: 'cron', expression: input.schedule.expression.trim(), timezone: input.schedule.timezone } : null
        // a new schedule starts from now: instants of the old one, or before, never fire as missed
        if (JSON.stringify(next.schedule) !== JSON.stringify(cur.schedule)) firedThrough = next.schedule ? this.clock().toISOString() : null
      }
      this.checkReferences({
        environment_id: input.environment_id,
        vault_ids: input.vault_ids ?? undefined,
        resources: (input.resources ?? undefined) as Record<string, unknown>[] | undefined,
      })
      if (input.agent !== undefined || input.environment_id !== undefined) this.checkMcpReach(next.agent, next.environment_id)
      next.updated_at = this.clock().toISOString()
      this.db
        .prepare('UPDATE deployments SET updated_at = ?, agent_id = ?, fired_through = ?, data = ? WHERE id = ?')
        .run(next.updated_at, next.agent.id, firedThrough, JSON.stringify(next), id)
      this.events('deployment.updated', id)
    })()
    this.changes.notify({ kind: 'deployment', id })
    return this.retrieve(id)
  }

  list(q: DeploymentListQuery): Page<Deployment> {
    const where: string[] = []
    const args: unknown[] = []
    if (!q.include_archived) where.push('archived_at IS NULL')
    if (q.status) {
      where.push('status = ?')
      args.push(q.status)
    }
    if (q.agent_id) {
      where.push('agent_id = ?')
      args.push(q.agent_id)
    }
    createdAtFilters(q, where, args)
    return keysetList<Deployment, DeploymentRow>(this.db, { table: 'deployments', where, args, order: 'desc', limit: q.limit ?? 20, page: q.page }, (r) => this.view(r))
  }

  /** Archives: no more scheduled fires, `upcoming_runs_at` empty; runs and `last_run_at` are kept. Idempotent. */
  archive(id: string): Deployment {
    const row = this.row(id)
    if (row.archived_at) return this.view(row)
    const now = this.clock().toISOString()
    const d = { ...(JSON.parse(row.data) as StoredDeployment), archived_at: now, updated_at: now, paused_reason: null }
    this.db.transaction(() => {
      this.db.prepare("UPDATE deployments SET archived_at = ?, updated_at = ?, status = 'active', data = ? WHERE id = ?").run(now, now, JSON.stringify(d), id)
      this.events('deployment.archived', id)
    })()
    this.changes.notify({ kind: 'deployment', id })
    return this.retrieve(id)
  }

  /** Pauses (`paused_reason: {type:'manual'}`): scheduled fires are suppressed, manual runs still work. */
  pause(id: string): Deployment {
    const row = this.row(id)
    if (row.archived_at) throw conflict(`deployment ${id} is archived and cannot be paused`)
    if (row.status === 'paused') return this.view(row)
    this.setPaused(row, { type: 'manual' })
    return this.retrieve(id)
  }

  /**
   * Unpauses: scheduled fires resume from now (instants that passed while it was paused never
   * fire, not even as a catch-up).
   */
  unpause(id: string): Deployment {
    const row = this.row(id)
    if (row.archived_at) throw conflict(`deployment ${id} is archived and cannot be unpaused`)
    if (row.status === 'active') return this.view(row)
    const now = this.clock().toISOString()
    const d = { ...(JSON.parse(row.data) as StoredDeployment), paused_reason: null, updated_at: now }
    this.db.transaction(() => {
      this.db
        .prepare("UPDATE deployments SET status = 'active', updated_at = ?, fired_through = CASE WHEN fired_through IS NULL THEN NULL ELSE ? END, data = ? WHERE id = ?")
        .run(now, now, JSON.stringify(d), id)
      this.events('deployment.unpaused', id)
    })()
    this.changes.notify({ kind: 'deployment', id })
    return this.retrieve(id)
  }

  /** Run now (allowed while paused, not once archived): the run with its session or its error. */
  async run(id: string): Promise<DeploymentRunView> {
    const row = this.row(id)
    if (row.archived_at) throw conflict(`deployment ${id} is archived; it cannot run`)
    const run = this.db.transaction(() => this.recordRun(this.row(id), { type: 'manual' }, null))()
    if (!run) throw new CorralError('api_error', `deployment ${id}: the run could not be recorded`)
    return this.startRecorded(run)
  }

  /**
   * A scheduled fire of `scheduledAt`: recorded (and `fired_through` moved to it) in one
   * transaction, then its session created. Null when there is nothing to do: the instant already
   * has its run (another process, or before a crash), or the deployment is no longer active and
   * scheduled (paused, archived, schedule removed, meanwhile).
   */
  async fireScheduled(params: ScheduledFireParams): Promise<DeploymentRunView | null> {
    const at = params.scheduledAt.toISOString()
    const run = this.db.transaction(() => {
      const row = this.db.prepare('SELECT * FROM deployments WHERE id = ?').get(params.deploymentId) as DeploymentRow | undefined
      if (!row || row.archived_at || row.status !== 'active' || row.fired_through === null) return null
      if (row.fired_through >= at) return null
      this.db.prepare('UPDATE deployments SET fired_through = ?, last_run_at = ? WHERE id = ?').run(at, this.clock().toISOString(), row.id)
      return this.recordRun(row, { type: 'schedule', scheduled_at: at }, params.catchUp ?? null)
    })()
    if (!run) return null
    return this.startRecorded(run)
  }

  /** The active, scheduled, unarchived deployments, for the scheduler. */
  scheduled(): ScheduledDeployment[] {
    const rows = this.db
      .prepare("SELECT id, fired_through, data FROM deployments WHERE archived_at IS NULL AND status = 'active' AND fired_through IS NOT NULL")
      .all() as Pick<DeploymentRow, 'id' | 'fired_through' | 'data'>[]
    return rows.flatMap((r) => {
      const schedule = (JSON.parse(r.data) as StoredDeployment).schedule
      if (!schedule) return []
      return [{ id: r.id, schedule: { expression: schedule.expression, timezone: schedule.timezone }, firedThrough: new Date(r.fired_through!), jitterMs: deploymentJitterMs(r.id) }]
    })
  }

  /**
   * Finishes every run recorded without an outcome (a crash between its record and its session):
   * each gets its session (with the id it reserved) or its error. Returns them.
   */
  async completePending(): Promise<DeploymentRunView[]> {
    const rows = this.db.prepare('SELECT * FROM deployment_runs WHERE session_id IS NULL AND error IS NULL ORDER BY created_at, id').all() as RunRow[]
    const out: DeploymentRunView[] = []
    for (const r of rows) out.push(await this.completeRun(r))
    return out
  }

  retrieveRun(id: string): DeploymentRunView {
    const row = this.db.prepare('SELECT * FROM deployment_runs WHERE id = ?').get(id) as RunRow | undefined
    if (!row) throw notFound('deployment run', id)
    return runView(row)
  }

  /** Runs newest first; a run still being started (no outcome yet) is not listed. */
  listRuns(q: DeploymentRunListQuery): Page<DeploymentRunView> {
    const where: string[] = ['(session_id IS NOT NULL OR error IS NOT NULL)']
    const args: unknown[] = []
    if (q.deployment_id) {
      where.push('deployment_id = ?')
      args.push(q.deployment_id)
    }
    if (q.has_error !== undefined) where.push(q.has_error ? 'error IS NOT NULL' : 'session_id IS NOT NULL')
    if (q.trigger_type) {
      where.push('trigger_type = ?')
      args.push(q.trigger_type)
    }
    createdAtFilters(q, where, args)
    return keysetList<DeploymentRunView, RunRow>(this.db, { table: 'deployment_runs', where, args, order: 'desc', limit: q.limit ?? 20, page: q.page }, runView)
  }

  // ---------- inside ----------

  private row(id: string): DeploymentRow {
    const row = this.db.prepare('SELECT * FROM deployments WHERE id = ?').get(id) as DeploymentRow | undefined
    if (!row) throw notFound('deployment', id)
    return row
  }

  /**
   * The next UPCOMING_RUNS instants of a schedule after now. Kept per schedule until its first
   * instant passes: nothing can change before then (a list of 100 deployments took ~330 ms
   * computing them afresh, ~3 ms each).
   */
  private upcoming(spec: CronSpec): string[] {
    const now = this.clock()
    const key = cronKey(spec)
    const hit = this.upcomingCache.get(key)
    if (hit && now.getTime() >= hit.from && hit.runs.length > 0 && now.getTime() < Date.parse(hit.runs[0])) return [...hit.runs]
    const runs = this.crons.get(spec).upcoming(now).map((t) => t.toISOString())
    if (this.upcomingCache.size > 256) this.upcomingCache.clear()
    this.upcomingCache.set(key, { from: now.getTime(), runs })
    return runs
  }

  private view(row: DeploymentRow): Deployment {
    const d = JSON.parse(row.data) as StoredDeployment
    const schedule: Deployment['schedule'] = d.schedule
      ? {
          ...d.schedule,
          last_run_at: row.last_run_at,
          upcoming_runs_at: row.archived_at ? [] : this.upcoming(d.schedule),
        }
      : null
    return {
      ...d,
      schedule,
      status: row.status,
      paused_reason: row.status === 'paused' ? d.paused_reason : null,
      updated_at: row.updated_at,
      archived_at: row.archived_at,
    }
  }

  private setPaused(row: DeploymentRow, reason: NonNullable<Deployment['paused_reason']>): void {
    const now = this.clock().toISOString()
    const d = { ...(JSON.parse(row.data) as StoredDeployment), paused_reason: reason, updated_at: now }
    this.db.transaction(() => {
      this.db.prepare("UPDATE deployments SET status = 'paused', updated_at = ?, data = ? WHERE id = ?").run(now, JSON.stringify(d), row.id)
      this.events('deployment.paused', row.id)
    })()
    this.changes.notify({ kind: 'deployment', id: row.id })
  }

  /** `agent`: an id (its latest version) or `{type:'agent', id, version}`; it must exist and not be archived. */
  private resolveAgent(ref: DeploymentCreateInput['agent']): Deployment['agent'] {
    const id = typeof ref === 'string' ? ref : ref.id
    const version = typeof ref === 'string' ? undefined : ref.version
    const latest = this.o.agents.find(id)
    if (!latest) throw invalid(`agent: agent ${JSON.stringify(id)} was not found`)
    if (latest.archived_at) throw invalid(`agent: agent ${id} is archived; a deployment runs only an agent that is not`)
    if (version !== undefined && !this.o.agents.find(id, version)) throw invalid(`agent.version: agent ${id} has no version ${version} (latest is ${latest.version})`)
    return { type: 'agent', id, version: version ?? latest.version }
  }

  /** The references a deployment's sessions will need, checked when it is saved (400 naming the field). */
  private checkReferences(refs: { environment_id?: string; vault_ids?: string[]; resources?: readonly Record<string, unknown>[] }): void {
    if (refs.environment_id !== undefined) {
      const env = this.findEnvironment(refs.environment_id)
      if (!env) throw invalid(`environment_id: environment ${JSON.stringify(refs.environment_id)} was not found`)
      if (env.archived_at) throw invalid(`environment_id: environment ${env.id} is archived`)
    }
    refs.vault_ids?.forEach((vaultId, i) => {
      const vault = this.findVault(vaultId)
      if (!vault) throw invalid(`vault_ids[${i}]: vault ${JSON.stringify(vaultId)} was not found`)
      if (vault.archived_at) throw invalid(`vault_ids[${i}]: vault ${vaultId} is archived`)
    })
    if (!refs.resources?.length) return
    refs.resources.forEach((r, i) => {
      if (r.type !== 'memory_store') return
      const store = this.findMemoryStore(String(r.memory_store_id))
      if (!store) throw invalid(`resources[${i}].memory_store_id: memory store ${JSON.stringify(r.memory_store_id)} was not found`)
      if (store.archived_at) throw invalid(`resources[${i}].memory_store_id: memory store ${store.id} is archived`)
    })
    try {
      this.o.sessions.checkResources(refs.resources)
    } catch (err) {
      if (isCorralError(err) && err.code === 'not_found_error') throw invalid(err.message, err)
      throw err
    }
  }

  /** A deployment whose sessions could not reach an MCP server of their agents is refused when saved (400; spec multiagent §2.5). */
  private checkMcpReach(agent: Deployment['agent'], environmentId: string): void {
    const problem = this.o.sessions.mcpEgressProblem(agent, environmentId)
    if (problem) throw invalid(problem)
  }

  private findEnvironment(id: string): Environment | undefined {
    try {
      return this.o.environments.retrieve(id)
    } catch (err) {
      if (isCorralError(err) && err.code === 'not_found_error') return undefined
      throw err
    }
  }

  private findVault(id: string): { id: string; archived_at: string | null } | undefined {
    try {
      return this.o.vaults.retrieve(id)
    } catch (err) {
      if (isCorralError(err) && err.code === 'not_found_error') return undefined
      throw err
    }
  }

  private findMemoryStore(id: string): { id: string; archived_at: string | null } | undefined {
    if (!this.o.memory) return undefined
    try {
      return this.o.memory.retrieveStore(id)
    } catch (err) {
      if (isCorralError(err) && err.code === 'not_found_error') return undefined
      throw err
    }
  }

  /** Inserts a pending run (inside the caller's transaction); null when its scheduled instant already has one. */
  private recordRun(row: DeploymentRow, trigger: DeploymentRun['trigger_context'], catchUp: DeploymentRunCorralFields['catch_up']): DeploymentRunView | null {
    const d = JSON.parse(row.data) as StoredDeployment
    const now = this.clock()
    const input: SessionCreateInput = {
      agent: { type: 'agent', id: d.agent.id, version: d.agent.version },
      environment_id: d.environment_id,
      initial_events: d.initial_events as SessionCreateInput['initial_events'],
      resources: d.resources as unknown as SessionCreateInput['resources'],
      vault_ids: d.vault_ids,
      metadata: {},
      title: d.name,
      ...(d.budget ? { budget: d.budget } : {}),
    }
    const data: RunData = {
      agent: d.agent,
      trigger_context: trigger,
      corral: { catch_up: catchUp },
      plan: { session_id: newId('session', now.getTime()), input },
    }
    const id = newId('deploymentRun', now.getTime())
    const scheduledAt = trigger.type === 'schedule' ? trigger.scheduled_at : null
    const res = this.db
      .prepare('INSERT OR IGNORE INTO deployment_runs (id, deployment_id, created_at, trigger_type, scheduled_at, session_id, error, data) VALUES (?, ?, ?, ?, ?, NULL, NULL, ?)')
      .run(id, row.id, now.toISOString(), trigger.type, scheduledAt, JSON.stringify(data))
    if (res.changes === 0) return null
    this.events('deployment_run.started', id)
    return this.retrieveRun(id)
  }

  private async startRecorded(run: DeploymentRunView): Promise<DeploymentRunView> {
    this.o.afterRunRecorded?.(run)
    const row = this.db.prepare('SELECT * FROM deployment_runs WHERE id = ?').get(run.id) as RunRow
    return this.completeRun(row)
  }

  /** Creates a pending run's session (with its reserved id, its session_id written in the session's transaction), or records its error. */
  private async completeRun(row: RunRow): Promise<DeploymentRunView> {
    if (row.session_id !== null || row.error !== null) return runView(row)
    const data = JSON.parse(row.data) as RunData
    const problem = this.preflight(data.plan.input)
    if (problem) return this.failRun(row, problem)
    // A session with the reserved id exists only if the run's session_id was written with it (one
    // transaction); checked anyway, so a recovery can never make a second session.
    if (this.o.sessions.exists(data.plan.session_id)) return this.settleRun(row, data.plan.session_id)
    try {
      await this.o.sessions.create(data.plan.input, {
        sessionId: data.plan.session_id,
        deploymentId: row.deployment_id,
        inCommit: (session: Session) => {
          const r = this.db.prepare('UPDATE deployment_runs SET session_id = ? WHERE id = ? AND session_id IS NULL AND error IS NULL').run(session.id, row.id)
          if (r.changes > 0) this.events('deployment_run.succeeded', row.id)
        },
      })
    } catch (err) {
      const type: DeploymentRunErrorType = !isCorralError(err)
        ? 'unknown_error'
        : err.code === 'rate_limit_error' || err.code === 'overloaded_error'
          ? 'session_rate_limited_error'
          : err.code === 'invalid_request_error' || err.code === 'not_found_error' || err.code === 'conflict_error'
            ? 'session_creation_rejected_error'
            : 'unknown_error'
      return this.failRun(row, { type, message: `the session could not be created: ${(err as Error).message}` })
    }
    return this.retrieveRun(row.id)
  }

  private settleRun(row: RunRow, sessionId: string): DeploymentRunView {
    this.db.transaction(() => {
      const r = this.db.prepare('UPDATE deployment_runs SET session_id = ? WHERE id = ? AND session_id IS NULL AND error IS NULL').run(sessionId, row.id)
      if (r.changes > 0) this.events('deployment_run.succeeded', row.id)
    })()
    return this.retrieveRun(row.id)
  }

  /** Records the run's error and, for the auto-pause errors, pauses its deployment with the reason (unless it is paused already or archived). */
  private failRun(row: RunRow, error: { type: DeploymentRunErrorType; message: string }): DeploymentRunView {
    this.db.transaction(() => {
      const r = this.db.prepare('UPDATE deployment_runs SET error = ? WHERE id = ? AND session_id IS NULL AND error IS NULL').run(JSON.stringify(error), row.id)
      if (r.changes > 0) this.events('deployment_run.failed', row.id)
    })()
    if (AUTO_PAUSE_ERRORS.has(error.type)) {
      const d = this.db.prepare('SELECT * FROM deployments WHERE id = ?').get(row.deployment_id) as DeploymentRow | undefined
      if (d && !d.archived_at && d.status === 'active') this.setPaused(d, { type: 'error', error: { type: error.type } as DeploymentPausedReasonError })
    }
    return this.retrieveRun(row.id)
  }

  /** Why a run's session cannot be created, as the API's run error, or null (checked before creating it). */
  private preflight(input: SessionCreateInput): { type: DeploymentRunErrorType; message: string } | null {
    const ref = input.agent as { id: string; version?: number }
    const agent = this.o.agents.find(ref.id)
    if (!agent) return { type: 'session_resource_not_found_error', message: `agent ${ref.id} no longer exists` }
    if (agent.archived_at) return { type: 'agent_archived_error', message: `agent ${ref.id} is archived; the deployment is paused until it runs an agent that is not (update its agent, then unpause it)` }
    const env = this.findEnvironment(input.environment_id)
    if (!env) return { type: 'environment_not_found_error', message: `environment ${input.environment_id} no longer exists` }
    if (env.archived_at) return { type: 'environment_archived_error', message: `environment ${env.id} is archived` }
    for (const vaultId of input.vault_ids ?? []) {
      const vault = this.findVault(vaultId)
      if (!vault) return { type: 'vault_not_found_error', message: `vault ${vaultId} no longer exists` }
      if (vault.archived_at) return { type: 'vault_archived_error', message: `vault ${vaultId} is archived` }
    }
    const resources = (input.resources ?? []) as unknown as Record<string, unknown>[]
    const selfHosted = env.config?.type === 'self_hosted'
    for (const r of resources) {
      if (selfHosted && (r.type === 'file' || r.type === 'github_repository')) {
        return { type: 'self_hosted_resources_unsupported_error', message: `environment ${env.id} is self-hosted and cannot mount the ${r.type} resource` }
      }
      if (r.type === 'file' && !this.o.files?.has(String(r.file_id))) return { type: 'file_not_found_error', message: `file ${String(r.file_id)} no longer exists` }
      if (r.type === 'memory_store') {
        const store = this.findMemoryStore(String(r.memory_store_id))
        if (!store) return { type: 'session_resource_not_found_error', message: `memory store ${String(r.memory_store_id)} no longer exists` }
        if (store.archived_at) return { type: 'memory_store_archived_error', message: `memory store ${store.id} is archived` }
      }
    }
    // the environment's networking or an agent's servers changed since the deployment was saved
    let mcp: string | undefined
    try {
      mcp = this.o.sessions.mcpEgressProblem(input.agent, env.id)
    } catch {
      // the session's create says what else is wrong (a listed agent archived, …)
    }
    if (mcp) return { type: 'mcp_egress_blocked_error', message: `${mcp}; the deployment is paused until its sessions can reach the server (then unpause it)` }
    return null
  }
}

function runView(row: RunRow): DeploymentRunView {
  const data = JSON.parse(row.data) as RunData
  return {
    type: 'deployment_run',
    id: row.id,
    deployment_id: row.deployment_id,
    agent: data.agent,
    trigger_context: data.trigger_context,
    session_id: row.session_id,
    error: row.error ? (JSON.parse(row.error) as DeploymentRun['error']) : null,
    created_at: row.created_at,
    corral: data.corral,
  }
}
