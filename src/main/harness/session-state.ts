import { answeredUseId, isOnThread, permissionOf, statusChangeOf, type LoggedEventOf, type RequestEvent, type ResultType, type StatusChange, type ThreadKey } from '../../shared/api/events'
import { defineFold, ignoring, type SeqEvent } from '../../shared/api/fold'
import type { ModelUsage } from './model-client'
import type { SessionStatus } from '../../shared/api/events'
import { DELIVERABLES_TOOL, OUTCOME_DEFAULT_MAX_ITERATIONS, deliverablePaths } from '../../shared/api/outcomes'

/** The outcome the primary works toward (`user.define_outcome`), as its events tell it. */
export interface OutcomeState {
  id: string
  defineSeq: number
  description: string
  /** The rubric's text (file rubrics are resolved to text on receipt). */
  rubric: string
  maxIterations: number
  /** The current 0-based evaluation cycle. */
  iteration: number
  /** working: the agent produces or revises; evaluating: a grader runs (openStartId); done: a terminal result was written. */
  phase: 'working' | 'evaluating' | 'done'
  /** The define, or the needs_revision end the agent now answers: an answer after it ends a working cycle. */
  sinceSeq: number
  /** The `span.outcome_evaluation_start` with no end yet (a dead process's evaluation is re-run under it). */
  openStartId?: string
  /** The files the agent named with ant__name_deliverables (its latest call). */
  deliverables: string[]
}

/** A tool call of the model that has no result yet. */
export interface OpenToolUse {
  id: string
  seq: number
  type: 'agent.tool_use' | 'agent.mcp_tool_use' | 'agent.custom_tool_use'
  /** The name the model called (`<server>__<tool>` for an MCP tool). */
  name: string
  input: Record<string, unknown>
  permission: 'allow' | 'ask' | null
  confirmation?: { result: 'allow' | 'deny'; deny_message?: string | null }
}

/** Everything the turn loop needs to know, folded from the log (nothing else is kept). */
export interface SessionState {
  /** The thread folded (the log's key: null for the primary thread). */
  thread: ThreadKey
  /**
   * Whose status events set this thread's status: `session` (the session's `session.status_*`,
   * a single-threaded session) or `thread` (its own `session.thread_status_*`: every child, and
   * the primary of a multi-agent session, whose session status is the aggregate of its threads).
   */
  statusScope: 'session' | 'thread'
  /** The primary thread's `sthr_` id, which its own `session.thread_status_*` events carry (multi-agent sessions). */
  primaryId?: string
  lastSeq: number
  /** The thread's last status event says: running | idle | rescheduling | terminated (idle when none). */
  status: SessionStatus
  lastIdle?: { seq: number; stopReason: { type: string; event_ids?: string[] } }
  lastAnswerSeq: number
  /**
   * How much of the log the last answer's request saw (its span end's `context_seq`; the span
   * end's own seq without one). An interrupt after it arrived while the request was in flight:
   * the answer does not settle it, even when the answer was logged after it.
   */
  lastAnswerSawSeq: number
  lastInterruptSeq: number
  /** A `span.model_request_start` with no end (the process died mid-request). */
  openSpanId?: string
  openToolUses: OpenToolUse[]
  /** The last user.message / system.message. */
  lastUserMessageSeq: number
  /** Input the model has not answered yet: user/system messages and tool results after the barrier. */
  newInputSeq: number
  /** `session.error` retrying events since the barrier: the attempt count for backoff. */
  failures: number
  /** Why the last successful model response stopped (end_turn, tool_use, refusal, ...). */
  lastStopReason?: string
  /** Usage summed over every model request (for the budget). */
  usageByModel: Map<string, ModelUsage>
  /**
   * Bash commands the person allowed for the rest of the session (Corral's
   * `corral_allow_for_session` on a confirmation), exact text → the confirmation's event id.
   */
  allowedCommands: Map<string, string>
  /**
   * Toolset tools a worker of the session's self_hosted environment runs (answered with
   * `user.tool_result`); absent: the harness runs every toolset call through its hands.
   */
  workerTools?: ReadonlySet<string>
  /** The session's latest outcome (primary thread only). */
  outcome?: OutcomeState
  /** The seq of the last `session.updated` that changed the budget (a raise resumes a thread paused at it). */
  budgetChangedSeq: number
  /** Workflow runs created and not ended: no outcome evaluation starts while one is open (spec §6.7, §8.4). */
  openWorkflowRuns: Set<string>
}

