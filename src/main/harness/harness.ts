import { type EventInputOf, type EventOf, type ThreadKey } from '../../shared/api/events'
import { newId, primaryThreadId } from '../../shared/api/ids'
import { WORKER_TOOLSET } from '../../shared/api/worker-toolset'
import type { EventAppendOptions, EventInput, EventLog, StoredEvent } from '../session/event-log'
import type { ToolJournal } from '../session/tool-journal'
import { filesSystemContext } from './context/files'
import { memorySystemContext } from './context/memory'
import { skillsSystemContext, type PlacedSkill } from './context/skills'
import { buildContextView, modelId, type ContextViewOptions, type ViewAgent, type ViewEvent } from './context/view'
import { ModelRequestError, zeroUsage, type ModelClient, type ModelResponse, type ModelUsage } from './model-client'
import { budgetCents, listCostCents } from '../../shared/api/pricing'
import { readSessionHistory } from './session-history'
import { decideNext, foldInto, newSessionState, type NextStep, type OpenToolUse, type SessionState } from './session-state'
import type { PreviewStream, ToolOutcome, ToolRouter } from '../hands/tool-router'
import { routeTool, type AgentToolConfig, type McpToolDefinition } from './tools'
import { DELEGATION_TOOLS } from './delegation'
import { advisorTool } from './advisor'
import { deliverablesTool, evaluate, graderRequest, readDeliverables } from './outcomes'
import { WORKFLOW_TOOLS } from './workflows/tools'
import type { AdvisorTierTable } from '../../shared/api/advisor-tiers'
import { PlatformTools, type PlatformToolResult, type DelegationRoster, type PlatformOfferContext, type ThreadAgent, type ThreadRef, type WorkflowLogSource } from './platform-tools'
import { SessionThreads } from './session-threads'
import { pause } from './pause'

/** A never-stored preview: `event_start` (its `event` names the event's id, type and, for a child thread, `session_thread_id`) or `event_delta`. */
export type PreviewEvent = { type: 'event_start' | 'event_delta'; [k: string]: unknown }

/** Where the harness publishes never-stored previews (`event_start` / `event_delta`). */
export interface PreviewSink {
  publish(sessionId: string, event: PreviewEvent): void
}

/** The session fields the harness reads: its pinned agent snapshot and budget, and the roster it pinned at create. */
export interface SessionSource {
  retrieve(id: string): { id: string; agent: unknown; budget?: unknown }
  /** What a run reads of its session, kept while the session is unchanged (SessionStore.runSnapshot); absent: retrieve. */
  runSnapshot?(id: string): { id: string; agent: unknown; budget?: unknown; resources?: readonly unknown[]; environment_id?: string; environment_type?: string }
  /** What the session may delegate to (null: a single-threaded session); `session`: as just retrieved (not read again). Absent: no session delegates. */
  rosterOf?(id: string, session?: { agent: unknown }): DelegationRoster | null
  /** Whether a worker of the session's self_hosted environment runs its toolset calls (spec resources.md §5). Absent: never. */
  answeredByWorker?(id: string, session?: { environment_id?: string }): boolean
  /** The skills placed in the session's sandbox (pinned at creation), announced to each thread whose agent lists them. */
  skillsOf?(id: string): readonly PlacedSkill[]
}


/**
 * The tools a session's remote MCP servers list (McpToolRouter in the vault). A server that
 * cannot be listed is left out; the source reports it to the session itself (`session.error`).
 */
export interface McpToolSource {
  tools(sessionId: string): Promise<{ tools: readonly McpToolDefinition[] }>
}

export interface HarnessOptions {
  /** Retries of a failed model request before `retries_exhausted` (default 5). */
  maxRetries?: number
  /** First backoff delay; doubles per attempt, with jitter (default 1000 ms). */
  backoffBaseMs?: number
  backoffMaxMs?: number
  /** How long to wait for a call the hands report as still running after a restart (default 60 s). */
  recoverTimeoutMs?: number
  recoverPollMs?: number
  context?: ContextViewOptions
  /** For tests: the jitter source (0..1). */
  random?: () => number
  /** How many sessions' events the harness keeps in memory between runs (default 256). */
  cacheSessions?: number
  /** How often `span.outcome_evaluation_ongoing` is written while a grader works (default 10 s). */
  outcomeHeartbeatMs?: number
}

export interface HarnessDeps {
  log: EventLog
  sessions: SessionSource
  model: ModelClient
  router: ToolRouter
  journal: ToolJournal
  previews?: PreviewSink
  /** The session's MCP tools, offered to the model when the agent has `mcp_toolset` entries. */
  mcp?: McpToolSource
  /** Tools the harness runs itself (default: delegation and the advisor); each says which threads it is offered to. */
  platform?: PlatformTools
  /** The advisor pairing table as the user extended it (settings), read at each consultation start (default: the built-in one). */
  advisorTiers?: () => AdvisorTierTable
  /** The workflow runs' log lines, for ant__workflow_run_status (without it the tool shows no log). */
  workflowLogs?: WorkflowLogSource
  options?: HarnessOptions
}

/**
 * How the orchestrator steers one running turn loop: `interrupt()` aborts the step in progress
 * (model stream or tool call) and lets the loop record the interrupt; `stop('shutdown')` aborts
 * it, records what the aborted step did, and ends the loop (the next process continues from the
 * log); `stop('lease_lost')` ends it without writing anything (another brain owns the session).
 */
export class TurnControl {
  private current = new AbortController()
  /** current.signal, read once (AbortController's getter checks its receiver on every read, and a turn reads it often) */
  private currentSignal = this.current.signal
  private isStopped = false
  private reason: 'shutdown' | 'lease_lost' = 'shutdown'

  get stopped(): boolean {
    return this.isStopped
  }
  /** Whether the loop may still append what an aborted step did. */
  get mayRecord(): boolean {
    return !this.isStopped || this.reason === 'shutdown'
  }
  /** The signal of the step in progress: aborted by `interrupt()` and `stop()`. */
  get signal(): AbortSignal {
    return this.currentSignal
  }
  /**
   * Called by the loop right after it read the log: an interrupt the log already shows is
   * handled from the log, so the signal starts fresh; one that arrives later aborts it.
   */
  rearm(): void {
    if (!this.isStopped && this.currentSignal.aborted) {
      this.current = new AbortController()
      this.currentSignal = this.current.signal
    }
  }
  interrupt(): void {
    this.current.abort()
  }
  stop(reason: 'shutdown' | 'lease_lost' = 'shutdown'): void {
    if (!this.isStopped) this.reason = reason
    this.isStopped = true
    this.current.abort()
  }
}

