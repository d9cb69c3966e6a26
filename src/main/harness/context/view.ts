import { answeredUseId, isEventOf, isOnThread, type LoggedEventOf, type RequestType, type ResultType, type ThreadKey } from '../../../shared/api/events'
import { ADVISOR_AGENT_NAME } from '../../../shared/api/advisor-tiers'
import { defineFold, ignoring, type SeqEvent } from '../../../shared/api/fold'
import type { ModelRequest } from '../model-client'
import { evaluationFeedbackText, outcomeBriefText } from './outcome'
import { OUTCOME_DEFAULT_MAX_ITERATIONS } from '../../../shared/api/outcomes'
import { modelTools, type AgentToolConfig, type McpToolDefinition, type ModelToolDefinition } from '../tools'

/** An event of the log with its position (the view needs both). */
export type ViewEvent = SeqEvent

/** The parts of the session's pinned agent snapshot the view reads. */
export interface ViewAgent {
  model: string | { id: string }
  system?: string | null
  tools?: readonly AgentToolConfig[]
}

export interface ContextViewOptions {
  maxTokens?: number
  /** Above this estimated size, older tool results are replaced by pointers (default 100k tokens). */
  clearThresholdTokens?: number
  /** Above this estimated size after clearing, the harness should compact (default 150k tokens). */
  compactThresholdTokens?: number
  /** The newest tool results that are never cleared (default 3). */
  keepRecentToolResults?: number
}

/** What a view is built for: the thread (the log's key: null for the primary), its agent snapshot, and the tools its MCP servers list. */
export interface ContextViewInput {
  thread: ThreadKey
  agent: ViewAgent
  options?: ContextViewOptions
  /** What the session's MCP servers list; those the agent's mcp_toolsets enable are offered. */
  mcpTools?: readonly McpToolDefinition[]
  /** Tools the harness runs itself that this thread is offered (platform-tools.ts), after the agent's. */
  platformTools?: readonly ModelToolDefinition[]
  /** What the session adds to the system prompt after the agent's own (its memory stores: memory.ts). */
  systemContext?: readonly string[]
}

export interface ContextView {
  request: ModelRequest
  estimatedTokens: number
  /** How many tool results were replaced by pointers in this view. */
  clearedToolResults: number
  /** Set when the view is still above the compaction threshold and can be compacted. */
  compaction?: { request: ModelRequest; throughSeq: number; throughEventId: string }
}

type Block = Record<string, unknown> & { type: string }
interface Message {
  role: 'user' | 'assistant'
  content: Block[]
  maxSeq: number
  maxEventId: string
}

export const COMPACTION_INSTRUCTION =
  'Summarize the conversation so far for your own later use: the task, decisions made, facts learned (file paths, commands, results), ' +
  'what has been done and what remains. Be complete but concise; this summary replaces the earlier turns in your context.'

const estimate = (x: unknown): number => Math.ceil(jsonSize(x) / 4)

/**
 * The length of `JSON.stringify(x)` without writing it, counting each string as its characters
 * and quotes (escapes not counted: a newline is 1, not 2): a walk of the structure, so a long
 * tool result costs its length's lookup, not a copy of its text. The view's size estimate is taken
 * every turn over the thread's whole conversation; serializing it was most of a long thread's view
 * (≈ 85 % at 400 tool calls of 2 KB).
 */
export function jsonSize(x: unknown): number {
  switch (typeof x) {
    case 'string':
      return x.length + 2
    case 'number':
      return Number.isFinite(x) ? String(x).length : 4
    case 'boolean':
      return x ? 4 : 5
    case 'object': {
      if (x === null) return 4
      if (Array.isArray(x)) {
        let n = 2 + Math.max(0, x.length - 1)
        for (const v of x) n += v === undefined || typeof v === 'function' || typeof v === 'symbol' ? 4 : jsonSize(v)
        return n
      }
      if (typeof (x as { toJSON?: unknown }).toJSON === 'function') return JSON.stringify(x).length
      let n = 2
      let fields = 0
      for (const k in x) {
        if (!Object.prototype.hasOwnProperty.call(x, k)) continue
        const v = (x as Record<string, unknown>)[k]
        if (v === undefined || typeof v === 'function' || typeof v === 'symbol') continue
        n += k.length + 3 + jsonSize(v)
        fields++
      }
      return n + Math.max(0, fields - 1)
    }
    default:
      return 0
  }
}