/** How a fold reads a thread's status (see SessionState.statusScope / primaryId) and who runs its toolset calls (workerTools). */
export interface FoldScope {
  statusScope?: 'session' | 'thread'
  primaryId?: string
  workerTools?: ReadonlySet<string>
}

/** Starts a fold of one thread of a session (`thread`: the log's key, null for the primary thread). */
export function newSessionState(thread: ThreadKey, scope: FoldScope = {}): SessionState {
  return {
    thread,
    statusScope: scope.statusScope ?? (thread === null ? 'session' : 'thread'),
    primaryId: scope.primaryId,
    workerTools: scope.workerTools,
    lastSeq: 0,
    status: 'idle',
    lastAnswerSeq: 0,
    lastAnswerSawSeq: 0,
    lastInterruptSeq: 0,
    openToolUses: [],
    lastUserMessageSeq: 0,
    newInputSeq: 0,
    failures: 0,
    usageByModel: new Map(),
    allowedCommands: new Map(),
    budgetChangedSeq: 0,
    openWorkflowRuns: new Set(),
  }
}

/** Folds a session's events on one thread (null: the primary) into its state. Pure. */
export function foldSession(events: readonly SeqEvent[], thread: ThreadKey, scope: FoldScope = {}): SessionState {
  return foldInto(newSessionState(thread, scope), events)
}

/**
 * Whether an event belongs to the fold of thread `s`: its own events; for the primary, its own
 * `session.thread_status_*` (which carry its `sthr_` id); for a child, an interrupt of every
 * thread (a `user.interrupt` without a thread).
 */
function concerns(s: SessionState, e: { type: string; session_thread_id?: string | null }): boolean {
  if (isOnThread(e, s.thread)) return true
  if (s.thread === null) return s.primaryId !== undefined && e.session_thread_id === s.primaryId
  // a budget change resumes every thread paused at it
  return (e.type === 'user.interrupt' || e.type === 'session.updated') && !e.session_thread_id
}

/**
 * Continues a fold with later events (those at or below `s.lastSeq` are skipped); events of
 * other threads only advance `lastSeq`. Returns `s`.
 */
export function foldInto(s: SessionState, events: readonly SeqEvent[]): SessionState {
  for (const { seq, event: e } of events) {
    if (seq <= s.lastSeq) continue
    s.lastSeq = seq
    if (!concerns(s, e)) continue
    step(s, e, seq)
  }
  return s
}

/** The status events of a thread: the session's own for the primary thread, `session.thread_status_*` for a child. */
const onStatus = (s: SessionState, e: { type: string; session_thread_id?: string | null }): StatusChange | undefined => {
  const c = statusChangeOf(e)
  if (!c || c.scope !== s.statusScope) return undefined
  s.status = c.status
  return c
}

const onIdle = (s: SessionState, e: LoggedEventOf<'session.status_idle'> | LoggedEventOf<'session.thread_status_idle'>, seq: number): void => {
  if (!onStatus(s, e)) return
  // an idle written with a model answer covers only what that request saw (context_seq)
  const contextSeq = 'context_seq' in e ? e.context_seq : undefined
  const sawThrough = typeof contextSeq === 'number' ? contextSeq : seq
  s.lastIdle = { seq, stopReason: e.stop_reason ?? { type: 'end_turn' } }
  // a turn that ended leaves no custom call waiting on the client (one logged after an interrupt that stopped the turn)
  if (s.lastIdle.stopReason.type === 'end_turn') dropCustom(s)
  if (s.newInputSeq <= sawThrough) resetBarrier(s)
  else s.failures = 0
}

const onToolUse = (s: SessionState, e: RequestEvent & { session_thread_id?: string | null }, seq: number): void => {
  if (e.type === 'agent.tool_use' && e.name === DELIVERABLES_TOOL && s.outcome && s.outcome.phase !== 'done') s.outcome.deliverables = deliverablePaths(e.input)
  s.openToolUses.push({
    id: e.id,
    seq,
    type: e.type,
    name: e.type === 'agent.mcp_tool_use' ? `${e.mcp_server_name}__${e.name}` : e.name,
    input: e.input ?? {},
    permission: permissionOf(e) as OpenToolUse['permission'],
  })
}

/** Input for the model: a message or a result. Results the harness writes while stopping a turn are not news for the model. */
const onInput = (s: SessionState, e: object, seq: number): void => {
  if (!('interrupted' in e && e.interrupted)) s.newInputSeq = seq
}