const INTERRUPTED_TEXT = 'Not run: the user interrupted the turn before this call ran.'
const ABANDONED_TEXT = 'Not run: the user sent a new message instead of confirming this call.'
const NO_MCP_TOOLS: readonly McpToolDefinition[] = Object.freeze([])
const UNKNOWN_OUTCOME_TEXT =
  'The outcome of this call is unknown: Corral restarted while it was running and the sandbox cannot tell whether it finished. ' +
  'Check its effects before running it again.'

/**
 * The brain: a stateless turn loop on the session log. `run(sessionId)` reads the log, decides
 * the next step (session-state.ts), performs it, appends what happened, and repeats until the
 * session waits for the outside world. It keeps nothing between runs that the log does not, so
 * a fresh process continues any session with `run`. The caller must hold the session's lease.
 */
export class Harness {
  private readonly o: Required<Omit<HarnessOptions, 'context'>> & { context: ContextViewOptions }
  private readonly cache = new Map<string, { events: ViewEvent[]; state: SessionState; readTo: number }>()
  /** Per session: its threads as the log says (shared by the brains of its threads). */
  private readonly threadsBySession = new Map<string, SessionThreads>()
  /** Calls this process journaled as started together with their response and has not run yet (firstHandsCall). */
  private readonly journaledNow = new Set<string>()
  /** The platform tools (delegation, the advisor): register more before the brains start. */
  readonly platform: PlatformTools

  constructor(private readonly deps: HarnessDeps) {
    const o = deps.options ?? {}
    this.o = {
      maxRetries: o.maxRetries ?? 5,
      backoffBaseMs: o.backoffBaseMs ?? 1000,
      backoffMaxMs: o.backoffMaxMs ?? 30_000,
      recoverTimeoutMs: o.recoverTimeoutMs ?? 60_000,
      recoverPollMs: o.recoverPollMs ?? 250,
      context: o.context ?? {},
      random: o.random ?? Math.random,
      cacheSessions: o.cacheSessions ?? 256,
      outcomeHeartbeatMs: o.outcomeHeartbeatMs ?? 10_000,
    }
    const advisor = advisorTool({ tiers: deps.advisorTiers, maxRetries: this.o.maxRetries, backoffBaseMs: this.o.backoffBaseMs, backoffMaxMs: this.o.backoffMaxMs, random: this.o.random })
    this.platform = deps.platform ?? new PlatformTools([...DELEGATION_TOOLS, advisor, deliverablesTool(), ...WORKFLOW_TOOLS])
  }

  /**
   * Runs one thread of a session until it waits (idle, requires_action) or `control` stops it.
   * The thread's events and their fold are cached per thread between runs (bounded; rebuilt from
   * the log when missing or after a failure), so a wake reads only what was appended since. A
   * child thread runs the agent snapshot its `session.thread_created` pinned; all threads share
   * the session's hands (the one ToolRouter).
   */
  async run(thread: ThreadRef, control: TurnControl = new TurnControl()): Promise<void> {
    const { sessionId } = thread
    const primaryId = primaryThreadId(sessionId)
    const threadKey: ThreadKey = thread.threadId === primaryId ? null : thread.threadId
    const session = this.sessionOf(sessionId)
    const sessionAgent = session.agent as ThreadAgent
    const roster = this.deps.sessions.rosterOf?.(sessionId, session) ?? null
    const threads = this.threadsOf(sessionId).catchUp(this.deps.log)
    const multi = roster !== null || threads.children.size > 0
    let agent: ThreadAgent
    let agentName = sessionAgent.name
    let workflowRunId: string | null = null
    if (threadKey === null) agent = sessionAgent
    else {
      const child = threads.children.get(threadKey)
      // an advisor consultation runs inside the primary's ant__advisor call (advisor.ts), never under a brain of its own
      if (!child || child.status === 'terminated' || child.advisor) return
      const { multiagent: _m, ...own } = (child.agent ?? sessionAgent) as ThreadAgent & { multiagent?: unknown }
      agent = own as ThreadAgent
      agentName = child.agentName
      workflowRunId = child.workflowRunId
    }
    const key = `${sessionId}/${threadKey ?? ''}`
    let cached = this.cache.get(key)
    if (cached) this.cache.delete(key) // re-inserted below: most recently used last
    else {
      const workerTools = this.deps.sessions.answeredByWorker?.(sessionId, session) ? WORKER_TOOLSET : undefined
      cached = { events: [], state: newSessionState(threadKey, { ...(multi ? { statusScope: 'thread', primaryId } : {}), workerTools }), readTo: 0 }
    }
    const entry = cached
    const { events, state } = entry
    // nothing of a child's thread lies before its session.thread_created: its first read starts
    // there (the log's window of recent rows answers it) instead of at the session's first event
    const threadFrom = threadKey === null ? 0 : Math.max(0, (threads.children.get(threadKey)?.createdSeq ?? 1) - 1)
    const catchUp = () => {
      for (;;) {
        // A read starts where the last one ended, not at this thread's last event: a thread whose
        // events are sparse among its session's (the primary during a workflow run of a thousand
        // agents) would otherwise read from further back each time, below the log's window of
        // recent rows, and SQLite would walk every other thread's rows since.
        const from = Math.max(state.lastSeq, threadFrom, entry.readTo)
        // what this thread's own appends committed is read before its fsync returns (a tool's
        // result resolves at its commit: runTools), so the next model request does not wait for the disk
        const page = this.deps.log.read(sessionId, { after: from, limit: 1000, threadId: threadKey, includeUnsynced: true })
        let merged = page
        if (threadKey !== null) {
          // an interrupt without a thread stops every thread, a budget change resumes every thread: the children fold them too
          // (those after the child's session.thread_created: one before it was never the child's)
          const before = page.length === 1000 ? page[page.length - 1].seq + 1 : undefined
          const all = this.deps.log.read(sessionId, { after: from, before, limit: 1000, threadId: null, types: ['user.interrupt', 'session.updated'], includeUnsynced: true })
          if (all.length) merged = [...page, ...all].sort((a, b) => a.seq - b.seq)
        }
        // a workflow run's thread is stopped by its run, never by an interrupt (spec §3.5, §6.8)
        if (workflowRunId !== null) merged = merged.filter((r) => r.event.type !== 'user.interrupt')
        for (const r of merged) events.push({ seq: r.seq, event: r.event })
        foldInto(state, merged)
        if (page.length < 1000) {
          // read up to the log's last committed seq (taken after the read, both synchronous:
          // nothing commits between); a single-threaded session's thread has every event, so
          // its own last one is already there
          if (multi) entry.readTo = Math.max(entry.readTo, this.deps.log.lastSeq(sessionId, { includeUnsynced: true }))
          return
        }
      }
    }
    const c: RunContext = { sessionId, thread, threadKey, workflowRunId, primaryId, multi, session, sessionAgent, agent: agent as RunContext['agent'], agentName, roster, threads, events, state, control }
    let ok = false
    try {
      while (!control.stopped) {
        catchUp()
        control.rearm()
        const step = decideNext(state)
        if (step.kind === 'none') break
        await this.perform(step, c)
      }
      if (multi && control.mayRecord && !control.stopped) await this.settleAggregate(c)
      ok = true
    } finally {
      if (ok) {
        this.cache.set(key, cached)
        while (this.cache.size > this.o.cacheSessions) this.cache.delete(this.cache.keys().next().value as string)
      }
    }
  }

