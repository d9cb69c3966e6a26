import type Database from 'better-sqlite3'
import type { z } from 'zod'
import type { Agent, Dream, DreamStatus, DreamUsage, Environment, Session, SessionUsage } from '../../shared/api/types'
import type { dreamCreateSchema, dreamListQuerySchema } from '../../shared/api/dream-schemas'
import { newId } from '../../shared/api/ids'
import { UPLOADS_DIR } from '../../shared/api/file-paths'
import { CorralError, invalid, isCorralError, notFound } from '../../shared/errors'
import type { Db } from './database'
import type { AgentStore } from './agent-store'
import type { EnvironmentStore, EnvironmentUpdateInput } from './environment-store'
import type { SessionStore } from './session-store'
import type { MemoryStore, MemoryWriteContext } from './memory-store'
import type { FileStore } from './file-store'
import type { SqliteEventLog } from './sqlite-event-log'
import { createdAtFilters, keysetList, type Page } from './pagination'
import { renderTranscript, TRANSCRIPT_EVENT_TYPES } from './dream-transcript'
import { StoreChanges } from './store-changes'
import { DREAM_METADATA, isDreamsOwn } from '../../shared/api/dreams'

export type DreamCreateInput = z.infer<typeof dreamCreateSchema>
export type DreamListQuery = z.infer<typeof dreamListQuerySchema>

/** What a dream was asked (the API object's fields that never change). */
interface DreamData {
  inputs: Dream['inputs']
  model: Dream['model']
  instructions: string | null
  output_behavior: Dream['output_behavior']
}

interface DreamRow {
  id: string
  created_at: string
  status: DreamStatus
  archived_at: string | null
  ended_at: string | null
  input_store_id: string
  target_store_id: string | null
  output_store_id: string | null
  reserved_session_id: string
  session_id: string | null
  finishing: string | null
  error: string | null
  data: string
}

/** How a running dream's session ended, recorded with its final status event. */
interface Finishing {
  status: 'completed' | 'failed'
  error?: { type: string; message: string }
}

/** What the dream runner (orchestrator/dream-runner.ts) is told after a commit. */
export type DreamChange = { kind: 'created' | 'finishing' | 'canceled'; id: string }

export interface DreamStoreOptions {
  agents: AgentStore
  environments: EnvironmentStore
  sessions: SessionStore
  memory: MemoryStore
  files?: FileStore
  log: SqliteEventLog
  clock?: () => Date
}

const DREAM_AGENT_NAME = 'Corral dreams'
/** A dream not ended: pending, or running with no ending recorded (SQL, for its time limit). */
const UNENDED = "(status = 'pending' OR (status = 'running' AND finishing IS NULL))"
const DEFAULT_PAGE = 20
/** Where a dream's session finds the transcripts of the sessions it reads. */
export const DREAM_TRANSCRIPTS_DIR = `${UPLOADS_DIR}/transcripts`

/** The system prompt of the agent that runs dreams: what a dream is for and how to do it. */
export const DREAM_SYSTEM = [
  'You reorganize a memory store: a folder of Markdown files that agents read at the start of their work and write to as they learn.',
  'You are given the transcripts of past sessions and the memory store. Read both, then rewrite the store so that the next agent finds what it needs:',
  '- keep what is true and useful; merge duplicates; fix what the sessions showed to be wrong or out of date, and remove what no longer holds;',
  '- add what the sessions learned that the store lacks (decisions, conventions, facts about the work, pitfalls and their fixes);',
  '- organize it into a few well-named files and folders, each about one subject, written plainly;',
  '- never copy secrets, tokens or personal data from the transcripts into the store.',
  'Work only inside the memory store folder (the transcripts are read-only). When the store is done, answer with a short summary of what you changed.',
].join('\n')

const ZERO_USAGE: DreamUsage = { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }

/**
 * Dreams (research preview; spec resources.md §11, docs/dreams.md): jobs that read a memory store
 * and past sessions' transcripts and write a reorganized store. A dream runs as a Corral session
 * of its own (`session_id`), on an agent and an environment Corral keeps for dreams, with the
 * output store mounted read-write and the transcripts as files. This store keeps the rows, starts
 * a dream's session (`start`, the runner calls it), and records how the session ended in the
 * transaction of its final status event (a batch projector on the log); the runner then releases
 * the session's hands (their last memory sync) and `finish`es the dream.
 */
