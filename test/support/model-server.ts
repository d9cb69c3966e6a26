import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { z } from 'zod'

/**
 * A scripted model server: a real HTTP server on 127.0.0.1 speaking the Messages API
 * (`POST /v1/messages`, streaming SSE) so the real @anthropic-ai/sdk client is exercised end to
 * end. Each request is answered by the next step of the test's script (or by a responder
 * function that looks at the request).
 *
 * Like a real model, it can only call what it is offered: every scripted tool_use is checked
 * against the `tools` array of the request it answers (the tool must be offered, and its input
 * must validate against the offered `input_schema`: required fields, types, no property the
 * schema does not declare). A call that does not is never streamed: the request is answered with
 * a 400 naming the violation, and the violation is kept in `violations` (tests assert it empty).
 * Build calls from the offered schema with `toolCall(req, name, input)`, which checks at once.
 */
export type ScriptBlock =
  | { type: 'text'; text: string }
  | { type: 'thinking'; thinking: string; signature?: string }
  | {
      type: 'tool_use'
      name: string
      input: Record<string, unknown>
      id?: string
      /**
       * Deliberately not what is offered (a test of how Corral answers a model that calls a tool
       * wrongly): the reason, e.g. 'a model that calls a tool it was not offered'. Skips the check.
       */
      offSchema?: string
    }

export interface ScriptUsage {
  input_tokens?: number
  output_tokens?: number
  cache_creation_input_tokens?: number
  cache_read_input_tokens?: number
}

export type ScriptStep =
  /** A complete streamed response. */
  | {
      kind: 'message'
      blocks: ScriptBlock[]
      stopReason?: string
      usage?: ScriptUsage
      /** Wait this long before the first byte (headers included). */
      delayMs?: number
      /** Wait this long between SSE events. */
      chunkDelayMs?: number
      /** Characters per text_delta (default 8). */
      chunkSize?: number
      /**
       * A tool call's whole input in its content_block_start, with no input_json_delta after it,
       * as some Anthropic-compatible servers send it (the official SDK's accumulation keeps it).
       */
      toolInputAtStart?: boolean
      /** End the body after message_delta, without message_stop (as some compatible servers do). */
      noMessageStop?: boolean
    }
  /** An HTTP error with the API's error envelope (429, 500, 529, 400, ...). */
  | { kind: 'error'; status: number; type?: string; message?: string; retryAfterSec?: number; delayMs?: number }
  /** Streams the response but destroys the socket after `afterEvents` SSE events. */
  | { kind: 'cut'; blocks: ScriptBlock[]; afterEvents: number }
  /** Streams `afterEvents` SSE events, then sends nothing more and keeps the socket open. */
  | { kind: 'stall'; blocks: ScriptBlock[]; afterEvents: number }

export interface RecordedRequest {
  index: number
  path: string
  headers: IncomingMessage['headers']
  body: {
    model: string
    max_tokens: number
    system?: { type: string; text: string; cache_control?: unknown }[]
    tools?: OfferedTool[]
    messages: { role: 'user' | 'assistant'; content: string | Record<string, unknown>[] }[]
    stream?: boolean
    tool_choice?: unknown
    [k: string]: unknown
  }
  /** performance.now() when the request was complete, and when the response's first byte went out. */
  receivedAt: number
  firstByteAt?: number
  /** performance.now() when the first content_block_delta went out. */
  firstTokenAt?: number
  /** performance.now() when the request's headers arrived (before its body was read). */
  arrivedAt: number
  /** performance.now() once a streamed response's last byte was handed to the socket (res.end()). */
  endedAt?: number
}

/** A tool as the request offers it (the Messages API's `tools` entries). */
export interface OfferedTool {
  name: string
  type?: string
  description?: string
  input_schema?: Record<string, unknown>
  cache_control?: unknown
}

export type Responder = (req: RecordedRequest) => ScriptStep | Promise<ScriptStep>

export class ScriptedModelServer {
  readonly requests: RecordedRequest[] = []
  /** Scripted tool calls that broke the offered schemas (each also failed its request with a 400). */
  readonly violations: string[] = []
  private readonly queue: ScriptStep[] = []
  private readonly sockets = new Set<import('node:net').Socket>()
  private responder?: Responder
  /** Called when a streamed response's first content delta went out (for benchmarks). */
  onFirstToken?: (req: RecordedRequest) => void
  /** Keep only this many recorded requests (benchmarks send thousands). */
  keepRequests = Infinity
  url = ''