  /** Forgets a session's cached events (e.g. when it is deleted). */
  forget(sessionId: string): void {
    for (const k of [...this.cache.keys()]) if (k.startsWith(`${sessionId}/`)) this.cache.delete(k)
    this.threadsBySession.delete(sessionId)
  }

  /** The threads of a session that may need a brain: the primary and every child not terminated. */
  liveThreads(sessionId: string): ThreadRef[] {
    const threads = this.threadsOf(sessionId).catchUp(this.deps.log)
    return [{ sessionId, threadId: threads.primaryId }, ...threads.liveChildren().map((ch) => ({ sessionId, threadId: ch.id }))]
  }

  /** Whether a thread belongs to a workflow run (its run stops it; an interrupt does not). */
  isWorkflowThread(thread: ThreadRef): boolean {
    return (this.threadsOf(thread.sessionId).catchUp(this.deps.log).children.get(thread.threadId)?.workflowRunId ?? null) !== null
  }

  private threadsOf(sessionId: string): SessionThreads {
    let t = this.threadsBySession.get(sessionId)
    if (!t) {
      t = new SessionThreads(sessionId, primaryThreadId(sessionId))
      this.threadsBySession.set(sessionId, t)
      while (this.threadsBySession.size > this.o.cacheSessions) this.threadsBySession.delete(this.threadsBySession.keys().next().value as string)
    }
    return t
  }

  /**
   * Appends what a thread did. In a multi-agent session a batch that changes a thread's status
   * also carries the session's aggregate status event, computed inside the append's transaction
   * from the log as it stands there (EventsAtCommit), so two threads ending at once cannot both
   * miss it, and threads ending together share one commit instead of taking turns behind a lock
   * held across commits; an idle of this thread is left out when a message reached the thread
   * after what its step saw (the thread goes on instead of flapping idle).
   */
  private async appendThread(c: RunContext, given: EventInput[], options?: EventAppendOptions): Promise<void> {
    // a child's events are logged on its thread; one it addresses to the primary says null
    const evs = c.threadKey === null ? given : given.map((e) => onThread(e, c.thread.threadId))
    if (!c.multi) {
      // a single-threaded session's idle goes with its session.usage too (spec §4.4, §9: before every session idle)
      const idleAt = evs.findIndex((e) => e.type === 'session.status_idle')
      if (idleAt < 0) await this.deps.log.append(c.sessionId, evs, options)
      else {
        const { after } = previewAggregate(c.threads.catchUp(this.deps.log), evs)
        await this.deps.log.append(c.sessionId, [...evs.slice(0, idleAt), after.usageEvent(this.sessionOf(c.sessionId).budget), ...evs.slice(idleAt)])
      }
      return
    }
    if (!evs.some(isStatusEvent)) {
      await this.deps.log.append(c.sessionId, evs, options)
      return
    }
    const atCommit = ({ earlier }: { earlier: readonly StoredEvent[] }): EventInput[] => {
      const threads = c.threads.atCommit(this.deps.log, earlier)
      const own = threads.facts(c.threadKey)
      let batch = evs
      // (a run's thread archived with its idle keeps going too: its archive goes with the idle)
      if (own && own.lastReceivedSeq > c.state.lastSeq) batch = batch.filter((e) => !((e.type === 'session.thread_status_idle' || isRunThreadArchive(e, c)) && threadOf(e, c.primaryId) === c.thread.threadId))
      // a message delivered to the idle primary marks it running in the same batch
      if (threads.primary.status !== 'running' && batch.some((e) => e.type === 'agent.thread_message_received' && !e.session_thread_id)) {
        batch = [...batch, { type: 'session.thread_status_running', session_thread_id: c.primaryId, agent_name: c.sessionAgent.name }]
      }
      let { agg, after } = previewAggregate(threads, batch)
      // (the budget first, with this batch's usage: a session without one, or under it, never scans its threads here)
      const limit = after.runs.size ? budgetCents(c.session.budget) : undefined
      const paused = limit !== undefined && spentCents(after.usageByModel) >= limit ? runsPausedAtBudget(after) : []
      if (paused.length) {
        batch = [...batch, ...paused]
        ;({ agg, after } = previewAggregate(threads, batch))
      }
      return agg ? [...batch, ...withUsage(agg, after, () => this.sessionOf(c.sessionId).budget)] : batch
    }
    // committed: the disk is waited for after the commit, so threads ending together share fsyncs
    await this.deps.log.append(c.sessionId, atCommit, { committed: true, lazy: options?.lazy })
    if (!options?.committed) await this.deps.log.whenSynced()
  }

  /** The session as a run reads it: its snapshot, kept while the session is unchanged, where the source has one. */
  private sessionOf(sessionId: string): RunContext['session'] & { environment_id?: string; environment_type?: string } {
    const s = this.deps.sessions
    return s.runSnapshot ? s.runSnapshot(sessionId) : s.retrieve(sessionId)
  }

  /** After a run, in a multi-agent session: the session's status is what its threads say (repairs a gap left by an older process). */
  private async settleAggregate(c: RunContext): Promise<void> {
    await this.deps.log.append(
      c.sessionId,
      ({ earlier }) => {
        const threads = c.threads.atCommit(this.deps.log, earlier)
        const agg = threads.aggregateEvent()
        return agg ? withUsage(agg, threads, () => this.sessionOf(c.sessionId).budget) : []
      },
      { committed: true },
    )
    await this.deps.log.whenSynced()
  }

  private runningEvent(c: RunContext): EventInput {
    return c.multi ? { type: 'session.thread_status_running', session_thread_id: c.thread.threadId, agent_name: c.agentName } : { type: 'session.status_running' }
  }

  private rescheduledEvent(c: RunContext): EventInput {
    return c.multi ? { type: 'session.thread_status_rescheduled', session_thread_id: c.thread.threadId, agent_name: c.agentName } : { type: 'session.status_rescheduled' }
  }

