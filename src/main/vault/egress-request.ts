import type http from 'node:http'
import { canonicalHost } from '../../shared/api/plain-http-hosts'

/*
 * The egress proxy's reading of a request, before any decision: where it goes (the target), the
 * path it names, whether that path is one repository's, whether its Host header agrees, whether
 * an upgrade is a real WebSocket upgrade. Pure functions of the request; a problem is a Refusal
 * whose message names the rule, which the proxy sends back to the sandbox and logs.
 */

/** Where a request goes. `tls`: the proxy speaks TLS upstream (a CONNECT tunnel it intercepted). */
export interface EgressTarget {
  host: string
  port: number
  tls: boolean
}

/** A request the proxy refuses: the HTTP status and a one-line reason naming the rule. */
export class Refusal extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** What the proxy's log says, when it differs from what the sandbox is told. */
    readonly logReason: string = message,
  ) {
    super(message)
  }
}

export const NOT_A_PROXY_REQUEST = 'the egress proxy takes absolute http:// URLs and CONNECT for https'

function safeUrl(s: string): URL | undefined {
  try {
    return new URL(s)
  } catch {
    return undefined
  }
}

/**
 * Where a request goes and the path (with query) it asks for, as sent: inside an intercepted
 * tunnel the tunnel's target and an origin-form path; otherwise the absolute http:// URL a proxy
 * client sends. Undefined when a request outside a tunnel is not an absolute http:// URL.
 * Throws Refusal(400) for an absolute-form (or any non-path) target inside a tunnel: the tunnel
 * names the host, and a request may not name another one.
 */