/**
 * The tools of a request, with their cache breakpoint, by their JSON: a thread is offered the
 * same tools turn after turn, so each turn gets the same array (one object the model thread
 * sends once: harness/model-thread.ts) and its size estimate without re-serializing it. Kept for
 * the 64 most recently used tool sets.
 */
type ToolSet = { tools: NonNullable<ModelRequest['tools']>; tokens: number }
const toolSets = new Map<string, ToolSet>()
function toolSet(tools: NonNullable<ModelRequest['tools']>): ToolSet {
  const json = JSON.stringify(tools)
  let set = toolSets.get(json)
  if (set) toolSets.delete(json)
  else set = { tools: withBreakpoint(tools), tokens: Math.ceil(json.length / 4) }
  toolSets.set(json, set)
  if (toolSets.size > 64) toolSets.delete(toolSets.keys().next().value as string)
  return set
}

const NONE: readonly never[] = []

/**
 * The tool set of a view by what it is made of, without serializing it: a brain builds each turn's
 * view from the same agent snapshot, MCP list and platform tools (whose definitions are constants),
 * so a turn after the first finds its set by those objects' identities. A new snapshot or list
 * (another thread, an MCP server that changed its tools) goes by the JSON (toolSet) once.
 */
const toolSetsByParts = new WeakMap<object, WeakMap<object, { platform: readonly ModelToolDefinition[]; set: ToolSet }[]>>()
function offeredTools(agentTools: readonly AgentToolConfig[], mcpTools: readonly McpToolDefinition[], platform: readonly ModelToolDefinition[]): ToolSet {
  let byMcp = toolSetsByParts.get(agentTools)
  if (!byMcp) toolSetsByParts.set(agentTools, (byMcp = new WeakMap()))
  let entries = byMcp.get(mcpTools)
  if (!entries) byMcp.set(mcpTools, (entries = []))
  const hit = entries.find((e) => e.platform.length === platform.length && e.platform.every((d, i) => d === platform[i]))
  if (hit) return hit.set
  const set = toolSet([...modelTools(agentTools, mcpTools), ...platform].map((t) => ({ ...t })) as unknown as NonNullable<ModelRequest['tools']>)
  entries.push({ platform: [...platform], set })
  if (entries.length > 8) entries.shift()
  return set
}

function withBreakpoint(tools: NonNullable<ModelRequest['tools']>): NonNullable<ModelRequest['tools']> {
  return tools.map((t, i, all) => (i === all.length - 1 ? { ...t, cache_control: { type: 'ephemeral' as const } } : t))
}

/** The model id an agent snapshot names. */
export function modelId(agent: ViewAgent): string {
  return typeof agent.model === 'string' ? agent.model : agent.model.id
}

/**
 * The context view: a pure function from one thread's events (of a session's log; the others
 * are skipped) and its agent snapshot to the Messages API request the model sees next. Nothing here touches the log;
 * clearing and compaction only change what the model sees.
 *
 * - Later views start at the newest `agent.thread_context_compacted` summary.
 * - A tool call with no answer by the time the conversation moves on gets a synthetic error
 *   result, so the request is always well-formed.
 * - Cache breakpoints: the system prompt, the last tool, and the conversation tail.
 */