export class DreamStore {
  private readonly clock: () => Date
  /** Each start, ending and cancel, told after its commit (the dream runner listens). */
  readonly changes = new StoreChanges<DreamChange>((err) => console.error('[corral] a dream listener failed:', err))
  /** recordFinishing's statement (prepared at its first use: see the constructor). */
  private setFinishing: Database.Statement | undefined

  constructor(
    private readonly db: Db,
    private readonly o: DreamStoreOptions,
  ) {
    this.clock = o.clock ?? (() => new Date())
    // prepared at the first final status event (stores opened over an older schema, as tests do, never need them)
    let running: Database.Statement | undefined
    const finished: string[] = []
    o.log.addBatchProjector((rid, stored) => {
      for (const { event } of stored) {
        const e = event as unknown as { type: string; session_thread_id?: string; stop_reason?: { type?: string } }
        if (e.type !== 'session.status_idle' && e.type !== 'session.status_terminated') continue
        const outcome = finishingOf(e)
        if (!outcome) continue
        running ??= db.prepare("SELECT d.id FROM dreams d JOIN sessions s ON s.id = d.session_id WHERE s.rid = ? AND d.status = 'running' AND d.finishing IS NULL").pluck()
        const id = running.get(rid) as string | undefined
        if (id && this.recordFinishing(id, outcome)) finished.push(id)
      }
    })
    // told after the commit (a listener may read the row the projector wrote)
    o.log.subscribeCommitted(() => {
      for (const id of finished.splice(0)) this.changes.notify({ kind: 'finishing', id })
    })
  }

  create(input: DreamCreateInput): Dream {
    const storeAt = input.inputs.findIndex((x) => x.type === 'memory_store')
    const sessionsAt = input.inputs.findIndex((x) => x.type === 'sessions')
    const storeId = (input.inputs[storeAt] as { memory_store_id: string }).memory_store_id
    const sessionIds = [...(input.inputs[sessionsAt] as { session_ids: string[] }).session_ids].sort()
    const store = this.findStore(storeId, `inputs[${storeAt}].memory_store_id`)
    if (store.archived_at) throw invalid(`inputs[${storeAt}].memory_store_id: memory store ${storeId} is archived; a dream reads a live store`)
    const given = (input.inputs[sessionsAt] as { session_ids: string[] }).session_ids
    given.forEach((id, i) => {
      if (!this.o.sessions.exists(id)) throw new CorralError('not_found_error', `inputs[${sessionsAt}].session_ids[${i}]: session ${JSON.stringify(id)} was not found`)
    })
    const updateExisting = input.output_behavior?.type === 'update_existing'
    const now = this.clock().toISOString()
    const data: DreamData = {
      inputs: input.inputs.map((x) => (x.type === 'sessions' ? { type: 'sessions', session_ids: sessionIds } : { type: 'memory_store', memory_store_id: x.memory_store_id })),
      model: typeof input.model === 'string' ? { id: input.model, speed: 'standard' } : { id: input.model.id, speed: 'standard' },
      instructions: input.instructions ?? null,
      output_behavior: updateExisting ? { type: 'update_existing', memory_store_id: storeId } : { type: 'create_new' },
    }
    const id = newId('dream', Date.parse(now))
    this.db.transaction(() => {
      if (updateExisting) {
        const holder = this.db
          .prepare("SELECT id FROM dreams WHERE target_store_id = ? AND (status IN ('pending', 'running') OR (finishing IS NOT NULL AND status = 'running')) LIMIT 1")
          .pluck()
          .get(storeId) as string | undefined
        if (holder) {
          throw new CorralError('conflict_error', `memory store ${storeId} is being updated by dream ${holder}, which has not stopped; wait for it to end or cancel it, then retry`, { shouldRetry: false })
        }
      }
      this.db
        .prepare(
          "INSERT INTO dreams (id, created_at, status, input_store_id, target_store_id, output_store_id, reserved_session_id, data) VALUES (?, ?, 'pending', ?, ?, ?, ?, ?)",
        )
        .run(id, now, storeId, updateExisting ? storeId : null, updateExisting ? storeId : null, newId('session', Date.parse(now)), JSON.stringify(data))
    })()
    this.changes.notify({ kind: 'created', id })
    return this.retrieve(id)
  }

  retrieve(id: string): Dream {
    return this.view(this.row(id))
  }

