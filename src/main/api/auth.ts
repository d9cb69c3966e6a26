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

/** An Origin header is acceptable when absent (non-browser clients) or a loopback http(s) origin. */
export function isAllowedOrigin(origin: string | undefined | null): boolean {
  if (!origin) return true
  try {
    const u = new URL(origin)
    return (u.protocol === 'http:' || u.protocol === 'https:') && isLoopbackHost(u.host)
  } catch {
    return false
  }
}

/** Constant-time token comparison (hashing first makes lengths equal). */
export function tokenMatches(given: string | undefined | null, expected: string): boolean {
  if (!given) return false
  const a = createHash('sha256').update(given).digest()
  const b = createHash('sha256').update(expected).digest()
  return timingSafeEqual(a, b)
}

/** The bearer token of a request: `Authorization: Bearer`, `x-api-key`, or the browser cookie. */
export function requestToken(headers: { get(name: string): string | null }, cookieName: string): string | undefined {
  const auth = headers.get('authorization')
  if (auth?.toLowerCase().startsWith('bearer ')) return auth.slice(7).trim()
  const apiKey = headers.get('x-api-key')
  if (apiKey) return apiKey.trim()
  const cookie = headers.get('cookie')
  if (cookie) {
    for (const part of cookie.split(';')) {
      const [k, ...v] = part.trim().split('=')
      if (k === cookieName) return decodeURIComponent(v.join('='))
    }
  }
  return undefined
}
