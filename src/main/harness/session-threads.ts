/**
 * The threads of one session as the log says, for the runtime: its children (agent, parent,
 * status, what each waits on), the primary thread's own status, the session's aggregate status,
 * and the usage of every thread (the one budget they share). Folded incrementally from the log's
 * status, creation, message and span events; nothing here is kept that the log does not hold.
 */
import { statusChangeOf, type SessionStatus } from '../../shared/api/events'
import { countChildSlots } from '../../shared/api/thread-slots'
import type { EventInput, EventLog, StoredEvent } from '../session/event-log'
import type { ModelUsage } from './model-client'
import { listCostCents, monetaryAmount } from '../../shared/api/pricing'
import type { AgentToolConfig } from './tools'


/** An agent definition a thread runs (a session snapshot: the session agent, a listed agent, a `self` copy or an inline agent). */
export interface ThreadAgent {
  type?: string
  id?: string
  version?: number
  name: string
  description?: string | null
  model: string | { id: string }
  system?: string | null
  tools?: readonly AgentToolConfig[]
  mcp_servers?: readonly unknown[]
  skills?: readonly unknown[]
}

export type StopReason = { type: string; event_ids?: string[] }

export interface ThreadFacts {
  status: SessionStatus
  lastIdle?: StopReason
  /** seq of the last `agent.thread_message_received` on the thread (0: none); for the primary, also of a run's `workflow_run.status_ended` (its reading turn's input). */
  lastReceivedSeq: number
  /** seq of the thread's last idle (undefined: none yet). */
  idleSeq?: number
}

export interface ChildThread extends ThreadFacts {
  id: string
  agentName: string
  agent?: ThreadAgent
  parentId: string | null
  createdSeq: number
  /** An advisor consultation (`agent.type: 'advisor'`, advisor.ts): it has no brain of its own and holds no slot under the 25. */
  advisor: boolean
  /** The workflow run the thread belongs to (such a thread holds no slot under the 25). */
  workflowRunId: string | null
}

/** Session-level aggregate status: running while any thread runs, else rescheduling while any thread retries a model request, else idle with the reason §4.4 gives. */
export type AggregateStatus = { status: 'running' } | { status: 'rescheduling' } | { status: 'idle'; stop_reason: StopReason }

const TYPES = [
  'session.thread_created',
  'session.thread_status_running',
  'session.thread_status_idle',
  'session.thread_status_rescheduled',
  'session.thread_status_terminated',
  'session.status_running',
  'session.status_idle',
  'session.status_rescheduled',
  'session.status_terminated',
  'span.model_request_end',
  'span.outcome_evaluation_end',
  'agent.thread_message_received',
  'workflow_run.created',
  'workflow_run.status_running',
  'workflow_run.status_idle',
  'workflow_run.status_ended',
]

export class SessionThreads {
  lastSeq = 0
  /** The children by id (in a fork: only those the fork created or changed; read a fork through child() and allChildren()). */
  readonly children = new Map<string, ChildThread>()
  readonly primary: ThreadFacts = { status: 'idle', lastReceivedSeq: 0 }
  /** The session's own (aggregate) status as its `session.status_*` events set it. */
  readonly session: { status: SessionStatus; lastIdle?: StopReason } = { status: 'idle' }
  readonly usageByModel = new Map<string, ModelUsage>()
  /**
   * Threads running now (log key; '' the primary), and the wall time with at least one running:
   * done (ms), and since when. A fork's set is what it changed over its origin's (a status batch
   * of a workflow run's session previews against dozens of running threads: copying the set per
   * preview was a visible share of a run's allocations).
   */
  private running = new RunningSet()
  /** Forked since the running set was last copied: the fork reads it, so a change goes to a copy. */
  private runningShared = false
  unionMs = 0
  unionSince = 0
  /** A thread wrote a status of its own (a multi-agent session): the session's status_* no longer time the activity. */
  threadStatuses = false
  /** Open workflow runs and whether each is running or paused (idle): a running run keeps the session running (spec §6.7). */
  readonly runs = new Map<string, 'running' | 'idle'>()
  /** seq of the last `workflow_run.status_ended` (0: none): the primary reads it in a turn of its own. */
  runEndSeq = 0
  /**
   * How many threads (the primary and every child) are running, rescheduling, idle waiting on
   * the client, idle at the budget: the aggregate reads these instead of walking every thread
   * (a workflow run's session has up to a thousand children, and a status batch asks twice).
   */
  private readonly tally = { running: 0, rescheduling: 0, requiresAction: 0, budgetReached: 0 }
  /** In a fork (preview): the fold it came from, whose children it reads until it changes one (then it holds a copy). */
  private base: SessionThreads | undefined