  list(q: DreamListQuery): Page<Dream> {
    const where: string[] = []
    const args: unknown[] = []
    if (!q.include_archived) where.push('archived_at IS NULL')
    if (q.statuses?.length) {
      where.push(`status IN (${q.statuses.map(() => '?').join(', ')})`)
      args.push(...q.statuses)
    }
    createdAtFilters(q, where, args)
    const page = keysetList<Dream, DreamRow>(this.db, { table: 'dreams', where, args, order: 'desc', limit: q.limit ?? DEFAULT_PAGE, page: q.page }, (row) => this.view(row))
    return { data: page.data, next_page: page.next_page }
  }

  /** Hides an ended dream from the default list: 400 while pending or running; an archived one comes back unchanged. */
  archive(id: string): Dream {
    const row = this.row(id)
    if (row.archived_at) return this.view(row)
    if (row.status === 'pending' || row.status === 'running') throw invalid(`dream ${id} is ${row.status}: only a completed, failed or canceled dream can be archived (cancel it first)`)
    this.db.prepare('UPDATE dreams SET archived_at = ? WHERE id = ? AND archived_at IS NULL').run(this.clock().toISOString(), id)
    return this.retrieve(id)
  }

  /** Stops a pending or running dream (its session is stopped by the runner); 400 once completed or failed; a canceled one comes back unchanged. */
  cancel(id: string): Dream {
    const row = this.row(id)
    if (row.status === 'canceled') return this.view(row)
    if (row.status === 'completed' || row.status === 'failed') throw invalid(`dream ${id} has ${row.status === 'completed' ? 'completed' : 'failed'}: only a pending or running dream can be canceled`)
    const changed = this.db.prepare("UPDATE dreams SET status = 'canceled', ended_at = ? WHERE id = ? AND status IN ('pending', 'running')").run(this.clock().toISOString(), id).changes
    if (changed) this.changes.notify({ kind: 'canceled', id })
    return this.retrieve(id)
  }

  /** The dreams the runner has to act on after a restart. */
  unsettled(): { pending: string[]; finishing: string[]; canceledSessions: string[] } {
    const ids = (sql: string) => this.db.prepare(sql).pluck().all() as string[]
    return {
      pending: ids("SELECT id FROM dreams WHERE status = 'pending' ORDER BY created_at, id"),
      finishing: ids("SELECT id FROM dreams WHERE status = 'running' AND finishing IS NOT NULL"),
      canceledSessions: ids(
        "SELECT d.session_id FROM dreams d JOIN sessions s ON s.id = d.session_id WHERE d.status = 'canceled' AND s.archived_at IS NULL",
      ),
    }
  }

  /** The session a dream runs in, once it has one. */
  sessionOf(id: string): string | null {
    return this.row(id).session_id
  }

  /** The session of a running dream whose session has ended (recorded, committed), else undefined. */
  endedSessionOf(id: string): string | undefined {
    const row = this.row(id)
    return row.status === 'running' && row.finishing && row.session_id ? row.session_id : undefined
  }

  /**
   * Starts a pending dream: its output store (a copy of the input store, for create_new), the
   * transcripts of its sessions as files, then its session (with the id it reserved; session_id
   * and status running written in the session's transaction). Each step is kept, so a start
   * stopped half-way goes on from where it was; a dream canceled meanwhile is left as it is.
   * A step that cannot be done fails the dream, naming why.
   */
  async start(id: string): Promise<Dream> {
    let row = this.row(id)
    if (row.status !== 'pending') return this.view(row)
    try {
      // its session exists only if session_id was written with it (one transaction): checked
      // anyway, before the transcripts are made again, so a recovery never touches a live session's files
      if (this.o.sessions.exists(row.reserved_session_id)) {
        this.db.prepare("UPDATE dreams SET session_id = ?, status = 'running' WHERE id = ? AND status = 'pending'").run(row.reserved_session_id, id)
        return this.retrieve(id)
      }
      if (!row.output_store_id) row = this.copyStore(row)
      const data = JSON.parse(row.data) as DreamData
      const files = await this.writeTranscripts(row, data)
      if (this.row(id).status !== 'pending') return this.retrieve(id)
      const { agent, environment } = this.dreamAgent(data.model.id)
      const output = this.o.memory.retrieveStore(row.output_store_id!)
      await this.o.sessions.create(
        {
          agent: { type: 'agent', id: agent.id, version: agent.version },
          environment_id: environment.id,
          title: `Dream ${id}`,
          metadata: { corral_dream_id: id },
          resources: [
            {
              type: 'memory_store',
              memory_store_id: output.id,
              access: 'read_write',
              instructions: 'The store this dream rewrites.',
            },
            ...files.map((f) => ({ type: 'file' as const, file_id: f.fileId, mount_path: `transcripts/${f.sessionId}.md` })),
          ],
          initial_events: [{ type: 'user.message', content: [{ type: 'text', text: this.prompt(data, output.name, files.map((f) => f.sessionId)) }] }],
        },
        {
          sessionId: row.reserved_session_id,
          inCommit: (session: Session) => {
            const n = this.db.prepare("UPDATE dreams SET session_id = ?, status = 'running' WHERE id = ? AND status = 'pending'").run(session.id, id).changes
            if (n === 0) throw new CorralError('conflict_error', `dream ${id} was canceled while it started`)
          },
        },
      )
    } catch (err) {
      const now = this.row(id)
      if (now.status !== 'pending') return this.view(now)
      const message = isCorralError(err) ? err.message : (err as Error).message
      this.fail(id, { type: isCorralError(err) && err.code !== 'api_error' ? 'invalid_request_error' : 'internal_error', message: `the dream could not start: ${message}` })
    }
    return this.retrieve(id)
  }

