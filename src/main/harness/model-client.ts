import Anthropic from '@anthropic-ai/sdk'
import type { MessageCreateParamsBase, RawMessageStreamEvent } from '@anthropic-ai/sdk/resources/messages/messages'
import { nodeFetch } from './model-transport'

/** A Messages API request as the context view builds it (without `stream`). */
export type ModelRequest = Omit<MessageCreateParamsBase, 'stream'> & { context_management?: unknown }

/** One content block of a finished model response. */
export type ResponseBlock =
  | { type: 'text'; text: string }
  | { type: 'thinking'; thinking: string; signature: string }
  | { type: 'redacted_thinking'; data: string }
  | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> }

export interface ModelUsage {
  input_tokens: number
  output_tokens: number
  cache_creation_input_tokens: number
  cache_read_input_tokens: number
}

/** Usage of nothing yet (a sum's start). */
export function zeroUsage(): ModelUsage {
  return { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
}

export interface ModelResponse {
  blocks: ResponseBlock[]
  stopReason: string | null
  usage: ModelUsage
  model: string
}

/** What the harness hears while a response streams (for previews); never stored. */
export interface ModelStreamHandlers {
  signal: AbortSignal
  /** A content block began at `index` of the response. */
  onBlockStart?: (index: number, type: ResponseBlock['type']) => void
  onTextDelta?: (index: number, text: string) => void
  /** Usage so far (input tokens are known from the first event). */
  onUsage?: (usage: ModelUsage) => void
}

/**
 * The model, as the harness sees it: one streamed request at a time. Implementations:
 * AnthropicModelClient (the official SDK against Anthropic or a compatible server).
 * Throws ModelRequestError for every failure, classified for the retry policy.
 */
export interface ModelClient {
  stream(request: ModelRequest, handlers: ModelStreamHandlers): Promise<ModelResponse>
}

export type ModelErrorKind = 'rate_limited' | 'overloaded' | 'server' | 'connection' | 'stream_cut' | 'stalled' | 'aborted' | 'invalid'

/** A failed model request. `retryable` follows from `kind`; `retryAfterMs` from the server's header. */
export class ModelRequestError extends Error {
  readonly kind: ModelErrorKind
  readonly status?: number
  readonly retryAfterMs?: number
  constructor(kind: ModelErrorKind, message: string, options: { status?: number; retryAfterMs?: number; cause?: unknown } = {}) {
    super(message, { cause: options.cause })
    this.name = 'ModelRequestError'
    this.kind = kind
    this.status = options.status
    this.retryAfterMs = options.retryAfterMs
  }
  get retryable(): boolean {
    return this.kind !== 'invalid' && this.kind !== 'aborted'
  }
  /** The Managed Agents error object type this failure is reported as. */
  get apiErrorType(): 'model_rate_limited_error' | 'model_overloaded_error' | 'model_request_failed_error' {
    return this.kind === 'rate_limited' ? 'model_rate_limited_error' : this.kind === 'overloaded' ? 'model_overloaded_error' : 'model_request_failed_error'
  }
}

export interface AnthropicModelClientParams {
  apiKey?: string
  baseURL?: string
  /**
   * For local Anthropic-compatible servers (Ollama, llama.cpp, LM Studio): strip
   * `cache_control`, `context_management`, server tools and beta headers from every request.
   */
  compatibilityMode?: boolean
  /** Beta headers to send (ignored in compatibility mode). */
  betas?: string[]
  /** Abort when no byte arrives for this long, including before the first one (default 120 s). */
  stallTimeoutMs?: number
  /** Upper bound for a whole request (default 10 min). */
  requestTimeoutMs?: number
  /** The fetch the SDK uses (tests inject one to see where a request goes without a network); default: `nodeFetch` (model-transport.ts). */
  fetch?: typeof fetch
}

/** Where requests go when no base URL is given. Always passed to the SDK: left undefined, the SDK
 * would read ANTHROPIC_BASE_URL from process.env itself, and a probe of "Anthropic's API" would dial
 * whatever that names while reporting api.anthropic.com. */
export const ANTHROPIC_API_URL = 'https://api.anthropic.com'

/** Strips what a local Anthropic-compatible server does not understand. Pure; returns a copy. */
export function toCompatibleRequest(request: ModelRequest): ModelRequest {
  const strip = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(strip)
    if (v && typeof v === 'object') {
      const out: Record<string, unknown> = {}
      for (const [k, x] of Object.entries(v)) if (k !== 'cache_control') out[k] = strip(x)
      return out
    }
    return v
  }
  const { context_management: _cm, ...rest } = request
  const out = strip(rest) as ModelRequest
  // Server tools have a versioned `type` (web_search_20250305, ...); client tools have none or 'custom'.
  if (out.tools) out.tools = out.tools.filter((t) => !('type' in t) || t.type === undefined || t.type === 'custom')
  if (out.tools && out.tools.length === 0) delete out.tools
  return out
}

