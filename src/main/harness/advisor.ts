/**
 * The advisor (spec §7): `ant__advisor`, a platform tool the harness runs itself on the primary
 * thread when the session's roster enables the advisor. One call is one consultation: a platform
 * thread named `anthropic.advisor` (`agent: {type:'advisor', model}`, parent: the primary) that
 * sends the advisor model the primary's conversation so far, without tools, and terminates once
 * its advice is delivered. The advice is the call's tool result, in the same primary turn; a
 * consultation that fails (pairing refused, budget reached, the endpoint failing after its
 * retries) or is interrupted returns a short notice instead, and the turn carries on.
 *
 * The pure parts (the request, the notice, the events) are exported for unit tests; `consult`
 * runs one consultation against the log and the model client.
 */
import { ADVISOR_AGENT_NAME, ADVISOR_TIERS, advisorPairingProblem, type AdvisorTierTable } from '../../shared/api/advisor-tiers'
import { PRIMARY_THREAD, type EventInputOf } from '../../shared/api/events'
import { newId } from '../../shared/api/ids'
import type { EventInput, EventLog } from '../session/event-log'
import type { ToolOutcome } from '../hands/tool-router'
import { buildContextView, type ViewAgent, type ViewEvent } from './context/view'
import { ModelRequestError, zeroUsage, type ModelClient, type ModelRequest, type ModelResponse, type ModelUsage } from './model-client'
import type { PlatformTool } from './platform-tools'
import type { ChildThread } from './session-threads'
import type { ModelToolDefinition } from './tools'
import { pause } from './pause'

/** The tool's name (platform tools other than the two documented delegation tools carry `ant__`). */
export const ADVISOR_TOOL = 'ant__advisor'
export { ADVISOR_AGENT_NAME }

export const ADVISOR_DEFINITION: ModelToolDefinition = {
  name: ADVISOR_TOOL,
  description:
    'Consult a stronger model (the advisor) about the task. It reads this conversation so far, has no tools, and answers with advice only: ' +
    'use it to plan, when stuck, or to review your work before you finish. Its advice comes back as this call\'s result.',
  input_schema: {
    type: 'object',
    properties: { question: { type: 'string', description: 'What you want advice on (optional: without it the advisor reviews the conversation as a whole)' } },
  },
}

/** What the advisor is told (its system prompt); the agent's own system prompt follows it. */
export const ADVISOR_SYSTEM =
  'You are an advisor to an AI agent working on a task. You see the conversation the agent has had so far: the user\'s messages, ' +
  'the agent\'s replies and tool calls, and the tool results, written out as text. You cannot run tools. Give the agent concise, ' +
  'concrete advice for its next steps: point out mistakes, risks and better approaches. Address the agent directly.'

/** Why a consultation gave no advice; each kind has one line of the notice (docs/multiagent.md). */
export type ConsultationFailure =
  | { kind: 'pairing'; problem: string }
  | { kind: 'disabled' }
  | { kind: 'budget' }
  | { kind: 'model'; message: string }
  | { kind: 'empty' }
  /** `consultation`: an interrupt named the advisor thread; `session`: the whole session was interrupted (or the engine shut down). */
  | { kind: 'interrupted'; scope: 'consultation' | 'session' }
  /** Corral shut down while the advisor's request ran. */
  | { kind: 'shutdown' }

/**
 * The tool result a failed consultation returns to the model: one short sentence saying that no
 * advice came and why, and that the turn goes on. Written in docs/multiagent.md (advisor section).
 */
export function failureNotice(f: ConsultationFailure): string {
  return `No advice: ${failureReason(f)}. Carry on without the advisor.`
}

function failureReason(f: ConsultationFailure): string {
  switch (f.kind) {
    case 'pairing':
      return `the advisor model may not advise this agent's model (${f.problem})`
    case 'disabled':
      return 'this session has no advisor'
    case 'budget':
      return "the session's budget is reached"
    case 'model':
      return `the advisor's model request failed (${f.message})`
    case 'empty':
      return 'the advisor answered with no text'
    case 'shutdown':
      return 'Corral shut down during the consultation'
    case 'interrupted':
      return f.scope === 'consultation' ? 'the consultation was interrupted' : 'the turn was interrupted'
  }
}