export function requestTarget(rawUrl: string, tunnel: EgressTarget | undefined): { target: EgressTarget; path: string } | undefined {
  // Sent upstream as is: what Node's client would refuse is a clear 400 here.
  if (/[^\x21-\x7e]/.test(rawUrl)) throw new Refusal(400, 'the request target has a space, a control or a non-ASCII character (percent-encode it)')
  if (tunnel) {
    if (!rawUrl.startsWith('/')) throw new Refusal(400, `inside a tunnel to ${tunnel.host} the request target must be a path; ${JSON.stringify(rawUrl.slice(0, 100))} is refused (absolute-form targets may name another host)`)
    return { target: tunnel, path: rawUrl }
  }
  // The path is kept exactly as sent: the URL parser would resolve dot segments and
  // backslashes, and the proxy must judge what the upstream will read.
  const m = /^http:\/\/([^/?#]*)([/?][^#]*)?$/i.exec(rawUrl)
  if (!m) return undefined
  if (m[1]!.includes('@')) throw new Refusal(400, 'a request URL with user information (user@host) is refused')
  const u = safeUrl(`http://${m[1]}/`)
  if (!u || !u.hostname) return undefined
  const path = m[2] === undefined ? '/' : m[2].startsWith('?') ? `/${m[2]}` : m[2]
  return { target: { host: u.hostname.replace(/^\[|\]$/g, ''), port: u.port ? Number(u.port) : 80, tls: false }, path }
}

/**
 * The decoded segments of a request path (query removed), or the rule it breaks: a path that
 * decides which repository's token a request carries must mean one thing to the proxy and to
 * any upstream, so backslashes, encoded slashes, backslashes and percent signs, NUL, malformed
 * percent-encoding and dot segments (`.`, `..`, encoded or with `;` parameters) are refused.
 */
export function canonicalPathSegments(path: string): { segments: string[] } | { problem: string } {
  const p = path.split('?')[0]!
  if (!p.startsWith('/')) return { problem: 'the path does not start with /' }
  if (p.includes('\\')) return { problem: 'the path contains a backslash' }
  if (/%(?![0-9a-fA-F]{2})/.test(p)) return { problem: 'the path has malformed percent-encoding' }
  if (/%(2f|5c|25|00)/i.test(p)) return { problem: 'the path encodes a slash, backslash, percent sign or NUL' }
  let segments: string[]
  try {
    segments = p.slice(1).split('/').map((s) => decodeURIComponent(s))
  } catch {
    return { problem: 'the path is not valid UTF-8 once decoded' }
  }
  if (segments.some((s) => /^\.\.?(;|$)/.test(s))) return { problem: 'the path has a dot segment (. or ..)' }
  return { segments }
}

/** A repository URL's host, port and path segments (`.git` and a trailing slash removed). */
function repositoryParts(url: string): { host: string; port: number; tls: boolean; segments: string[] } | undefined {
  const u = safeUrl(url)
  if (!u || (u.protocol !== 'https:' && u.protocol !== 'http:')) return undefined
  const p = canonicalPathSegments(u.pathname.replace(/\/+$/, '').replace(/\.git$/, ''))
  if ('problem' in p || p.segments.length === 0 || p.segments.some((s) => s === '')) return undefined
  const host = canonicalHost(u.hostname)
  if (!host) return undefined
  return { host, port: u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80, tls: u.protocol === 'https:', segments: p.segments }
}

/** Whether a repository lives on `host` (any port or scheme: responses from it are scrubbed of its token). */
export function repositoryOnHost(url: string, host: string): boolean {
  const r = repositoryParts(url)
  return r !== undefined && r.host === canonicalHost(host)
}

/** Whether a repository lives at the target (same scheme, host and port). */
export function repositoryAt(url: string, target: EgressTarget): boolean {
  const r = repositoryParts(url)
  return r !== undefined && r.tls === target.tls && r.port === target.port && r.host === canonicalHost(target.host)
}

/**
 * The repository a request belongs to. `path` undefined (a CONNECT) → the first repository at the
 * target. Otherwise the path must name the repository exactly: `…/name`, `…/name.git`, or either
 * followed by `/` (never a sibling such as `name.git-x` or `name-other`), compared segment by
 * segment after decoding. Throws Refusal(400) for a non-canonical path at a repository's host,
 * since that path could reach another repository once the upstream normalises it.
 */
export function repositoryFor<R extends { url: string }>(repositories: readonly R[], target: EgressTarget, path: string | undefined): R | undefined {
  const here = repositories.filter((r) => repositoryAt(r.url, target))
  if (here.length === 0 || path === undefined) return here[0]
  const p = canonicalPathSegments(path)
  if ('problem' in p) throw new Refusal(400, `${p.problem}; on ${target.host}, a repository's host, paths must be canonical`)
  return here.find((r) => {
    const base = repositoryParts(r.url)!.segments
    const n = base.length
    if (p.segments.length < n) return false
    for (let i = 0; i < n - 1; i++) if (p.segments[i] !== base[i]) return false
    const last = p.segments[n - 1]!
    return last === base[n - 1] || last === `${base[n - 1]}.git`
  })
}

/**
 * The rule a Host header breaks, or undefined when it names the target (host and port; an
 * absent port means the scheme's default). An absent Host header names nothing and passes (the
 * proxy sets it).
 */
export function hostHeaderProblem(header: string | undefined, target: EgressTarget): string | undefined {
  if (header === undefined) return undefined
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(header.trim())
  const port = m?.[2] !== undefined ? Number(m[2]) : target.tls ? 443 : 80
  const host = m ? canonicalHost(m[1]!) : undefined
  if (host !== undefined && host === canonicalHost(target.host) && port === target.port) return undefined
  return `the Host header ${JSON.stringify(header.slice(0, 200))} does not name the request's target ${target.host}:${target.port}`
}

/** The comma-separated tokens of a header, lower case. */
export function headerTokens(v: string | string[] | undefined): string[] {
  return (Array.isArray(v) ? v.join(',') : (v ?? '')).split(',').map((t) => t.trim().toLowerCase()).filter(Boolean)
}

/**
 * The rule an upgrade request breaks, or undefined for a real WebSocket opening handshake
 * (RFC 6455 §4.1: GET, `Upgrade: websocket`, `Connection: upgrade`, a 16-byte key, version 13).
 * Other upgrades (h2c, TLS) are refused: the proxy would have to splice bytes it cannot judge.
 */
export function webSocketUpgradeProblem(req: http.IncomingMessage): string | undefined {
  const upgrade = headerTokens(req.headers.upgrade)
  if (upgrade.length !== 1 || upgrade[0] !== 'websocket') return `only WebSocket upgrades pass the egress proxy (Upgrade: ${JSON.stringify(String(req.headers.upgrade ?? '').slice(0, 100))})`
  if (req.method !== 'GET') return `a WebSocket upgrade is a GET, not ${req.method}`
  if (!headerTokens(req.headers.connection).includes('upgrade')) return 'a WebSocket upgrade needs Connection: Upgrade'
  const key = String(req.headers['sec-websocket-key'] ?? '')
  if (!/^[A-Za-z0-9+/]{22}==$/.test(key)) return 'a WebSocket upgrade needs a Sec-WebSocket-Key of 16 bytes in base64'
  if (String(req.headers['sec-websocket-version'] ?? '') !== '13') return 'a WebSocket upgrade needs Sec-WebSocket-Version: 13'
  return undefined
}

/** Whether a plain-HTTP target is among a credential's `host:port` plain-HTTP entries. */
export function plainHttpAllowed(entries: readonly string[] | undefined, target: EgressTarget): boolean {
  return !target.tls && (entries ?? []).includes(`${canonicalHost(target.host)}:${target.port}`)
}