  private idleEvent(c: RunContext, stopReason: EventInputOf<'session.status_idle'>['stop_reason'], contextSeq?: number): EventInput {
    const extra = contextSeq !== undefined ? { context_seq: contextSeq } : {}
    return c.multi
      ? { type: 'session.thread_status_idle', session_thread_id: c.thread.threadId, agent_name: c.agentName, stop_reason: stopReason, stop_details: null, ...extra }
      : { type: 'session.status_idle', stop_reason: stopReason, stop_details: null, ...extra }
  }

  private offerContext(c: RunContext): PlatformOfferContext {
    const o = c.threadKey === null ? c.state.outcome : undefined
    return { thread: c.thread, threadKey: c.threadKey, sessionAgent: c.sessionAgent, agent: c.agent, roster: c.roster, activeOutcome: o && o.phase !== 'done' ? o.id : null }
  }

  private async perform(step: NextStep, c: RunContext): Promise<void> {
    const append = (evs: EventInput[]) => this.appendThread(c, evs)
    switch (step.kind) {
      case 'close_span':
        await append([{ type: 'span.model_request_end', model_request_start_id: step.spanId, is_error: true, model_usage: zeroUsage(), interrupted: true }])
        return
      case 'stop_tools': {
        const interrupted = step.cause === 'interrupt'
        await append(
          step.toolUses.map((t) => {
            const started = this.deps.journal.wasStarted(t.id)
            const text = started ? 'Interrupted by the user while running; it may have partly run.' : interrupted ? INTERRUPTED_TEXT : ABANDONED_TEXT
            return toolResult(t, { content: text, isError: true }, true)
          }),
        )
        return
      }
      case 'idle':
        await append([this.idleEvent(c, step.stopReason)])
        return
      case 'run_tools':
        await this.runTools(step.run, step.deny, c)
        return
      case 'model':
        await this.callModel(step.attempt, c)
        return
      case 'grade':
        await this.grade(step.startId, c)
        return
      case 'end_outcome': {
        const o = c.state.outcome!
        await append([
          {
            type: 'span.outcome_evaluation_end',
            outcome_evaluation_start_id: step.startId,
            outcome_id: o.id,
            iteration: o.iteration,
            result: step.result,
            explanation: step.startId ? 'The user interrupted the evaluation: the outcome ends without a verdict.' : 'The user interrupted the work before it was evaluated: the outcome ends without a verdict.',
            usage: zeroUsage(),
            gaps: [],
          },
        ])
        return
      }
    }
  }

  /**
   * One evaluation of the active outcome (outcomes.ts): its start is appended first (unless a dead
   * process's evaluation is re-run under `startId`), the grader reads the named deliverable files
   * through the hands, heartbeats go out while it works, and the verdict is appended once, as
   * `span.outcome_evaluation_end` with the cycle's usage: `needs_revision` (the gaps become the
   * agent's next input; on the last allowed cycle it is `max_iterations_reached` instead),
   * `satisfied` or `failed` (the turn ends: idle in the same batch). A shutdown writes no verdict:
   * the next process runs the evaluation again under the same start.
   */
  private async grade(reRun: string | undefined, c: RunContext): Promise<void> {
    const o = c.state.outcome!
    if (this.budgetReached(c)) {
      await this.appendThread(c, [this.idleEvent(c, { type: 'budget_reached' })])
      return
    }
    const startId = reRun ?? newId('event')
    const prefix = this.runningPrefix(c)
    if (!reRun || prefix.length) await this.appendThread(c, [...prefix, ...(reRun ? [] : [{ id: startId, type: 'span.outcome_evaluation_start' as const, outcome_id: o.id, iteration: o.iteration }])])
    const signal = c.control.signal
    const model = modelId(c.agent)
    const files = await readDeliverables({ router: this.deps.router, sessionId: c.sessionId, paths: o.deliverables, callId: startId, signal })
    const request = graderRequest({ model, description: o.description, rubric: o.rubric, finalMessage: finalMessageOf(c.events, c.threadKey), files })
    const heartbeat = () => void this.deps.log.append(c.sessionId, [{ type: 'span.outcome_evaluation_ongoing', outcome_id: o.id, iteration: o.iteration }]).catch(() => {})
    const r = await evaluate({
      model: this.deps.model,
      request,
      signal,
      onHeartbeat: heartbeat,
      heartbeatMs: this.o.outcomeHeartbeatMs,
      maxRetries: this.o.maxRetries,
      backoffBaseMs: this.o.backoffBaseMs,
      backoffMaxMs: this.o.backoffMaxMs,
      random: this.o.random,
    })
    if (!c.control.mayRecord || c.control.stopped) return
    const end = { type: 'span.outcome_evaluation_end' as const, outcome_evaluation_start_id: startId, outcome_id: o.id, iteration: o.iteration, usage: r.usage, model }
    if (r.kind === 'aborted') {
      await this.appendThread(c, [{ ...end, result: 'interrupted', explanation: 'The user interrupted the evaluation: the outcome ends without a verdict.', gaps: [] }])
      return
    }
    if (r.kind === 'no_verdict') {
      await this.appendThread(c, [{ ...end, result: 'failed', explanation: r.explanation, gaps: [] }, this.idleEvent(c, { type: 'end_turn' })])
      return
    }
    const v = r.verdict
    const result = v.result === 'needs_revision' && o.iteration + 1 >= o.maxIterations ? 'max_iterations_reached' : v.result
    const idle = result === 'satisfied' || result === 'failed' ? [this.idleEvent(c, { type: 'end_turn' })] : []
    await this.appendThread(c, [{ ...end, result, explanation: v.explanation, gaps: v.gaps }, ...idle])
  }

  private runningPrefix(c: RunContext): EventInput[] {
    return c.state.status === 'running' ? [] : [this.runningEvent(c)]
  }

