/**
 * The thread's timeline as a fold over the session's events (the log is the truth; the UI is a
 * view of it). Pure: no DOM, no React. A tool call and everything that answers it (confirmation,
 * result) fold into one item; never-stored previews (`event_start` / `event_delta`) make a
 * streaming item that the stored event with the same id later replaces in place.
 *
 * Incremental: `append` is O(1) per event, so a live stream costs nothing on a long session;
 * `TimelineBuilder.from(events)` folds a whole history in one pass.
 */

import { answeredUseId, isPending, statusChangeOf, type RequestType, type ThreadStatus } from '../../../../shared/api/events'
import { ADVISOR_AGENT_NAME } from './thread-tree'

/** The fields of a logged event the fold reads. Events come from the SDK's types; this is their common part. */
export interface TimelineEvent {
  id: string
  type: string
  processed_at?: string | null
  session_thread_id?: string | null
  [field: string]: unknown
}

export interface ToolResult {
  text: string
  isError: boolean
  at?: string
  exitCode?: number
  durationMs?: number
  images: number
  /** The user interrupted the turn while this call ran (or before it ran). */
  interrupted: boolean
  /** The parts of `text` a bash command wrote to stderr (Corral's `stderr_ranges`; ranges that do not fit the text are dropped). */
  stderr?: [number, number][]
}

export interface ToolItem {
  kind: 'tool'
  id: string
  at?: string
  threadId?: string | null
  name: string
  /** 'toolset' (bash, read, write, edit, ...), 'mcp' or 'custom'. */
  source: 'toolset' | 'mcp' | 'custom'
  mcpServer?: string
  input: Record<string, unknown>
  permission?: 'allow' | 'ask' | 'deny'
  confirmation?: { result: 'allow' | 'deny'; denyMessage?: string | null; at?: string }
  result?: ToolResult
  /** Allowed without asking: the person allowed this exact command for the session (that confirmation's id). */
  allowedBy?: string
  /** Output streamed while the call runs (never-stored previews); the stored result supersedes it. */
  live?: string
  /** The parts of `live` that came as stderr (previews with Corral's `stream: 'stderr'`). */
  liveStderr?: [number, number][]
  /** Corral's latest line about the running call (`stream: 'status'`: its sandbox starting), never the command's output. */
  liveStatus?: string
}

export type TimelineItem =
  | { kind: 'user'; id: string; at?: string; text: string; attachments: number }
  | { kind: 'agent'; id: string; at?: string; text: string; streaming: boolean }
  | { kind: 'thinking'; id: string; at?: string; text: string; streaming: boolean }
  | ToolItem
  | { kind: 'turn'; id: string; at?: string; stopReason: string; detail?: string }
  | { kind: 'interrupt'; id: string; at?: string }
  | {
      kind: 'error'
      id: string
      at?: string
      errorType: string
      message: string
      retry?: string
      /** One row per failing request episode: the failed attempts so far, of how many, and the last HTTP status. */
      attempts?: number
      maxAttempts?: number
      statusCode?: number
    }
  | { kind: 'thread'; id: string; at?: string; threadId: string; agentName: string; state: 'created' | ThreadStatus; stopReason?: string; archived?: boolean }
  | { kind: 'thread_message'; id: string; at?: string; direction: 'sent' | 'received'; otherThreadId: string; agentName?: string | null; text: string; fromRun?: boolean }
  | DelegationItem
  | ReportItem
  | { kind: 'note'; id: string; at?: string; label: string; text: string; tone: 'neutral' | 'warn' | 'good' }
  | WorkflowRunItem

/**
 * On the primary's timeline: a workflow run, at its `workflow_run.created`. The row names the run
 * only; the run card draws it live from the session's run board (features/workflows), which folds
 * the run's other events and its threads' (none of which make rows of their own here).
 */
export interface WorkflowRunItem {
  kind: 'workflow_run'
  id: string
  at?: string
  runId: string
  name: string
}

/**
 * On the primary's timeline: the lead handed work to a thread. Made from the thread's
 * `session.thread_created` (the task filled in from the `agent.thread_message_sent` that follows
 * it), or from a later `agent.thread_message_sent` to a thread that exists (a follow-up).
 */