/** The JSON of tool arrays already sent (streamedRequestJson), by the array. */
const toolsJson = new WeakMap<object, string>()

/**
 * A streaming request's body as JSON, the same as the SDK's own `JSON.stringify({ ...body, stream:
 * true })` but for the place of `tools` (last). A thread's tools are the same array turn after
 * turn (context/view.ts finds its tool set by identity, and never changes one), and their schemas
 * are most of a request's bytes: each array is serialized once. It was 6.5 % of the event loop in
 * issue #11's threads bench (the SDK's encoder), a fixed cost of every turn of every thread.
 */
export function streamedRequestJson(body: MessageCreateParamsBase): string {
  const { tools, ...rest } = body
  const head = JSON.stringify({ ...rest, stream: true })
  if (tools === undefined) return head
  let json = toolsJson.get(tools)
  if (json === undefined) toolsJson.set(tools, (json = JSON.stringify(tools)))
  return `${head.slice(0, -1)},"tools":${json}}`
}

/**
 * The official SDK's Messages API client, streaming. The SDK's own retries are off: the harness
 * retries and reports each attempt as events. A stalled socket (no bytes for `stallTimeoutMs`)
 * is aborted and reported as `stalled`.
 *
 * Requests leave one at a time (takeTurn): each is built by the SDK and handed to the network
 * before the next one's building starts. When many threads ask at once (25 children whose tool
 * results committed together), the SDK's awaits otherwise interleave their building step by step,
 * and the first request's bytes waited for the last one to be built; their responses then came
 * due together too, and the next turns queued behind each other again (issue #11's threads bench,
 * docs/multiagent.md).
 */
export class AnthropicModelClient implements ModelClient {
  private readonly client: Anthropic
  private readonly stallTimeoutMs: number
  /** Settles when the last request in line has been handed to the network (takeTurn). */
  private line: Promise<void> = Promise.resolve()
  /** Lets the next request in line be built: the turn of the request the SDK is building now. */
  private endTurn: (() => void) | undefined

  constructor(private readonly params: AnthropicModelClientParams) {
    this.stallTimeoutMs = params.stallTimeoutMs ?? 120_000
    const transport = params.fetch ?? (nodeFetch as typeof fetch)
    this.client = new Anthropic({
      apiKey: params.apiKey ?? 'no-key',
      baseURL: params.baseURL || ANTHROPIC_API_URL,
      maxRetries: 0,
      timeout: params.requestTimeoutMs ?? 600_000,
      // the SDK hands the request it built to the network: the next one in line may be built
      fetch: ((input: string | URL | Request, init?: RequestInit) => {
        const end = this.endTurn
        this.endTurn = undefined
        try {
          return transport(input, init)
        } finally {
          end?.()
        }
      }) as typeof fetch,
    })
  }

  /**
   * Waits until the requests ahead in line have been handed to the network; the returned function
   * ends this request's turn (idempotent: the fetch the SDK calls ends it, or a failure before).
   * The next request is let go on process.nextTick, behind the tick in which Node's HTTP client
   * writes this one to its socket, so its bytes leave first. Not setImmediate: one request per
   * turn of the event loop held 64 workflow agents' requests behind the loop's other work
   * (slot refill p50 8 → 83 ms in the workflows bench).
   */
  private async takeTurn(): Promise<() => void> {
    const ahead = this.line
    let next!: () => void
    this.line = new Promise<void>((resolve) => (next = resolve))
    await ahead
    let ended = false
    const end = () => {
      if (ended) return
      ended = true
      if (this.endTurn === end) this.endTurn = undefined
      process.nextTick(next)
    }
    this.endTurn = end
    return end
  }

  /**
   * One streaming Messages request. The SDK's `messages.create` prints its deprecation warning
   * (a deprecated model) on every call, which floods a long session's log: the first request for
   * a model goes through it, so the SDK warns once with its own list; later ones post the same
   * request without the check.
   */
  private send(body: MessageCreateParamsBase, options: { signal: AbortSignal; headers: Record<string, string> }): Promise<AsyncIterable<RawMessageStreamEvent>> {
    if (!AnthropicModelClient.checkedModels.has(body.model)) {
      AnthropicModelClient.checkedModels.add(body.model)
      return this.client.messages.create({ ...body, stream: true }, options)
    }
    // the body as JSON text, which the SDK sends as it is when it is given its content type
    const headers = { ...options.headers, 'content-type': 'application/json' }
    return this.client.post('/v1/messages', { body: streamedRequestJson(body), ...options, headers, stream: true }) as unknown as Promise<AsyncIterable<RawMessageStreamEvent>>
  }