  private async runTools(run: OpenToolUse[], deny: OpenToolUse[], c: RunContext): Promise<void> {
    const prefix = this.runningPrefix(c)
    if (deny.length || prefix.length) {
      await this.appendThread(c, [
        ...prefix,
        ...deny.map((t) =>
          toolResult(t, { content: t.confirmation?.deny_message ? `The user denied this call: ${t.confirmation.deny_message}` : 'The user denied this call.', isError: true }),
        ),
      ])
    }
    for (const t of run) {
      if (c.control.stopped) return
      const signal = c.control.signal
      if (signal.aborted) return // an interrupt arrived: the loop records it
      // The result's id is chosen now, so the output previewed while the call runs names the
      // event that will conclude it.
      const resultId = newId('event')
      const platform = t.type === 'agent.tool_use' ? this.platform.find(t.name, this.offerContext(c)) : undefined
      if (platform) {
        // a platform tool only reads the log and appends: its events and result land together
        c.threads.catchUp(this.deps.log)
        const r = await platform
          .run({ ...this.offerContext(c), call: { id: t.id, seq: t.seq, name: t.name, input: t.input }, log: this.deps.log, model: this.deps.model, events: c.events, threads: c.threads, signal, budgetReached: () => this.budgetReached(c), workflowLogs: this.deps.workflowLogs })
          .catch((err: unknown): PlatformToolResult => ({ outcome: { content: `The ${t.name} call failed: ${(err as Error).message}`, isError: true }, events: undefined }))
        if (!c.control.mayRecord) return
        await this.appendThread(c, [...(r.events ?? []), toolResult(t, r.outcome, r.interrupted === true, resultId)])
        continue
      }
      const outcome = await this.executeOnce(t, c, signal, this.outputPreview(c, t, resultId))
      if (!c.control.mayRecord) return
      if (c.control.stopped) {
        // shutdown: the model hears of it when the session continues
        await this.appendThread(c, [toolResult(t, { ...outcome, content: `Corral shut down while this call was running, and cancelled it. Output so far: ${outcome.content}`, isError: true }, false, resultId)])
        return
      }
      // resolves at its commit: the loop's next model request is built from it while its fsync
      // runs (nothing the request does outlives the process; the next call's journal record waits for the disk)
      await this.appendThread(c, [toolResult(t, outcome, signal.aborted, resultId)], { committed: true })
    }
  }

  /**
   * The previews of one model response of a thread (opt-in, never stored): each names its thread
   * (a child's carry its `session_thread_id`), so a stream shows only its own thread's (spec §5).
   * A child's text may be the final text of its turn, which is its report to the lead and is
   * never previewed (spec §4.2): its text previews are held until a tool call starts in the same
   * response (then the text is not the report: they go out, and later ones live) and dropped if
   * the response ends without one. Its thinking is previewed live.
   */
  private responsePreviews(c: RunContext): { start(index: number, event: { id: string; type: 'agent.message' | 'agent.thinking' }): void; delta(index: number, p: PreviewEvent): void; toolCallStarted(): void } {
    const sink = this.deps.previews
    const sessionId = c.sessionId
    const child = c.threadKey !== null ? { session_thread_id: c.thread.threadId } : {}
    let holding = c.threadKey !== null
    const held: PreviewEvent[] = []
    const heldBlocks = new Set<number>()
    const out = (index: number, p: PreviewEvent) => {
      if (holding && heldBlocks.has(index)) held.push(p)
      else sink?.publish(sessionId, p)
    }
    return {
      start(index, event) {
        if (holding && event.type === 'agent.message') heldBlocks.add(index)
        out(index, { type: 'event_start', event: { ...event, ...child } })
      },
      delta: out,
      toolCallStarted() {
        if (!holding) return
        holding = false
        for (const p of held.splice(0)) sink?.publish(sessionId, p)
      },
    }
  }

  /**
   * Corral addition: a running toolset call's output as never-stored previews of its
   * `agent.tool_result` (`event_start` at the first chunk, then one `event_delta` per chunk), for
   * stream clients that ask for `event_deltas=agent.tool_result`. What the hands stream is the
   * raw output as it is written; the stored result (capped, with the notes for the model) then
   * replaces it. A chunk a command wrote to stderr carries Corral's `stream: 'stderr'` on its
   * delta (stdout's deltas are the API's shape, unchanged); a line of Corral's own about the call
   * (its sandbox starting: RunnerSandbox) carries `stream: 'status'`. Undefined when nobody can hear
   * previews or the call is not a toolset call.
   */
  private outputPreview(c: RunContext, t: OpenToolUse, resultId: string): ((chunk: string, stream?: PreviewStream) => void) | undefined {
    const previews = this.deps.previews
    if (!previews || t.type !== 'agent.tool_use') return undefined
    const sessionId = c.sessionId
    // a child's call output is its own stream's, never the session's
    const child = c.threadKey !== null ? { session_thread_id: c.thread.threadId } : {}
    let started = false
    return (chunk, stream) => {
      if (!chunk) return
      if (!started) {
        started = true
        previews.publish(sessionId, { type: 'event_start', event: { id: resultId, type: 'agent.tool_result', tool_use_id: t.id, ...child } })
      }
      const delta = { type: 'content_delta', content: { type: 'text', text: chunk }, index: 0, ...(stream === 'stderr' || stream === 'status' ? { stream } : {}) }
      previews.publish(sessionId, { type: 'event_delta', event_id: resultId, delta })
    }
  }

  /** Runs a call unless an earlier process may have run it; then asks the hands what happened. */
  private async executeOnce(t: OpenToolUse, c: RunContext, signal: AbortSignal, onOutput?: (chunk: string, stream?: PreviewStream) => void): Promise<ToolOutcome> {
    const route = routeTool(c.agent.tools ?? [], t.name)
    if (route.kind === 'history') return readSessionHistory(this.deps.log, c.sessionId, t.input)
    if (route.kind === 'unknown' || route.kind === 'custom') return { content: `Unknown tool ${JSON.stringify(t.name)}: this agent has no such tool.`, isError: true }
    const call = { sessionId: c.sessionId, toolUseId: t.id, name: t.name, input: t.input, route: route.kind }
    // journaled by this process with its response (callModel) and not handed to the hands since
    if (this.journaledNow.delete(t.id)) {
      // (nothing to record: the journal's row is on disk)
    } else if (this.deps.journal.wasStarted(t.id)) {
      const deadline = Date.now() + this.o.recoverTimeoutMs
      for (;;) {
        let r: Awaited<ReturnType<ToolRouter['recover']>>
        try {
          r = await this.deps.router.recover(call)
        } catch (err) {
          return { content: `${UNKNOWN_OUTCOME_TEXT} (${(err as Error).message})`, isError: true }
        }
        if (r.state === 'finished') return r.outcome
        if (r.state === 'unknown') return { content: UNKNOWN_OUTCOME_TEXT, isError: true }
        if (r.state === 'not_started') break
        if (Date.now() > deadline || signal.aborted) return { content: UNKNOWN_OUTCOME_TEXT, isError: true }
        await pause(this.o.recoverPollMs, signal)
      }
    } else {
      await this.deps.journal.markStarted(c.sessionId, t.id)
    }
    try {
      return await this.deps.router.execute({ ...call, signal, onOutput })
    } catch (err) {
      return { content: `The tool call failed: ${(err as Error).message}`, isError: true }
    }
  }