export interface DelegationItem {
  kind: 'delegation'
  id: string
  at?: string
  threadId: string
  agentName: string
  /** An advisor consultation reads "Consulted the advisor"; a workflow run's thread as started by the run. */
  target: 'subagent' | 'advisor' | 'workflow'
  /** The task as sent (absent until its `agent.thread_message_sent` is folded). */
  task?: string
  followUp: boolean
}

/** On the primary's timeline: a thread's report back (`agent.thread_message_received`), or an advisor's advice. */
export interface ReportItem {
  kind: 'report'
  id: string
  at?: string
  threadId: string
  agentName: string
  /** 'advisor': the advice of a consultation (`anthropic.advisor`), read as such. */
  from: 'subagent' | 'advisor'
  text: string
}

/** Event types that never show in the timeline (they feed usage and status instead). */
const HIDDEN = new Set([
  'span.model_request_start',
  'span.model_request_end',
  'session.status_running',
  'session.status_rescheduled',
  'session.usage',
  'session.updated',
  'session.deleted',
])

export function textOf(content: unknown): string {
  if (!Array.isArray(content)) return ''
  const parts: string[] = []
  for (const block of content as { type?: string; text?: string; content?: unknown }[]) {
    if (block?.type === 'text' && typeof block.text === 'string') parts.push(block.text)
    else if (block?.type === 'search_result' && Array.isArray(block.content)) parts.push(textOf(block.content))
    else if (block?.type === 'redacted') parts.push('[redacted]')
  }
  return parts.join('\n')
}

function countBlocks(content: unknown, type: string): number {
  return Array.isArray(content) ? content.filter((b: { type?: string }) => b?.type === type).length : 0
}

function stopReasonOf(e: TimelineEvent): string {
  const r = e.stop_reason as { type?: string } | undefined
  return r?.type ?? 'end_turn'
}

/** An event's `stderr_ranges` that fit `text` (ascending, inside it), or undefined. */
function stderrRanges(e: TimelineEvent, text: string): [number, number][] | undefined {
  const v = e.stderr_ranges
  if (!Array.isArray(v)) return undefined
  const out: [number, number][] = []
  let end = 0
  for (const r of v) {
    if (!Array.isArray(r) || typeof r[0] !== 'number' || typeof r[1] !== 'number' || r[0] < end || r[1] <= r[0] || r[1] > text.length) return undefined
    out.push([r[0], r[1]])
    end = r[1]
  }
  return out.length ? out : undefined
}

/** `ranges` with [from, to) added (merged with the last when they touch). */
function withRange(ranges: [number, number][] | undefined, from: number, to: number): [number, number][] {
  const out = ranges ? [...ranges] : []
  const last = out[out.length - 1]
  if (last && last[1] === from) out[out.length - 1] = [last[0], to]
  else out.push([from, to])
  return out
}

function numberField(e: TimelineEvent, ...names: string[]): number | undefined {
  for (const n of names) {
    const v = e[n]
    if (typeof v === 'number' && Number.isFinite(v)) return v
  }
  return undefined
}

/**
 * Which thread a builder shows: `null` is the primary thread (events logged without a thread id,
 * plus the lifecycle of its subagent threads); a `sthr_` id is that subagent's thread; `'*'` is
 * every thread (the confirmation queue).
 */
export type ThreadFilter = string | null

export class TimelineBuilder {
  /** The items, oldest first. Replaced (not mutated) item objects mark what changed. */
  items: TimelineItem[] = []
  private readonly index = new Map<string, number>()
  /** Result or confirmation that arrived before its tool_use (history read newest-first). */
  private readonly orphans = new Map<string, TimelineEvent[]>()
  private readonly seen = new Set<string>()
  /** Per thread ('' = primary): the event ids its latest idle said it requires action on. */
  private readonly waiting = new Map<string, ReadonlySet<string>>()
  /** Previewed tool result id → the tool_use id whose card shows its output. */
  private readonly liveResults = new Map<string, string>()
  /** Primary view: child thread id → its delegation card still waiting for the task text. */
  private readonly taskless = new Map<string, string>()
  /** Primary view: the advisor consultation threads (their thread_created's agent is the advisor). */
  private readonly advisorThreads = new Set<string>()
  /** Child thread id → its agent name (from the thread events that name it: created, status). */
  private readonly agentNames = new Map<string, string>()
  /** Primary view: the threads of workflow runs (their lifecycle is drawn by the run card, not as rows). */
  private readonly runThreads = new Set<string>()
  /** A child's own view: the workflow run that started this thread (its task is the program's call). */
  private ownRun: string | undefined

