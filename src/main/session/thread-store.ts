import type { BetaManagedAgentsSessionThread as SessionThread } from '@anthropic-ai/sdk/resources/beta/sessions/threads/threads'
import { primaryThreadId } from '../../shared/api/ids'
import { invalid, notFound } from '../../shared/errors'
import { STATUS_EVENT_TYPES, statusChangeOf } from '../../shared/api/events'
import type { Session } from '../../shared/api/types'
import { countChildSlots } from '../../shared/api/thread-slots'
import { listCostCents, monetaryAmount } from '../../shared/api/pricing'
import type { SessionStore } from './session-store'
import type { SqliteEventLog } from './sqlite-event-log'
import type { Page } from './pagination'
import { openWorkflowRuns, workflowRunOpenError } from './workflow-store'

export type { SessionThread }
type ThreadStatus = SessionThread['status']


/** What a thread's fold reads: its creation, the status events (the shared table) and its model requests' usage. */
const THREAD_EVENT_TYPES = ['session.thread_created', ...STATUS_EVENT_TYPES, 'span.model_request_end']

interface ThreadFold {
  thread: SessionThread
  /** The name its lifecycle events carry (`agent_name` of its `session.thread_created`). */
  agentName: string
  runningSince: number | null
  activeMs: number
  firstRunningAt: number | null
  sawStatus: boolean
  sawIdle: boolean
  usage: Record<string, unknown>
  /** The list cost of the thread's model requests so far, in unrounded US cents (each priced at the model its span end names). */
  costCents: number
}

export interface ThreadListQuery {
  statuses?: readonly ThreadStatus[]
  limit?: number
  page?: string
}

/**
 * Session threads, derived from the log (the log is the truth; no table holds thread state).
 * A child thread starts at its `session.thread_created` event; its status follows its
 * `session.thread_status_*` events; its usage sums the `span.model_request_end` events logged on it.
 *
 * Corral's harness may add two fields to `session.thread_created` beyond the API's
 * (`agent_name`, `session_thread_id`, `workflow_run_id`): `agent` (the resolved agent snapshot)
 * and `parent_thread_id`. Without them the thread's agent is the session's agent when the names
 * match, else an inline agent named `agent_name` on the session agent's model, and its parent is
 * the primary thread (multi-agent is one level deep).
 */
export class ThreadStore {
  /**
   * Folds per session, advanced incrementally: the log is append-only and a seq is assigned
   * under the write lock, so nothing can appear at or below a seq already folded.
   */
  private readonly folds = new Map<string, SessionFold>()

  private readonly log: SqliteEventLog
  private readonly sessions: SessionStore
  private readonly clock: () => Date

  constructor(options: { log: SqliteEventLog; sessions: SessionStore; clock?: () => Date }) {
    this.log = options.log
    this.sessions = options.sessions
    this.clock = options.clock ?? (() => new Date())
  }

  /** Every thread of a session, primary first then in creation order (ascending created_at). */
  all(sessionId: string): SessionThread[] {
    return this.derive(sessionId, true)
  }

