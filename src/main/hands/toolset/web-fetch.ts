import { readFileSync } from 'node:fs'
import http from 'node:http'
import { basename, join } from 'node:path'
import type { Duplex } from 'node:stream'
import tls from 'node:tls'
import zlib from 'node:zlib'
import { convert } from 'html-to-text'
import { WEB_FETCH_MAX_BODY_BYTES } from '../../../shared/tools/toolset'
import type { SandboxEgress } from '../sandbox'

export interface WebFetchParams {
  url: string
  /** The session's egress (the vault's `sessionEgress`); undefined: the session may reach nothing. */
  egress: SandboxEgress | undefined
  /** Largest body downloaded (after decompression); default WEB_FETCH_MAX_BODY_BYTES. */
  maxBodyBytes?: number
  /** Redirects followed, each one decided by the proxy again; default 5. */
  maxRedirects?: number
  /** Whole-fetch timeout in ms; default 30 s. */
  timeoutMs?: number
  signal?: AbortSignal
}

export type WebFetchResult = { ok: true; url: string; status: number; contentType: string; text: string } | { ok: false; message: string }

/** A refusal by the session's egress proxy: the policy it names, as the proxy said it. */
class FetchRefused extends Error {}

/**
 * Fetches a URL host-side THROUGH the session's egress proxy, so the request meets exactly the
 * decisions a request from inside the sandbox meets (allowed hosts, private and local addresses
 * refused after the proxy's own lookup, credentials injected, responses scrubbed): http:// as an
 * absolute-form request on the proxy's unix socket, https:// as CONNECT then TLS (verified
 * against the public roots and the install's egress CA, which the proxy uses for the hosts it
 * intercepts). HTML becomes readable text (html-to-text); other text types are returned as they
 * are; a binary type is refused. Never throws: every failure is `{ ok: false, message }` naming
 * the rule (the proxy's policy, the size cap, the timeout).
 */
export async function webFetch(p: WebFetchParams): Promise<WebFetchResult> {
  if (!p.egress) {
    return { ok: false, message: `web_fetch: refused by the environment's networking policy: this session may reach no host (networking is none, or limited with no allowed_hosts)` }
  }
  const socketPath = p.egress.socketPath ?? join(p.egress.dir, basename(p.egress.bridge.socket))
  const maxBody = p.maxBodyBytes ?? WEB_FETCH_MAX_BODY_BYTES
  const controller = new AbortController()
  const onAbort = () => controller.abort()
  p.signal?.addEventListener('abort', onAbort, { once: true })
  const timer = setTimeout(() => controller.abort(), p.timeoutMs ?? 30_000)
  let url = p.url
  try {
    for (let hop = 0; ; hop++) {
      const target = new URL(url)
      if (target.protocol !== 'http:' && target.protocol !== 'https:') return { ok: false, message: `web_fetch: ${url} is not an http(s) URL` }
      const r = await fetchOnce({ target, socketPath, caFile: join(p.egress.dir, 'ca-bundle.pem'), maxBody, signal: controller.signal })
      if (r.status >= 300 && r.status < 400 && r.location) {
        if (hop >= (p.maxRedirects ?? 5)) return { ok: false, message: `web_fetch: ${p.url} redirected more than ${p.maxRedirects ?? 5} times` }
        url = new URL(r.location, target).href
        continue
      }
      const type = (r.contentType.split(';')[0] ?? '').trim().toLowerCase()
      if (r.status >= 400) return { ok: false, message: `web_fetch: ${url} answered HTTP ${r.status}${r.body.length ? `: ${toText(r.body, type).slice(0, 2000)}` : ''}` }
      if (type && !isTextual(type)) return { ok: false, message: `web_fetch: ${url} is ${type} (${r.body.length} bytes), not text; download it with bash (curl) if you need the file` }
      return { ok: true, url, status: r.status, contentType: type || 'text/plain', text: toText(r.body, type) }
    }
  } catch (err) {
    if (err instanceof FetchRefused) return { ok: false, message: err.message }
    if (controller.signal.aborted) return { ok: false, message: p.signal?.aborted ? 'web_fetch: interrupted' : `web_fetch: ${url} did not answer within ${(p.timeoutMs ?? 30_000) / 1000} s` }
    return { ok: false, message: `web_fetch: ${url}: ${(err as Error).message}` }
  } finally {
    clearTimeout(timer)
    p.signal?.removeEventListener('abort', onAbort)
  }
}

interface RawResponse {
  status: number
  contentType: string
  location?: string
  body: Buffer
}

const HEADERS = { 'user-agent': 'Corral-web_fetch/1 (+https://docs.anthropic.com)', accept: 'text/html,application/xhtml+xml,text/plain,application/json;q=0.9,*/*;q=0.5', 'accept-encoding': 'gzip, deflate, br' }