  /** One budget for the whole session: every thread's requests count, the advisor's too (spec §9). */
  private budgetReached(c: RunContext): boolean {
    const limit = budgetCents(c.session.budget)
    return limit !== undefined && spentCents(c.multi ? c.threads.catchUp(this.deps.log).usageByModel : c.state.usageByModel) >= limit
  }

  private async callModel(attempt: number, c: RunContext): Promise<void> {
    if (this.budgetReached(c)) {
      await this.appendThread(c, [this.idleEvent(c, { type: 'budget_reached' })])
      return
    }
    const platformTools = this.platform.offered(this.offerContext(c)).map((t) => t.definition)
    const memory = memorySystemContext(c.session.resources)
    const files = filesSystemContext({ resources: c.session.resources, tools: c.agent.tools })
    const agentSkills = (c.agent as { skills?: readonly unknown[] }).skills
    const skills = agentSkills?.length ? skillsSystemContext(this.deps.sessions.skillsOf?.(c.sessionId), agentSkills) : undefined
    const view = buildContextView(c.events, {
      thread: c.state.thread,
      agent: c.agent,
      options: this.o.context,
      mcpTools: await this.mcpTools(c),
      platformTools,
      systemContext: [memory, files, skills].filter((t): t is string => t !== undefined),
    })
    const request = view.compaction?.request ?? view.request
    const signal = c.control.signal
    if (signal.aborted) return
    const startId = newId('event')
    const model = modelId(c.agent)
    // The request goes out first; `running` and the span start are appended a macrotask later,
    // lazily (they join the next group another append commits: EventAppendOptions.lazy), so
    // their commit and fsync overlap the model's own latency instead of delaying the request.
    // `context_seq` on the span end records how much of the log this request saw, so input
    // appended meanwhile is still answered afterwards.
    const contextSeq = c.state.lastSeq
    const prefix = this.runningPrefix(c)
    let started: Promise<unknown> | undefined
    // (resolved at its commit: what follows it — the response's events — is appended after it and
    // waits for the disk itself, and the WAL is synced in order)
    const startSpan = () => (started ??= this.appendThread(c, [...prefix, { id: startId, type: 'span.model_request_start' }], { committed: true, lazy: true }))
    setImmediate(startSpan)
    const previews = this.responsePreviews(c)
    const previewIds = new Map<number, string>()
    let usage = zeroUsage()
    let response: ModelResponse
    try {
      response = await this.deps.model.stream(request, {
        signal,
        onBlockStart: view.compaction
          ? undefined
          : (index, type) => {
              if (type === 'tool_use') return previews.toolCallStarted()
              if (type !== 'text' && type !== 'thinking') return
              const id = newId('event')
              previewIds.set(index, id)
              previews.start(index, { id, type: type === 'text' ? 'agent.message' : 'agent.thinking' })
            },
        onTextDelta: view.compaction
          ? undefined
          : (index, text) => {
              const id = previewIds.get(index)
              if (id) previews.delta(index, { type: 'event_delta', event_id: id, delta: { type: 'content_delta', content: { type: 'text', text }, index: 0 } })
            },
        onUsage: (u) => (usage = u),
      })
    } catch (err) {
      await startSpan()
      const e = err instanceof ModelRequestError ? err : new ModelRequestError('connection', (err as Error).message, { cause: err })
      if (!c.control.mayRecord) return
      const end: EventInputOf<'span.model_request_end'> = { type: 'span.model_request_end', model_request_start_id: startId, is_error: true, model_usage: usage, model }
      if (e.kind === 'aborted' || c.control.stopped) {
        await this.appendThread(c, [{ ...end, interrupted: true }])
        return
      }
      const exhausted = !e.retryable || attempt + 1 > this.o.maxRetries
      const error: EventInput = {
        type: 'session.error',
        error: { type: e.apiErrorType, message: e.message, retry_status: { type: exhausted ? 'exhausted' : 'retrying' } },
        // Corral additions (the API has no such fields): which attempt of the episode failed, of
        // how many, and the endpoint's HTTP status, so a client can show "retrying 3/5 (HTTP 529)".
        attempt: attempt + 1,
        max_attempts: e.retryable ? this.o.maxRetries + 1 : attempt + 1,
        ...(e.status !== undefined ? { status_code: e.status } : {}),
      }
      if (exhausted) {
        // a child whose retries are exhausted terminates (spec §4.6)
        const terminated: EventInput[] = c.threadKey !== null ? [{ type: 'session.thread_status_terminated', session_thread_id: c.thread.threadId, agent_name: c.agentName }] : []
        await this.appendThread(c, [end, error, this.idleEvent(c, { type: 'retries_exhausted' }), ...terminated])
        return
      }
      // a thread retrying a model request is rescheduled until its next attempt starts (runningPrefix writes running again)
      await this.appendThread(c, [end, error, this.rescheduledEvent(c)])
      const exp = Math.min(this.o.backoffMaxMs, this.o.backoffBaseMs * 2 ** attempt)
      const delay = Math.max(e.retryAfterMs ?? 0, exp / 2 + (exp / 2) * this.o.random())
      await pause(Math.min(delay, this.o.backoffMaxMs), signal)
      return
    }
    await startSpan()
    if (!c.control.mayRecord) return
    // an interrupt reached this brain after the response was complete: the turn still stops (the
    // fold stops its calls, see decideNext), and a child's final text is not sent as a report
    const cutShort = signal.aborted && !c.control.stopped
    const end: EventInputOf<'span.model_request_end'> = {
      type: 'span.model_request_end',
      model_request_start_id: startId,
      is_error: false,
      model_usage: response.usage,
      model,
      stop_reason: response.stopReason,
      context_seq: contextSeq,
    }
    if (view.compaction) {
      const summary = response.blocks.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('\n')
      await this.appendThread(c, [
        { ...end, stop_reason: 'compaction' },
        { type: 'agent.thread_context_compacted', summary, through_seq: view.compaction.throughSeq, through_event_id: view.compaction.throughEventId },
      ])
      return
    }
    let out = this.responseEvents(response, previewIds, c)
    // A final answer (no tool calls) ends the turn in the same commit: one fsync fewer per turn.
    // The idle carries context_seq too, so input that arrived meanwhile is still answered.
    const final = response.stopReason !== 'pause_turn' && !out.some((e) => e.type === 'agent.tool_use' || e.type === 'agent.mcp_tool_use' || e.type === 'agent.custom_tool_use')
    // working toward an outcome, the primary's turn ends in an evaluation, not an idle (decideNext: grade)
    const evaluating = final && c.threadKey === null && c.state.outcome?.phase === 'working' && response.stopReason !== 'refusal'
    const idle: EventInput[] = final && !evaluating ? [this.idleEvent(c, { type: response.stopReason === 'refusal' ? 'refusal' : 'end_turn' }, contextSeq)] : []
    // A workflow run's thread has one task and gets no follow-ups: the turn that ends it archives
    // it in the same commit, where the run's driver records the call's result (one commit per
    // agent fewer: orchestrator/workflow-runs.ts, project).
    if (idle.length && c.workflowRunId !== null) idle.push(runThreadArchive(c))
    if (final && c.threadKey !== null && c.workflowRunId === null && response.stopReason !== 'refusal' && !cutShort) out = this.report(out, c)
    const batch = [...out, ...(await this.unrunnableAsks(out, c)), end, ...idle]
    // The first call the hands will run now is journaled as started in the same commit as the
    // response (one fsync before it runs instead of two); the others as today, one by one.
    const first = cutShort ? undefined : this.firstHandsCall(out, c)
    if (!first) await this.appendThread(c, batch)
    else {
      await Promise.all([this.deps.journal.markStarted(c.sessionId, first), this.appendThread(c, batch)])
      this.journaledNow.add(first)
      if (this.journaledNow.size > 4096) this.journaledNow.delete(this.journaledNow.values().next().value as string)
    }
  }