  /**
   * `cached: false` folds the log from the start without touching the cache: for reads inside an
   * append's transaction, which may yet roll back (the cache must never hold an event that was not committed).
   */
  private derive(sessionId: string, cached: boolean): SessionThread[] {
    const session = this.sessions.retrieve(sessionId)
    let sf = cached ? this.folds.get(sessionId) : undefined
    if (!sf || sf.createdAt !== session.created_at) {
      const primary = newFold(newThread(session, primaryThreadId(sessionId), null, primaryAgent(session), session.created_at, null), session.agent.name)
      sf = { createdAt: session.created_at, lastSeq: 0, byThread: new Map([[null, primary]]), order: [primary], running: 0, unionMs: 0, unionSince: 0, primaryOwnStatus: false }
    }
    // Most recently used last; a bounded number of sessions keep their fold.
    if (cached) {
      this.folds.delete(sessionId)
      this.folds.set(sessionId, sf)
      if (this.folds.size > MAX_CACHED_SESSIONS) this.folds.delete(this.folds.keys().next().value as string)
    }
    const fold = sf
    const primary = fold.order[0]
    this.log.scan(sessionId, { after: fold.lastSeq, types: THREAD_EVENT_TYPES }, (row) => {
      fold.lastSeq = row.seq
      const tid = row.threadId
      if (row.type === 'session.thread_created') {
        if (tid === null || fold.byThread.has(tid)) return
        const e = JSON.parse(row.data) as { agent_name?: string; agent?: unknown; parent_thread_id?: string | null; workflow_run_id?: string | null }
        const f = newFold(
          newThread(session, tid, e.parent_thread_id ?? primary.thread.id, childAgent(session, e.agent_name ?? 'agent', e.agent), row.processedAt, e.workflow_run_id ?? null),
          e.agent_name ?? 'agent',
        )
        f.thread.status = 'running'
        setRunning(fold, f, Date.parse(row.processedAt), true)
        f.firstRunningAt = f.runningSince
        fold.byThread.set(tid, f)
        fold.order.push(f)
        return
      }
      if (row.type === 'span.model_request_end') {
        const f = fold.byThread.get(tid)
        if (!f) return
        const e = JSON.parse(row.data) as { model_usage?: Record<string, unknown>; model?: unknown }
        addUsage(f.usage, e.model_usage)
        f.costCents += costOf(typeof e.model === 'string' ? e.model : modelOf(f.thread.agent), e.model_usage)
        return
      }
      // Session-level status events describe the primary thread; thread_status_* name theirs (statusChangeOf).
      const change = statusChangeOf({ type: row.type, session_thread_id: tid })
      const f = change && fold.byThread.get(change.thread)
      if (!f) return
      // Once the primary writes its own thread_status_* (a multi-agent runtime does), the
      // session's status_* are the aggregate of every thread, no longer the primary's.
      if (f === primary && change.scope === 'thread') fold.primaryOwnStatus = true
      if (f === primary && change.scope === 'session' && fold.primaryOwnStatus) return
      const status = change.status
      const at = Date.parse(row.processedAt)
      setRunning(fold, f, at, status === 'running')
      if (status === 'running' && f.firstRunningAt === null) f.firstRunningAt = at
      if (status === 'idle') f.sawIdle = true
      // An archive's terminated event dates archived_at (and freezes duration_seconds there).
      if (status === 'terminated' && f.thread.archived_at === null && (JSON.parse(row.data) as { archived?: unknown }).archived === true) f.thread.archived_at = row.processedAt
      f.sawStatus = true
      f.thread.status = status
      f.thread.updated_at = row.processedAt
    })
    const now = this.clock().getTime()
    // Without status events of its own, the primary thread's status is the session's (its
    // projection is the authority).
    return fold.order.map((f, i) => finish(f, now, i === 0 && (!fold.primaryOwnStatus || session.status === 'terminated') ? session.status : undefined))
  }

  /** This store's clock, in ms (what its stats are computed at). */
  now(): number {
    return this.clock().getTime()
  }

  /**
   * The session's active time from its threads' status events (spec §3.1): `union_seconds` counts
   * wall time with at least one thread running once (the session's `usage.active_seconds`),
   * `sum_seconds` adds up each thread's own active time (the session's `stats.active_seconds`).
   */
  activity(sessionId: string): SessionActivity {
    const threads = this.all(sessionId)
    const sf = this.folds.get(sessionId) as SessionFold
    const now = this.clock().getTime()
    const unionMs = sf.unionMs + (sf.running > 0 ? Math.max(0, now - sf.unionSince) : 0)
    return { union_seconds: unionMs / 1000, sum_seconds: threads.reduce((n, t) => n + (t.stats?.active_seconds ?? 0), 0) }
  }

  /**
   * The session's child threads that hold a slot under the limit of MAX_LIVE_CHILD_THREADS (spec
   * §3.3): every child not terminated (idle ones too; archiving frees the slot), but advisor
   * consultations and workflow-run threads, which never count.
   */
  liveChildCount(sessionId: string): number {
    return countChildSlots(this.all(sessionId).map((t) => ({ parentThreadId: t.parent_thread_id, status: t.status, agentType: t.agent.type, workflowRunId: t.workflow_run_id })))
  }