  /** Models whose first request went through the SDK's own checks, in this process. */
  private static readonly checkedModels = new Set<string>()

  async stream(request: ModelRequest, handlers: ModelStreamHandlers): Promise<ModelResponse> {
    const body = this.params.compatibilityMode ? toCompatibleRequest(request) : request
    const controller = new AbortController()
    let stalled = false
    let timer: NodeJS.Timeout | undefined
    // One timer per request, not one per streamed event: each event only notes its time, and the
    // timer, when it fires, waits on for what remains since the latest one.
    let lastEventAt = performance.now()
    const watch = (ms: number) => {
      timer = setTimeout(() => {
        const quiet = performance.now() - lastEventAt
        if (quiet < this.stallTimeoutMs) return watch(this.stallTimeoutMs - quiet)
        stalled = true
        controller.abort()
      }, ms)
    }
    const onAbort = () => controller.abort()
    if (handlers.signal.aborted) throw new ModelRequestError('aborted', 'the model request was interrupted')
    handlers.signal.addEventListener('abort', onAbort, { once: true })
    watch(this.stallTimeoutMs)
    const headers: Record<string, string> = {}
    if (!this.params.compatibilityMode && this.params.betas?.length) headers['anthropic-beta'] = this.params.betas.join(',')
    const acc = new ResponseAccumulator(handlers)
    // The response is whole at its message_stop event: it is answered then, and the rest of the
    // body (the end of the chunked encoding) is read on behind it, so the connection goes back to
    // the pool without the turn waiting for it. A failure after message_stop changes nothing.
    let answer: ((r: ModelResponse) => void) | undefined
    const stopped = new Promise<ModelResponse>((resolve) => (answer = resolve))
    const consume = async (): Promise<ModelResponse> => {
      try {
        const endTurn = await this.takeTurn()
        let stream: AsyncIterable<RawMessageStreamEvent>
        try {
          stream = await this.send(body as MessageCreateParamsBase, { signal: controller.signal, headers })
        } finally {
          endTurn()
        }
        for await (const event of stream) {
          lastEventAt = performance.now()
          acc.apply(event)
          if (event.type === 'message_stop') answer?.(acc.finish())
        }
        return acc.finish()
      } catch (err) {
        if (acc.complete) return acc.finish()
        if (handlers.signal.aborted) throw new ModelRequestError('aborted', 'the model request was interrupted', { cause: err })
        if (stalled) throw new ModelRequestError('stalled', `the model endpoint sent nothing for ${this.stallTimeoutMs} ms`, { cause: err })
        if (err instanceof ModelRequestError) throw err
        throw classifyError(err, this.params.baseURL || ANTHROPIC_API_URL)
      } finally {
        if (timer) clearTimeout(timer)
        handlers.signal.removeEventListener('abort', onAbort)
      }
    }
    return Promise.race([stopped, consume()])
  }
}

const NETWORK_CODES: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host name lookup failed',
  ETIMEDOUT: 'connection timed out',
  ECONNRESET: 'connection reset',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  UND_ERR_CONNECT_TIMEOUT: 'connection timed out',
  UND_ERR_SOCKET: 'connection closed',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'untrusted (self-signed) certificate',
  SELF_SIGNED_CERT_IN_CHAIN: 'untrusted certificate chain',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'certificate cannot be verified',
  CERT_HAS_EXPIRED: 'expired certificate',
  ERR_TLS_CERT_ALTNAME_INVALID: 'certificate does not match the host',
}

/** The network reason under an SDK connection error ("Connection error." → "connection refused"), from its cause chain. */
function networkReason(err: unknown, to: string): string | undefined {
  let deepest: string | undefined
  for (let e = err as { code?: unknown; message?: unknown; cause?: unknown } | undefined, i = 0; e && i < 8; e = e.cause as typeof e, i++) {
    if (typeof e.code === 'string' && NETWORK_CODES[e.code]) return `${NETWORK_CODES[e.code]}${to} (${String(e.message ?? e.code)})`
    if (typeof e.message === 'string' && e.message) deepest = e.message
  }
  return deepest && `${deepest}${to}`
}

/**
 * Maps an SDK or network error to a ModelRequestError. `baseURL` (the endpoint asked) goes into
 * a connection failure's message: "model request failed: connection refused to http://…".
 */