export function buildContextView(events: readonly ViewEvent[], input: ContextViewInput): ContextView {
  const { agent, options = {}, mcpTools = NONE } = input
  const clearAt = options.clearThresholdTokens ?? 100_000
  const compactAt = options.compactThresholdTokens ?? 150_000
  const keepRecent = options.keepRecentToolResults ?? 3
  const model = modelId(agent)
  const maxTokens = options.maxTokens ?? 8192

  const own = events.filter((e) => isOnThread(e.event, input.thread))
  let start = 0
  let summary: string | undefined
  for (let i = own.length - 1; i >= 0; i--) {
    const e = own[i].event
    if (isEventOf(e, 'agent.thread_context_compacted') && typeof e.summary === 'string' && typeof e.through_seq === 'number') {
      summary = e.summary
      const through = e.through_seq
      start = own.findIndex((x) => x.seq > through)
      if (start < 0) start = own.length
      break
    }
  }

  const messages = toMessages(own.slice(start), summary, input.thread === null)
  const offered = offeredTools(agent.tools ?? NONE, mcpTools, input.platformTools ?? NONE)
  const tools = offered.tools
  const systemTexts = [agent.system, ...(input.systemContext ?? [])].filter((t): t is string => !!t)
  const system = systemTexts.length ? systemTexts.map((text) => ({ type: 'text' as const, text })) : undefined

  const baseSize = estimate(system ?? '') + offered.tokens
  let size = baseSize + estimate(messages)
  let cleared = 0
  if (size > clearAt) {
    cleared = clearOldToolResults(messages, keepRecent)
    size = baseSize + estimate(messages)
  }

  const request = finish({ model, max_tokens: maxTokens, system, tools, messages })
  const view: ContextView = { request, estimatedTokens: size, clearedToolResults: cleared }
  if (size > compactAt) {
    let boundary = -1
    for (let i = messages.length - 1; i >= 2; i--) {
      if (messages[i].role === 'assistant') {
        boundary = i
        break
      }
    }
    if (boundary > 0) {
      const head = messages.slice(0, boundary).map((m) => ({ ...m, content: [...m.content] }))
      const last = head[head.length - 1]
      last.content.push({ type: 'text', text: COMPACTION_INSTRUCTION })
      const cReq = finish({ model, max_tokens: Math.min(maxTokens, 4096), system, tools, messages: head })
      cReq.tool_choice = { type: 'none' }
      view.compaction = { request: cReq, throughSeq: messages[boundary - 1].maxSeq, throughEventId: messages[boundary - 1].maxEventId }
    }
  }
  return view
}

function finish(p: { model: string; max_tokens: number; system?: { type: 'text'; text: string }[]; tools: NonNullable<ModelRequest['tools']>; messages: Message[] }): ModelRequest {
  const system = p.system?.map((b, i, all) => (i === all.length - 1 ? { ...b, cache_control: { type: 'ephemeral' as const } } : b))
  // p.tools carry their breakpoint already (toolSet)
  const tools = p.tools
  // the blocks were built for this view alone, so only the tail is copied (to carry its breakpoint)
  const messages = p.messages.map((m, i, all) => {
    if (i < all.length - 1 || m.content.length === 0) return { role: m.role, content: m.content }
    const content = [...m.content]
    content[content.length - 1] = { ...content[content.length - 1], cache_control: { type: 'ephemeral' } }
    return { role: m.role, content }
  })
  const req: ModelRequest = { model: p.model, max_tokens: p.max_tokens, messages: messages as unknown as ModelRequest['messages'] }
  if (system) req.system = system
  if (tools.length) req.tools = tools
  return req
}

