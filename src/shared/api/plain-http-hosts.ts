/*
 * A Corral addition to `environment_variable` credentials: the metadata key
 * `corral.plain_http_hosts` lists the `host[:port]` destinations where the egress proxy may inject
 * the credential over plain HTTP. Without it a secret is injected only over TLS. Metadata is the
 * API's free-form map, so a client that does not know the key keeps every shared field's meaning.
 */

/** A host name as the WHATWG URL parser canonicalises it (lower case, IPv4 shorthand expanded), without brackets. */
export function canonicalHost(host: string): string | undefined {
  const bare = host.replace(/^\[|\]$/g, '')
  let u: URL
  try {
    u = new URL(`http://${bare.includes(':') ? `[${bare}]` : bare}/`)
  } catch {
    return undefined
  }
  return u.hostname.replace(/^\[|\]$/g, '').replace(/\.$/, '')
}

/** The credential metadata key through which a credential allows plain-HTTP injection (a Corral addition). */
export const PLAIN_HTTP_HOSTS_KEY = 'corral.plain_http_hosts'

/**
 * Parses the value of `corral.plain_http_hosts`: comma-separated `host` or `host:port` entries
 * (port 80 when absent), no wildcard. Returns `host:port` strings, or the rule an entry breaks.
 */
export function parsePlainHttpHosts(value: string): { hosts: string[] } | { problem: string } {
  const hosts: string[] = []
  for (const raw of value.split(',').map((s) => s.trim()).filter(Boolean)) {
    const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(?::(\d{1,5}))?$/.exec(raw)
    const port = m?.[2] !== undefined ? Number(m[2]) : 80
    const host = m ? canonicalHost(m[1]!) : undefined
    if (!m || !host || port < 1 || port > 65535) return { problem: `${JSON.stringify(raw)} is not a host or host:port (no scheme, path or wildcard)` }
    hosts.push(`${host}:${port}`)
  }
  return { hosts }
}

