import type { Context } from 'hono'
import { CorralError } from '../../../shared/errors'
import { parseQuery } from '../query'

/** Largest request body accepted (images in user messages are the big case). */
export const MAX_BODY_BYTES = 32 * 1024 * 1024

/** Reads a JSON body: 413 when over the limit, 400 when it is not valid UTF-8 JSON. */
export async function readJson(c: Context): Promise<unknown> {
  const len = Number(c.req.header('content-length') ?? '0')
  if (len > MAX_BODY_BYTES) throw new CorralError('request_too_large', `request body is ${len} bytes; the limit is ${MAX_BODY_BYTES}`)
  const buf = new Uint8Array(await c.req.arrayBuffer())
  if (buf.byteLength > MAX_BODY_BYTES) throw new CorralError('request_too_large', `request body is over ${MAX_BODY_BYTES} bytes`)
  if (buf.byteLength === 0) return {}
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