  constructor(
    readonly sessionId: string,
    readonly primaryId: string,
  ) {}

  /**
   * Reads what the log appended since the last call (with `before`: only events before that seq,
   * e.g. the first one an uncommitted transaction wrote, which this fold must never hold).
   */
  catchUp(log: Pick<EventLog, 'read'>, before?: number): this {
    for (;;) {
      // what is committed, on disk or not: a brain woken at a commit (orchestrator/scheduler.ts) finds its thread here
      const page = log.read(this.sessionId, { after: this.lastSeq, ...(before !== undefined ? { before } : {}), types: TYPES, limit: 1000, includeUnsynced: true })
      for (const r of page) this.apply(r.seq, r.event as unknown as Record<string, unknown> & { type: string })
      if (page.length < 1000) return this
    }
  }

  /**
   * The session's threads as an append's transaction has the log (EventsAtCommit): this fold
   * caught up on what is committed, and, when the transaction already wrote events of the
   * session, a copy with those folded in (the fold itself only ever holds committed events).
   * Within one group transaction every status append of the session asks again, with the group's
   * events so far: the copy the last one made goes on from where it was (a burst of 64 threads
   * ending together re-applied each earlier append's events for every later one: O(k²)). It is
   * made afresh when this fold moved on, or when the events it holds are not the group's (a group
   * redone after a rollback makes new ones).
   */
  atCommit(log: Pick<EventLog, 'read'>, earlier: readonly StoredEvent[]): SessionThreads {
    this.catchUp(log, earlier[0]?.seq)
    if (earlier.length === 0) return this
    let g = this.groupFork
    if (!g || g.baseSeq !== this.lastSeq || g.applied > earlier.length || earlier[g.applied - 1] !== g.last) {
      g = this.groupFork = { fork: this.fork(), baseSeq: this.lastSeq, applied: 0, last: undefined }
    }
    for (let i = g.applied; i < earlier.length; i++) g.fork.apply(earlier[i].seq, earlier[i].event as unknown as Record<string, unknown> & { type: string })
    g.applied = earlier.length
    g.last = earlier[earlier.length - 1]
    return g.fork
  }

  /** atCommit's last copy: this fold as it stood (`baseSeq`) with the first `applied` events of a group folded in, `last` the last of them. */
  private groupFork: { fork: SessionThreads; baseSeq: number; applied: number; last: StoredEvent | undefined } | undefined

  /** The facts of a thread by its log key (null / the primary's id: the primary). */
  facts(threadId: string | null): ThreadFacts | undefined {
    if (threadId === null || threadId === this.primaryId) return this.primary
    return this.child(threadId)
  }

  /** A child thread by id (a fork's own copy, else its origin's). */
  child(threadId: string): ChildThread | undefined {
    return this.children.get(threadId) ?? this.base?.child(threadId)
  }

  /** Every child, in creation order (a fork: its origin's, with its own changes, then its own new ones). */
  allChildren(): ChildThread[] {
    if (!this.base) return [...this.children.values()]
    const out = this.base.allChildren().map((ch) => this.children.get(ch.id) ?? ch)
    for (const ch of this.children.values()) if (!this.base.child(ch.id)) out.push(ch)
    return out
  }