  /** A running dream whose session ended takes the status that ending gave it (after its hands were released). */
  finish(id: string): Dream {
    const row = this.row(id)
    if (row.status !== 'running' || !row.finishing) return this.view(row)
    const f = JSON.parse(row.finishing) as Finishing
    this.db
      .prepare("UPDATE dreams SET status = ?, error = ?, ended_at = ? WHERE id = ? AND status = 'running'")
      .run(f.status, f.error ? JSON.stringify(f.error) : null, this.clock().toISOString(), id)
    return this.retrieve(id)
  }

  /**
   * The dream whose time limit comes first among those not ended: pending, or running with no
   * ending recorded (the runner arms its timer for it).
   */
  firstUnended(): { id: string; created_at: string } | undefined {
    return this.db.prepare(`SELECT id, created_at FROM dreams WHERE ${UNENDED} ORDER BY created_at, id LIMIT 1`).get() as { id: string; created_at: string } | undefined
  }

  /** The dreams not ended (as firstUnended) that were created before `before` (an ISO time), oldest first. */
  unendedBefore(before: string): string[] {
    return this.db.prepare(`SELECT id FROM dreams WHERE ${UNENDED} AND created_at < ? ORDER BY created_at, id`).pluck().all(before) as string[]
  }

  /**
   * Ends a dream that ran past its time limit (`limitMs` from its creation, for the message): a
   * pending one fails at once; for a running one the timeout is recorded as its session's ending,
   * and the runner stops the session and finishes the dream as for any ending (what the session
   * wrote to the output store stays there). False when the dream ended, or its ending was
   * recorded, meanwhile.
   */
  timeOut(id: string, limitMs: number): boolean {
    const row = this.row(id)
    const kept = row.output_store_id ? `; what it wrote so far is kept in memory store ${row.output_store_id}` : ''
    const error = { type: 'timeout', message: `the dream did not finish within its time limit of ${describeDuration(limitMs)} (Settings → Dream time limit; dream_time_limit_minutes in the settings API), so its session was stopped${kept}` }
    if (row.status === 'pending') {
      return this.db.prepare("UPDATE dreams SET status = 'failed', error = ?, ended_at = ? WHERE id = ? AND status = 'pending'").run(JSON.stringify(error), this.clock().toISOString(), id).changes > 0
    }
    const recorded = this.recordFinishing(id, { status: 'failed', error })
    if (recorded) this.changes.notify({ kind: 'finishing', id })
    return recorded
  }

  /**
   * Records how a running dream ended, unless an ending was recorded already (its session's final
   * status and its time limit race: the first one wins); true when this one was.
   */
  private recordFinishing(id: string, f: Finishing): boolean {
    this.setFinishing ??= this.db.prepare("UPDATE dreams SET finishing = ? WHERE id = ? AND status = 'running' AND finishing IS NULL")
    return this.setFinishing.run(JSON.stringify(f), id).changes > 0
  }


  private fail(id: string, error: { type: string; message: string }): void {
    this.db.prepare("UPDATE dreams SET status = 'failed', error = ?, ended_at = ? WHERE id = ? AND status IN ('pending', 'running')").run(JSON.stringify(error), this.clock().toISOString(), id)
  }