  private constructor(private readonly server: Server) {}

  /** Starts a server on 127.0.0.1 (any free port) answering with `script`. Close it with `close()`. */
  static async start(script: ScriptStep[] | Responder = []): Promise<ScriptedModelServer> {
    let self: ScriptedModelServer | undefined
    const server = createServer((req, res) => void self!.handle(req, res))
    self = new ScriptedModelServer(server)
    if (typeof script === 'function') self.responder = script
    else self.queue.push(...script)
    server.on('connection', (s) => {
      s.setNoDelay(true)
      self!.sockets.add(s)
      s.on('close', () => self!.sockets.delete(s))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    self.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    return self
  }

  /** Adds steps to the end of the script. */
  push(...steps: ScriptStep[]): void {
    this.queue.push(...steps)
  }

  /** Replaces the responder (steps still queued are used first). */
  respondWith(responder: Responder): void {
    this.responder = responder
  }

  get pending(): number {
    return this.queue.length
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const arrivedAt = performance.now()
    const chunks: Buffer[] = []
    for await (const c of req) chunks.push(c as Buffer)
    const path = (req.url ?? '').split('?')[0]
    if (req.method !== 'POST' || path !== '/v1/messages') {
      return sendError(res, 404, 'not_found_error', `scripted model server: no route ${req.method} ${path}`)
    }
    let body: RecordedRequest['body']
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as RecordedRequest['body']
    } catch {
      return sendError(res, 400, 'invalid_request_error', 'body: not JSON')
    }
    const recorded: RecordedRequest = { index: this.requests.length, path, headers: req.headers, body, receivedAt: performance.now(), arrivedAt }
    this.requests.push(recorded)
    if (this.requests.length > this.keepRequests) this.requests.splice(0, this.requests.length - this.keepRequests)
    const step = this.queue.shift() ?? (this.responder ? await this.responder(recorded) : undefined)
    if (!step) return sendError(res, 400, 'invalid_request_error', `scripted model server: the script has no step for request #${recorded.index}`)
    if (step.kind === 'error') {
      if (step.delayMs) await sleep(step.delayMs)
      const headers: Record<string, string> = {}
      if (step.retryAfterSec !== undefined) headers['retry-after'] = String(step.retryAfterSec)
      return sendError(res, step.status, step.type ?? defaultErrorType(step.status), step.message ?? `scripted ${step.status}`, headers)
    }
    const problems = step.blocks.flatMap((b) => (b.type === 'tool_use' && !b.offSchema ? toolUseViolations(body.tools, b.name, b.input) : []))
    if (problems.length) {
      const message = `scripted model server: request #${recorded.index}: the script calls a tool the way the request does not offer it: ${problems.join('; ')}`
      this.violations.push(message)
      return sendError(res, 400, 'invalid_request_error', message)
    }
    if (step.kind === 'message' && step.delayMs) await sleep(step.delayMs)
    if (res.destroyed) return
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'request-id': `req_scripted_${recorded.index}` })
    res.flushHeaders()
    recorded.firstByteAt = performance.now()
    const events = sseEvents(step.kind === 'message' ? step : { kind: 'message', blocks: step.blocks }, body.model)
    const limit = Math.min(step.kind === 'message' ? events.length : step.afterEvents, events.length)
    const gap = step.kind === 'message' ? (step.chunkDelayMs ?? 0) : 0
    // a whole response written at once goes out in one write, as a server's buffered stream would
    const corked = step.kind === 'message' && !gap
    if (corked) res.cork()
    for (let i = 0; i < limit; i++) {
      if (res.destroyed) return
      res.write(`event: ${events[i].type}\ndata: ${JSON.stringify(events[i])}\n\n`)
      if (events[i].type === 'content_block_delta' && recorded.firstTokenAt === undefined) {
        recorded.firstTokenAt = performance.now()
        this.onFirstToken?.(recorded)
      }
      if (gap && i + 1 < limit) await sleep(gap)
    }
    if (corked) res.uncork()
    if (step.kind === 'cut') {
      res.socket?.destroy()
      return
    }
    if (step.kind === 'stall') return // keep the socket open; the client must give up
    res.end()
    recorded.endedAt = performance.now()
  }
}

function defaultErrorType(status: number): string {
  if (status === 429) return 'rate_limit_error'
  if (status === 529) return 'overloaded_error'
  if (status >= 500) return 'api_error'
  if (status === 401) return 'authentication_error'
  return 'invalid_request_error'
}

