import { PRIMARY_THREAD, type EventInputOf, type EventOf } from '../../shared/api/events'
import { newId } from '../../shared/api/ids'
import type { EventInput, EventLog } from '../session/event-log'
import type { ToolJournal } from '../session/tool-journal'
import { buildContextView, modelId, type ContextViewOptions, type ViewAgent, type ViewEvent } from './context/view'
import { ModelRequestError, type ModelClient, type ModelResponse, type ModelUsage } from './model-client'
import { budgetCents, listCostCents } from './pricing'
import { readSessionHistory } from './session-history'
import { decideNext, foldInto, newSessionState, type NextStep, type OpenToolUse, type SessionState } from './session-state'
import type { ToolOutcome, ToolRouter } from '../hands/tool-router'
import { routeTool, type AgentToolConfig, type McpToolDefinition } from './tools'

/** Where the harness publishes never-stored previews (`event_start` / `event_delta`). */
export interface PreviewSink {
  publish(sessionId: string, event: { type: 'event_start' | 'event_delta'; [k: string]: unknown }): void
}

/** The session fields the harness reads: its pinned agent snapshot and budget. */
export interface SessionSource {
  retrieve(id: string): { id: string; agent: unknown; budget?: unknown }
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
    return this.current.signal
  }
  /**
   * Called by the loop right after it read the log: an interrupt the log already shows is
   * handled from the log, so the signal starts fresh; one that arrives later aborts it.
   */
  rearm(): void {
    if (!this.isStopped && this.current.signal.aborted) this.current = new AbortController()
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
  private readonly cache = new Map<string, { events: ViewEvent[]; state: SessionState }>()

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
    }
  }

  /**
   * Runs the session until it waits (idle, requires_action) or `control` stops it. Events and
   * their fold are cached per session between runs (bounded; rebuilt from the log when missing
   * or after a failure), so a wake reads only what was appended since.
   */
  async run(sessionId: string, control: TurnControl = new TurnControl()): Promise<void> {
    const session = this.deps.sessions.retrieve(sessionId)
    const agent = session.agent as ViewAgent & { tools?: AgentToolConfig[] }
    let cached = this.cache.get(sessionId)
    if (cached) this.cache.delete(sessionId) // re-inserted below: most recently used last
    else cached = { events: [], state: newSessionState(PRIMARY_THREAD) }
    const { events, state } = cached
    const catchUp = () => {
      for (;;) {
        const page = this.deps.log.read(sessionId, { after: state.lastSeq, limit: 1000 })
        for (const r of page) events.push({ seq: r.seq, event: r.event })
        foldInto(state, page)
        if (page.length < 1000) return
      }
    }
    let ok = false
    try {
      while (!control.stopped) {
        catchUp()
        control.rearm()
        const step = decideNext(state)
        if (step.kind === 'none') break
        await this.perform(step, { sessionId, session, agent, events, state, control })
      }
      ok = true
    } finally {
      if (ok) {
        this.cache.set(sessionId, cached)
        while (this.cache.size > this.o.cacheSessions) this.cache.delete(this.cache.keys().next().value as string)
      }
    }
  }

  /** Forgets a session's cached events (e.g. when it is deleted). */
  forget(sessionId: string): void {
    this.cache.delete(sessionId)
  }

  private async perform(step: NextStep, c: RunContext): Promise<void> {
    const append = (evs: EventInput[]) => this.deps.log.append(c.sessionId, evs)
    switch (step.kind) {
      case 'close_span':
        await append([{ type: 'span.model_request_end', model_request_start_id: step.spanId, is_error: true, model_usage: zeroUsage(), interrupted: true }])
        return
      case 'stop_tools': {
        const interrupted = c.state.lastInterruptSeq > 0 && c.state.lastInterruptSeq > Math.min(...step.toolUses.map((t) => t.seq))
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
        await append([{ type: 'session.status_idle', stop_reason: step.stopReason, stop_details: null }])
        return
      case 'run_tools':
        await this.runTools(step.run, step.deny, c)
        return
      case 'model':
        await this.callModel(step.attempt, c)
        return
    }
  }

  private runningPrefix(c: RunContext): EventInput[] {
    return c.state.status === 'running' ? [] : [{ type: 'session.status_running' }]
  }

  private async runTools(run: OpenToolUse[], deny: OpenToolUse[], c: RunContext): Promise<void> {
    const prefix = this.runningPrefix(c)
    if (deny.length || prefix.length) {
      await this.deps.log.append(c.sessionId, [
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
      const outcome = await this.executeOnce(t, c, signal, this.outputPreview(c.sessionId, t, resultId))
      if (!c.control.mayRecord) return
      if (c.control.stopped) {
        // shutdown: the model hears of it when the session continues
        await this.deps.log.append(c.sessionId, [toolResult(t, { ...outcome, content: `Corral shut down while this call was running, and cancelled it. Output so far: ${outcome.content}`, isError: true }, false, resultId)])
        return
      }
      await this.deps.log.append(c.sessionId, [toolResult(t, outcome, signal.aborted, resultId)])
    }
  }

  /**
   * Corral addition: a running toolset call's output as never-stored previews of its
   * `agent.tool_result` (`event_start` at the first chunk, then one `event_delta` per chunk), for
   * stream clients that ask for `event_deltas=agent.tool_result`. What the hands stream is the
   * raw output as it is written; the stored result (capped, with the notes for the model) then
   * replaces it. Undefined when nobody can hear previews or the call is not a toolset call.
   */
  private outputPreview(sessionId: string, t: OpenToolUse, resultId: string): ((chunk: string) => void) | undefined {
    const previews = this.deps.previews
    if (!previews || t.type !== 'agent.tool_use') return undefined
    let started = false
    return (chunk) => {
      if (!chunk) return
      if (!started) {
        started = true
        previews.publish(sessionId, { type: 'event_start', event: { id: resultId, type: 'agent.tool_result', tool_use_id: t.id } })
      }
      previews.publish(sessionId, { type: 'event_delta', event_id: resultId, delta: { type: 'content_delta', content: { type: 'text', text: chunk }, index: 0 } })
    }
  }

  /** Runs a call unless an earlier process may have run it; then asks the hands what happened. */
  private async executeOnce(t: OpenToolUse, c: RunContext, signal: AbortSignal, onOutput?: (chunk: string) => void): Promise<ToolOutcome> {
    const route = routeTool(c.agent.tools ?? [], t.name)
    if (route.kind === 'history') return readSessionHistory(this.deps.log, c.sessionId, t.input)
    if (route.kind === 'unknown' || route.kind === 'custom') return { content: `Unknown tool ${JSON.stringify(t.name)}: this agent has no such tool.`, isError: true }
    const call = { sessionId: c.sessionId, toolUseId: t.id, name: t.name, input: t.input, route: route.kind }
    if (this.deps.journal.wasStarted(t.id)) {
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
        await sleep(this.o.recoverPollMs, signal)
      }
    } else {
      this.deps.journal.markStarted(c.sessionId, t.id)
    }
    try {
      return await this.deps.router.execute({ ...call, signal, onOutput })
    } catch (err) {
      return { content: `The tool call failed: ${(err as Error).message}`, isError: true }
    }
  }

  private async callModel(attempt: number, c: RunContext): Promise<void> {
    const limit = budgetCents(c.session.budget)
    if (limit !== undefined && spentCents(c.state) >= limit) {
      await this.deps.log.append(c.sessionId, [{ type: 'session.status_idle', stop_reason: { type: 'budget_reached' }, stop_details: null }])
      return
    }
    const view = buildContextView(c.events, { thread: c.state.thread, agent: c.agent, options: this.o.context, mcpTools: await this.mcpTools(c) })
    const request = view.compaction?.request ?? view.request
    const signal = c.control.signal
    if (signal.aborted) return
    const startId = newId('event')
    const model = modelId(c.agent)
    // The request goes out first; `running` and the span start are appended a macrotask later,
    // so the commit's fsync (synchronous, on this thread) overlaps the model's own latency
    // instead of delaying the request. `context_seq` on the span end records how much of the
    // log this request saw, so input appended meanwhile is still answered afterwards.
    const contextSeq = c.state.lastSeq
    const prefix = this.runningPrefix(c)
    let started: Promise<unknown> | undefined
    const startSpan = () => (started ??= this.deps.log.append(c.sessionId, [...prefix, { id: startId, type: 'span.model_request_start' }]))
    setImmediate(startSpan)
    const previews = this.deps.previews
    const previewIds = new Map<number, string>()
    let usage = zeroUsage()
    let response: ModelResponse
    try {
      response = await this.deps.model.stream(request, {
        signal,
        onBlockStart: view.compaction
          ? undefined
          : (index, type) => {
              if (type !== 'text' && type !== 'thinking') return
              const id = newId('event')
              previewIds.set(index, id)
              previews?.publish(c.sessionId, { type: 'event_start', event: { id, type: type === 'text' ? 'agent.message' : 'agent.thinking' } })
            },
        onTextDelta: view.compaction
          ? undefined
          : (index, text) => {
              const id = previewIds.get(index)
              if (id) previews?.publish(c.sessionId, { type: 'event_delta', event_id: id, delta: { type: 'content_delta', content: { type: 'text', text }, index: 0 } })
            },
        onUsage: (u) => (usage = u),
      })
    } catch (err) {
      await startSpan()
      const e = err instanceof ModelRequestError ? err : new ModelRequestError('connection', (err as Error).message, { cause: err })
      if (!c.control.mayRecord) return
      const end: EventInputOf<'span.model_request_end'> = { type: 'span.model_request_end', model_request_start_id: startId, is_error: true, model_usage: usage, model }
      if (e.kind === 'aborted' || c.control.stopped) {
        await this.deps.log.append(c.sessionId, [{ ...end, interrupted: true }])
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
        await this.deps.log.append(c.sessionId, [end, error, { type: 'session.status_idle', stop_reason: { type: 'retries_exhausted' }, stop_details: null }])
        return
      }
      await this.deps.log.append(c.sessionId, [end, error])
      const exp = Math.min(this.o.backoffMaxMs, this.o.backoffBaseMs * 2 ** attempt)
      const delay = Math.max(e.retryAfterMs ?? 0, exp / 2 + (exp / 2) * this.o.random())
      await sleep(Math.min(delay, this.o.backoffMaxMs), signal)
      return
    }
    await startSpan()
    if (!c.control.mayRecord) return
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
      await this.deps.log.append(c.sessionId, [
        { ...end, stop_reason: 'compaction' },
        { type: 'agent.thread_context_compacted', summary, through_seq: view.compaction.throughSeq, through_event_id: view.compaction.throughEventId },
      ])
      return
    }
    const out = this.responseEvents(response, previewIds, c)
    // A final answer (no tool calls) ends the turn in the same commit: one fsync fewer per turn.
    // The idle carries context_seq too, so input that arrived meanwhile is still answered.
    const final = response.stopReason !== 'pause_turn' && !out.some((e) => e.type === 'agent.tool_use' || e.type === 'agent.mcp_tool_use' || e.type === 'agent.custom_tool_use')
    const idle: EventInput[] = final
      ? [{ type: 'session.status_idle', stop_reason: { type: response.stopReason === 'refusal' ? 'refusal' : 'end_turn' }, stop_details: null, context_seq: contextSeq }]
      : []
    await this.deps.log.append(c.sessionId, [...out, ...(await this.unrunnableAsks(out, c)), end, ...idle])
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
    if (!this.deps.mcp || !(c.agent.tools ?? []).some((t) => t.type === 'mcp_toolset')) return []
    const signal = c.control.signal
    if (signal.aborted) return []
    // a server that takes long to answer must not hold up an interrupt or a shutdown
    let onAbort = () => {}
    const aborted = new Promise<{ tools: readonly McpToolDefinition[] }>((resolve) => {
      onAbort = () => resolve({ tools: [] })
      signal.addEventListener('abort', onAbort, { once: true })
    })
    try {
      return (await Promise.race([this.deps.mcp.tools(c.sessionId), aborted])).tools
    } catch {
      return [] // the source reports unreachable servers itself; the turn goes on without them
    } finally {
      signal.removeEventListener('abort', onAbort)
    }
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
  session: { id: string; agent: unknown; budget?: unknown }
  agent: ViewAgent & { tools?: AgentToolConfig[] }
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
  return ev
}

function zeroUsage(): ModelUsage {
  return { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
}

function spentCents(s: SessionState): number {
  let total = 0
  for (const [model, u] of s.usageByModel) total += listCostCents(model, u)
  return total
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve()
    const t = setTimeout(done, ms)
    function done() {
      clearTimeout(t)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    signal?.addEventListener('abort', done, { once: true })
  })
}