  constructor(readonly thread: ThreadFilter = null) {}

  static from(events: readonly TimelineEvent[], thread: ThreadFilter = null): TimelineBuilder {
    const b = new TimelineBuilder(thread)
    for (const e of events) b.append(e)
    return b
  }

  /** The agent name of a child thread, as its thread events named it; undefined when none was folded. */
  agentOf(threadId: string): string | undefined {
    return this.agentNames.get(threadId)
  }

  /** True when this event id has been folded in already (a stream replaying history). */
  has(eventId: string): boolean {
    return this.seen.has(eventId)
  }

  private inThread(e: TimelineEvent): boolean {
    const tid = e.session_thread_id ?? null
    if (this.thread === '*') return true
    if (this.thread === null) return tid === null || e.type.startsWith('session.thread_')
    return tid === this.thread
  }

  private push(item: TimelineItem): void {
    this.index.set(item.id, this.items.length)
    this.items.push(item)
  }

  private replace(id: string, update: (old: TimelineItem) => TimelineItem): boolean {
    const i = this.index.get(id)
    if (i === undefined) return false
    this.items[i] = update(this.items[i])
    return true
  }

  /** Folds one stored event in. Returns whether the items changed. Duplicates are ignored. */
  append(e: TimelineEvent): boolean {
    if (!e || typeof e.id !== 'string' || this.seen.has(e.id)) return false
    this.seen.add(e.id)
    if (e.session_thread_id && typeof e.agent_name === 'string' && e.agent_name) this.agentNames.set(e.session_thread_id, e.agent_name)
    const waitingChanged = this.trackWaiting(e)
    if (HIDDEN.has(e.type) || !this.inThread(e)) return waitingChanged
    if (this.thread === null && this.ofRunThread(e)) return waitingChanged
    if (e.type === 'session.thread_created' && this.thread !== null && typeof e.workflow_run_id === 'string' && e.workflow_run_id) this.ownRun = e.workflow_run_id
    const at = e.processed_at ?? undefined
    switch (e.type) {
      case 'user.message':
        this.push({ kind: 'user', id: e.id, at, text: textOf(e.content), attachments: countBlocks(e.content, 'image') + countBlocks(e.content, 'document') })
        return true
      case 'agent.message': {
        const item: TimelineItem = { kind: 'agent', id: e.id, at, text: textOf(e.content), streaming: false }
        if (!this.replace(e.id, () => item)) this.push(item)
        return true
      }
      case 'agent.thinking': {
        const streamed = this.index.get(e.id)
        const text = streamed !== undefined ? (this.items[streamed] as { text?: string }).text ?? '' : ''
        const item: TimelineItem = { kind: 'thinking', id: e.id, at, text, streaming: false }
        if (!this.replace(e.id, () => item)) this.push(item)
        return true
      }
      case 'agent.tool_use':
      case 'agent.mcp_tool_use':
      case 'agent.custom_tool_use': {
        const item: ToolItem = {
          kind: 'tool',
          id: e.id,
          at,
          threadId: e.session_thread_id ?? null,
          name: String(e.name ?? 'tool'),
          source: e.type === 'agent.mcp_tool_use' ? 'mcp' : e.type === 'agent.custom_tool_use' ? 'custom' : 'toolset',
          mcpServer: typeof e.mcp_server_name === 'string' ? e.mcp_server_name : undefined,
          input: (e.input as Record<string, unknown>) ?? {},
          permission: e.evaluated_permission as ToolItem['permission'],
          allowedBy: typeof e.corral_allowed_by === 'string' ? e.corral_allowed_by : undefined,
        }
        this.push(item)
        for (const o of this.orphans.get(e.id) ?? []) this.answerTool(o)
        this.orphans.delete(e.id)
        return true
      }
      case 'agent.tool_result':
      case 'agent.mcp_tool_result':
      case 'user.custom_tool_result':
      case 'user.tool_result':
      case 'user.tool_confirmation':
        return this.answerTool(e)
      case 'user.interrupt':
        this.push({ kind: 'interrupt', id: e.id, at })
        return true
      case 'session.status_idle': {
        const reason = stopReasonOf(e)
        const details = e.stop_details as { explanation?: string | null } | null | undefined
        this.push({ kind: 'turn', id: e.id, at, stopReason: reason, detail: details?.explanation ?? undefined })
        return true
      }
      case 'session.status_terminated':
        this.push({ kind: 'note', id: e.id, at, label: 'Session terminated', text: '', tone: 'warn' })
        return true
      case 'session.error': {
        const err = (e.error as { type?: string; message?: string; retry_status?: { type?: string } }) ?? {}
        const extra = e as { attempt?: unknown; max_attempts?: unknown; status_code?: unknown }
        const num = (v: unknown) => (typeof v === 'number' ? v : undefined)
        const item: TimelineItem = {
          kind: 'error',
          id: e.id,
          at,
          errorType: err.type ?? 'unknown_error',
          message: err.message ?? '',
          retry: err.retry_status?.type,
          attempts: num(extra.attempt),
          maxAttempts: num(extra.max_attempts),
          statusCode: num(extra.status_code),
        }
        // The harness writes one session.error per failed attempt: a model request that is being
        // retried continues the row above (one row per failing episode) rather than adding one.
        const last = this.items[this.items.length - 1]
        if (last?.kind === 'error' && last.retry === 'retrying' && last.errorType.startsWith('model_') && item.errorType.startsWith('model_')) {
          this.index.set(item.id, this.items.length - 1)
          this.items[this.items.length - 1] = { ...item, id: last.id, attempts: item.attempts ?? (last.attempts ?? 1) + 1 }
          return true
        }
        this.push({ ...item, attempts: item.attempts ?? 1 })
        return true
      }
      case 'session.thread_created':
        if (this.thread === null) return this.delegated(e, at)
      // falls through: a child's own view shows its creation as a lifecycle row
      case 'session.thread_status_running':
      case 'session.thread_status_idle':
      case 'session.thread_status_rescheduled':
      case 'session.thread_status_terminated': {
        const state = e.type === 'session.thread_created' ? 'created' : (statusChangeOf(e)?.status ?? 'running')
        if (state === 'running') return false
        // A child's own timeline: its idles end its turns like the session's do on the primary's.
        if (this.thread !== null && this.thread !== '*' && state !== 'created') {
          if (state === 'idle') this.push({ kind: 'turn', id: e.id, at, stopReason: stopReasonOf(e) })
          else if (state === 'terminated') this.push({ kind: 'note', id: e.id, at, label: e.archived === true ? 'Thread archived' : 'Thread terminated', text: 'It accepts no more messages.', tone: e.archived === true ? 'neutral' : 'warn' })
          else this.push({ kind: 'note', id: e.id, at, label: 'Rescheduled', text: 'A transient failure; the thread retries.', tone: 'neutral' })
          return true
        }
        // On the primary's view a child's turn that ended well is told by its report card (and
        // the thread tree's status); what is left is news: waiting for you, failed, terminated.
        // An advisor consultation always terminates when it is done: that is no news either.
        if (this.thread === null && state === 'idle' && stopReasonOf(e) === 'end_turn') return false
        if (this.thread === null && state === 'terminated' && this.isAdvisor(String(e.session_thread_id ?? ''), e.agent_name)) return false
        this.push({
          kind: 'thread',
          id: e.id,
          at,
          threadId: String(e.session_thread_id ?? ''),
          agentName: String(e.agent_name ?? 'subagent'),
          state,
          stopReason: state === 'idle' ? stopReasonOf(e) : undefined,
          // Terminated by `POST …/threads/{tid}/archive` (Corral's `archived` on the event).
          archived: state === 'terminated' && e.archived === true ? true : undefined,
        })
        return true
      }
      case 'agent.thread_message_sent':
      case 'agent.thread_message_received': {
        const sent = e.type === 'agent.thread_message_sent'
        if (this.thread === null) return sent ? this.sentTask(e, at) : this.reported(e, at)
        this.push({
          kind: 'thread_message',
          id: e.id,
          at,
          direction: sent ? 'sent' : 'received',
          otherThreadId: String(sent ? e.to_session_thread_id : e.from_session_thread_id),
          agentName: (sent ? e.to_agent_name : e.from_agent_name) as string | null | undefined,
          text: textOf(e.content),
          // a run's thread gets its task from the program, through the primary
          ...(this.ownRun && !sent ? { fromRun: true } : {}),
        })
        return true
      }
      case 'agent.thread_context_compacted':
        this.push({ kind: 'note', id: e.id, at, label: 'Context compacted', text: 'Older turns were summarised for the model; the full log is kept.', tone: 'neutral' })
        return true
      case 'system.message':
        this.push({ kind: 'note', id: e.id, at, label: 'System', text: textOf(e.content), tone: 'neutral' })
        return true
      case 'user.define_outcome':
        this.push({ kind: 'note', id: e.id, at, label: 'Outcome defined', text: String(e.description ?? ''), tone: 'neutral' })
        return true
      case 'span.outcome_evaluation_end':
        this.push({ kind: 'note', id: e.id, at, label: `Outcome evaluation: ${String(e.result ?? '')}`, text: String(e.explanation ?? ''), tone: e.result === 'satisfied' ? 'good' : 'neutral' })
        return true
      case 'workflow_run.created':
        if (typeof e.workflow_run_id !== 'string') return false
        this.push({ kind: 'workflow_run', id: e.id, at, runId: e.workflow_run_id, name: String(e.name ?? e.workflow_run_id) })
        return true
      case 'workflow_run.error': {
        // A run's own error is on its card; a start the engine refused made no run: a row says so.
        if (typeof e.workflow_run_id === 'string' && e.workflow_run_id) return false
        const err = (e.error as { type?: string; message?: string } | undefined) ?? {}
        this.push({ kind: 'note', id: e.id, at, label: 'Workflow run refused', text: `${(err.type ?? 'unknown_error').replace(/_/g, ' ')}${err.message ? ` — ${err.message}` : ''}`, tone: 'warn' })
        return true
      }
      default:
        // The run's status, phase and end events are folded by its card.
        return false
    }
  }