function sendError(res: ServerResponse, status: number, type: string, message: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers })
  res.end(JSON.stringify({ type: 'error', error: { type, message } }))
}

/** The SSE events of a response, in order, as the Messages API streams them. */
export function sseEvents(step: Extract<ScriptStep, { kind: 'message' }>, model: string): ({ type: string } & Record<string, unknown>)[] {
  const u = step.usage ?? {}
  const input = u.input_tokens ?? 100
  const output = u.output_tokens ?? 20
  const out: ({ type: string } & Record<string, unknown>)[] = []
  out.push({
    type: 'message_start',
    message: {
      id: `msg_scripted_${Math.random().toString(36).slice(2)}`,
      type: 'message',
      role: 'assistant',
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: input, output_tokens: 1, cache_creation_input_tokens: u.cache_creation_input_tokens ?? 0, cache_read_input_tokens: u.cache_read_input_tokens ?? 0 },
    },
  })
  const size = step.chunkSize ?? 8
  step.blocks.forEach((b, index) => {
    if (b.type === 'text') {
      out.push({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } })
      for (let i = 0; i < b.text.length; i += size) out.push({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: b.text.slice(i, i + size) } })
    } else if (b.type === 'thinking') {
      out.push({ type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', signature: '' } })
      out.push({ type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: b.thinking } })
      out.push({ type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: b.signature ?? 'sig_scripted' } })
    } else {
      const id = b.id ?? `toolu_scripted_${Math.random().toString(36).slice(2)}`
      out.push({ type: 'content_block_start', index, content_block: { type: 'tool_use', id, name: b.name, input: step.toolInputAtStart ? b.input : {} } })
      const json = step.toolInputAtStart ? '' : JSON.stringify(b.input)
      const third = Math.ceil(json.length / 3)
      for (let i = 0; i < json.length; i += third) out.push({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: json.slice(i, i + third) } })
    }
    out.push({ type: 'content_block_stop', index })
  })
  const stop = step.stopReason ?? (step.blocks.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn')
  out.push({ type: 'message_delta', delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: output, input_tokens: input } })
  if (!step.noMessageStop) out.push({ type: 'message_stop' })
  return out
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms))
}

/** Convenience steps. */
export const say = (text: string, extra: Partial<Extract<ScriptStep, { kind: 'message' }>> = {}): ScriptStep => ({ kind: 'message', blocks: [{ type: 'text', text }], ...extra })
export const callTool = (name: string, input: Record<string, unknown>, text?: string): ScriptStep => ({
  kind: 'message',
  blocks: [...(text ? [{ type: 'text' as const, text }] : []), { type: 'tool_use', name, input }],
})

/**
 * Validators by the schema's JSON text: every request parses its body afresh, so the same offered
 * schema is a new object each time (keyed by identity, each request compiled its tools' validators
 * again: ~0.8 ms per request of the benchmark's shared event loop). Bounded: cleared past 512.
 */
const schemaCache = new Map<string, z.ZodType>()

/**
 * Why a call of `name` with `input` is not what `tools` offers: the tool is not offered (or is a
 * server tool, which the model never calls as a tool_use), or the input does not validate
 * against its `input_schema` (with `additionalProperties` unset, an undeclared property counts as
 * a violation too: a real model sends only what the schema names). Empty when the call is fine.
 */
export function toolUseViolations(tools: readonly OfferedTool[] | undefined, name: string, input: unknown): string[] {
  const offered = (tools ?? []).find((t) => t.name === name)
  const names = (tools ?? []).map((t) => t.name).join(', ') || 'none'
  if (!offered) return [`tool "${name}" is not offered (offered: ${names})`]
  if (offered.type && offered.type !== 'custom') return [`tool "${name}" is a server tool (${offered.type}); the model does not call it as a tool_use`]
  const schema = offered.input_schema
  if (!schema) return [`tool "${name}" has no input_schema`]
  if (input === null || typeof input !== 'object' || Array.isArray(input)) return [`${name}: the input must be an object`]
  const out: string[] = []
  const properties = (schema.properties ?? {}) as Record<string, unknown>
  if (schema.additionalProperties === undefined) {
    for (const k of Object.keys(input)) if (!(k in properties)) out.push(`${name}: property "${k}" is not in the offered schema (it has ${Object.keys(properties).join(', ') || 'none'})`)
  }
  const schemaKey = JSON.stringify(schema)
  let validator = schemaCache.get(schemaKey)
  if (!validator) {
    try {
      validator = z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0])
    } catch (err) {
      return [...out, `${name}: its input_schema cannot be read (${(err as Error).message})`]
    }
    if (schemaCache.size >= 512) schemaCache.clear()
    schemaCache.set(schemaKey, validator)
  }
  const r = validator.safeParse(input)
  if (!r.success) for (const issue of r.error.issues) out.push(`${name}: ${issue.path.map(String).join('.') || '(input)'}: ${issue.message}`)
  return out
}