type Block = Record<string, unknown> & { type: string }

export interface ConsultationRequestParams {
  /** The primary thread's agent snapshot (its model is the executor's; its system prompt is shown to the advisor). */
  agent: ViewAgent
  advisorModel: string
  /** The `ant__advisor` call being answered: it and its result are left out of what the advisor reads. */
  callId: string
  question?: string
  maxTokens?: number
}

/**
 * The advisor's request: the primary thread's context view (what the primary model itself sees:
 * compaction summary, cleared results and all) rewritten for a model with no tools. Tool calls
 * and results become text, thinking is left out (its signatures belong to the executor's model),
 * the `ant__advisor` call itself is dropped, and a last user turn asks for the advice. No `tools`
 * array. Pure.
 */
export function consultationRequest(events: readonly ViewEvent[], p: ConsultationRequestParams): ModelRequest {
  const view = buildContextView(events, { thread: PRIMARY_THREAD, agent: { ...p.agent, tools: [] } })
  const names = new Map<string, string>()
  const messages: { role: 'user' | 'assistant'; content: Block[] }[] = []
  const push = (role: 'user' | 'assistant', blocks: Block[]) => {
    if (!blocks.length) return
    const last = messages[messages.length - 1]
    if (last && last.role === role) last.content.push(...blocks)
    else messages.push({ role, content: blocks })
  }
  for (const m of view.request.messages) {
    const blocks: Block[] = []
    for (const raw of (typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content) as Block[]) {
      const { cache_control: _c, ...b } = raw
      if (b.type === 'text') {
        if (typeof b.text === 'string' && b.text.length) blocks.push({ type: 'text', text: b.text })
      } else if (b.type === 'tool_use') {
        const id = String(b.id)
        if (id === p.callId) continue
        names.set(id, String(b.name))
        blocks.push({ type: 'text', text: `[tool call ${String(b.name)} ${JSON.stringify(b.input ?? {})}]` })
      } else if (b.type === 'tool_result') {
        const id = String(b.tool_use_id)
        if (id === p.callId) continue
        const text = typeof b.content === 'string' ? b.content : ((b.content as Block[] | undefined) ?? []).map((x) => (x.type === 'text' ? String(x.text) : `[${x.type}]`)).join('\n')
        blocks.push({ type: 'text', text: `[result of ${names.get(id) ?? 'a tool call'}${b.is_error ? ' (error)' : ''}]\n${text}` })
      } else if (b.type === 'image' || b.type === 'document') blocks.push(b)
      // thinking and redacted thinking: not for another model
    }
    if (m.role === 'user' || m.role === 'assistant') push(m.role, blocks)
  }
  const ask = p.question?.trim()
    ? `The agent asks the advisor: ${p.question.trim()}`
    : 'The agent asks the advisor for advice on its work so far and its next steps.'
  if (messages.length === 0 || messages[0].role !== 'user') messages.unshift({ role: 'user', content: [{ type: 'text', text: '(conversation start)' }] })
  push('user', [{ type: 'text', text: `<advisor_request>\n${ask}\n</advisor_request>` }])
  const agentSystem = p.agent.system ? `\n\nThe agent works under this system prompt:\n<agent_system_prompt>\n${p.agent.system}\n</agent_system_prompt>` : ''
  return {
    model: p.advisorModel,
    max_tokens: p.maxTokens ?? 4096,
    system: [{ type: 'text', text: ADVISOR_SYSTEM + agentSystem, cache_control: { type: 'ephemeral' } }],
    messages: messages as unknown as ModelRequest['messages'],
  }
}

/** The advice a response carries: its text blocks (thinking never surfaces), or undefined when it has none. */
export function adviceOf(response: Pick<ModelResponse, 'blocks'>): string | undefined {
  const text = response.blocks
    .flatMap((b) => (b.type === 'text' ? [b.text] : []))
    .join('\n')
    .trim()
  return text.length ? text : undefined
}