  /** Primary view: an event of a workflow run's thread (its creation names the run; later ones name the thread). */
  private ofRunThread(e: TimelineEvent): boolean {
    if (!e.type.startsWith('session.thread_') && e.type !== 'agent.thread_message_sent' && e.type !== 'agent.thread_message_received') return false
    if (e.type === 'session.thread_created' && typeof e.workflow_run_id === 'string' && e.workflow_run_id) {
      this.runThreads.add(String(e.session_thread_id ?? ''))
      return true
    }
    const tid = e.type === 'agent.thread_message_sent' ? e.to_session_thread_id : e.type === 'agent.thread_message_received' ? e.from_session_thread_id : e.session_thread_id
    return typeof tid === 'string' && this.runThreads.has(tid)
  }

  /** Primary view: a child thread was created: its delegation card, the task to come. */
  private delegated(e: TimelineEvent, at: string | undefined): boolean {
    const threadId = String(e.session_thread_id ?? '')
    const agentName = String(e.agent_name ?? 'subagent')
    const agent = e.agent as { type?: string } | undefined
    const target = agent?.type === 'advisor' || agentName === ADVISOR_AGENT_NAME ? 'advisor' : e.workflow_run_id ? 'workflow' : 'subagent'
    if (target === 'advisor') this.advisorThreads.add(threadId)
    this.push({ kind: 'delegation', id: e.id, at, threadId, agentName, target, followUp: false })
    this.taskless.set(threadId, e.id)
    return true
  }

