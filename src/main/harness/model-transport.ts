import http from 'node:http'
import https from 'node:https'
import type { IncomingMessage } from 'node:http'
import { StringDecoder } from 'node:string_decoder'

/**
 * The model client's HTTP transport: the `fetch` the official SDK is given, over Node's own
 * http/https with keep-alive agents, instead of the global fetch (undici's WHATWG fetch).
 *
 * Why (issue #11 and #12's benches): every model request of every thread goes through here, and
 * the global fetch's Request/Response/web-stream machinery cost the model thread 1.1 ms of CPU
 * per streamed request when warm and 4 ms over a process's first hundred requests, against 0.65
 * and 1.4 ms here (the same SDK, the same SSE bytes; the response body is the socket's Node
 * stream, which the SDK's SSE reader iterates directly). The SDK still builds every request,
 * parses every event and classifies every error: only the bytes' way changes.
 *
 * What it answers is the part of a fetch `Response` the SDK reads (status, ok, headers, url, body,
 * text(), json()). A request it does not know how to send (a streamed or form body, a scheme other
 * than http/https, a `Request` object) goes to the global fetch unchanged. Errors are Node's own:
 * a refused connection keeps its `code` (ECONNREFUSED…) for the error classification, an abort
 * is an `AbortError` as the SDK expects.
 *
 * An event stream whose events carry no `event:` line (only `data:`, which SSE allows and some
 * Anthropic-compatible proxies and local servers send) gets one, named after its data's `type`:
 * the SDK drops every event without one, and the response read as cut short (`eventStreamBody`).
 */

const agents = {
  'http:': new http.Agent({ keepAlive: true }),
  'https:': new https.Agent({ keepAlive: true }),
} as const

/** A body this transport sends as it is: a string or bytes, or none. */
function simpleBody(body: unknown): string | Uint8Array | undefined | false {
  if (body === undefined || body === null) return undefined
  if (typeof body === 'string' || body instanceof Uint8Array) return body
  if (body instanceof ArrayBuffer) return new Uint8Array(body)
  return false
}

function headerRecord(h: RequestInit['headers']): Record<string, string> {
  const out: Record<string, string> = {}
  if (!h) return out
  if (h instanceof Headers) h.forEach((v, k) => (out[k] = v))
  else if (Array.isArray(h)) for (const [k, v] of h) out[k.toLowerCase()] = v
  else for (const [k, v] of Object.entries(h)) if (v !== undefined && v !== null) out[k.toLowerCase()] = String(v)
  return out
}

/** The fetch-shaped answer the SDK reads: the body is the response's Node stream (async-iterable). */
class NodeResponse {
  readonly ok: boolean
  readonly status: number
  readonly statusText: string
  readonly headers: Headers
  readonly redirected = false
  readonly type = 'basic'
  private used = false

  constructor(
    readonly url: string,
    private readonly res: IncomingMessage,
  ) {
    this.status = res.statusCode ?? 0
    this.ok = this.status >= 200 && this.status < 300
    this.statusText = res.statusMessage ?? ''
    const headers = new Headers()
    const raw = res.rawHeaders
    for (let i = 0; i + 1 < raw.length; i += 2) headers.append(raw[i], raw[i + 1])
    this.headers = headers
  }

  private stream: AsyncIterable<Uint8Array> | undefined

  get body(): AsyncIterable<Uint8Array> {
    this.stream ??= /^text\/event-stream\b/i.test(this.res.headers['content-type'] ?? '') ? eventStreamBody(this.res) : this.res
    return this.stream
  }

  get bodyUsed(): boolean {
    return this.used
  }

  async arrayBuffer(): Promise<ArrayBuffer> {
    const bytes = await this.bytes()
    return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer
  }

  async text(): Promise<string> {
    return (await this.bytes()).toString('utf8')
  }

  async json(): Promise<unknown> {
    return JSON.parse(await this.text())
  }

  private async bytes(): Promise<Buffer> {
    if (this.used) throw new TypeError('Body is unusable: Body has already been read')
    this.used = true
    const chunks: Buffer[] = []
    for await (const c of this.res) chunks.push(c as Buffer)
    return Buffer.concat(chunks)
  }
}

/**
 * An event stream's body as the SDK reads it. The first event with data decides: with an `event:`
 * line (the Messages API's own streams) every chunk passes as it came; with only `data:` lines, each event
 * without an `event:` line gets one naming its data's `type` (`message_start`, …), since the SDK
 * skips an event that has none. Chunks go on as they arrive either way.
 */