export function classifyError(err: unknown, baseURL?: string): ModelRequestError {
  if (err instanceof Anthropic.APIError && typeof err.status === 'number') {
    const status = err.status
    const retryAfter = Number(err.headers?.get?.('retry-after'))
    const retryAfterMs = Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter * 1000 : undefined
    const msg = `model endpoint answered ${status}: ${err.message}`
    if (status === 429) return new ModelRequestError('rate_limited', msg, { status, retryAfterMs, cause: err })
    if (status === 529) return new ModelRequestError('overloaded', msg, { status, retryAfterMs, cause: err })
    if (status >= 500 || status === 408) return new ModelRequestError('server', msg, { status, retryAfterMs, cause: err })
    return new ModelRequestError('invalid', msg, { status, cause: err })
  }
  const message = (err as Error)?.message ?? String(err)
  // An overloaded_error sent as an SSE `error` event mid-stream.
  if (/overloaded/i.test(message)) return new ModelRequestError('overloaded', `model endpoint overloaded: ${message}`, { cause: err })
  const to = baseURL ? ` to ${baseURL}` : ''
  return new ModelRequestError('connection', `model request failed: ${networkReason(err, to) ?? message + to}`, { cause: err })
}

/** Folds raw stream events into a response, forwarding previews. Throws on a cut stream. */
class ResponseAccumulator {
  private readonly blocks: (ResponseBlock & { partialJson?: string })[] = []
  private stopReason: string | null = null
  private model = ''
  private stopped = false
  private readonly usage: ModelUsage = { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }

  constructor(private readonly handlers: ModelStreamHandlers) {}

  apply(event: RawMessageStreamEvent): void {
    switch (event.type) {
      case 'message_start':
        this.model = event.message.model
        this.mergeUsage(event.message.usage as unknown as Record<string, unknown>)
        break
      case 'content_block_start': {
        const b = event.content_block
        let block: (typeof this.blocks)[number] | undefined
        if (b.type === 'text') block = { type: 'text', text: b.text ?? '' }
        else if (b.type === 'thinking') block = { type: 'thinking', thinking: b.thinking ?? '', signature: b.signature ?? '' }
        else if (b.type === 'redacted_thinking') block = { type: 'redacted_thinking', data: b.data }
        // (the input comes in input_json_delta events; some compatible servers send it whole here instead)
        else if (b.type === 'tool_use') block = { type: 'tool_use', id: b.id, name: b.name, input: b.input && typeof b.input === 'object' && !Array.isArray(b.input) ? { ...(b.input as Record<string, unknown>) } : {}, partialJson: '' }
        if (block) {
          this.blocks[event.index] = block
          this.handlers.onBlockStart?.(event.index, block.type)
          if (block.type === 'text' && block.text) this.handlers.onTextDelta?.(event.index, block.text)
        }
        break
      }
      case 'content_block_delta': {
        const block = this.blocks[event.index]
        if (!block) break
        const d = event.delta
        if (d.type === 'text_delta' && block.type === 'text') {
          block.text += d.text
          this.handlers.onTextDelta?.(event.index, d.text)
        } else if (d.type === 'thinking_delta' && block.type === 'thinking') block.thinking += d.thinking
        else if (d.type === 'signature_delta' && block.type === 'thinking') block.signature += d.signature
        else if (d.type === 'input_json_delta' && block.type === 'tool_use') block.partialJson = (block.partialJson ?? '') + d.partial_json
        break
      }
      case 'content_block_stop': {
        const block = this.blocks[event.index]
        if (block?.type === 'tool_use') {
          const raw = block.partialJson ?? ''
          try {
            if (raw.trim()) block.input = JSON.parse(raw) as Record<string, unknown>
            delete block.partialJson
          } catch {
            // Truncated input (max_tokens): the block keeps partialJson and is dropped in finish().
          }
        }
        break
      }
      case 'message_delta':
        this.stopReason = event.delta.stop_reason ?? this.stopReason
        this.mergeUsage(event.usage as unknown as Record<string, unknown>)
        break
      case 'message_stop':
        this.stopped = true
        break
    }
  }

  private mergeUsage(u: Record<string, unknown> | undefined | null): void {
    if (!u) return
    for (const k of Object.keys(this.usage) as (keyof ModelUsage)[]) {
      const v = u[k]
      if (typeof v === 'number') this.usage[k] = v
    }
    this.handlers.onUsage?.({ ...this.usage })
  }

  /** Whether message_stop arrived (the response is whole). */
  get complete(): boolean {
    return this.stopped
  }

  finish(): ModelResponse {
    // A body that ends cleanly after message_delta's stop_reason is whole too (some compatible
    // servers close the stream without message_stop); one that ends before it was cut.
    if (!this.stopped && this.stopReason === null) throw new ModelRequestError('stream_cut', 'the model stream ended before message_stop')
    // A tool_use whose input never completed (max_tokens) is dropped rather than run half-formed.
    const blocks = this.blocks.filter((b): b is ResponseBlock & { partialJson?: string } => !!b && !(b.type === 'tool_use' && b.partialJson !== undefined))
    return { blocks: blocks.map(({ partialJson: _p, ...b }) => b as ResponseBlock), stopReason: this.stopReason, usage: { ...this.usage }, model: this.model }
  }
}