  /** Primary view: the lead sent a thread its task (fills the card) or a follow-up (a card of its own). */
  private sentTask(e: TimelineEvent, at: string | undefined): boolean {
    const threadId = String(e.to_session_thread_id ?? '')
    const task = textOf(e.content)
    const card = this.taskless.get(threadId)
    if (card !== undefined) {
      this.taskless.delete(threadId)
      this.index.set(e.id, this.index.get(card)!)
      return this.replace(card, (old) => (old.kind === 'delegation' ? { ...old, task } : old))
    }
    const agentName = (typeof e.to_agent_name === 'string' && e.to_agent_name) || this.agentNames.get(threadId) || 'subagent'
    this.push({ kind: 'delegation', id: e.id, at, threadId, agentName, target: 'subagent', task, followUp: true })
    return true
  }

  /** Primary view: a thread reported back (or an advisor answered). */
  private reported(e: TimelineEvent, at: string | undefined): boolean {
    const threadId = String(e.from_session_thread_id ?? '')
    const agentName = (typeof e.from_agent_name === 'string' && e.from_agent_name) || this.agentNames.get(threadId) || 'subagent'
    const from = this.isAdvisor(threadId, agentName) ? 'advisor' : 'subagent'
    this.push({ kind: 'report', id: e.id, at, threadId, agentName, from, text: textOf(e.content) })
    return true
  }