/** The consultation thread's own start: created (on the primary stream), running, and its request's span. */
export function consultationStartEvents(p: { threadId: string; primaryThreadId: string; advisorModel: string; spanId: string }): EventInput[] {
  const created: EventInputOf<'session.thread_created'> = {
    type: 'session.thread_created',
    session_thread_id: p.threadId,
    agent_name: ADVISOR_AGENT_NAME,
    workflow_run_id: null,
    agent: { type: 'advisor', model: p.advisorModel },
    parent_thread_id: p.primaryThreadId,
  }
  return [
    created,
    { type: 'session.thread_status_running', session_thread_id: p.threadId, agent_name: ADVISOR_AGENT_NAME },
    { id: p.spanId, type: 'span.model_request_start', session_thread_id: p.threadId },
  ]
}

/**
 * The consultation's end, appended with the `ant__advisor` result in one batch: the span's end
 * (its usage at the advisor model), then with advice the message sent on the advisor thread and
 * received on the primary, then the thread's idle and termination.
 */
export function consultationEndEvents(p: {
  threadId: string
  primaryThreadId: string
  advisorModel: string
  spanId: string
  usage: ModelUsage
  advice?: string
  /** The request's last failure (its span ends in error, and the thread's `session.error` follows it). */
  error?: EventInput
  /** The request was cut short by an interrupt. */
  interrupted?: boolean
  stopReason: 'end_turn' | 'retries_exhausted'
}): EventInput[] {
  const end: EventInputOf<'span.model_request_end'> = {
    type: 'span.model_request_end',
    session_thread_id: p.threadId,
    model_request_start_id: p.spanId,
    is_error: !!(p.error || p.interrupted),
    model_usage: p.usage,
    model: p.advisorModel,
  }
  if (p.interrupted) end.interrupted = true
  const out: EventInput[] = [end, ...(p.error ? [p.error] : [])]
  if (p.advice !== undefined) {
    const content = [{ type: 'text' as const, text: p.advice }]
    out.push(
      { type: 'agent.thread_message_sent', session_thread_id: p.threadId, to_session_thread_id: p.primaryThreadId, to_agent_name: null, content },
      { type: 'agent.thread_message_received', from_session_thread_id: p.threadId, from_agent_name: ADVISOR_AGENT_NAME, content },
    )
  }
  out.push(
    { type: 'session.thread_status_idle', session_thread_id: p.threadId, agent_name: ADVISOR_AGENT_NAME, stop_reason: { type: p.stopReason }, stop_details: null },
    { type: 'session.thread_status_terminated', session_thread_id: p.threadId, agent_name: ADVISOR_AGENT_NAME },
  )
  return out
}

/**
 * Advisor threads a dead process left running for the call made at `callSeq` (created after the
 * call, never terminated): a re-run of the call terminates them before it starts its own.
 */
export function orphanedConsultations(children: Iterable<Pick<ChildThread, 'id' | 'advisor' | 'status' | 'createdSeq'>>, callSeq: number): string[] {
  return [...children].filter((c) => c.advisor && c.status !== 'terminated' && c.createdSeq > callSeq).map((c) => c.id)
}

export interface ConsultParams {
  sessionId: string
  primaryThreadId: string
  /** The `ant__advisor` call (its event id and position in the log). */
  call: { id: string; seq: number; input: Record<string, unknown> }
  /** The primary's agent snapshot: its model is the executor. */
  agent: ViewAgent
  /** The roster's advisor model, or null when the session has none. */
  advisorModel: string | null
  /** The primary thread's events the caller has read. */
  events: readonly ViewEvent[]
  /** The session's child threads as the log says (to find a consultation a dead process left open). */
  children: Iterable<Pick<ChildThread, 'id' | 'advisor' | 'status' | 'createdSeq'>>
  log: EventLog
  model: ModelClient
  /** The pairing table as the user extended it (settings), read at each consultation start. */
  tiers: AdvisorTierTable
  /** Whether the session's shared budget is spent (checked before the advisor's request). */
  budgetReached?: () => boolean
  /** Aborted by a session-level interrupt or a shutdown: the thread terminates with no advice. */
  signal: AbortSignal
  maxRetries?: number
  backoffBaseMs?: number
  backoffMaxMs?: number
  maxTokens?: number
  random?: () => number
}

