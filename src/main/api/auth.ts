import { timingSafeEqual, createHash } from 'node:crypto'

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]', '::1'])

/** True when a Host (or Origin host) header names this machine's loopback (DNS-rebinding guard). */
export function isLoopbackHost(hostHeader: string | undefined | null): boolean {
  if (!hostHeader) return false
  let host = hostHeader.trim().toLowerCase()
  if (host.startsWith('[')) {
    const end = host.indexOf(']')
    host = end > 0 ? host.slice(0, end + 1) : host
  } else host = host.replace(/:\d+$/, '')
  return LOOPBACK_HOSTS.has(host)
}

/**
 * The origin a browser names when it loads a page from this server through `hostHeader`
 * (`http://<host>[:port]`, normalised), or undefined when the Host header is not a loopback name.
 */
export function ownOrigin(hostHeader: string | undefined | null): string | undefined {
  if (!hostHeader || !isLoopbackHost(hostHeader)) return undefined
  try {
    return new URL(`http://${hostHeader.trim().toLowerCase()}`).origin
  } catch {
    return undefined
  }
}

/**
 * An Origin header is acceptable when absent (non-browser clients, same-origin GETs) or exactly
 * this server's own origin: the same scheme, host and port as the Host the request came to. A
 * page on another loopback port (a dev server, a notebook) is another origin and is refused, as
 * is `Origin: null` (sandboxed frames, file: pages).
 */
export function isAllowedOrigin(origin: string | undefined | null, hostHeader: string | undefined | null): boolean {
  if (origin === undefined || origin === null) return true
  const own = ownOrigin(hostHeader)
  return own !== undefined && origin.trim().toLowerCase() === own
}

/** The header the renderer sends on every request: a cross-origin page cannot set it without a preflight, which fails. */
export const CSRF_HEADER = 'x-corral-csrf'

/** The headers of a request, as the browser rules read them. */
export interface BrowserRequest {
  method: string
  headers: { get(name: string): string | null }
}

const SAFE_METHODS = new Set(['GET', 'HEAD'])

/**
 * The browser-side rules for a request authenticated by the session cookie (the renderer in a
 * browser): it must carry `Sec-Fetch-Site: same-origin` (or `none`: typed into the address bar),
 * and when it changes state (anything but GET/HEAD) also `Content-Type: application/json` and
 * `X-Corral-CSRF: 1`. A blind cross-origin form or `text/plain` fetch meets none of these, and a
 * fetch that sets the header needs a CORS preflight, which this server never grants.
 *
 * Returns why the request is refused (for a 403 permission_error), or undefined when it passes.
 * `fetchMetadata: 'when-sent'` (the sign-in routes, used before any cookie exists) accepts a
 * request without Sec-Fetch-Site, but never a cross-site or same-site one.
 */
export function browserRequestRefusal(req: BrowserRequest, options: { fetchMetadata?: 'required' | 'when-sent'; /** An upload route: `multipart/form-data` is accepted too (still with X-Corral-CSRF). */ upload?: boolean } = {}): string | undefined {
  const site = req.headers.get('sec-fetch-site')?.trim().toLowerCase()
  if (site === undefined) {
    if (options.fetchMetadata !== 'when-sent') return 'a request signed in by the browser cookie must carry Sec-Fetch-Site: same-origin (use a current browser, or send Authorization: Bearer <token>)'
  } else if (site !== 'same-origin' && site !== 'none') return `Sec-Fetch-Site: ${site} is refused: only this server's own pages may use its cookie`
  if (SAFE_METHODS.has(req.method.toUpperCase())) return undefined
  // An upload from the page (a file dropped on a session) is multipart; X-Corral-CSRF, which a
  // blind form cannot send, is what stops another page either way.
  const type = req.headers.get('content-type')?.split(';')[0].trim().toLowerCase()
  if (type !== 'application/json' && !(options.upload && type === 'multipart/form-data'))
    return `Content-Type: ${type ?? '(none)'} is refused: a ${req.method.toUpperCase()} signed in by the browser cookie must be application/json${options.upload ? ' or multipart/form-data' : ''}`
  if (req.headers.get(CSRF_HEADER)?.trim() !== '1') return `a ${req.method.toUpperCase()} signed in by the browser cookie must carry the header X-Corral-CSRF: 1`
  return undefined
}

/** Constant-time token comparison (hashing first makes lengths equal). */
export function tokenMatches(given: string | undefined | null, expected: string): boolean {
  if (!given) return false
  const a = createHash('sha256').update(given).digest()
  const b = createHash('sha256').update(expected).digest()
  return timingSafeEqual(a, b)
}

/** A request's credential and where it came from: the cookie is what a browser sends by itself. */
export interface RequestCredential {
  token: string
  via: 'bearer' | 'api-key' | 'cookie'
}

/** The credential of a request: `Authorization: Bearer`, `x-api-key`, or the browser cookie (in that order). */
export function requestCredential(headers: { get(name: string): string | null }, cookieName: string): RequestCredential | undefined {
  const auth = headers.get('authorization')
  if (auth?.toLowerCase().startsWith('bearer ')) return { token: auth.slice(7).trim(), via: 'bearer' }
  const apiKey = headers.get('x-api-key')
  if (apiKey) return { token: apiKey.trim(), via: 'api-key' }
  const cookie = headers.get('cookie')
  if (cookie) {
    for (const part of cookie.split(';')) {
      const [k, ...v] = part.trim().split('=')
      if (k !== cookieName) continue
      try {
        return { token: decodeURIComponent(v.join('=')), via: 'cookie' }
      } catch {
        return undefined
      }
    }
  }
  return undefined
}