  /**
   * A child's turn that ends with end_turn reports its final text to its parent: the text is
   * `agent.thread_message_sent` on the child (not also `agent.message`) and
   * `agent.thread_message_received` on the primary, in the batch that ends the turn, so a crash
   * delivers it exactly once.
   */
  private report(out: EventInput[], c: RunContext): EventInput[] {
    const texts: { type: 'text'; text: string }[] = []
    const rest: EventInput[] = []
    for (const e of out) {
      if (e.type === 'agent.message') for (const b of e.content) texts.push({ type: 'text', text: b.type === 'text' ? b.text : '' })
      else rest.push(e)
    }
    const content = texts.length ? texts : [{ type: 'text' as const, text: '(The agent ended its turn without a reply.)' }]
    return [
      ...rest,
      { type: 'agent.thread_message_sent', session_thread_id: c.thread.threadId, to_session_thread_id: c.primaryId, to_agent_name: null, content },
      { type: 'agent.thread_message_received', session_thread_id: null, from_session_thread_id: c.thread.threadId, from_agent_name: c.agentName, content },
    ]
  }

  /**
   * Results for the `ask` toolset calls of a response that no sandbox can run (the router says
   * why): they fail at once with the reason instead of waiting for an approval that could only
   * lead to the same failure.
   */
  private async unrunnableAsks(out: EventInput[], c: RunContext): Promise<EventInput[]> {
    const router = this.deps.router
    if (!router.unavailable) return []
    const results: EventInput[] = []
    const reasons = new Map<string, string | undefined>()
    for (const e of out) {
      if (e.type !== 'agent.tool_use' || e.evaluated_permission !== 'ask') continue
      const name = String(e.name)
      if (!reasons.has(name)) reasons.set(name, await router.unavailable(c.sessionId, name).catch(() => undefined))
      const reason = reasons.get(name)
      if (reason) results.push(toolResult({ id: String(e.id), type: 'agent.tool_use' }, { content: `Not run (and not put to the user for approval): no sandbox can run it here: ${reason}`, isError: true }))
    }
    return results
  }

  /** The MCP tools of the session's servers, when its agent has an mcp_toolset (none otherwise). */
  private async mcpTools(c: RunContext): Promise<readonly McpToolDefinition[]> {
    // (one empty list: the context view finds a thread's tool set again by its parts' identities)
    if (!this.deps.mcp || !(c.agent.tools ?? []).some((t) => t.type === 'mcp_toolset')) return NO_MCP_TOOLS
    const signal = c.control.signal
    if (signal.aborted) return NO_MCP_TOOLS
    // a server that takes long to answer must not hold up an interrupt or a shutdown
    let onAbort = () => {}
    const aborted = new Promise<{ tools: readonly McpToolDefinition[] }>((resolve) => {
      onAbort = () => resolve({ tools: NO_MCP_TOOLS })
      signal.addEventListener('abort', onAbort, { once: true })
    })
    try {
      return (await Promise.race([this.deps.mcp.tools(c.sessionId), aborted])).tools
    } catch {
      return NO_MCP_TOOLS // the source reports unreachable servers itself; the turn goes on without them
    } finally {
      signal.removeEventListener('abort', onAbort)
    }
  }

  /**
   * The id of the first call of a response that runTools will hand to the hands at once: an
   * allowed toolset call (no confirmation to wait for, not a platform tool, not a self-hosted
   * worker's), which is the first of the turn's calls to run. Undefined when there is none.
   */
  private firstHandsCall(out: readonly EventInput[], c: RunContext): string | undefined {
    for (const e of out) {
      if (e.type === 'agent.custom_tool_use' || e.type === 'agent.mcp_tool_use') return undefined
      if (e.type !== 'agent.tool_use') continue
      if (e.evaluated_permission !== 'allow' || c.state.workerTools?.has(e.name)) return undefined
      if (this.platform.find(e.name, this.offerContext(c))) return undefined
      return routeTool(c.agent.tools ?? [], e.name).kind === 'toolset' && e.id ? e.id : undefined
    }
    return undefined
  }

  /** The events a finished response becomes, in order; previews' pre-assigned ids are kept. */
  private responseEvents(response: ModelResponse, previewIds: Map<number, string>, c: RunContext): EventInput[] {
    const out: EventInput[] = []
    response.blocks.forEach((b, index) => {
      const id = previewIds.get(index) ?? newId('event')
      if (b.type === 'thinking') out.push({ id, type: 'agent.thinking', thinking: b.thinking, signature: b.signature })
      else if (b.type === 'redacted_thinking') out.push({ id, type: 'agent.thinking', redacted: true })
      else if (b.type === 'text') {
        if (b.text.length) out.push({ id, type: 'agent.message', content: [{ type: 'text', text: b.text }] })
      } else if (b.type === 'tool_use') {
        const route = routeTool(c.agent.tools ?? [], b.name)
        if (route.kind === 'custom') out.push({ id, type: 'agent.custom_tool_use', name: b.name, input: b.input })
        else if (route.kind === 'toolset' || route.kind === 'mcp') {
          // `auto` is evaluated as ask: Corral has no classifier to judge a single call
          const evaluation: ToolEvaluation = route.policy === 'auto' ? { type: 'auto', evaluated_permission: { type: 'ask', reason_code: 'no_local_classifier' } } : { type: route.policy }
          if (route.kind === 'mcp') {
            const name = b.name.slice(route.serverName.length + 2)
            out.push({ id, type: 'agent.mcp_tool_use', mcp_server_name: route.serverName, name, input: b.input, evaluated_permission: route.permission, evaluation })
          } else {
            // The person allowed exactly this command for the session: it does not ask again.
            const command = (b.input as { command?: unknown } | undefined)?.command
            const allowedBy = route.permission === 'ask' && b.name === 'bash' && typeof command === 'string' ? c.state.allowedCommands.get(command) : undefined
            if (allowedBy) out.push({ id, type: 'agent.tool_use', name: b.name, input: b.input, evaluated_permission: 'allow', evaluation, corral_allowed_by: allowedBy })
            else out.push({ id, type: 'agent.tool_use', name: b.name, input: b.input, evaluated_permission: route.permission, evaluation })
          }
        } else out.push({ id, type: 'agent.tool_use', name: b.name, input: b.input, evaluated_permission: 'allow' })
      }
    })
    return out
  }
}