export async function* eventStreamBody(res: AsyncIterable<Buffer>): AsyncGenerator<Uint8Array> {
  const chunks = res[Symbol.asyncIterator]()
  const held: Buffer[] = []
  let head = ''
  let named = true
  try {
    for (;;) {
      const r = await chunks.next()
      if (!r.done) {
        held.push(r.value)
        head += r.value.toString('latin1') // only ASCII field names are looked for
      }
      // the first event with data (before it: comments, a retry field), whole
      const first = firstDataEvent(head, r.done === true)
      if (first !== undefined || r.done || head.length > 65_536) {
        named = first === undefined || /^event:/m.test(first)
        break
      }
    }
    if (named) {
      yield* held
      for (;;) {
        const r = await chunks.next()
        if (r.done) return
        yield r.value
      }
    }
    const decoder = new StringDecoder('utf8')
    let rest = ''
    const feed = (text: string, last: boolean): Buffer | undefined => {
      const { out, left } = withEventLines(rest + text, last)
      rest = left
      return out ? Buffer.from(out, 'utf8') : undefined
    }
    for (const c of held) {
      const out = feed(decoder.write(c), false)
      if (out) yield out
    }
    for (;;) {
      const r = await chunks.next()
      const out = r.done ? feed(decoder.end(), true) : feed(decoder.write(r.value), false)
      if (out) yield out
      if (r.done) return
    }
  } finally {
    await chunks.return?.()
  }
}

/** The whole events of an event stream's text (each ends at a blank line) and what follows the last. */
function splitEvents(text: string): { events: string[]; left: string } {
  const events: string[] = []
  let from = 0
  const blank = /\r\n\r\n|\n\n|\r\r/g
  for (let m = blank.exec(text); m; m = blank.exec(text)) {
    events.push(text.slice(from, m.index))
    from = m.index + m[0].length
  }
  return { events, left: text.slice(from) }
}

const hasData = (event: string) => /^data:/m.test(event)

/** The first whole event of `text` with a `data:` line (the rest of the text, when `last`), or undefined. */
function firstDataEvent(text: string, last: boolean): string | undefined {
  const { events, left } = splitEvents(text)
  return events.find(hasData) ?? (last && hasData(left) ? left : undefined)
}

/** The whole events in `text` (up to its last blank line; all of it when `last`), each given an `event:` line it lacked. */
function withEventLines(text: string, last: boolean): { out: string; left: string } {
  const { events, left } = splitEvents(text)
  if (last && left.trim() !== '') events.push(left)
  return { out: events.map((e) => `${withEventLine(e)}\n\n`).join(''), left: last ? '' : left }
}

function withEventLine(event: string): string {
  const lines = event.split(/\r\n|\n|\r/)
  if (lines.some((l) => l.startsWith('event:'))) return event
  const data = lines
    .filter((l) => l.startsWith('data:'))
    .map((l) => l.slice(l.startsWith('data: ') ? 6 : 5))
    .join('\n')
  if (data === '') return event
  let type: unknown
  try {
    type = (JSON.parse(data) as { type?: unknown }).type
  } catch {
    return event
  }
  return typeof type === 'string' && /^[\w.-]+$/.test(type) ? `event: ${type}\n${event}` : event
}

/** `fetch(url, init)` for the SDK over node:http/https (see the module's comment). */
export function nodeFetch(input: string | URL | Request, init: RequestInit = {}): Promise<Response> {
  const body = simpleBody(init.body)
  const url = typeof input === 'string' ? new URL(input) : input instanceof URL ? input : undefined
  const agent = url ? agents[url.protocol as keyof typeof agents] : undefined
  if (!url || !agent || body === false) return globalThis.fetch(input, init)
  const signal = init.signal ?? undefined
  const headers = headerRecord(init.headers)
  if (body !== undefined) headers['content-length'] = String(typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength)
  return new Promise<Response>((resolve, reject) => {
    if (signal?.aborted) return reject(abortError(signal))
    const request = (url.protocol === 'https:' ? https : http).request(url, { method: init.method ?? 'GET', headers, agent }, (res) =>
      resolve(new NodeResponse(url.href, res) as unknown as Response),
    )
    request.on('error', reject)
    if (signal) abortOn(signal, request)
    request.end(body)
  })
}

/** The error an aborted request ends with, as Node's own `signal` option makes it (the SDK looks for the name). */
function abortError(signal: AbortSignal): Error {
  return Object.assign(new Error('The operation was aborted', { cause: signal.reason }), { name: 'AbortError', code: 'ABORT_ERR' })
}

/**
 * Destroys `request` (and with it the response, mid-body too) when `signal` aborts, until the
 * request closes. What http.request's own `signal` option does, without the end-of-stream
 * machinery that option attaches to every request: that was 3.6 % of the event loop in issue #11's
 * threads bench, where each turn of each thread makes one request.
 */
function abortOn(signal: AbortSignal, request: http.ClientRequest): void {
  const onAbort = () => request.destroy(abortError(signal))
  signal.addEventListener('abort', onAbort, { once: true })
  request.once('close', () => signal.removeEventListener('abort', onAbort))
}