/** Folds events into alternating messages; see buildContextView. */
function toMessages(events: readonly ViewEvent[], summary: string | undefined, isPrimary: boolean): Message[] {
  const out: Message[] = []
  let assistant: Message | undefined
  let user: Message | undefined
  const openToolUses = new Map<string, string>() // tool_use id → tool name, awaiting a result

  const toolUseOrder = new Map<string, number>()
  const flushUser = () => {
    if (!user) return
    // results in the order of the calls they answer (the log has them in completion order)
    const results = user.content.filter((b) => b.type === 'tool_result')
    results.sort((a, b) => (toolUseOrder.get(String(a.tool_use_id)) ?? 0) - (toolUseOrder.get(String(b.tool_use_id)) ?? 0))
    user.content = [...results, ...user.content.filter((b) => b.type !== 'tool_result')]
    out.push(user)
    user = undefined
  }
  const userMsg = (seq: number, id: string): Message => {
    if (assistant) {
      out.push(assistant)
      assistant = undefined
    }
    if (!user) user = { role: 'user', content: [], maxSeq: seq, maxEventId: id }
    user.maxSeq = Math.max(user.maxSeq, seq)
    if (user.maxSeq === seq) user.maxEventId = id
    return user
  }
  const addResult = (seq: number, id: string, toolUseId: string, content: unknown, isError: boolean) => {
    if (!openToolUses.has(toolUseId)) return // an answer to nothing in view (before a compaction): skip
    openToolUses.delete(toolUseId)
    const m = userMsg(seq, id)
    const block: Block = { type: 'tool_result', tool_use_id: toolUseId, content: resultContent(content) }
    if (isError) block.is_error = true
    // tool results lead the user turn that follows the tool calls
    const firstNonResult = m.content.findIndex((b) => b.type !== 'tool_result')
    if (firstNonResult < 0) m.content.push(block)
    else m.content.splice(firstNonResult, 0, block)
  }
  const closeOpenToolUses = (seq: number, id: string, why: string) => {
    for (const toolUseId of [...openToolUses.keys()]) addResult(seq, id, toolUseId, [{ type: 'text', text: why }], true)
  }
  const assistantMsg = (seq: number, id: string): Message => {
    if (user) {
      closeOpenToolUses(user.maxSeq, user.maxEventId, 'No result was recorded for this tool call: the conversation moved on before it was answered.')
      flushUser()
    }
    if (!assistant) {
      if (out.length === 0) out.push({ role: 'user', content: [{ type: 'text', text: '(conversation start)' }], maxSeq: 0, maxEventId: '' })
      assistant = { role: 'assistant', content: [], maxSeq: seq, maxEventId: id }
    }
    assistant.maxSeq = seq
    assistant.maxEventId = id
    return assistant
  }

  if (summary !== undefined) out.push({ role: 'user', content: [{ type: 'text', text: `Summary of the earlier part of this session (older events are in session_history):\n\n${summary}` }], maxSeq: 0, maxEventId: '' })
  // the summary is a user turn of its own: what follows merges into it if it is user content
  if (summary !== undefined) user = out.pop()

  const fold: MessageFold = { userMsg, assistantMsg, addResult, openToolUses, toolUseOrder, isPrimary, outcomeIterations: new Map() }
  for (const { seq, event } of events) messageStep(fold, event, seq)
  if (assistant) {
    out.push(assistant)
    assistant = undefined
  }
  if (openToolUses.size > 0) {
    const last = out[out.length - 1]
    closeOpenToolUses(last?.maxSeq ?? 0, last?.maxEventId ?? '', 'No result has been recorded for this tool call.')
  }
  flushUser()
  return out.filter((m) => m.content.length > 0)
}

/** What the message fold's handlers work on: the open turns of toMessages and its pending calls. */
interface MessageFold {
  /** Folding the primary thread (a child's own reports are part of its history). */
  isPrimary: boolean
  userMsg: (seq: number, id: string) => Message
  assistantMsg: (seq: number, id: string) => Message
  addResult: (seq: number, id: string, toolUseId: string, content: unknown, isError: boolean) => void
  /** tool_use id → tool name, awaiting a result */
  openToolUses: Map<string, string>
  toolUseOrder: Map<string, number>
  /** max_iterations of each outcome defined in the events folded (for the feedback's "of at most N"). */
  outcomeIterations: Map<string, number>
}

const onToolUse = (f: MessageFold, e: LoggedEventOf<RequestType>, seq: number): void => {
  const name = e.type === 'agent.mcp_tool_use' ? `${e.mcp_server_name}__${e.name}` : e.name
  f.assistantMsg(seq, e.id).content.push({ type: 'tool_use', id: e.id, name, input: e.input ?? {} })
  f.openToolUses.set(e.id, name)
  f.toolUseOrder.set(e.id, seq)
}