  /** Children that may need a brain: not terminated, not an advisor consultation (it runs inside the primary's call). */
  liveChildren(): ChildThread[] {
    return this.allChildren().filter((c) => c.status !== 'terminated' && !c.advisor)
  }

  /** How many children hold a slot under the limit (the thread store's rule: shared/api/thread-slots.ts). */
  liveChildCount(): number {
    return countChildSlots(
      this.allChildren().map((c) => ({ parentThreadId: c.parentId ?? this.primaryId, status: c.status, agentType: c.agent?.type, workflowRunId: c.workflowRunId })),
    )
  }

  /**
   * A copy to fold events into without changing this one (the harness previews what a batch it is
   * about to append does to the aggregate). Children are copied only when the fork changes them.
   */
  fork(): SessionThreads {
    const copy = new SessionThreads(this.sessionId, this.primaryId)
    Object.assign(copy.primary, this.primary)
    Object.assign(copy.session, this.session)
    copy.base = this
    for (const [m, u] of this.usageByModel) copy.usageByModel.set(m, { ...u })
    copy.running = new RunningSet(this.running)
    this.runningShared = true
    for (const [r, st] of this.runs) copy.runs.set(r, st)
    copy.runEndSeq = this.runEndSeq
    Object.assign(copy.tally, this.tally)
    copy.unionMs = this.unionMs
    copy.unionSince = this.unionSince
    copy.threadStatuses = this.threadStatuses
    copy.lastSeq = this.lastSeq
    return copy
  }

  /** The facts of a thread to change (in a fork, the child copied first). */
  private mutableFacts(threadId: string | null): ThreadFacts | undefined {
    if (threadId === null || threadId === this.primaryId) return this.primary
    const mine = this.children.get(threadId)
    if (mine || !this.base) return mine
    const ch = this.base.child(threadId)
    if (!ch) return undefined
    const own = { ...ch }
    this.children.set(threadId, own)
    return own
  }

  /** Sets a thread's status (and its last idle), keeping the tally. */
  private setStatus(f: ThreadFacts, status: SessionStatus, lastIdle: StopReason | undefined, seq: number): void {
    this.count(f, -1)
    f.status = status
    if (lastIdle) {
      f.lastIdle = lastIdle
      f.idleSeq = seq
    }
    this.count(f, 1)
  }

  private count(f: ThreadFacts, by: 1 | -1): void {
    if (f.status === 'running') this.tally.running += by
    else if (f.status === 'rescheduling') this.tally.rescheduling += by
    else if (f.status === 'idle' && f.lastIdle?.type === 'requires_action') this.tally.requiresAction += by
    else if (f.status === 'idle' && f.lastIdle?.type === 'budget_reached') this.tally.budgetReached += by
  }