/** A consultation's outcome: the tool result, and the events to append with it in one batch. */
export interface ConsultResult {
  outcome: ToolOutcome
  events: EventInput[]
  /** The whole turn was interrupted (or the engine shut down): the result is recorded as the interrupted call's. */
  interrupted?: boolean
}

/**
 * Runs one consultation. The thread's start is appended at once (so the client sees it and may
 * interrupt it by its id); its end comes back in `events`, to be appended with the call's result
 * in one batch, so a crash either keeps the whole answer or leaves the call unanswered, and the
 * next brain runs it again (terminating the thread the dead one left open). Pairing and budget
 * are checked before anything is written: a refused consultation starts no thread. Never throws
 * for a model failure: the outcome is then the failure notice.
 */
export async function consult(p: ConsultParams): Promise<ConsultResult> {
  const fail = (f: ConsultationFailure, events: EventInput[] = []): ConsultResult => ({ outcome: { content: failureNotice(f), isError: true }, events })
  if (!p.advisorModel) return fail({ kind: 'disabled' })
  const executor = typeof p.agent.model === 'string' ? p.agent.model : p.agent.model.id
  const problem = advisorPairingProblem(executor, p.advisorModel, p.tiers)
  if (problem) return fail({ kind: 'pairing', problem })
  if (p.budgetReached?.()) return fail({ kind: 'budget' })

  const question = typeof p.call.input.question === 'string' ? p.call.input.question : undefined
  const request = consultationRequest(p.events, { agent: p.agent, advisorModel: p.advisorModel, callId: p.call.id, question, maxTokens: p.maxTokens })
  const threadId = newId('thread')
  const ids = { threadId, primaryThreadId: p.primaryThreadId, advisorModel: p.advisorModel }
  const orphans = orphanedConsultations(p.children, p.call.seq).map((t): EventInput => ({ type: 'session.thread_status_terminated', session_thread_id: t, agent_name: ADVISOR_AGENT_NAME }))
  let spanId = newId('event')
  const [first] = await p.log.append(p.sessionId, [...orphans, ...consultationStartEvents({ ...ids, spanId })])

  // An interrupt naming this thread stops only the consultation; the session's signal stops it too.
  const abort = new AbortController()
  const onSessionAbort = () => abort.abort()
  if (p.signal.aborted) abort.abort()
  p.signal.addEventListener('abort', onSessionAbort, { once: true })
  const stopTail = p.log.tail(p.sessionId, first.seq, (s) => {
    if (s.event.type !== 'user.interrupt') return
    const named = s.event.session_thread_id || null
    if (named === threadId || named === null || named === p.primaryThreadId) abort.abort()
  })
  const maxRetries = p.maxRetries ?? 5
  const errors: EventInput[] = []
  try {
    for (let attempt = 0; ; attempt++) {
      let usage: ModelUsage = zeroUsage()
      try {
        if (abort.signal.aborted) throw new ModelRequestError('aborted', 'interrupted')
        const response = await p.model.stream(request, { signal: abort.signal, onUsage: (u) => (usage = u) })
        const advice = adviceOf(response)
        const end = consultationEndEvents({ ...ids, spanId, usage: response.usage, advice, stopReason: 'end_turn' })
        if (advice === undefined) return fail({ kind: 'empty' }, [...errors, ...end])
        return { outcome: { content: advice, isError: false }, events: [...errors, ...end] }
      } catch (err) {
        const e = err instanceof ModelRequestError ? err : new ModelRequestError('connection', (err as Error).message, { cause: err })
        if (e.kind === 'aborted' || abort.signal.aborted) {
          // which interrupt it was, from the log (not from which signal fired first); the brain
          // hears of an interrupt at its commit, before it is on disk
          const named = p.log.read(p.sessionId, { after: first.seq, types: ['user.interrupt'], limit: 1000, includeUnsynced: true }).map((x) => x.event.session_thread_id || null)
          const end = [...errors, ...consultationEndEvents({ ...ids, spanId, usage, interrupted: true, stopReason: 'end_turn' })]
          if (named.includes(threadId)) return fail({ kind: 'interrupted', scope: 'consultation' }, end)
          // an interrupt of the whole turn stops it: the notice is recorded, not answered
          if (named.some((t) => t === null || t === p.primaryThreadId)) return { ...fail({ kind: 'interrupted', scope: 'session' }, end), interrupted: true }
          // no interrupt: the engine is shutting down; the model hears of it when the session continues
          return fail({ kind: 'shutdown' }, end)
        }
        const exhausted = !e.retryable || attempt + 1 > maxRetries
        const error: EventInput = {
          type: 'session.error',
          session_thread_id: threadId,
          error: { type: e.apiErrorType, message: e.message, retry_status: { type: exhausted ? 'exhausted' : 'retrying' } },
          attempt: attempt + 1,
          max_attempts: e.retryable ? maxRetries + 1 : attempt + 1,
          ...(e.status !== undefined ? { status_code: e.status } : {}),
        }
        if (exhausted) return fail({ kind: 'model', message: e.message }, [...errors, ...consultationEndEvents({ ...ids, spanId, usage, error, stopReason: 'retries_exhausted' })])
        // a failed attempt's span ends with the error; the retry opens a new span on the same thread
        const nextSpan = newId('event')
        errors.push(
          { type: 'span.model_request_end', session_thread_id: threadId, model_request_start_id: spanId, is_error: true, model_usage: usage, model: p.advisorModel },
          error,
          { id: nextSpan, type: 'span.model_request_start', session_thread_id: threadId },
        )
        spanId = nextSpan
        const exp = Math.min(p.backoffMaxMs ?? 30_000, (p.backoffBaseMs ?? 1000) * 2 ** attempt)
        const delay = Math.max(e.retryAfterMs ?? 0, exp / 2 + (exp / 2) * (p.random ?? Math.random)())
        await pause(Math.min(delay, p.backoffMaxMs ?? 30_000), abort.signal)
      }
    }
  } finally {
    stopTail()
    p.signal.removeEventListener('abort', onSessionAbort)
  }
}