type ToolEvaluation = NonNullable<EventOf<'agent.tool_use'>['evaluation']>

interface RunContext {
  sessionId: string
  thread: ThreadRef
  /** The log's key of the thread: null for the primary. */
  threadKey: ThreadKey
  /** The workflow run a child thread belongs to (its final text goes to the run's program, not to the primary). */
  workflowRunId: string | null
  primaryId: string
  /** A multi-agent session: threads report their own status and the session's is the aggregate. */
  multi: boolean
  session: { id: string; agent: unknown; budget?: unknown; resources?: readonly unknown[] }
  sessionAgent: ThreadAgent
  agentName: string
  roster: DelegationRoster | null
  threads: SessionThreads
  agent: ThreadAgent & ViewAgent & { tools?: AgentToolConfig[] }
  events: ViewEvent[]
  state: SessionState
  control: TurnControl
}

/** The result event of a call: `agent.mcp_tool_result` for an MCP tool, `agent.tool_result` otherwise. */
function toolResult(t: Pick<OpenToolUse, 'id' | 'type'>, o: ToolOutcome, interrupted = false, id?: string): EventInput {
  const content = [{ type: 'text' as const, text: o.content }]
  const ev: EventInputOf<'agent.mcp_tool_result'> | EventInputOf<'agent.tool_result'> =
    t.type === 'agent.mcp_tool_use'
      ? { type: 'agent.mcp_tool_result', mcp_tool_use_id: t.id, content, is_error: o.isError }
      : { type: 'agent.tool_result', tool_use_id: t.id, content, is_error: o.isError }
  if (id) ev.id = id
  if (interrupted) ev.interrupted = true
  // Corral additions (the API has no such fields; nothing shared changes meaning): what the
  // renderer shows on a tool card.
  if (typeof o.exitCode === 'number') ev.exit_code = o.exitCode
  if (typeof o.durationMs === 'number') ev.duration_ms = Math.round(o.durationMs)
  if (o.stderr?.length) ev.stderr_ranges = o.stderr.map(([from, to]) => [from, to])
  return ev
}

/** The text of the thread's last model response (its agent.message events after the last request's start): what the grader reads as the final message. */
function finalMessageOf(events: readonly ViewEvent[], thread: ThreadKey): string {
  const texts: string[] = []
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i].event as { type: string; session_thread_id?: string | null; content?: { type: string; text?: string }[] }
    if ((e.session_thread_id || null) !== thread) continue
    if (e.type === 'span.model_request_start') break
    if (e.type === 'agent.message') texts.unshift((e.content ?? []).map((b) => (b.type === 'text' ? (b.text ?? '') : '')).join(''))
  }
  return texts.join('\n\n').trim()
}


function spentCents(usageByModel: Map<string, ModelUsage>): number {
  let total = 0
  for (const [model, u] of usageByModel) total += listCostCents(model, u)
  return total
}

/** An event of a child thread: its own unless it names another (null: the primary, stored without the field). */
function onThread(e: EventInput, threadId: string): EventInput {
  if (e.session_thread_id === undefined) return { ...e, session_thread_id: threadId }
  if (e.session_thread_id === null) {
    const { session_thread_id: _t, ...rest } = e
    return rest as EventInput
  }
  return e
}

const STATUS_TYPES = new Set(['session.thread_status_running', 'session.thread_status_idle', 'session.thread_status_rescheduled', 'session.thread_status_terminated'])
function isStatusEvent(e: EventInput): boolean {
  return STATUS_TYPES.has(e.type)
}

/** A workflow run's thread's archive, written with the idle that ends its one task. */
function runThreadArchive(c: RunContext): EventInput {
  return { type: 'session.thread_status_terminated', session_thread_id: c.thread.threadId, agent_name: c.agentName, archived: true }
}

function isRunThreadArchive(e: EventInput, c: RunContext): boolean {
  return c.workflowRunId !== null && e.type === 'session.thread_status_terminated' && e.archived === true
}

/** The thread a status event names (the primary's id for one without). */
function threadOf(e: EventInput, primaryId: string): string {
  return typeof e.session_thread_id === 'string' ? e.session_thread_id : primaryId
}

/** The session status event the threads' statuses call for once `batch` is appended (the fold itself is not changed). */
function previewAggregate(threads: SessionThreads, batch: readonly EventInput[]): { agg: EventInput | undefined; after: SessionThreads } {
  const copy = threads.fork()
  let seq = threads.lastSeq
  for (const e of batch) copy.apply(++seq, e as unknown as Record<string, unknown> & { type: string })
  return { agg: copy.aggregateEvent(), after: copy }
}

/**
 * At the budget, once no thread works and one is paused at it, every running workflow run pauses
 * (spec §9): its `workflow_run.status_idle` goes before the session's usage and idle (the spec's
 * open point, decided), and the run no longer keeps the session running. Raising the budget
 * resumes them (SessionStore.update writes their status_running).
 */
function runsPausedAtBudget(after: SessionThreads): EventInput[] {
  if (![...after.runs.values()].includes('running')) return []
  const threads = [after.primary, ...after.allChildren()]
  if (threads.some((t) => t.status === 'running' || t.status === 'rescheduling')) return []
  if (!threads.some((t) => t.status === 'idle' && t.lastIdle?.type === 'budget_reached')) return []
  return [...after.runs].filter(([, state]) => state === 'running').map(([id]) => ({ type: 'workflow_run.status_idle', workflow_run_id: id }))
}

/** A session idle goes with the `session.usage` snapshot immediately before it (spec §4.4, §9). */
function withUsage(agg: EventInput, threads: SessionThreads, budget: () => unknown): EventInput[] {
  return agg.type === 'session.status_idle' ? [threads.usageEvent(budget()), agg] : [agg]
}

