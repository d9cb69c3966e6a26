import type http from 'node:http'
import { Transform, type Readable, type TransformCallback } from 'node:stream'
import zlib from 'node:zlib'
import { Refusal } from './egress-request'

/*
 * The egress proxy's side of a response from a host that may hold a secret: every response
 * from a host in a credential's allow-list (or a repository's host) is scrubbed of that
 * credential's secrets, whether or not the request carried one (a value stored with an injected
 * secret can be fetched back later without it). What is scrubbed: each raw secret and each
 * header value the proxy built that does not contain it (a repository's `Basic` value). A body
 * is scrubbed as bytes, so a compressed body is decoded first; an encoding the proxy cannot
 * decode is refused. Secrets transformed by the upstream (base64, hex, hashes) are not
 * recognised: that is why a credential names the hosts trusted with it.
 */

/** `Authorization` value the proxy sends for a repository token (GitHub's form). */
export function repositoryAuthorization(token: string): string {
  return `Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`
}

/** What a repository token is scrubbed as: the token and the base64 credentials of its Basic header. */
export function repositoryScrubValues(token: string): string[] {
  return [token, repositoryAuthorization(token).slice('Basic '.length)]
}

const REDACTED = '[redacted by corral]'

export function scrubHeaderValue(v: string | string[] | number, secrets: readonly string[]): string | string[] | number {
  if (!secrets.length || typeof v === 'number') return v
  const one = (s: string) => secrets.reduce((acc, sec) => (sec ? acc.split(sec).join(REDACTED) : acc), s)
  return Array.isArray(v) ? v.map(one) : one(v)
}

const DECODERS: Record<string, () => Transform> = {
  gzip: () => zlib.createGunzip(),
  'x-gzip': () => zlib.createGunzip(),
  deflate: () => zlib.createInflate(),
  br: () => zlib.createBrotliDecompress(),
}

/**
 * The response's content codings, outermost last (as listed), without `identity`. Throws
 * Refusal(502) naming the coding when one cannot be decoded for scrubbing.
 */
export function contentCodings(res: http.IncomingMessage, host: string): string[] {
  const listed = String(res.headers['content-encoding'] ?? '')
    .split(',')
    .map((t) => t.trim().toLowerCase())
    .filter((t) => t && t !== 'identity')
  for (const c of listed) if (!DECODERS[c]) throw new Refusal(502, `${host} answered with content-encoding ${JSON.stringify(c)}, which the egress proxy cannot decode to scrub secrets from it`)
  return listed
}

/**
 * The response body as the client will get it: decoded from `codings` (see contentCodings) and
 * scrubbed of `secrets` (`mode` as for SecretScrubber). A decoding error destroys the stream.
 */
export function scrubbedBody(res: Readable, codings: readonly string[], secrets: readonly string[], mode: 'redact' | 'mask' = 'redact'): Readable {
  let out: Readable = res
  for (const c of [...codings].reverse()) {
    const d = DECODERS[c]!()
    const from = out
    from.on('error', (err) => d.destroy(err))
    out = from.pipe(d)
  }
  const scrubber = new SecretScrubber(secrets, mode)
  out.on('error', (err) => scrubber.destroy(err))
  return out.pipe(scrubber)
}

function scrubNeedles(buf: Buffer, needles: readonly Buffer[], mode: 'redact' | 'mask'): Buffer {
  let out = buf
  for (const n of needles) {
    let i = out.indexOf(n)
    if (i < 0) continue
    const parts: Buffer[] = []
    let from = 0
    while (i >= 0) {
      parts.push(out.subarray(from, i), mode === 'mask' ? Buffer.alloc(n.length, '*') : Buffer.from(REDACTED))
      from = i + n.length
      i = out.indexOf(n, from)
    }
    parts.push(out.subarray(from))
    out = Buffer.concat(parts)
  }
  return out
}

/** A whole body with each secret replaced by `[redacted by corral]`. */
export function scrubBuffer(buf: Buffer, secrets: readonly string[]): Buffer {
  return scrubNeedles(buf, [...new Set(secrets.filter(Boolean))].map((s) => Buffer.from(s, 'utf8')), 'redact')
}

/**
 * Replaces secrets in a byte stream, across chunk boundaries: with `[redacted by corral]`, or
 * with `*` of the same length (`mask`, for framed streams whose lengths must not change).
 */
export class SecretScrubber extends Transform {
  private tail = Buffer.alloc(0)
  private readonly needles: Buffer[]
  private readonly keep: number

  constructor(
    secrets: readonly string[],
    private readonly mode: 'redact' | 'mask' = 'redact',
  ) {
    super()
    this.needles = [...new Set(secrets.filter(Boolean))].map((s) => Buffer.from(s, 'utf8'))
    this.keep = Math.max(0, ...this.needles.map((n) => n.length - 1))
  }

  private scrub(buf: Buffer): Buffer {
    return scrubNeedles(buf, this.needles, this.mode)
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    if (this.needles.length === 0) return done(null, chunk)
    const data = this.scrub(this.tail.length ? Buffer.concat([this.tail, chunk]) : chunk)
    const cut = Math.max(0, data.length - this.keep)
    this.tail = Buffer.from(data.subarray(cut))
    done(null, data.subarray(0, cut))
  }

  override _flush(done: TransformCallback): void {
    done(null, this.scrub(this.tail))
  }
}