const onResult = (f: MessageFold, e: LoggedEventOf<ResultType>, seq: number): void => {
  f.addResult(seq, e.id, String(answeredUseId(e)), e.content, !!e.is_error)
}

/** One event of the thread into the messages: every type is handled or explicitly ignored. */
const messageStep = defineFold<MessageFold, number>({
  'user.message': (f, e, seq) => {
    f.userMsg(seq, e.id).content.push(...userContent(e.content))
  },
  'system.message': (f, e, seq) => {
    const text = (e.content ?? []).map((b) => b.text ?? '').join('\n')
    f.userMsg(seq, e.id).content.push({ type: 'text', text: `<system-message>\n${text}\n</system-message>` })
  },
  'agent.thinking': (f, e, seq) => {
    if (typeof e.thinking === 'string' && typeof e.signature === 'string' && e.signature) {
      const m = f.assistantMsg(seq, e.id)
      // thinking must precede text and tool_use in an assistant turn
      const firstOther = m.content.findIndex((b) => b.type !== 'thinking')
      const block = { type: 'thinking', thinking: e.thinking, signature: e.signature }
      if (firstOther < 0) m.content.push(block)
      else m.content.splice(firstOther, 0, block)
    }
  },
  'agent.message': (f, e, seq) => {
    for (const b of (e.content as Block[] | undefined) ?? []) if (b.type === 'text') f.assistantMsg(seq, e.id).content.push({ type: 'text', text: b.text })
  },
  'agent.tool_use': onToolUse,
  'agent.custom_tool_use': onToolUse,
  'agent.mcp_tool_use': onToolUse,
  'agent.tool_result': onResult,
  'user.tool_result': onResult,
  'agent.mcp_tool_result': onResult,
  'user.custom_tool_result': onResult,
  // the compaction summary starts the view (buildContextView); the rest is not for the model
  // a message from another thread is a user turn; one from the primary (a task) as is, one from a
  // child (its report) naming the sender, so the lead knows who answered
  'agent.thread_message_received': (f, e, seq) => {
    // an advisor's advice is the ant__advisor call's result (advisor.ts): the model reads it there, once
    if (e.from_agent_name === ADVISOR_AGENT_NAME) return
    const text = textOf(e.content)
    const from = e.from_agent_name ? `${e.from_agent_name} (thread ${e.from_session_thread_id})` : undefined
    f.userMsg(seq, e.id).content.push({ type: 'text', text: from ? `<message from="${from}">\n${text}\n</message>` : text })
  },
  // a child's report is its own final answer: it stays in the child's history as assistant text
  // (the primary's own sends are already its send_to_agent call and result)
  'agent.thread_message_sent': (f, e, seq) => {
    if (!f.isPrimary) f.assistantMsg(seq, e.id).content.push({ type: 'text', text: textOf(e.content) })
  },
  // an outcome is the agent's task, told as a user turn (context/outcome.ts)
  'user.define_outcome': (f, e, seq) => {
    const maxIterations = typeof e.max_iterations === 'number' ? e.max_iterations : OUTCOME_DEFAULT_MAX_ITERATIONS
    f.outcomeIterations.set(e.outcome_id, maxIterations)
    const rubric = e.rubric.type === 'text' ? e.rubric.content : `(rubric file ${e.rubric.file_id})`
    f.userMsg(seq, e.id).content.push({ type: 'text', text: outcomeBriefText({ outcome_id: e.outcome_id, description: e.description, rubric, max_iterations: maxIterations }) })
  },
  // the grader's gaps (needs_revision) or its last word (max_iterations_reached) are the agent's next input
  'span.outcome_evaluation_end': (f, e, seq) => {
    const text = evaluationFeedbackText({
      outcome_id: e.outcome_id,
      iteration: e.iteration,
      max_iterations: f.outcomeIterations.get(e.outcome_id) ?? OUTCOME_DEFAULT_MAX_ITERATIONS,
      result: e.result,
      explanation: e.explanation,
      gaps: e.gaps ?? [],
    })
    if (text) f.userMsg(seq, e.id).content.push({ type: 'text', text })
  },
  ...ignoring('agent.thread_context_compacted', 'user.interrupt', 'user.tool_confirmation'),
  ...ignoring('session.status_running', 'session.status_idle', 'session.status_rescheduled', 'session.status_terminated', 'session.error', 'session.updated', 'session.usage', 'session.deleted'),
  ...ignoring('session.thread_created', 'session.thread_status_running', 'session.thread_status_idle', 'session.thread_status_rescheduled', 'session.thread_status_terminated'),
  ...ignoring('span.model_request_start', 'span.model_request_end', 'span.outcome_evaluation_start', 'span.outcome_evaluation_ongoing'),
  // the primary reads a run's end as a user turn naming the run, its result and its output (docs/workflows.md)
  'workflow_run.status_ended': (f, e, seq) => {
    if (!f.isPrimary) return
    f.userMsg(seq, e.id).content.push({ type: 'text', text: workflowRunEndedText(e) })
  },
  ...ignoring('workflow_run.created', 'workflow_run.status_running', 'workflow_run.status_idle', 'workflow_run.error', 'workflow_run.phase_started', 'workflow_run.phase_ended'),
})

