/**
 * When a credential's `mcp_server_url` is an agent's MCP server's URL: the same origin and the same
 * path but for a trailing slash (query and fragment aside). The engine picks a server's credential
 * with it (hands/mcp/client.ts); the agent editor says with it which vault holds one.
 */
export function sameMcpUrl(a: string, b: string): boolean {
  try {
    const x = new URL(a)
    const y = new URL(b)
    return x.origin === y.origin && x.pathname.replace(/\/$/, '') === y.pathname.replace(/\/$/, '')
  } catch {
    return a === b
  }
}