/** A result closes its call (whatever the result type: the answer table says which field names it). */
const onResult = (s: SessionState, e: LoggedEventOf<ResultType>, seq: number): void => {
  const useId = answeredUseId(e)
  s.openToolUses = s.openToolUses.filter((t) => t.id !== useId)
  onInput(s, e, seq)
}

/** custom tool calls are answered by the client; once the turn is stopped or moves on they are abandoned (the context view tells the model they got no result) */
const dropCustom = (s: SessionState) => {
  s.openToolUses = s.openToolUses.filter((t) => t.type !== 'agent.custom_tool_use')
}

/** One event of the thread: every type is handled or explicitly ignored (a new type does not compile until it is). */
const step = defineFold<SessionState, number>({
  'session.status_running': onStatus,
  'session.status_rescheduled': onStatus,
  'session.status_terminated': onStatus,
  'session.status_idle': onIdle,
  'session.thread_status_running': onStatus,
  'session.thread_status_rescheduled': onStatus,
  'session.thread_status_terminated': onStatus,
  'session.thread_status_idle': onIdle,
  'user.interrupt': (s, _e, seq) => {
    s.lastInterruptSeq = seq
    resetBarrier(s)
    dropCustom(s)
  },
  'user.message': (s, e, seq) => {
    s.lastUserMessageSeq = seq
    dropCustom(s)
    onInput(s, e, seq)
  },
  'system.message': (s, e, seq) => {
    s.lastUserMessageSeq = seq
    dropCustom(s)
    onInput(s, e, seq)
  },
  'span.model_request_start': (s, e) => {
    s.openSpanId = e.id
  },
  'span.model_request_end': (s, e, seq) => {
    if (s.openSpanId === e.model_request_start_id) s.openSpanId = undefined
    addUsage(s, e.model, e.model_usage)
    // a compaction request summarizes; it answers nothing
    if (!e.is_error && e.stop_reason !== 'compaction') {
      s.lastAnswerSeq = seq
      s.lastAnswerSawSeq = typeof e.context_seq === 'number' ? e.context_seq : seq
      s.lastStopReason = typeof e.stop_reason === 'string' ? e.stop_reason : 'end_turn'
      s.failures = 0
      // input appended while the request ran (after the part of the log it saw) is still news
      const sawThrough = typeof e.context_seq === 'number' ? e.context_seq : seq
      if (s.newInputSeq <= sawThrough) s.newInputSeq = 0
      // pause_turn: the endpoint paused a long turn; sending the conversation again continues it
      if (e.stop_reason === 'pause_turn') s.newInputSeq = seq
    }
  },
  'session.error': (s, e) => {
    // an MCP server's failure is not a failed model request: it does not delay the next one
    if (e.error?.retry_status?.type === 'retrying' && !e.error.type?.startsWith('mcp_')) s.failures++
  },
  'agent.tool_use': onToolUse,
  'agent.mcp_tool_use': onToolUse,
  'agent.custom_tool_use': onToolUse,
  'user.tool_confirmation': (s, e) => {
    const t = s.openToolUses.find((x) => x.id === e.tool_use_id)
    if (t && !t.confirmation) t.confirmation = { result: e.result, deny_message: e.deny_message }
    if (t && e.result === 'allow' && e.corral_allow_for_session === true && t.name === 'bash' && typeof t.input.command === 'string' && !s.allowedCommands.has(t.input.command)) {
      s.allowedCommands.set(t.input.command, e.id)
    }
  },
  'agent.tool_result': onResult,
  'agent.mcp_tool_result': onResult,
  'user.tool_result': onResult,
  'user.custom_tool_result': onResult,
  // a message from another thread (a task, a follow-up, a child's report) is input for the model
  'agent.thread_message_received': onInput,
  ...ignoring('agent.message', 'agent.thinking', 'agent.thread_context_compacted', 'agent.thread_message_sent'),
  ...ignoring('session.thread_created', 'session.usage', 'session.deleted'),
  'session.updated': (s, e, seq) => {
    if (e.budget === undefined) return
    s.budgetChangedSeq = seq
    // paused at the budget: the raise (or removal) is what it waited for; an evaluation due resumes by itself
    if (s.status === 'idle' && s.lastIdle?.stopReason.type === 'budget_reached' && !evaluationDue(s)) s.newInputSeq = seq
  },
  // the outcome is the agent's task: input for the model like a message (the view renders it as one)
  'user.define_outcome': (s, e, seq) => {
    const rubric = e.rubric as { type: string; content?: string; file_id?: string }
    s.outcome = {
      id: e.outcome_id,
      defineSeq: seq,
      description: e.description,
      rubric: rubric.type === 'text' ? String(rubric.content ?? '') : `(rubric file ${String(rubric.file_id)})`,
      maxIterations: typeof e.max_iterations === 'number' ? e.max_iterations : OUTCOME_DEFAULT_MAX_ITERATIONS,
      iteration: 0,
      phase: 'working',
      sinceSeq: seq,
      deliverables: [],
    }
    s.lastUserMessageSeq = seq
    dropCustom(s)
    onInput(s, e, seq)
  },
  'span.outcome_evaluation_start': (s, e) => {
    if (s.outcome?.id !== e.outcome_id) return
    s.outcome.phase = 'evaluating'
    s.outcome.openStartId = e.id
    s.outcome.iteration = e.iteration
  },
  'span.outcome_evaluation_end': (s, e, seq) => {
    addUsage(s, e.model, e.usage)
    const o = s.outcome
    if (o?.id !== e.outcome_id || o.phase === 'done') return
    o.openStartId = undefined
    if (e.result === 'needs_revision') {
      // the gaps are the agent's next input (the view renders them as a user turn)
      o.phase = 'working'
      o.iteration = e.iteration + 1
      o.sinceSeq = seq
      onInput(s, e, seq)
    } else {
      // satisfied, max_iterations_reached, failed, interrupted (or a result this Corral does not know): no further evaluation
      o.phase = 'done'
      // one final turn acknowledges what remains, with no further evaluation
      if (e.result === 'max_iterations_reached') onInput(s, e, seq)
    }
  },
  'workflow_run.created': (s, e) => {
    s.openWorkflowRuns.add(e.workflow_run_id)
  },
  // a run that ended gives the primary a turn to read its result (docs/workflows.md)
  'workflow_run.status_ended': (s, e, seq) => {
    s.openWorkflowRuns.delete(e.workflow_run_id)
    onInput(s, e, seq)
  },
  ...ignoring('span.outcome_evaluation_ongoing'),
  ...ignoring('workflow_run.status_running', 'workflow_run.status_idle', 'workflow_run.error', 'workflow_run.phase_started', 'workflow_run.phase_ended'),
})

