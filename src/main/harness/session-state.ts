import type { ViewEvent } from './context/view'
import type { ModelUsage } from './model-client'

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
  lastSeq: number
  /** The last primary-thread status event: running | idle | ... (idle when none). */
  status: string
  lastIdle?: { seq: number; stopReason: { type: string; event_ids?: string[] } }
  lastAnswerSeq: number
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
}

const INPUT_TYPES = new Set(['user.message', 'system.message', 'user.custom_tool_result', 'user.tool_result', 'agent.tool_result', 'agent.mcp_tool_result'])

/** Folds a session's primary-thread events into its state. Pure; `into` continues an earlier fold. */
export function foldSession(events: readonly ViewEvent[], into?: SessionState): SessionState {
  const s: SessionState = into ?? {
    lastSeq: 0,
    status: 'idle',
    lastAnswerSeq: 0,
    lastInterruptSeq: 0,
    openToolUses: [],
    lastUserMessageSeq: 0,
    newInputSeq: 0,
    failures: 0,
    usageByModel: new Map(),
    allowedCommands: new Map(),
  }
  for (const { seq, event: e } of events) {
    if (seq <= s.lastSeq) continue
    s.lastSeq = seq
    if (e.session_thread_id) continue
    switch (e.type) {
      case 'session.status_running':
      case 'session.status_rescheduled':
      case 'session.status_terminated':
        s.status = e.type.slice('session.status_'.length)
        break
      case 'session.status_idle': {
        s.status = 'idle'
        s.lastIdle = { seq, stopReason: (e.stop_reason as { type: string; event_ids?: string[] }) ?? { type: 'end_turn' } }
        // an idle written with a model answer covers only what that request saw (context_seq)
        const sawThrough = typeof e.context_seq === 'number' ? e.context_seq : seq
        if (s.newInputSeq <= sawThrough) resetBarrier(s)
        else s.failures = 0
        break
      }
      case 'user.interrupt':
        s.lastInterruptSeq = seq
        resetBarrier(s)
        // custom tool calls are answered by the client; once the turn is stopped or moves on
        // they are abandoned (the context view tells the model they got no result)
        s.openToolUses = s.openToolUses.filter((t) => t.type !== 'agent.custom_tool_use')
        break
      case 'user.message':
      case 'system.message':
        s.lastUserMessageSeq = seq
        s.openToolUses = s.openToolUses.filter((t) => t.type !== 'agent.custom_tool_use')
        break
      case 'span.model_request_start':
        s.openSpanId = e.id
        break
      case 'span.model_request_end': {
        if (s.openSpanId === e.model_request_start_id) s.openSpanId = undefined
        const u = e.model_usage as ModelUsage | undefined
        if (u) {
          const model = typeof e.model === 'string' ? e.model : ''
          const acc = s.usageByModel.get(model) ?? { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
          for (const k of Object.keys(acc) as (keyof ModelUsage)[]) acc[k] += u[k] ?? 0
          s.usageByModel.set(model, acc)
        }
        // a compaction request summarizes; it answers nothing
        if (!e.is_error && e.stop_reason !== 'compaction') {
          s.lastAnswerSeq = seq
          s.lastStopReason = typeof e.stop_reason === 'string' ? e.stop_reason : 'end_turn'
          s.failures = 0
          // input appended while the request ran (after the part of the log it saw) is still news
          const sawThrough = typeof e.context_seq === 'number' ? e.context_seq : seq
          if (s.newInputSeq <= sawThrough) s.newInputSeq = 0
          // pause_turn: the endpoint paused a long turn; sending the conversation again continues it
          if (e.stop_reason === 'pause_turn') s.newInputSeq = seq
        }
        break
      }
      case 'session.error': {
        const err = e.error as { type?: string; retry_status?: { type?: string } } | undefined
        // an MCP server's failure is not a failed model request: it does not delay the next one
        if (err?.retry_status?.type === 'retrying' && !err.type?.startsWith('mcp_')) s.failures++
        break
      }
      case 'agent.tool_use':
      case 'agent.mcp_tool_use':
      case 'agent.custom_tool_use':
        s.openToolUses.push({
          id: e.id,
          seq,
          type: e.type,
          name: e.type === 'agent.mcp_tool_use' ? `${String(e.mcp_server_name)}__${String(e.name)}` : String(e.name),
          input: (e.input as Record<string, unknown>) ?? {},
          permission: e.type === 'agent.custom_tool_use' ? null : ((e.evaluated_permission as 'allow' | 'ask' | undefined) ?? (e.type === 'agent.mcp_tool_use' ? 'ask' : 'allow')),
        })
        break
      case 'user.tool_confirmation': {
        const t = s.openToolUses.find((x) => x.id === e.tool_use_id)
        if (t && !t.confirmation) t.confirmation = { result: e.result as 'allow' | 'deny', deny_message: e.deny_message as string | null | undefined }
        if (t && e.result === 'allow' && e.corral_allow_for_session === true && t.name === 'bash' && typeof t.input.command === 'string' && !s.allowedCommands.has(t.input.command)) {
          s.allowedCommands.set(t.input.command, e.id)
        }
        break
      }
      default:
        break
    }
    if (e.type === 'agent.tool_result' || e.type === 'user.tool_result' || e.type === 'user.custom_tool_result' || e.type === 'agent.mcp_tool_result') {
      const useId = (e.type === 'user.custom_tool_result' ? e.custom_tool_use_id : e.type === 'agent.mcp_tool_result' ? e.mcp_tool_use_id : e.tool_use_id) as string
      s.openToolUses = s.openToolUses.filter((t) => t.id !== useId)
    }
    // Results the harness writes while stopping a turn are not news for the model.
    if (INPUT_TYPES.has(e.type) && !e.interrupted) s.newInputSeq = seq
  }
  return s
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
  | { kind: 'stop_tools'; toolUses: OpenToolUse[] }
  | { kind: 'run_tools'; run: OpenToolUse[]; deny: OpenToolUse[] }
  | { kind: 'idle'; stopReason: { type: 'end_turn' } | { type: 'requires_action'; event_ids: string[] } | { type: 'refusal' } }
  | { kind: 'model'; attempt: number }

/**
 * Decides the next step from the folded state. Pure. Order: finish an interrupt, close a
 * request a dead process left open, settle tool calls, wait for answers, call the model, idle.
 */
export function decideNext(s: SessionState): NextStep {
  const interruptPending = s.lastInterruptSeq > (s.lastIdle?.seq ?? 0) && s.lastInterruptSeq > s.lastAnswerSeq
  const unconfirmedOrCustom = (t: OpenToolUse) => t.type === 'agent.custom_tool_use' || (t.permission === 'ask' && !t.confirmation)
  if (interruptPending) {
    const toolUses = s.openToolUses.filter(isHarnessRun)
    if (toolUses.length) return { kind: 'stop_tools', toolUses }
    if (s.openSpanId) return { kind: 'close_span', spanId: s.openSpanId }
    if (s.newInputSeq > s.lastInterruptSeq) return { kind: 'model', attempt: s.failures }
    if (s.status === 'idle' && s.lastIdle && s.lastIdle.stopReason.type !== 'requires_action') return { kind: 'none' }
    return { kind: 'idle', stopReason: { type: 'end_turn' } }
  }
  if (s.openSpanId) return { kind: 'close_span', spanId: s.openSpanId }

  const run = s.openToolUses.filter((t) => isHarnessRun(t) && (t.permission === 'allow' || t.confirmation?.result === 'allow'))
  const deny = s.openToolUses.filter((t) => isHarnessRun(t) && t.permission === 'ask' && t.confirmation?.result === 'deny')
  const waiting = s.openToolUses.filter(unconfirmedOrCustom)
  // A new user message while calls wait for confirmation: those calls are abandoned (the model hears so).
  const abandoned = waiting.filter((t) => t.seq < s.lastUserMessageSeq)
  if (abandoned.length) return { kind: 'stop_tools', toolUses: abandoned }
  if (run.length || deny.length) return { kind: 'run_tools', run, deny }
  if (waiting.length) {
    const ids = waiting.map((t) => t.id)
    const li = s.lastIdle
    const same = s.status === 'idle' && li?.stopReason.type === 'requires_action' && sameSet(li.stopReason.event_ids ?? [], ids)
    return same ? { kind: 'none' } : { kind: 'idle', stopReason: { type: 'requires_action', event_ids: ids } }
  }
  if (s.newInputSeq > 0) return { kind: 'model', attempt: s.failures }
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
