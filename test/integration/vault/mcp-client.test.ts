import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { McpConnection, McpServerError } from '../../../src/main/vault/mcp-client'
import { KeyringKeychain } from '../../../src/main/vault/keyring-keychain'
import { keychainProbe, requirement } from '../../support/requirements'
import { KeychainSecretSink } from '../../../src/main/vault/vault-services'
import type { StoredCredential } from '../../../src/main/session/vault-store'

const BEARER = 'canary-mcp-bearer-9a1b'
const ACCESS_OLD = 'canary-mcp-access-expired-11'
const ACCESS_NEW = 'canary-mcp-access-fresh-22'
const REFRESH = 'canary-mcp-refresh-33'
const CLIENT_SECRET = 'canary-mcp-client-secret-44'

/** A real streamable-HTTP MCP server on 127.0.0.1 that demands a bearer token; /token refreshes. */
async function mcpTestServer() {
  const valid = new Set<string>([BEARER, ACCESS_NEW])
  const refreshCalls: string[] = []
  const server = http.createServer(async (req, res) => {
    if (req.url === '/token') {
      let body = ''
      for await (const c of req) body += String(c)
      const form = new URLSearchParams(body)
      refreshCalls.push(form.get('grant_type') ?? '')
      const basic = `Basic ${Buffer.from(`corral-client:${CLIENT_SECRET}`).toString('base64')}`
      if (form.get('refresh_token') !== REFRESH || req.headers.authorization !== basic) {
        res.writeHead(400, { 'content-type': 'application/json' })
        return res.end('{"error":"invalid_grant"}')
      }
      res.writeHead(200, { 'content-type': 'application/json' })
      return res.end(JSON.stringify({ access_token: ACCESS_NEW, token_type: 'Bearer', expires_in: 3600 }))
    }
    const auth = String(req.headers.authorization ?? '')
    if (!valid.has(auth.replace(/^Bearer /, ''))) {
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
    await transport.handleRequest(req, res)
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return { url, refreshCalls, close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()) }) }
}

const cred = (id: string, auth: Record<string, unknown>) =>
  ({ id, type: 'vault_credential', vault_id: 'vlt_1', auth, metadata: {}, created_at: '', updated_at: '', archived_at: null, corral: { secret_stored: true } }) as unknown as StoredCredential

const keychainReq = requirement('keychain', keychainProbe)

describe.skipIf(!keychainReq.ok)('McpConnection (streamable HTTP, credentials from the OS keychain)', () => {
  let srv: Awaited<ReturnType<typeof mcpTestServer>>
  const keychain = new KeyringKeychain({ service: `corral-test-mcp-${process.pid}-${Date.now()}` })
  const sink = new KeychainSecretSink(keychain)
  const logs: string[] = []
  beforeAll(async () => {
    srv = await mcpTestServer()
    await sink.put('vcrd_bearer', 'static_bearer', { token: BEARER })
    await sink.put('vcrd_oauth', 'mcp_oauth', { access_token: ACCESS_OLD, refresh_token: REFRESH, client_secret: CLIENT_SECRET })
    await sink.put('vcrd_wrong', 'static_bearer', { token: 'canary-wrong-token-55' })
  })
  afterAll(async () => {
    for (const id of ['vcrd_bearer', 'vcrd_oauth', 'vcrd_wrong']) await sink.delete(id)
    await srv.close()
  })

  it('lists the server tools under the server name and calls one with the static bearer token', async () => {
    const conn = await McpConnection.connect({ name: 'docs', url: `${srv.url}/mcp` }, [cred('vcrd_bearer', { type: 'static_bearer', mcp_server_url: `${srv.url}/mcp` })], { keychain, log: (l) => logs.push(l) })
    try {
      expect(conn.tools.map((t) => t.name).sort()).toEqual(['docs__echo', 'docs__whoami'])
      expect(await conn.callTool('docs__echo', { text: 'hi' })).toMatchObject({ content: 'echo: hi', isError: false })
      const reflected = await conn.callTool('whoami', {})
      expect(reflected.content).toBe('you sent Bearer [redacted by corral]')
    } finally {
      await conn.close()
    }
  })

  it('refreshes an expired mcp_oauth access token, keeps the new one in the keychain, and goes on', async () => {
    const oauth = cred('vcrd_oauth', {
      type: 'mcp_oauth',
      mcp_server_url: `${srv.url}/mcp`,
      refresh: { client_id: 'corral-client', token_endpoint: `${srv.url}/token`, token_endpoint_auth: { type: 'client_secret_basic' } },
    })
    const conn = await McpConnection.connect({ name: 'docs', url: `${srv.url}/mcp` }, [oauth], { keychain, log: (l) => logs.push(l) })
    try {
      expect(srv.refreshCalls).toEqual(['refresh_token'])
      expect(await keychain.get('credential/vcrd_oauth/access_token')).toBe(ACCESS_NEW)
      expect((await conn.callTool('docs__echo', { text: 'after refresh' })).content).toBe('echo: after refresh')
    } finally {
      await conn.close()
    }
  })

  it('reports mcp_authentication_failed_error, terminal, when the server rejects the credential, without the token in the message', async () => {
    const err = await McpConnection.connect({ name: 'docs', url: `${srv.url}/mcp` }, [cred('vcrd_wrong', { type: 'static_bearer', mcp_server_url: `${srv.url}/mcp` })], { keychain }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(McpServerError)
    const obj = (err as McpServerError).toErrorObject()
    expect(obj).toMatchObject({ type: 'mcp_authentication_failed_error', mcp_server_name: 'docs', retry_status: { type: 'terminal' } })
    expect(obj.message).toMatch(/rejected the credential/)
    expect(JSON.stringify(obj)).not.toContain('canary-wrong-token-55')
  })

  it('reports mcp_authentication_failed_error when the vaults hold no credential for a server that needs one', async () => {
    const err = (await McpConnection.connect({ name: 'docs', url: `${srv.url}/mcp` }, [], { keychain }).catch((e: unknown) => e)) as McpServerError
    expect(err.toErrorObject()).toMatchObject({ type: 'mcp_authentication_failed_error', retry_status: { type: 'terminal' } })
    expect(err.message).toMatch(/vaults have none for this URL/)
  })

  it('reports mcp_connection_failed_error, exhausted after its attempts, when nothing answers', async () => {
    const dead = await mcpTestServer()
    await dead.close()
    const err = (await McpConnection.connect({ name: 'gone', url: `${dead.url}/mcp` }, [], { keychain, connectAttempts: 2 }).catch((e: unknown) => e)) as McpServerError
    expect(err.toErrorObject()).toMatchObject({ type: 'mcp_connection_failed_error', mcp_server_name: 'gone', retry_status: { type: 'exhausted' } })
    expect(err.message).toMatch(/could not connect to MCP server "gone"/)
  })

  it('never logs a token', () => {
    expect(logs.length).toBeGreaterThan(1)
    expect(logs.join('\n')).not.toMatch(/canary/)
  })
})