function addUsage(s: SessionState, model: unknown, u: Partial<ModelUsage> | undefined): void {
  if (!u) return
  const key = typeof model === 'string' ? model : ''
  const acc = s.usageByModel.get(key) ?? { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
  for (const k of Object.keys(acc) as (keyof ModelUsage)[]) acc[k] += u[k] ?? 0
  s.usageByModel.set(key, acc)
}

/** Paused at the budget and not raised since (a raise or removal resumes it). */
function pausedAtBudget(s: SessionState): boolean {
  return s.status === 'idle' && s.lastIdle?.stopReason.type === 'budget_reached' && s.budgetChangedSeq < s.lastIdle.seq
}

/** The agent's turn ended while working toward an outcome: its deliverable is due for an evaluation. */
function evaluationDue(s: SessionState): boolean {
  const o = s.outcome
  return !!o && o.phase === 'working' && s.lastAnswerSeq > o.sinceSeq && s.lastStopReason !== 'refusal'
}

/**
 * The hook of "no evaluation starts while a workflow run is open" (spec §6.7, §8.4): an evaluation
 * due waits while the fold counts a `workflow_run.created` without its `workflow_run.status_ended`;
 * the run's end wakes the primary, which then evaluates. Pure.
 */
export function evaluationBlockedByWorkflowRun(s: Pick<SessionState, 'openWorkflowRuns'>): boolean {
  return s.openWorkflowRuns.size > 0
}

function resetBarrier(s: SessionState): void {
  s.newInputSeq = 0
  s.failures = 0
}

export interface DecideOptions {
  maxRetries: number
}

/** The next thing the turn loop does; `none` means the session waits for the outside world. */
export type NextStep =
  | { kind: 'none' }
  | { kind: 'close_span'; spanId: string }
  /** Close calls without running them: because of an interrupt, or because a new message abandoned the calls waiting on the person. */
  | { kind: 'stop_tools'; toolUses: OpenToolUse[]; cause: 'interrupt' | 'new_message' }
  | { kind: 'run_tools'; run: OpenToolUse[]; deny: OpenToolUse[] }
  | { kind: 'idle'; stopReason: { type: 'end_turn' } | { type: 'requires_action'; event_ids: string[] } | { type: 'refusal' } }
  | { kind: 'model'; attempt: number }
  /** Evaluate the outcome's deliverable; `startId`: re-run the evaluation a dead process started (its start is in the log). */
  | { kind: 'grade'; startId?: string }
  /** End the active outcome without a verdict (an interrupt; `startId` '' when no evaluation had started). */
  | { kind: 'end_outcome'; result: 'interrupted'; startId: string }

/**
 * Decides the next step from the folded state. Pure. Order: finish an interrupt, close a
 * request a dead process left open, settle tool calls, wait for answers, call the model, idle.
 */
export function decideNext(s: SessionState): NextStep {
  // An interrupt is settled by a later idle, or by an answer whose request already saw it: an
  // answer that was in flight when it arrived (logged after it, but its context_seq before it)
  // does not settle it, so the interrupt wins over a response that happened to finish first.
  const interruptPending = s.lastInterruptSeq > (s.lastIdle?.seq ?? 0) && s.lastInterruptSeq > s.lastAnswerSawSeq
  const unconfirmedOrCustom = (t: OpenToolUse) => t.type === 'agent.custom_tool_use' || (t.permission === 'ask' && !t.confirmation)
  if (interruptPending) {
    const toolUses = s.openToolUses.filter(isHarnessRun)
    if (toolUses.length) return { kind: 'stop_tools', toolUses, cause: 'interrupt' }
    if (s.openSpanId) return { kind: 'close_span', spanId: s.openSpanId }
    const o = s.outcome
    if (o && o.phase !== 'done' && o.defineSeq < s.lastInterruptSeq) return { kind: 'end_outcome', result: 'interrupted', startId: o.openStartId ?? '' }
    if (s.newInputSeq > s.lastInterruptSeq) return { kind: 'model', attempt: s.failures }
    if (s.status === 'idle' && s.lastIdle && s.lastIdle.stopReason.type !== 'requires_action') return { kind: 'none' }
    return { kind: 'idle', stopReason: { type: 'end_turn' } }
  }
  if (s.openSpanId) return { kind: 'close_span', spanId: s.openSpanId }
  // an evaluation a dead process started is run again under its start (one verdict, never two)
  if (s.outcome?.phase === 'evaluating' && s.outcome.openStartId) return pausedAtBudget(s) ? { kind: 'none' } : { kind: 'grade', startId: s.outcome.openStartId }

  const allowed = (t: OpenToolUse) => t.permission === 'allow' || t.confirmation?.result === 'allow'
  // a self_hosted session's toolset call, once allowed, waits for its worker's user.tool_result
  const byWorker = (t: OpenToolUse) => t.type === 'agent.tool_use' && s.workerTools?.has(t.name) === true && allowed(t)
  const run = s.openToolUses.filter((t) => isHarnessRun(t) && allowed(t) && !byWorker(t))
  const deny = s.openToolUses.filter((t) => isHarnessRun(t) && t.permission === 'ask' && t.confirmation?.result === 'deny')
  const waiting = s.openToolUses.filter((t) => unconfirmedOrCustom(t) || byWorker(t))
  // A new user message while calls wait for confirmation: those calls are abandoned (the model
  // hears so). A call a worker is running is not: like a call the hands run, it finishes first.
  const abandoned = waiting.filter((t) => t.seq < s.lastUserMessageSeq && !byWorker(t))
  if (abandoned.length) return { kind: 'stop_tools', toolUses: abandoned, cause: 'new_message' }
  if (run.length || deny.length) return { kind: 'run_tools', run, deny }
  if (waiting.length) {
    const ids = waiting.map((t) => t.id)
    const li = s.lastIdle
    const same = s.status === 'idle' && li?.stopReason.type === 'requires_action' && sameSet(li.stopReason.event_ids ?? [], ids)
    return same ? { kind: 'none' } : { kind: 'idle', stopReason: { type: 'requires_action', event_ids: ids } }
  }
  if (s.newInputSeq > 0) return { kind: 'model', attempt: s.failures }
  if (evaluationDue(s)) return pausedAtBudget(s) || evaluationBlockedByWorkflowRun(s) ? { kind: 'none' } : { kind: 'grade' }
  if (s.lastAnswerSeq > (s.lastIdle?.seq ?? 0)) {
    return { kind: 'idle', stopReason: s.lastStopReason === 'refusal' ? { type: 'refusal' } : { type: 'end_turn' } }
  }
  return { kind: 'none' }
}

/** A call the harness runs itself (a toolset or MCP tool), not one the client answers. */
function isHarnessRun(t: OpenToolUse): boolean {
  return t.type === 'agent.tool_use' || t.type === 'agent.mcp_tool_use'
}

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x) => b.includes(x))
}