  apply(seq: number, e: Record<string, unknown> & { type: string; session_thread_id?: string | null }): void {
    if (seq <= this.lastSeq) return
    this.lastSeq = seq
    const tid = typeof e.session_thread_id === 'string' && e.session_thread_id !== this.primaryId ? e.session_thread_id : null
    if (e.type === 'session.thread_created') {
      if (!tid || this.child(tid)) return
      this.children.set(tid, {
        id: tid,
        agentName: typeof e.agent_name === 'string' ? e.agent_name : 'agent',
        agent: e.agent && typeof e.agent === 'object' ? (e.agent as ThreadAgent) : undefined,
        parentId: typeof e.parent_thread_id === 'string' ? e.parent_thread_id : this.primaryId,
        createdSeq: seq,
        advisor: (e.agent as { type?: unknown } | undefined)?.type === 'advisor',
        workflowRunId: typeof e.workflow_run_id === 'string' ? e.workflow_run_id : null,
        status: 'idle',
        lastReceivedSeq: 0,
      })
      return
    }
    // the grader's evaluations count toward the one budget like a thread's requests (spec §8.4)
    if (e.type === 'span.model_request_end' || e.type === 'span.outcome_evaluation_end') {
      const u = (e.type === 'span.model_request_end' ? e.model_usage : e.usage) as Partial<ModelUsage> | undefined
      if (!u) return
      const model = typeof e.model === 'string' ? e.model : ''
      const acc = this.usageByModel.get(model) ?? { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
      for (const k of Object.keys(acc) as (keyof ModelUsage)[]) acc[k] += u[k] ?? 0
      this.usageByModel.set(model, acc)
      return
    }
    if (e.type.startsWith('workflow_run.')) {
      const run = typeof e.workflow_run_id === 'string' ? e.workflow_run_id : null
      if (!run) return
      if (e.type === 'workflow_run.status_ended') {
        this.runs.delete(run)
        // a run's end is the primary's next input (its reading turn): an idle of a step that did not see it is left out
        this.primary.lastReceivedSeq = seq
        this.runEndSeq = seq
      } else if (e.type === 'workflow_run.created' || e.type === 'workflow_run.status_running') this.runs.set(run, 'running')
      else if (e.type === 'workflow_run.status_idle' && this.runs.has(run)) this.runs.set(run, 'idle')
      // (a phase's start or end, an error: the run's status is unchanged; the events a status
      // append's transaction wrote before it reach the fold unfiltered, these among them)
      return
    }
    if (e.type === 'agent.thread_message_received') {
      const f = this.mutableFacts(tid)
      if (f) f.lastReceivedSeq = seq
      return
    }
    const c = statusChangeOf({ type: e.type, session_thread_id: tid })
    if (!c) return
    if (c.scope === 'session') {
      // a single-threaded session's activity is its own status (its threads write none)
      if (!this.threadStatuses) this.track('', c.status === 'running', e.processed_at)
      this.session.status = c.status
      if (c.status === 'idle') this.session.lastIdle = (e.stop_reason as StopReason | undefined) ?? { type: 'end_turn' }
      return
    }
    const f = this.mutableFacts(c.thread)
    if (!f) return
    // from now on the threads time the activity (the primary's own status shares the session's key '')
    this.threadStatuses = true
    // active time is time running: a thread waiting to retry its model request (rescheduling) is not (as the thread store counts it)
    this.track(c.thread === null || c.thread === this.primaryId ? '' : c.thread, c.status === 'running', e.processed_at)
    this.setStatus(f, c.status, c.status === 'idle' ? ((e.stop_reason as StopReason | undefined) ?? { type: 'end_turn' }) : undefined, seq)
  }

  /** A thread starts or stops running at the event's time (an event not logged yet: now); the union counts overlap once. */
  private track(key: string, running: boolean, at: unknown): void {
    if (running === this.running.has(key)) return
    const t = typeof at === 'string' ? Date.parse(at) : Date.now()
    const was = this.running.size > 0
    if (this.runningShared) {
      this.running = this.running.copy()
      this.runningShared = false
    }
    this.running.set(key, running)
    if (!was && this.running.size > 0) this.unionSince = t
    if (was && this.running.size === 0) this.unionMs += Math.max(0, t - this.unionSince)
  }

  /**
   * The `session.usage` snapshot written immediately before every `session.status_idle` (spec
   * §4.4, §9): every thread's tokens summed, their list cost in whole cents (USD), the session's
   * active seconds (wall time with at least one thread running), and the budget echoed.
   */
  usageEvent(budget: unknown): EventInput {
    const sum = { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
    let cents = 0
    for (const [model, u] of this.usageByModel) {
      for (const k of Object.keys(sum) as (keyof ModelUsage)[]) sum[k] += u[k]
      cents += listCostCents(model, u)
    }
    const activeMs = this.unionMs + (this.running.size > 0 ? Math.max(0, Date.now() - this.unionSince) : 0)
    return {
      type: 'session.usage',
      usage: {
        input_tokens: sum.input_tokens,
        output_tokens: sum.output_tokens,
        cache_read_input_tokens: sum.cache_read_input_tokens,
        cache_creation: { ephemeral_5m_input_tokens: sum.cache_creation_input_tokens },
        list_cost: monetaryAmount(cents),
        active_seconds: activeMs / 1000,
      },
      budget: (budget ?? null) as never,
    } as EventInput
  }

  /**
   * The aggregate the threads' statuses make (spec §4.4): any thread running → running; else any
   * thread rescheduling (waiting to retry a failed model request) → rescheduling (Corral's
   * decision on the spec's open point); else idle with requires_action > budget_reached > the primary's reason.
   */
  aggregate(): AggregateStatus {
    if (this.tally.running > 0) return { status: 'running' }
    if (this.tally.rescheduling > 0) return { status: 'rescheduling' }
    if (this.tally.requiresAction > 0) {
      // the event ids in thread order (the primary first), as every thread says them
      const pending: string[] = []
      for (const t of [this.primary, ...this.allChildren()]) if (t.status === 'idle' && t.lastIdle?.type === 'requires_action') pending.push(...(t.lastIdle.event_ids ?? []))
      if (pending.length) return { status: 'idle', stop_reason: { type: 'requires_action', event_ids: pending } }
    }
    // a running workflow run keeps the session running though no thread works (spec §6.7); a paused one does not
    for (const r of this.runs.values()) if (r === 'running') return { status: 'running' }
    // so does a run's end the idle primary has not read yet: its reading turn is the session's work
    // (its brain is woken by the end; the session idles after that turn, not before it)
    if (this.primary.status === 'idle' && this.primary.lastIdle?.type !== 'budget_reached' && this.runEndSeq > (this.primary.idleSeq ?? 0)) return { status: 'running' }
    if (this.tally.budgetReached > 0) return { status: 'idle', stop_reason: { type: 'budget_reached' } }
    const own = this.primary.lastIdle?.type
    return { status: 'idle', stop_reason: { type: own === 'retries_exhausted' || own === 'refusal' ? own : 'end_turn' } }
  }

  /** The session status event the aggregate needs now, or none when the session already says so. */
  aggregateEvent(): EventInput | undefined {
    const a = this.aggregate()
    if (a.status === 'running') return this.session.status === 'running' ? undefined : { type: 'session.status_running' }
    if (a.status === 'rescheduling') return this.session.status === 'rescheduling' || this.session.status === 'terminated' ? undefined : { type: 'session.status_rescheduled' }
    const cur = this.session.lastIdle
    if (this.session.status === 'idle' && cur && cur.type === a.stop_reason.type && sameSet(cur.event_ids ?? [], a.stop_reason.event_ids ?? [])) return undefined
    if (this.session.status === 'terminated') return undefined
    return { type: 'session.status_idle', stop_reason: a.stop_reason as never, stop_details: null }
  }
}

/**
 * A set of keys, or (over a `base` that is never changed again) what changed over it: a fork's
 * running threads cost what the fork changed, not a copy of its origin's.
 */
class RunningSet {
  private readonly added = new Set<string>()
  private readonly gone = new Set<string>()
  size: number

  constructor(private readonly base?: RunningSet) {
    this.size = base?.size ?? 0
  }

  has(key: string): boolean {
    return this.added.has(key) || (!this.gone.has(key) && (this.base?.has(key) ?? false))
  }

  set(key: string, on: boolean): void {
    if (on === this.has(key)) return
    if (on) {
      if (!this.gone.delete(key)) this.added.add(key)
    } else if (!this.added.delete(key)) this.gone.add(key)
    this.size += on ? 1 : -1
  }

  /** The same keys, changeable without changing this one. */
  copy(): RunningSet {
    const c = new RunningSet(this.base)
    for (const k of this.added) c.added.add(k)
    for (const k of this.gone) c.gone.add(k)
    c.size = this.size
    return c
  }
}

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x) => b.includes(x))
}