async function fetchOnce(p: { target: URL; socketPath: string; caFile: string; maxBody: number; signal: AbortSignal }): Promise<RawResponse> {
  const { target } = p
  const path = target.pathname + target.search
  if (target.protocol === 'http:') {
    // A proxy request: the absolute URL on the request line, sent on the session's socket.
    return request({ socketPath: p.socketPath, path: target.href, headers: { ...HEADERS, host: target.host }, signal: p.signal }, p.maxBody)
  }
  const port = Number(target.port || 443)
  const host = target.hostname.replace(/^\[|\]$/g, '')
  const tunnel = await connectTunnel(p.socketPath, `${target.hostname}:${port}`, p.signal)
  const secure = tls.connect({ socket: tunnel, servername: /^[\d.]+$|:/.test(host) ? undefined : host, ca: [...tls.rootCertificates, readFileSync(p.caFile, 'utf8')] })
  return request({ createConnection: () => secure, path, headers: { ...HEADERS, host: target.host }, signal: p.signal }, p.maxBody)
}

function connectTunnel(socketPath: string, authority: string, signal: AbortSignal): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, method: 'CONNECT', path: authority, headers: { host: authority }, signal })
    req.once('connect', (res, socket, head) => {
      if (res.statusCode === 200) {
        if (head.length) socket.unshift(head)
        return resolve(socket)
      }
      // A refusal carries its reason in the body (the proxy's `x-corral-egress: refused`).
      const chunks: Buffer[] = [head]
      socket.on('data', (c: Buffer) => chunks.push(c))
      socket.once('close', () => reject(refusal(res.statusCode ?? 0, res.headers, Buffer.concat(chunks).toString('utf8'))))
      socket.once('error', () => undefined)
    })
    req.once('error', reject)
    req.end()
  })
}

function request(options: http.RequestOptions & { signal: AbortSignal }, maxBody: number): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = http.request({ ...options, method: 'GET' }, (res) => {
      const status = res.statusCode ?? 0
      if (res.headers['x-corral-egress'] === 'refused') {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (c: string) => (text += c))
        res.on('end', () => reject(refusal(status, res.headers, text)))
        return
      }
      const declared = Number(res.headers['content-length'])
      if (Number.isFinite(declared) && declared > maxBody) {
        res.destroy()
        return reject(new FetchRefused(`web_fetch: the body is ${declared} bytes, over the ${maxBody}-byte limit for a fetched page`))
      }
      const enc = String(res.headers['content-encoding'] ?? '').toLowerCase()
      const stream = enc === 'gzip' || enc === 'x-gzip' ? res.pipe(zlib.createGunzip()) : enc === 'deflate' ? res.pipe(zlib.createInflate()) : enc === 'br' ? res.pipe(zlib.createBrotliDecompress()) : res
      const chunks: Buffer[] = []
      let size = 0
      stream.on('data', (c: Buffer) => {
        size += c.length
        if (size > maxBody) {
          res.destroy()
          stream.destroy()
          reject(new FetchRefused(`web_fetch: the body is over the ${maxBody}-byte limit for a fetched page`))
          return
        }
        chunks.push(c)
      })
      stream.on('error', reject)
      res.on('error', reject)
      stream.on('end', () => resolve({ status, contentType: String(res.headers['content-type'] ?? ''), location: res.headers.location, body: Buffer.concat(chunks) }))
    })
    req.on('error', reject)
    req.end()
  })
}

function refusal(status: number, headers: http.IncomingHttpHeaders, body: string): Error {
  const why = body.replace(/^corral egress proxy:\s*/, '').trim() || `HTTP ${status}`
  if (headers['x-corral-egress'] !== 'refused') return new Error(`the egress proxy answered ${status}: ${why}`)
  const policy = /resolves to a destination|localhost|metadata/.test(why)
    ? 'the egress address policy (private, loopback, link-local and metadata addresses are never reachable)'
    : /not among the hosts/.test(why)
      ? "the environment's networking policy (allowed_hosts)"
      : 'the egress proxy'
  return new FetchRefused(`web_fetch: refused by ${policy}: ${why}`)
}

function isTextual(type: string): boolean {
  return type.startsWith('text/') || /^application\/(xhtml\+xml|xml|json|ld\+json|javascript|x-javascript|rss\+xml|atom\+xml)$/.test(type) || type.endsWith('+json') || type.endsWith('+xml')
}

/** The body as text: HTML turned into readable text (headings, lists, links with their URLs). */
function toText(body: Buffer, type: string): string {
  const text = body.toString('utf8')
  const html = type === 'text/html' || type === 'application/xhtml+xml' || (!type && /^\s*<(!doctype html|html)/i.test(text))
  if (!html) return text
  return convert(text, {
    wordwrap: false,
    selectors: [
      { selector: 'img', format: 'skip' },
      { selector: 'script', format: 'skip' },
      { selector: 'style', format: 'skip' },
      { selector: 'nav', format: 'skip' },
    ],
  }).trim()
}