  /** A consultation thread: created for the advisor, or named after it. */
  private isAdvisor(threadId: string, agentName: unknown): boolean {
    return this.advisorThreads.has(threadId) || agentName === ADVISOR_AGENT_NAME
  }

  /**
   * Only idles decide what a thread waits for: a `running` in between (the brain working on the
   * calls already answered) does not end the wait for the ones still unanswered.
   */
  private trackWaiting(e: TimelineEvent): boolean {
    const primary = e.type === 'session.status_idle'
    const thread = e.type === 'session.thread_status_idle'
    if (!primary && !thread) return false
    const key = primary ? '' : String(e.session_thread_id ?? '')
    const r = e.stop_reason as { type?: string; event_ids?: string[] } | undefined
    const ids = r?.type === 'requires_action' ? new Set(r.event_ids ?? []) : new Set<string>()
    const had = this.waiting.get(key)
    this.waiting.set(key, ids)
    return (had?.size ?? 0) > 0 || ids.size > 0
  }

  /**
   * The tool calls that wait for the person now: asked for confirmation (or a custom tool's
   * result), not yet answered, and named by their thread's latest `requires_action` idle.
   */
  pending(): ToolItem[] {
    const out: ToolItem[] = []
    const listed = new Set<string>()
    // A child's call is named twice: by its thread's idle and by the session's aggregate idle.
    for (const ids of this.waiting.values()) {
      for (const id of ids) {
        const i = this.index.get(id)
        const item = i === undefined ? undefined : this.items[i]
        if (item && !listed.has(item.id) && isAwaitingUser(item)) {
          listed.add(item.id)
          out.push(item)
        }
      }
    }
    return out
  }

  private answerTool(e: TimelineEvent): boolean {
    const useId = answeredUseId(e) ?? ''
    if (!this.index.has(useId)) {
      const list = this.orphans.get(useId) ?? []
      list.push(e)
      this.orphans.set(useId, list)
      return false
    }
    return this.replace(useId, (old) => {
      const tool = old as ToolItem
      if (e.type === 'user.tool_confirmation') {
        return { ...tool, confirmation: { result: e.result as 'allow' | 'deny', denyMessage: (e.deny_message as string | null | undefined) ?? null, at: e.processed_at ?? undefined } }
      }
      const started = tool.confirmation?.at ?? tool.at
      const measured = numberField(e, 'duration_ms')
      const durationMs = measured ?? (started && e.processed_at ? Math.max(0, Date.parse(e.processed_at) - Date.parse(started)) : undefined)
      this.liveResults.delete(e.id)
      const text = textOf(e.content)
      const stderr = stderrRanges(e, text)
      return {
        ...tool,
        live: undefined,
        liveStderr: undefined,
        liveStatus: undefined,
        result: {
          ...(stderr ? { stderr } : {}),
          text,
          isError: e.is_error === true,
          at: e.processed_at ?? undefined,
          exitCode: numberField(e, 'exit_code'),
          durationMs,
          images: countBlocks(e.content, 'image'),
          interrupted: e.interrupted === true,
        },
      }
    })
  }

