/*
 * The API's allow-list entries (`allowed_hosts` of a `limited` network, a credential's hosts):
 * one rule for the egress proxy, which enforces them, and for the checks that refuse a
 * configuration up front (an MCP server a session could not reach, spec multiagent §2.5).
 */

/**
 * Whether `host` matches an allow-list entry, as the API defines it: an entry matches the host
 * exactly; `*.example.com` matches any subdomain of example.com but not example.com itself.
 */
export function hostMatches(host: string, entry: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, '')
  const e = entry.toLowerCase().replace(/\.$/, '')
  if (e.startsWith('*.')) return h.endsWith(e.slice(1)) && h.length > e.length - 1
  return h === e
}

export function hostAllowed(host: string, entries: readonly string[]): boolean {
  return entries.some((e) => hostMatches(host, e))
}