  /**
   * `POST /v1/sessions/{id}/threads/{tid}/archive` (spec §3.4): an idle child thread (an idle
   * with `requires_action` too) is terminated by a `session.thread_status_terminated` marked
   * `archived`, which dates its `archived_at`; it stays listed, terminated, and frees its slot.
   * A thread already terminated (archived, or ended by a failure) is answered as it is: nothing
   * is written. Errors: not_found_error for a thread the session does not have; invalid_request_error
   * for the primary thread (archive the session instead) and for a thread that is running or
   * rescheduling (interrupt it first). Checked again inside the append's transaction, so a turn
   * that starts meanwhile cannot be cut off by an archive that read the thread idle.
   */
  async archive(sessionId: string, threadId: string): Promise<SessionThread> {
    const check = (cached: boolean): SessionThread | 'archive' => {
      if (threadId === primaryThreadId(sessionId)) {
        this.sessions.retrieve(sessionId)
        throw invalid(`thread ${threadId} is the primary thread of session ${sessionId}; it cannot be archived (archive the session instead)`)
      }
      const t = this.derive(sessionId, cached).find((x) => x.id === threadId)
      if (!t) throw notFound(`thread of session ${sessionId}`, threadId)
      if (t.status === 'terminated') return t
      // a run's thread is Corral's to archive while its run is open (spec §6.5, §6.9)
      if (t.workflow_run_id && openWorkflowRuns(this.log, sessionId).some((r) => r.id === t.workflow_run_id)) {
        throw workflowRunOpenError(`thread ${threadId} belongs to workflow run ${t.workflow_run_id}, which is open; Corral archives a run's threads itself once the program is done with them (at the latest when the run ends)`)
      }
      if (t.status !== 'idle') {
        throw invalid(`thread ${threadId} is ${t.status}; only an idle thread can be archived (interrupt it first: user.interrupt with session_thread_id ${threadId})`)
      }
      return 'archive'
    }
    const first = check(true)
    if (first !== 'archive') return first
    const agentName = this.folds.get(sessionId)?.byThread.get(threadId)?.agentName ?? 'agent'
    let unchanged: SessionThread | undefined
    await this.log.append(
      sessionId,
      [{ type: 'session.thread_status_terminated', session_thread_id: threadId, agent_name: agentName, archived: true }],
      {
        precheck: () => {
          unchanged = undefined
          const now = check(false)
          // Terminated meanwhile (another archive, a failure): answer that thread, write nothing.
          if (now !== 'archive') {
            unchanged = now
            throw new Error('thread already terminated')
          }
        },
      },
    ).catch((err: unknown) => {
      if (!unchanged) throw err
    })
    return unchanged ?? this.retrieve(sessionId, threadId)
  }

  retrieve(sessionId: string, threadId: string): SessionThread {
    const t = this.all(sessionId).find((x) => x.id === threadId)
    if (!t) throw notFound(`thread of session ${sessionId}`, threadId)
    return t
  }

  /**
   * The log's key for a thread's events: null for the primary thread, the id for a child.
   * Throws not_found_error for a thread the session does not have.
   */
  logKey(sessionId: string, threadId: string): string | null {
    if (threadId === primaryThreadId(sessionId)) {
      this.sessions.retrieve(sessionId)
      return null
    }
    const created = this.log.read(sessionId, { types: ['session.thread_created'], threadId, limit: 1 })
    if (created.length === 0) throw notFound(`thread of session ${sessionId}`, threadId)
    return threadId
  }

  list(sessionId: string, q: ThreadListQuery): Page<SessionThread> {
    let rows = this.all(sessionId)
    if (q.statuses?.length) rows = rows.filter((t) => q.statuses!.includes(t.status))
    const limit = q.limit ?? THREAD_PAGE_SIZE
    let start = 0
    if (q.page) {
      const raw = Buffer.from(q.page, 'base64url').toString()
      const n = Number(raw.slice(1))
      if (raw[0] !== 't' || !Number.isInteger(n) || n < 0) throw invalid('page: not a cursor this server issued')
      start = n
    }
    const data = rows.slice(start, start + limit)
    const end = start + data.length
    return { data, next_page: end < rows.length ? Buffer.from(`t${end}`).toString('base64url') : null }
  }
}

const MAX_CACHED_SESSIONS = 256
/** The API's default page size of the thread list (spec §3.2, §11). */
export const THREAD_PAGE_SIZE = 1000

interface SessionFold {
  createdAt: string
  lastSeq: number
  byThread: Map<string | null, ThreadFold>
  order: ThreadFold[]
  /** Threads running now, and the wall time with at least one running (overlap once): done, and since when it runs. */
  running: number
  unionMs: number
  unionSince: number
  /** The primary has status events of its own (see the fold). */
  primaryOwnStatus: boolean
}

/** A thread starts or stops running at `at`: its own active time, and the session's union of them. */
function setRunning(sf: SessionFold, f: ThreadFold, at: number, running: boolean): void {
  const was = f.runningSince !== null
  if (was) f.activeMs += at - (f.runningSince as number)
  f.runningSince = running ? at : null
  if (running && !was && sf.running++ === 0) sf.unionSince = at
  if (!running && was && --sf.running === 0) sf.unionMs += at - sf.unionSince
}