  private copyStore(row: DreamRow): DreamRow {
    const source = this.o.memory.retrieveStore(row.input_store_id)
    if (source.archived_at) throw invalid(`memory store ${source.id} was archived before the dream started`)
    const ctx: MemoryWriteContext = { actor: { type: 'session_actor', session_id: row.reserved_session_id } }
    this.db.transaction(() => {
      const copy = this.o.memory.createStore({
        name: `${source.name} (dream)`.slice(0, 255),
        description: `Written by dream ${row.id} from ${source.id}${source.description ? `: ${source.description}` : ''}`.slice(0, 1024),
        metadata: { corral_dream_id: row.id, corral_dream_source: source.id },
      })
      for (const m of this.o.memory.snapshot(source.id)) this.o.memory.createMemory(copy.id, { path: m.path, content: m.content }, ctx)
      this.db.prepare('UPDATE dreams SET output_store_id = ? WHERE id = ? AND output_store_id IS NULL').run(copy.id, row.id)
    })()
    return this.row(row.id)
  }

  /** Each input session's transcript as a file scoped to the dream's session (made again on a restarted start). */
  private async writeTranscripts(row: DreamRow, data: DreamData): Promise<{ sessionId: string; fileId: string }[]> {
    const files = this.o.files
    if (!files) throw new CorralError('api_error', 'this engine keeps no files, so a dream cannot be given its transcripts')
    const ids = (data.inputs.find((x) => x.type === 'sessions') as { session_ids: string[] }).session_ids
    files.deleteSessionFiles(row.reserved_session_id)
    const out: { sessionId: string; fileId: string }[] = []
    for (const sessionId of ids) {
      const session = this.o.sessions.retrieve(sessionId)
      const text = renderTranscript(session, this.events(sessionId))
      const file = await files.createFromBytes(Buffer.from(text, 'utf8'), {
        filename: `${sessionId}.md`,
        mimeType: 'text/markdown',
        scopeSessionId: row.reserved_session_id,
      })
      out.push({ sessionId, fileId: file.id })
    }
    return out
  }

  private *events(sessionId: string) {
    let after = 0
    for (;;) {
      const page = this.o.log.read(sessionId, { after, limit: 1000, types: TRANSCRIPT_EVENT_TYPES })
      for (const e of page) yield e.event
      if (page.length < 1000) return
      after = page[page.length - 1].seq
    }
  }

  private prompt(data: DreamData, storeName: string, sessionIds: string[]): string {
    return [
      `Reorganize the memory store "${storeName}" (mounted read-write; its path is in your system prompt) using the transcripts of ${sessionIds.length} past session${sessionIds.length === 1 ? '' : 's'}:`,
      ...sessionIds.map((id) => `- ${DREAM_TRANSCRIPTS_DIR}/${id}.md`),
      data.instructions ? `\nGuidance for this dream:\n${data.instructions}` : '',
    ]
      .filter(Boolean)
      .join('\n')
  }

  /**
   * The agent (at the dream's model) and environment Corral runs dreams with, made or mended as
   * needed: a prompt, model or tools changed on the agent are put back (an update that changes
   * nothing makes no new version), and so is a network rule changed on the environment.
   */
  private dreamAgent(model: string): { agent: Agent; environment: Environment } {
    const mine = (x: { metadata?: Record<string, string> | null; archived_at: string | null }) => !x.archived_at && isDreamsOwn(x)
    const tools = [{ type: 'agent_toolset_20260401' as const, default_config: { enabled: true, permission_policy: { type: 'always_allow' as const } }, configs: [{ name: 'web_fetch' as const, enabled: false }, { name: 'web_search' as const, enabled: false }] }]
    let agent = this.findMine((page) => this.o.agents.list({ limit: 100, page }) as Page<Agent>, mine)
    if (!agent) agent = this.o.agents.create({ name: DREAM_AGENT_NAME, model, system: DREAM_SYSTEM, tools, metadata: { ...DREAM_METADATA } })
    else agent = this.o.agents.update(agent.id, { version: agent.version, model, system: DREAM_SYSTEM, tools })
    const networking = { type: 'limited' as const, allowed_hosts: [], allow_package_managers: false, allow_mcp_servers: false }
    let environment = this.findMine((page) => this.o.environments.list({ limit: 100, page }) as Page<Environment>, mine)
    if (!environment) {
      environment = this.o.environments.create({
        name: 'Corral dreams',
        description: 'The sandbox Corral runs dreams in (no network).',
        config: { type: 'cloud', networking },
        metadata: { ...DREAM_METADATA },
      })
    } else {
      const n = (environment.config as { networking?: { type?: string; allowed_hosts?: unknown[]; allow_package_managers?: boolean; allow_mcp_servers?: boolean } }).networking
      const closed = n?.type === 'limited' && !n.allowed_hosts?.length && !n.allow_package_managers && !n.allow_mcp_servers
      if (!closed) environment = this.o.environments.update(environment.id, { config: { ...environment.config, type: 'cloud', networking } as EnvironmentUpdateInput['config'] })
    }
    return { agent, environment }
  }

