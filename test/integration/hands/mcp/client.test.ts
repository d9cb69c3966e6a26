import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { McpConnection, McpServerError, validateMcpOAuthCredential } from '../../../../src/main/hands/mcp/client'
import { KeyringKeychain } from '../../../../src/main/vault/keyring-keychain'
import { keychainProbe, requirement } from '../../../support/requirements'
import { KeychainSecretSink } from '../../../../src/main/vault/vault-services'
import { ACCESS_NEW, ACCESS_OLD, BEARER, CLIENT_SECRET, REFRESH, mcpTestServer, storedCredential } from '../../../support/mcp-server'

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
    const conn = await McpConnection.connect({ name: 'docs', url: `${srv.url}/mcp` }, [storedCredential('vcrd_bearer', { type: 'static_bearer', mcp_server_url: `${srv.url}/mcp` })], { keychain, log: (l) => logs.push(l) })
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
    const oauth = srv.oauthCredential('vcrd_oauth')
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
    const err = await McpConnection.connect({ name: 'docs', url: `${srv.url}/mcp` }, [storedCredential('vcrd_wrong', { type: 'static_bearer', mcp_server_url: `${srv.url}/mcp` })], { keychain }).catch((e: unknown) => e)
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

  describe('validateMcpOAuthCredential', () => {
    const oauth = (id: string, url = `${srv.url}/mcp`, refresh = true) =>
      storedCredential(id, { type: 'mcp_oauth', mcp_server_url: url, ...(refresh ? { refresh: { client_id: 'corral-client', token_endpoint: `${srv.url}/token`, token_endpoint_auth: { type: 'client_secret_basic' } } } : {}) })

    it('says valid when the server takes the access token', async () => {
      await sink.put('vcrd_v1', 'mcp_oauth', { access_token: ACCESS_NEW })
      const v = await validateMcpOAuthCredential(oauth('vcrd_v1', undefined, false), { keychain })
      expect(v).toMatchObject({ type: 'vault_credential_validation', credential_id: 'vcrd_v1', vault_id: 'vlt_1', status: 'valid', has_refresh_token: false, mcp_probe: null, refresh: null })
      await sink.delete('vcrd_v1')
    })

    it('refreshes after a 401 and says valid, reporting the refresh', async () => {
      await sink.put('vcrd_v2', 'mcp_oauth', { access_token: ACCESS_OLD, refresh_token: REFRESH, client_secret: CLIENT_SECRET })
      const v = await validateMcpOAuthCredential(oauth('vcrd_v2'), { keychain })
      expect(v).toMatchObject({ status: 'valid', has_refresh_token: true, refresh: { status: 'succeeded', http_response: null } })
      await sink.delete('vcrd_v2')
    })

    it('says invalid when the refresh is refused, with both responses captured and scrubbed', async () => {
      await sink.put('vcrd_v3', 'mcp_oauth', { access_token: ACCESS_OLD, refresh_token: 'canary-bad-refresh-66', client_secret: CLIENT_SECRET })
      const v = await validateMcpOAuthCredential(oauth('vcrd_v3'), { keychain })
      expect(v.status).toBe('invalid')
      expect(v.mcp_probe).toMatchObject({ method: 'initialize', http_response: { status_code: 401 } })
      expect(v.refresh).toMatchObject({ status: 'failed', http_response: { status_code: 400, body: '{"error":"invalid_grant"}' } })
      expect(JSON.stringify(v)).not.toMatch(/canary/)
      await sink.delete('vcrd_v3')
    })

    it('says invalid when no access token is stored, and unknown when the server does not answer', async () => {
      expect((await validateMcpOAuthCredential(oauth('vcrd_none'), { keychain })).status).toBe('invalid')
      await sink.put('vcrd_v4', 'mcp_oauth', { access_token: ACCESS_NEW })
      const v = await validateMcpOAuthCredential(oauth('vcrd_v4', 'http://127.0.0.1:9/mcp', false), { keychain })
      expect(v).toMatchObject({ status: 'unknown', mcp_probe: { method: 'initialize', http_response: null } })
      await sink.delete('vcrd_v4')
    })

    it('refuses a credential that is not mcp_oauth, naming the rule', async () => {
      await expect(validateMcpOAuthCredential(storedCredential('vcrd_bearer', { type: 'static_bearer', mcp_server_url: `${srv.url}/mcp` }), { keychain })).rejects.toThrow(/only mcp_oauth credentials can be validated/)
    })
  })

  it('refreshes an access token known to have expired before sending it, not after the server refuses it, and says when the new one expires', async () => {
    const fresh = await mcpTestServer()
    const expired = fresh.oauthCredential('vcrd_expired', { expires_at: new Date(Date.now() - 5_000).toISOString() })
    await sink.put('vcrd_expired', 'mcp_oauth', { access_token: ACCESS_OLD, refresh_token: REFRESH, client_secret: CLIENT_SECRET })
    const told: [string, string | null][] = []
    try {
      const conn = await McpConnection.connect({ name: 'docs', url: `${fresh.url}/mcp` }, [expired], { keychain, onRefreshed: (id, at) => told.push([id, at]) })
      expect(fresh.refused.count).toBe(0)
      expect(fresh.refreshCalls).toEqual(['refresh_token'])
      expect(told).toHaveLength(1)
      expect(told[0][0]).toBe('vcrd_expired')
      expect(Math.abs(Date.parse(told[0][1]!) - (Date.now() + 3600_000))).toBeLessThan(60_000)
      // the new expiry is an hour away: no further refresh
      expect((await conn.callTool('docs__echo', { text: 'later' })).content).toBe('echo: later')
      expect(fresh.refreshCalls).toEqual(['refresh_token'])
      await conn.close()
    } finally {
      await sink.delete('vcrd_expired')
      await fresh.close()
    }
  })

  it('refreshes once when several connections find the access token expired together, so a rotating token endpoint loses none of them', async () => {
    const rotating = await mcpTestServer({ rotate: true })
    const oauth = rotating.oauthCredential('vcrd_rotating')
    await sink.put('vcrd_rotating', 'mcp_oauth', { access_token: ACCESS_OLD, refresh_token: REFRESH, client_secret: CLIENT_SECRET })
    try {
      const conns = await Promise.all([1, 2, 3].map(() => McpConnection.connect({ name: 'docs', url: `${rotating.url}/mcp` }, [oauth], { keychain })))
      expect(rotating.refreshCalls).toEqual(['refresh_token'])
      for (const c of conns) expect((await c.callTool('docs__echo', { text: 'ok' })).content).toBe('echo: ok')
      await Promise.all(conns.map((c) => c.close()))
      // the rotated refresh token is the one kept: a later refresh works
      expect(await keychain.get('credential/vcrd_rotating/refresh_token')).toBe(`${REFRESH}-rotated-1`)
      await keychain.set('credential/vcrd_rotating/access_token', ACCESS_OLD)
      expect(await validateMcpOAuthCredential(oauth, { keychain })).toMatchObject({ status: 'valid', refresh: { status: 'succeeded' } })
      expect(rotating.refreshCalls).toEqual(['refresh_token', 'refresh_token'])
    } finally {
      await sink.delete('vcrd_rotating')
      await rotating.close()
    }
  })

  it('never logs a token', () => {
    expect(logs.length).toBeGreaterThan(1)
    expect(logs.join('\n')).not.toMatch(/canary/)
  })
})
