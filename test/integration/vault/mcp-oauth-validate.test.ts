import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { keychainProbe, requirement } from '../../support/requirements'
import { Engine } from '../../../src/main/engine'
import { KeyringKeychain } from '../../../src/main/vault/keyring-keychain'
import { keychainAccount } from '../../../src/main/vault/keychain'
import { ACCESS_NEW, ACCESS_OLD, CLIENT_SECRET, REFRESH, mcpTestServer } from '../../support/mcp-server'
import { WebhookReceiver } from '../../support/webhook-receiver'

const keychain = requirement('keychain', keychainProbe)

/**
 * `client.beta.vaults.credentials.mcpOAuthValidate` through the official SDK, against a real
 * streamable-HTTP MCP server and its token endpoint, with the secrets in the OS keychain.
 */
describe.skipIf(!keychain.ok)('credentials.mcpOAuthValidate (the SDK, the keychain, a real MCP server)', () => {
  const service = `corral-test-validate-${process.pid}-${Date.now()}`
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-validate-'))
  const k = new KeyringKeychain({ service })
  const logs: string[] = []
  let engine: Engine
  let client: Anthropic
  let srv: Awaited<ReturnType<typeof mcpTestServer>>
  let lax: Awaited<ReturnType<typeof mcpTestServer>>
  const created: string[] = []

  beforeAll(async () => {
    srv = await mcpTestServer()
    lax = await mcpTestServer({ openHandshake: true })
    engine = await Engine.openWithKeychain({ dataDir, keychain: k, token: 'tok', env: { PATH: process.env.PATH }, harness: { enabled: false }, log: (l) => logs.push(l) })
    client = new Anthropic({ baseURL: (await engine.listen(0)).url, apiKey: 'tok' })
  })

  afterAll(async () => {
    await engine.close()
    for (const id of created) for (const f of ['access_token', 'refresh_token', 'client_secret', 'token'] as const) await k.delete(keychainAccount.credential(id, f))
    await srv.close()
    await lax.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  /** An mcp_oauth credential in a vault of its own (a vault holds one credential per server URL). */
  const oauth = async (url: string, access: string, refresh?: string) => {
    const vaultId = (await client.beta.vaults.create({ display_name: 'validate' })).id
    const c = await client.beta.vaults.credentials.create(vaultId, {
      auth: {
        type: 'mcp_oauth',
        mcp_server_url: url,
        access_token: access,
        ...(refresh ? { refresh: { client_id: 'corral-client', refresh_token: refresh, token_endpoint: `${srv.url}/token`, token_endpoint_auth: { type: 'client_secret_basic', client_secret: CLIENT_SECRET } } } : {}),
      },
    })
    created.push(c.id)
    return { ...c, vaultId }
  }

  it('says valid for an access token the server takes, with the API shape', async () => {
    const c = await oauth(`${srv.url}/mcp`, ACCESS_NEW)
    const v = await client.beta.vaults.credentials.mcpOAuthValidate(c.id, { vault_id: c.vaultId })
    expect(v).toEqual({ type: 'vault_credential_validation', credential_id: c.id, vault_id: c.vaultId, status: 'valid', has_refresh_token: false, mcp_probe: null, refresh: null, validated_at: expect.any(String) })
    expect(Math.abs(Date.parse(v.validated_at) - Date.now())).toBeLessThan(60_000)
  })

  it('refreshes a rejected access token, keeps the new one in the keychain and says valid', async () => {
    const c = await oauth(`${srv.url}/mcp/`, ACCESS_OLD, REFRESH)
    const v = await client.beta.vaults.credentials.mcpOAuthValidate(c.id, { vault_id: c.vaultId })
    expect(v).toMatchObject({ status: 'valid', has_refresh_token: true, mcp_probe: null, refresh: { status: 'succeeded', http_response: null } })
    expect(await k.get(keychainAccount.credential(c.id, 'access_token'))).toBe(ACCESS_NEW)
    // the token endpoint said the new token lives an hour: the credential says so now, and its updated_at (an API write's) stays
    const after = await client.beta.vaults.credentials.retrieve(c.id, { vault_id: c.vaultId })
    expect(after.auth.type === 'mcp_oauth' && Math.abs(Date.parse(after.auth.expires_at ?? '') - (Date.now() + 3600_000))).toBeLessThan(60_000)
    expect(after.updated_at).toBe(c.updated_at)
  })

  it('says invalid when the refresh is refused, the probe and the token endpoint captured without a secret, and a webhook tells of the refused refresh once', async () => {
    // a webhook receiver for vault_credential.refresh_failed (docs/webhooks.md)
    const receiver = await new WebhookReceiver().start()
    const hook = await client.beta.organization.webhooks.create({ url: receiver.url, enabled_events: ['vault_credential.refresh_failed'] as never })
    const c = await oauth(`${srv.url}/mcp`, ACCESS_OLD, 'canary-refused-refresh-17')
    const v = await client.beta.vaults.credentials.mcpOAuthValidate(c.id, { vault_id: c.vaultId })
    await client.beta.vaults.credentials.mcpOAuthValidate(c.id, { vault_id: c.vaultId })
    await expect.poll(() => receiver.got.length, { timeout: 5_000 }).toBe(1)
    expect(receiver.bodies()[0].data).toEqual({ type: 'vault_credential.refresh_failed', id: c.id, vault_id: c.vaultId, organization_id: 'local', workspace_id: 'local' })
    await client.beta.organization.webhooks.delete(hook.id)
    await receiver.close()
    expect(v).toMatchObject({
      status: 'invalid',
      mcp_probe: { method: 'initialize', http_response: { status_code: 401, content_type: 'application/json', body: '{"error":"unauthorized"}', body_truncated: false } },
      refresh: { status: 'failed', http_response: { status_code: 400, body: '{"error":"invalid_grant"}' } },
    })
    expect(JSON.stringify(v)).not.toMatch(/canary/)
  })

  it('does not call a token valid because the server let the handshake through: tools/list is the test', async () => {
    const c = await oauth(`${lax.url}/mcp`, 'canary-unknown-access-29')
    const v = await client.beta.vaults.credentials.mcpOAuthValidate(c.id, { vault_id: c.vaultId })
    expect(v).toMatchObject({ status: 'invalid', refresh: { status: 'no_refresh_token' }, mcp_probe: { method: 'tools/list', http_response: { status_code: 401 } } })
    const ok = await oauth(`${lax.url}/mcp`, ACCESS_NEW)
    expect((await client.beta.vaults.credentials.mcpOAuthValidate(ok.id, { vault_id: ok.vaultId })).status).toBe('valid')
  })

  it('speaks the protocol version the server answered initialize with', async () => {
    // an older server: it answers 2025-03-26 and refuses any other version on later requests
    const seen: string[] = []
    const old = http.createServer(async (req, res) => {
      let body = ''
      for await (const c of req) body += String(c)
      if (req.method === 'DELETE') return res.writeHead(200).end()
      if (req.headers.authorization !== `Bearer ${ACCESS_NEW}`) return res.writeHead(401).end()
      const m = JSON.parse(body) as { id?: number; method: string }
      seen.push(`${m.method} ${req.headers['mcp-protocol-version'] ?? '-'}`)
      if (m.method !== 'initialize' && req.headers['mcp-protocol-version'] !== '2025-03-26') return res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"unsupported protocol version"}')
      if (m.id === undefined) return res.writeHead(202).end()
      const result = m.method === 'initialize' ? { protocolVersion: '2025-03-26', capabilities: { tools: {} }, serverInfo: { name: 'old', version: '1' } } : { tools: [] }
      res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'old-1' }).end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result }))
    })
    await new Promise<void>((r) => old.listen(0, '127.0.0.1', r))
    try {
      const c = await oauth(`http://127.0.0.1:${(old.address() as AddressInfo).port}/mcp`, ACCESS_NEW)
      expect((await client.beta.vaults.credentials.mcpOAuthValidate(c.id, { vault_id: c.vaultId })).status).toBe('valid')
      expect(seen).toEqual(['initialize -', 'notifications/initialized 2025-03-26', 'tools/list 2025-03-26'])
    } finally {
      old.closeAllConnections()
      await new Promise((r) => old.close(r))
    }
  })

  it('says unknown when the MCP server does not answer', async () => {
    const gone = await mcpTestServer()
    await gone.close()
    const c = await oauth(`${gone.url}/mcp`, ACCESS_NEW)
    const v = await client.beta.vaults.credentials.mcpOAuthValidate(c.id, { vault_id: c.vaultId })
    expect(v).toMatchObject({ status: 'unknown', mcp_probe: { method: 'initialize', http_response: null }, refresh: null })
  })

  it('answers the API errors: another vault or an unknown id 404, a static_bearer or an archived credential 400 naming why', async () => {
    const c = await oauth(`${srv.url}/mcp`, ACCESS_NEW)
    const other = await client.beta.vaults.create({ display_name: 'other' })
    await expect(client.beta.vaults.credentials.mcpOAuthValidate(c.id, { vault_id: other.id })).rejects.toMatchObject({ status: 404 })
    await expect(client.beta.vaults.credentials.mcpOAuthValidate('vcrd_missing', { vault_id: c.vaultId })).rejects.toMatchObject({ status: 404 })
    const bearer = await client.beta.vaults.credentials.create(c.vaultId, { auth: { type: 'static_bearer', mcp_server_url: 'https://mcp.example.test/x', token: 'canary-bearer-31' } })
    created.push(bearer.id)
    await expect(client.beta.vaults.credentials.mcpOAuthValidate(bearer.id, { vault_id: c.vaultId })).rejects.toMatchObject({ status: 400, error: { error: { type: 'invalid_request_error', message: expect.stringMatching(/static_bearer: only mcp_oauth credentials can be validated/) } } })
    await client.beta.vaults.credentials.archive(c.id, { vault_id: c.vaultId })
    await expect(client.beta.vaults.credentials.mcpOAuthValidate(c.id, { vault_id: c.vaultId })).rejects.toMatchObject({ status: 400, error: { error: { message: expect.stringMatching(/is archived/) } } })
  })

  it('writes no secret to a log line', () => {
    expect(logs.join('\n')).not.toMatch(/canary/)
  })
})

describe('credentials.mcpOAuthValidate without a keychain', () => {
  it('answers 503 naming the missing keychain, after the 404s', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'corral-validate-nokc-'))
    const engine = Engine.open({ dataDir, token: 'tok', harness: { enabled: false }, defaultHands: false, log: () => {} })
    try {
      const client = new Anthropic({ baseURL: (await engine.listen(0)).url, apiKey: 'tok', maxRetries: 0 })
      const vault = await client.beta.vaults.create({ display_name: 'v' })
      await expect(client.beta.vaults.credentials.mcpOAuthValidate('vcrd_missing', { vault_id: vault.id })).rejects.toMatchObject({ status: 404 })
      const c = await client.beta.vaults.credentials.create(vault.id, { auth: { type: 'mcp_oauth', mcp_server_url: 'https://mcp.example.test/mcp', access_token: 'a' } })
      await expect(client.beta.vaults.credentials.mcpOAuthValidate(c.id, { vault_id: vault.id })).rejects.toMatchObject({ status: 503, error: { error: { type: 'api_error', message: expect.stringMatching(/without a keychain/) } } })
    } finally {
      await engine.close()
      rmSync(dataDir, { recursive: true, force: true })
    }
  })
})