  private findMine<T extends { metadata?: Record<string, string> | null; archived_at: string | null }>(list: (page?: string) => Page<T>, mine: (x: T) => boolean): T | undefined {
    for (let page = list(); ; page = list(page.next_page!)) {
      const found = page.data.find(mine)
      if (found || !page.next_page) return found
    }
  }

  private findStore(id: string, field: string) {
    try {
      return this.o.memory.retrieveStore(id)
    } catch (err) {
      if (isCorralError(err) && err.code === 'not_found_error') throw new CorralError('not_found_error', `${field}: memory store ${JSON.stringify(id)} was not found`)
      throw err
    }
  }

  private row(id: string): DreamRow {
    const row = this.db.prepare('SELECT * FROM dreams WHERE id = ?').get(id) as DreamRow | undefined
    if (!row) throw notFound('dream', id)
    return row
  }

  private view(row: DreamRow): Dream {
    const data = JSON.parse(row.data) as DreamData
    return {
      type: 'dream',
      id: row.id,
      status: row.status,
      inputs: data.inputs,
      model: data.model,
      instructions: data.instructions,
      output_behavior: data.output_behavior,
      outputs: row.output_store_id ? [{ type: 'memory_store', memory_store_id: row.output_store_id }] : [],
      session_id: row.session_id,
      error: row.error ? (JSON.parse(row.error) as Dream['error']) : null,
      usage: row.session_id ? this.usageOf(row.session_id) : { ...ZERO_USAGE },
      created_at: row.created_at,
      ended_at: row.ended_at,
      archived_at: row.archived_at,
    }
  }

  private usageOf(sessionId: string): DreamUsage {
    const raw = this.db.prepare('SELECT usage FROM sessions WHERE id = ?').pluck().get(sessionId) as string | undefined
    if (!raw) return { ...ZERO_USAGE }
    const u = JSON.parse(raw) as SessionUsage
    const cc = u.cache_creation
    return {
      input_tokens: u.input_tokens ?? 0,
      output_tokens: u.output_tokens ?? 0,
      cache_read_input_tokens: u.cache_read_input_tokens ?? 0,
      cache_creation_input_tokens: (cc?.ephemeral_5m_input_tokens ?? 0) + (cc?.ephemeral_1h_input_tokens ?? 0),
    }
  }
}

/** "1 hour", "90 minutes", "45 seconds", "300 ms": a time limit as a person reads it. */
function describeDuration(ms: number): string {
  const plural = (n: number, unit: string) => `${n} ${unit}${n === 1 ? '' : 's'}`
  if (ms % 3_600_000 === 0) return plural(ms / 3_600_000, 'hour')
  if (ms % 60_000 === 0) return plural(ms / 60_000, 'minute')
  if (ms % 1000 === 0) return plural(ms / 1000, 'second')
  return `${ms} ms`
}

/** How a dream's session ending ends the dream (undefined: not an ending, e.g. waiting on a confirmation). */
function finishingOf(e: { type: string; session_thread_id?: string; stop_reason?: { type?: string } }): Finishing | undefined {
  if (e.type === 'session.status_terminated') return { status: 'failed', error: { type: 'internal_error', message: 'the dream\'s session was terminated' } }
  switch (e.stop_reason?.type) {
    case 'end_turn':
      return { status: 'completed' }
    case 'retries_exhausted':
      return { status: 'failed', error: { type: 'model_error', message: 'the model could not be reached: the dream\'s session gave up retrying (its events say why)' } }
    case 'budget_reached':
      return { status: 'failed', error: { type: 'budget_exceeded', message: 'the dream\'s session reached its budget' } }
    case 'refusal':
      return { status: 'failed', error: { type: 'refusal', message: 'the model declined to do the dream' } }
    default:
      return undefined
  }
}