export interface AdvisorToolOptions {
  /** The pairing table as the user extended it (settings), read at each consultation start (default: the built-in one). */
  tiers?: () => AdvisorTierTable
  maxRetries?: number
  backoffBaseMs?: number
  backoffMaxMs?: number
  random?: () => number
}

/**
 * `ant__advisor` as a platform tool: offered on the primary thread only, when the session's
 * roster enables the advisor; each call is one consultation (`consult`).
 */
export function advisorTool(o: AdvisorToolOptions = {}): PlatformTool {
  return {
    name: ADVISOR_TOOL,
    definition: ADVISOR_DEFINITION,
    offered: (ctx) => ctx.threadKey === null && typeof ctx.roster?.advisor === 'string',
    async run(ctx) {
      return consult({
        sessionId: ctx.thread.sessionId,
        primaryThreadId: ctx.thread.threadId,
        call: ctx.call,
        agent: ctx.sessionAgent,
        advisorModel: ctx.roster?.advisor ?? null,
        events: ctx.events,
        children: ctx.threads.children.values(),
        log: ctx.log,
        model: ctx.model,
        tiers: o.tiers?.() ?? ADVISOR_TIERS,
        budgetReached: ctx.budgetReached,
        signal: ctx.signal,
        maxRetries: o.maxRetries,
        backoffBaseMs: o.backoffBaseMs,
        backoffMaxMs: o.backoffMaxMs,
        random: o.random,
      })
    },
  }
}