/** A session's active time (spec §3.1): `union`, wall time with at least one thread running (usage.active_seconds); `sum`, each thread's own (stats.active_seconds). */
export interface SessionActivity {
  union_seconds: number
  sum_seconds: number
}

function newFold(thread: SessionThread, agentName: string): ThreadFold {
  return { thread, agentName, runningSince: null, activeMs: 0, firstRunningAt: null, sawStatus: false, sawIdle: false, usage: {}, costCents: 0 }
}

function newThread(
  session: Session,
  id: string,
  parent: string | null,
  agent: SessionThread['agent'],
  createdAt: string,
  workflowRunId: string | null,
): SessionThread {
  return {
    type: 'session_thread',
    id,
    session_id: session.id,
    parent_thread_id: parent,
    agent,
    status: 'idle',
    archived_at: null,
    created_at: createdAt,
    updated_at: createdAt,
    stats: null,
    usage: null,
    workflow_run_id: workflowRunId,
  }
}

function primaryAgent(session: Session): SessionThread['agent'] {
  const { multiagent: _m, ...agent } = session.agent as Session['agent'] & { multiagent?: unknown }
  return agent as SessionThread['agent']
}

function childAgent(session: Session, name: string, given: unknown): SessionThread['agent'] {
  if (given && typeof given === 'object' && typeof (given as { type?: unknown }).type === 'string') return given as SessionThread['agent']
  if (name === session.agent.name) return primaryAgent(session)
  const a = session.agent
  return {
    type: 'inline',
    name,
    description: null,
    model: a.model,
    system: null,
    tools: [],
    mcp_servers: [],
    skills: [],
    execution_identity: a.execution_identity,
  } as SessionThread['agent']
}

function addUsage(usage: Record<string, unknown>, delta: Record<string, unknown> | undefined): void {
  if (!delta) return
  for (const k of ['input_tokens', 'output_tokens', 'cache_read_input_tokens'] as const) {
    if (typeof delta[k] === 'number') usage[k] = ((usage[k] as number | undefined) ?? 0) + delta[k]
  }
  if (typeof delta.cache_creation_input_tokens === 'number') {
    const cc = (usage.cache_creation as Record<string, number> | undefined) ?? {}
    // A new object: threads handed out earlier share the old one.
    usage.cache_creation = { ...cc, ephemeral_5m_input_tokens: (cc.ephemeral_5m_input_tokens ?? 0) + delta.cache_creation_input_tokens }
  }
}

/** The list cost of one request's usage (a span end's `model_usage`), in cents; 0 without usage. */
function costOf(model: string, u: Record<string, unknown> | undefined): number {
  if (!u) return 0
  const n = (k: string) => (typeof u[k] === 'number' ? (u[k] as number) : 0)
  return listCostCents(model, { input_tokens: n('input_tokens'), output_tokens: n('output_tokens'), cache_creation_input_tokens: n('cache_creation_input_tokens'), cache_read_input_tokens: n('cache_read_input_tokens') })
}

/** The model id a thread's agent runs (a string or `{id}`); '' when it names none (priced at the default). */
function modelOf(agent: SessionThread['agent']): string {
  const m = (agent as { model?: unknown }).model
  return typeof m === 'string' ? m : typeof (m as { id?: unknown } | undefined)?.id === 'string' ? (m as { id: string }).id : ''
}

function finish(f: ThreadFold, now: number, statusOverride: ThreadStatus | undefined): SessionThread {
  // A copy: the fold stays as the log left it, ready for the next events.
  const t: SessionThread = { ...f.thread, status: statusOverride ?? f.thread.status }
  const created = Date.parse(t.created_at)
  const end = t.status === 'terminated' ? Date.parse(t.updated_at) : now
  const activeMs = f.activeMs + (f.runningSince !== null ? Math.max(0, now - f.runningSince) : 0)
  const isPrimary = t.parent_thread_id === null
  // Null until the thread's first status transition (for a child: its first thread_status_*).
  if (f.sawStatus) {
    t.stats = {
      active_seconds: activeMs / 1000,
      duration_seconds: Math.max(0, end - created) / 1000,
      startup_seconds: isPrimary ? (f.firstRunningAt !== null ? (f.firstRunningAt - created) / 1000 : 0) : 0,
    }
  }
  // list_cost: this thread's model requests at list prices, rounded on its own (spec §3.1: threads never sum exactly to the session's figure)
  if (f.sawIdle) t.usage = { ...(f.usage as SessionThread['usage'] & object), active_seconds: activeMs / 1000, list_cost: monetaryAmount(f.costCents) }
  return t
}
