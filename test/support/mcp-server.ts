import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { z } from 'zod'
import type { StoredCredential } from '../../src/main/session/vault-store'

export const BEARER = 'canary-mcp-bearer-9a1b'
export const ACCESS_OLD = 'canary-mcp-access-expired-11'
export const ACCESS_NEW = 'canary-mcp-access-fresh-22'
export const REFRESH = 'canary-mcp-refresh-33'
export const CLIENT_SECRET = 'canary-mcp-client-secret-44'

/** A credential as the vault store keeps it (its secrets in the keychain), in vault vlt_1. */
export function storedCredential(id: string, auth: Record<string, unknown>): StoredCredential {
  return { id, type: 'vault_credential', vault_id: 'vlt_1', auth, metadata: {}, created_at: '', updated_at: '', archived_at: null, corral: { secret_stored: true } } as unknown as StoredCredential
}

/**
 * A real streamable-HTTP MCP server on 127.0.0.1 that demands a bearer token; /token refreshes.
 * `openHandshake`: `initialize` and its notification pass without a token (some servers check
 * the token only from the first real request on). `rotate`: the token endpoint takes each
 * refresh token once and answers a new one with the new access token (refresh-token rotation).
 * `tokenDelayMs`: how long the token endpoint takes to answer (default 50 ms).
 */
export async function mcpTestServer(opts: { openHandshake?: boolean; rotate?: boolean; tokenDelayMs?: number } = {}) {
  const valid = new Set<string>([BEARER, ACCESS_NEW])
  const refreshCalls: string[] = []
  let refreshToken = REFRESH
  let rotations = 0
  /** Requests refused for their token (401). */
  const refused = { count: 0 }
  const server = http.createServer(async (req, res) => {
    if (req.url === '/token') {
      let body = ''
      for await (const c of req) body += String(c)
      const form = new URLSearchParams(body)
      refreshCalls.push(form.get('grant_type') ?? '')
      const basic = `Basic ${Buffer.from(`corral-client:${CLIENT_SECRET}`).toString('base64')}`
      if (form.get('refresh_token') !== refreshToken || req.headers.authorization !== basic) {
        res.writeHead(400, { 'content-type': 'application/json' })
        return res.end('{"error":"invalid_grant"}')
      }
      // a slow endpoint, so that refreshes asked for together overlap
      await new Promise((r) => setTimeout(r, opts.tokenDelayMs ?? 50))
      if (opts.rotate) refreshToken = `${REFRESH}-rotated-${++rotations}`
      res.writeHead(200, { 'content-type': 'application/json' })
      return res.end(JSON.stringify({ access_token: ACCESS_NEW, token_type: 'Bearer', expires_in: 3600, ...(opts.rotate ? { refresh_token: refreshToken } : {}) }))
    }
    const auth = String(req.headers.authorization ?? '')
    let parsed: { method?: string } | undefined
    if (opts.openHandshake && req.method === 'POST') {
      let body = ''
      for await (const c of req) body += String(c)
      parsed = JSON.parse(body) as { method?: string }
    }
    const handshake = parsed?.method === 'initialize' || parsed?.method === 'notifications/initialized'
    if (!handshake && !valid.has(auth.replace(/^Bearer /, ''))) {
      refused.count++
      res.writeHead(401, { 'www-authenticate': 'Bearer', 'content-type': 'application/json' })
      return res.end('{"error":"unauthorized"}')
    }
    const mcp = new McpServer({ name: 'test-mcp', version: '1.0.0' })
    mcp.registerTool('echo', { description: 'echoes text', inputSchema: { text: z.string() } }, async ({ text }) => ({ content: [{ type: 'text', text: `echo: ${text}` }] }))
    // A careless server that reflects the caller's Authorization header in a result.
    mcp.registerTool('whoami', { description: 'reflects the auth header' }, async () => ({ content: [{ type: 'text', text: `you sent ${auth}` }] }))
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined })
    res.on('close', () => void transport.close())
    await mcp.connect(transport)
    await transport.handleRequest(req, res, parsed)
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  /** An mcp_oauth credential for this server, refreshed at its /token with client_secret_basic; `auth` adds to its auth (expires_at). */
  const oauthCredential = (id: string, auth: Record<string, unknown> = {}) =>
    storedCredential(id, {
      type: 'mcp_oauth',
      mcp_server_url: `${url}/mcp`,
      ...auth,
      refresh: { client_id: 'corral-client', token_endpoint: `${url}/token`, token_endpoint_auth: { type: 'client_secret_basic' } },
    })
  return { url, refreshCalls, refused, oauthCredential, close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()) }) }
}