function userContent(content: unknown): Block[] {
  const out: Block[] = []
  for (const b of (content as Block[] | undefined) ?? []) {
    if (b.type === 'text') out.push({ type: 'text', text: b.text })
    else if (b.type === 'image' || b.type === 'document') out.push({ ...b })
  }
  return out
}

function resultContent(content: unknown): Block[] | string {
  const blocks = ((content as Block[] | undefined) ?? []).filter((b) => ['text', 'image', 'document', 'search_result'].includes(b.type))
  return blocks.length ? blocks.map((b) => ({ ...b })) : ''
}

/** Replaces the content of all but the newest `keep` tool results with a pointer. Returns how many. */
function clearOldToolResults(messages: Message[], keep: number): number {
  const results: Block[] = []
  for (const m of messages) for (const b of m.content) if (b.type === 'tool_result') results.push(b)
  const toClear = results.slice(0, Math.max(0, results.length - keep))
  for (const b of toClear) {
    b.content = [
      {
        type: 'text',
        text: `[This tool result was cleared from your context to save space. It is still in the session log: call session_history with {"event_id":"${String(b.tool_use_id)}","types":["agent.tool_result"],"limit":5} to read it (the call, then results that follow it).]`,
      },
    ]
  }
  return toClear.length
}

function textOf(content: readonly { type: string; text?: string }[] | undefined): string {
  return (content ?? []).flatMap((b) => (b.type === 'text' && typeof b.text === 'string' ? [b.text] : [])).join('\n')
}

/** How much of a run's output (JSON text) the primary's reading turn shows. */
export const WORKFLOW_OUTPUT_IN_CONTEXT = 8_192

/** The user-turn text of a run's end: its id and name, the result, and the output (JSON, as capped when the run ended). */
function workflowRunEndedText(e: { workflow_run_id: string; result: { type: string; error?: { type: string; message: string } }; name?: string; output?: unknown }): string {
  const name = e.name ? ` name=${JSON.stringify(e.name)}` : ''
  const result = e.result.type === 'error' && e.result.error ? `error (${e.result.error.type}: ${e.result.error.message})` : e.result.type
  const lines = [`<workflow_run id="${e.workflow_run_id}"${name}>`, `The workflow run ended. Result: ${result}.`]
  if (e.output !== undefined) {
    // always JSON: a returned string shows quoted, so "null" and null never read alike
    const json = JSON.stringify(e.output)
    const cut = json.length > WORKFLOW_OUTPUT_IN_CONTEXT
    lines.push(`Output${cut ? ` (the first ${WORKFLOW_OUTPUT_IN_CONTEXT} of ${json.length} characters; the whole output is in ant__workflow_run_status)` : ''}:`, cut ? json.slice(0, WORKFLOW_OUTPUT_IN_CONTEXT) : json)
  }
  lines.push('</workflow_run>')
  return lines.join('\n')
}