/**
 * A tool_use step built from what `req` offers: throws at once (failing the test where the call
 * is written) when the tool is not offered or `input` does not validate against its schema.
 */
export function toolCall(req: RecordedRequest, name: string, input: Record<string, unknown>, text?: string): ScriptStep {
  const problems = toolUseViolations(req.body.tools, name, input)
  if (problems.length) throw new Error(`scripted model: ${problems.join('; ')}`)
  return callTool(name, input, text)
}

/** One response that calls several tools (each checked as toolCall checks it), in the order given. */
export function toolCalls(req: RecordedRequest, calls: readonly [name: string, input: Record<string, unknown>][]): ScriptStep {
  const steps = calls.map(([name, input]) => toolCall(req, name, input))
  const [first, ...rest] = steps
  if (first.kind !== 'message') return first
  return { ...first, blocks: [...first.blocks, ...rest.flatMap((s) => (s.kind === 'message' ? s.blocks : []))] }
}

/** The offered tool called `name` in `req` (its input_schema included), or undefined. */
export function offeredTool(req: RecordedRequest, name: string): OfferedTool | undefined {
  return req.body.tools?.find((t) => t.name === name)
}

/** A call that deliberately breaks the offered schemas (`reason` says why the test wants it); not checked. */
export const callToolOffSchema = (name: string, input: Record<string, unknown>, reason: string): ScriptStep => ({
  kind: 'message',
  blocks: [{ type: 'tool_use', name, input, offSchema: reason }],
})

/** The text of a request's first system block ('' without one): which agent a request is for. */
export function systemOf(req: RecordedRequest): string {
  return req.body.system?.[0]?.text ?? ''
}

/** Every text block of the request's user turns, in order. */
export function userTexts(req: RecordedRequest): string[] {
  return req.body.messages.flatMap((m) => (m.role === 'user' && typeof m.content !== 'string' ? m.content.flatMap((b) => (b.type === 'text' ? [String(b.text)] : [])) : []))
}

/** Text of every tool_result block in a request, in order. */
export function toolResultsOf(req: RecordedRequest): { tool_use_id: string; text: string; is_error: boolean }[] {
  const out: { tool_use_id: string; text: string; is_error: boolean }[] = []
  for (const m of req.body.messages) {
    if (typeof m.content === 'string') continue
    for (const b of m.content) {
      if (b.type !== 'tool_result') continue
      const c = b.content
      const text = typeof c === 'string' ? c : ((c as { text?: string }[]) ?? []).map((x) => x.text ?? '').join('')
      out.push({ tool_use_id: String(b.tool_use_id), text, is_error: b.is_error === true })
    }
  }
  return out
}

/**
 * The answer of a request that forces a tool (`tool_choice: {type: 'tool', name}`, as a grader's
 * request does): that tool's call, built from the offered schema like `toolCall` (throws when the
 * request forces no tool, or `input` does not validate against the forced tool's schema).
 */
export function forcedToolCall(req: RecordedRequest, input: Record<string, unknown>): ScriptStep {
  const choice = req.body.tool_choice as { type?: string; name?: string } | undefined
  if (choice?.type !== 'tool' || typeof choice.name !== 'string') throw new Error(`scripted model: request #${req.index} forces no tool (tool_choice ${JSON.stringify(choice)})`)
  return toolCall(req, choice.name, input)
}

/** The name of the tool a request forces with `tool_choice`, or undefined. */
export function forcedToolName(req: RecordedRequest): string | undefined {
  const choice = req.body.tool_choice as { type?: string; name?: string } | undefined
  return choice?.type === 'tool' && typeof choice.name === 'string' ? choice.name : undefined
}

/** The text of every text block of a request's messages, in order (what a model reads, without tool results). */
export function messageTextOf(req: RecordedRequest): string {
  const out: string[] = []
  for (const m of req.body.messages) {
    if (typeof m.content === 'string') out.push(m.content)
    else for (const b of m.content) if (b.type === 'text' && typeof b.text === 'string') out.push(b.text)
  }
  return out.join('\n')
}
