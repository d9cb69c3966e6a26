import { Readable } from 'node:stream'
import type { ReadableStream as WebReadableStream } from 'node:stream/web'
import busboy from 'busboy'
import type { Context } from 'hono'
import { CorralError, invalid } from '../../../shared/errors'
import { parseQuery } from '../query'

/** Largest request body accepted (images in user messages are the big case). */
export const MAX_BODY_BYTES = 32 * 1024 * 1024

export interface ReadJsonOptions {
  /** The cap in bytes (default MAX_BODY_BYTES). */
  limit?: number
}

/**
 * Reads a JSON body, counting bytes as they arrive: 413 `request_too_large` as soon as the
 * declared Content-Length or the bytes read pass the cap (the rest is never buffered; the
 * HTTP adapter drains a little and then closes the connection), 400 when it is not valid UTF-8
 * JSON. An empty body is `{}`.
 */
export async function readJson(c: Context, options: ReadJsonOptions = {}): Promise<unknown> {
  const limit = options.limit ?? MAX_BODY_BYTES
  const declared = c.req.header('content-length')
  if (declared !== undefined && Number(declared) > limit) throw new CorralError('request_too_large', `request body is ${declared} bytes; the limit is ${limit}`)
  const chunks: Uint8Array[] = []
  let total = 0
  const body = c.req.raw.body
  if (body) {
    const reader = body.getReader()
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      total += value.byteLength
      if (total > limit) {
        reader.cancel().catch(() => {})
        throw new CorralError('request_too_large', `request body is over ${limit} bytes; the limit is ${limit}`)
      }
      chunks.push(value)
    }
  }
  if (total === 0) return {}
  const buf = Buffer.concat(chunks, total)
  let text: string
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(buf)
  } catch {
    throw new CorralError('invalid_request_error', 'body: not valid UTF-8')
  }
  try {
    return JSON.parse(text)
  } catch (err) {
    throw new CorralError('invalid_request_error', `body: not valid JSON (${(err as Error).message})`)
  }
}

export function query(c: Context, arrayKeys: readonly string[] = []): Record<string, unknown> {
  return parseQuery(new URL(c.req.url).searchParams, arrayKeys)
}

/** Refuses any query parameter (but the SDK's `beta=true`) on a route that takes none. */
export function noQuery(c: Context): void {
  const q = query(c)
  const keys = Object.keys(q)
  if (keys.length > 0) throw new CorralError('invalid_request_error', `invalid query: unknown parameter ${keys.map((k) => JSON.stringify(k)).join(', ')}; this route takes none`)
}

export interface MultipartOptions {
  /** What the body must be, for the 400s: "an upload is multipart/form-data with a `file` part". */
  expects: string
  /** A declared Content-Length past this is a 413 at once (`tooLarge` says why), before any byte is read. */
  maxBytes: number
  tooLarge: (declared: number) => string
  /** busboy's limits (files, fileSize, fields, fieldSize, parts). */
  limits: busboy.Limits
  /** Keep the directories in a part's filename (a skill's paths). */
  preservePath?: boolean
  /** The route's own part handlers on the parser; `fail(err)` ends the read with that error. */
  onParts: (parser: busboy.Busboy, fail: (err: unknown) => void) => void
}

/**
 * Reads a multipart/form-data body as it arrives (busboy): 400 naming what is wrong when it is
 * not multipart, missing or malformed, 413 when its declared length passes `maxBytes`; the
 * parts go to the route's handlers. On any failure the rest of the body is left unread (the
 * HTTP adapter drains a little and closes the connection) and the error is thrown.
 */
export async function readMultipart(c: Context, o: MultipartOptions): Promise<void> {
  const contentType = c.req.header('content-type') ?? ''
  if (!/^multipart\/form-data\s*;/i.test(contentType)) throw invalid(`body: ${o.expects}`)
  const declared = Number(c.req.header('content-length'))
  if (Number.isFinite(declared) && declared > o.maxBytes) throw new CorralError('request_too_large', o.tooLarge(declared))
  const body = c.req.raw.body
  if (!body) throw invalid(`body: missing; ${o.expects}`)
  let parser: busboy.Busboy
  try {
    parser = busboy({ headers: { 'content-type': contentType }, defParamCharset: 'utf8', preservePath: o.preservePath, limits: o.limits })
  } catch (err) {
    throw invalid(`body: not a multipart/form-data body (${(err as Error).message})`)
  }
  const source = Readable.fromWeb(body as unknown as WebReadableStream<Uint8Array>)
  const parsed = new Promise<void>((resolve, reject) => {
    o.onParts(parser, reject)
    parser.on('error', (err: Error) => reject(invalid(`body: not a valid multipart/form-data body (${err.message})`)))
    parser.on('close', () => resolve())
    source.on('error', reject)
  })
  source.pipe(parser)
  try {
    await parsed
  } catch (err) {
    source.unpipe(parser)
    source.destroy()
    throw err
  }
}
