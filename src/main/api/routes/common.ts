import type { Context } from 'hono'
import { CorralError } from '../../../shared/errors'
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