  /**
   * Folds a never-stored preview in: `event_start` opens a streaming item, `event_delta` appends
   * text to it. Returns whether the items changed. A preview of an event already stored is ignored.
   */
  preview(p: { type: string; event?: { id?: string; type?: string; session_thread_id?: string | null; tool_use_id?: string }; event_id?: string; delta?: { content?: { text?: string }; stream?: string } }): boolean {
    if (p.type === 'event_start') {
      const ev = p.event
      if (!ev?.id || this.seen.has(ev.id) || this.index.has(ev.id)) return false
      if (ev.type === 'agent.tool_result') {
        // A running call's output: shown on its card (which is in this view or not at all).
        if (typeof ev.tool_use_id !== 'string' || !this.index.has(ev.tool_use_id)) return false
        this.liveResults.set(ev.id, ev.tool_use_id)
        return false
      }
      // Another thread's streaming text never shows here (a child's previews are not the primary's).
      if (this.thread !== '*' && (ev.session_thread_id ?? null) !== this.thread) return false
      if (ev.type === 'agent.message') this.push({ kind: 'agent', id: ev.id, text: '', streaming: true })
      else if (ev.type === 'agent.thinking') this.push({ kind: 'thinking', id: ev.id, text: '', streaming: true })
      else return false
      return true
    }
    if (p.type === 'event_delta' && p.event_id && !this.seen.has(p.event_id)) {
      const text = p.delta?.content?.text ?? ''
      if (!text) return false
      const useId = this.liveResults.get(p.event_id)
      if (useId !== undefined) {
        if (p.delta?.stream === 'status') {
          const line = text.replace(/^\[corral\] /, '').trim()
          return this.replace(useId, (old) => (old.kind !== 'tool' || old.result ? old : { ...old, liveStatus: line }))
        }
        const stderr = p.delta?.stream === 'stderr'
        return this.replace(useId, (old) => {
          if (old.kind !== 'tool' || old.result) return old
          const before = old.live ?? ''
          return { ...old, live: before + text, ...(stderr ? { liveStderr: withRange(old.liveStderr, before.length, before.length + text.length) } : {}) }
        })
      }
      return this.replace(p.event_id, (old) => (old.kind === 'agent' || old.kind === 'thinking' ? { ...old, text: old.text + text } : old))
    }
    return false
  }

  /** Takes over the running calls' live output from the builder this one replaces (older events loaded). */
  carryLive(from: TimelineBuilder): void {
    for (const [resultId, useId] of from.liveResults) {
      const i = from.index.get(useId)
      const old = i === undefined ? undefined : from.items[i]
      if (this.seen.has(resultId) || old?.kind !== 'tool') continue
      if (this.replace(useId, (it) => (it.kind === 'tool' && !it.result ? { ...it, live: old.live, liveStderr: old.liveStderr, liveStatus: old.liveStatus } : it))) this.liveResults.set(resultId, useId)
    }
  }

  /** Ends every streaming item (the stream dropped or the turn was interrupted before the stored event). */
  settleStreaming(): boolean {
    let changed = false
    this.items.forEach((item, i) => {
      if ((item.kind === 'agent' || item.kind === 'thinking') && item.streaming && !this.seen.has(item.id)) {
        this.items[i] = { ...item, streaming: false }
        changed = true
      }
    })
    return changed
  }
}

/** A tool call that waits for the person: a confirmation, or a custom tool's result. */
export function isAwaitingUser(item: TimelineItem): item is ToolItem {
  if (item.kind !== 'tool') return false
  return isPending({ type: REQUEST_OF_SOURCE[item.source], permission: item.permission, confirmed: !!item.confirmation, resulted: !!item.result })
}

/** The request type a tool card was folded from. */
const REQUEST_OF_SOURCE = { toolset: 'agent.tool_use', mcp: 'agent.mcp_tool_use', custom: 'agent.custom_tool_use' } as const satisfies Record<ToolItem['source'], RequestType>

/**
 * `items` without the lifecycle rows of threads `ofRun` says belong to a workflow run (the same
 * array when there are none). The builder knows a run's thread from its `session.thread_created`;
 * a page that starts after it folds the thread's later status events as a subagent's, which the
 * run board and the thread objects know better.
 */
export function withoutRunThreadRows(items: TimelineItem[], ofRun: (threadId: string) => boolean): TimelineItem[] {
  return items.some((i) => i.kind === 'thread' && ofRun(i.threadId)) ? items.filter((i) => i.kind !== 'thread' || !ofRun(i.threadId)) : items
}

/**
 * A workflow run's thread's own timeline: the messages it received are the program's calls (its
 * task), not the lead's words (`fromRun`). Its own stream need not carry its `session.thread_created`,
 * so the view says so from the run board. The same array when nothing changes.
 */
export function asRunThreadRows(items: TimelineItem[]): TimelineItem[] {
  return items.some((i) => i.kind === 'thread_message' && i.direction === 'received' && !i.fromRun) ? items.map((i) => (i.kind === 'thread_message' && i.direction === 'received' && !i.fromRun ? { ...i, fromRun: true } : i)) : items
}
