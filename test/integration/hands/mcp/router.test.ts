import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Engine } from '../../../../src/main/engine'
import { KeyringKeychain } from '../../../../src/main/vault/keyring-keychain'
import { McpToolRouter } from '../../../../src/main/hands/mcp/router'
import { HandsRouter } from '../../../../src/main/hands/router'
import type { McpErrorObject } from '../../../../src/main/hands/mcp/client'
import { sessionMcpServers } from '../../../../src/main/hands/mcp/servers'
import { keychainProbe, requirement } from '../../../support/requirements'
import { RecordingToolRouter } from '../../../support/harness-tool-router'
import { BEARER, mcpTestServer } from '../../../support/mcp-server'

const keychainReq = requirement('keychain', keychainProbe)

describe.skipIf(!keychainReq.ok)('McpToolRouter with an engine, its vaults and a remote MCP server', () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-mcp-router-'))
  const keychain = new KeyringKeychain({ service: `corral-test-mcprouter-${process.pid}-${Date.now()}` })
  let srv: Awaited<ReturnType<typeof mcpTestServer>>
  let engine: Engine
  let client: Anthropic
  let mcp: McpToolRouter
  /** The MCP hands and, for every other tool, a recording stand-in for the sandbox hands. */
  let router: HandsRouter
  let inner: RecordingToolRouter
  const reported: [string, McpErrorObject][] = []
  const credentialIds: string[] = []

  beforeAll(async () => {
    srv = await mcpTestServer()
    engine = await Engine.openWithKeychain({ dataDir: dir, keychain, token: 'test-token', env: { PATH: process.env.PATH }, harness: { enabled: false } })
    const server = await engine.listen(0)
    client = new Anthropic({ baseURL: server.url, apiKey: 'test-token' })
    inner = new RecordingToolRouter(join(dir, 'effects.log'))
    mcp = new McpToolRouter({
      keychain,
      connectAttempts: 1,
      serversFor: (sessionId) => sessionMcpServers(engine.services.vaults, engine.services.sessions.retrieve(sessionId)),
      onServerError: (sessionId, e) => reported.push([sessionId, e]),
    })
    router = new HandsRouter({ backends: [{ route: 'mcp', hands: mcp }, { route: 'toolset', hands: inner }] })
  })

  afterAll(async () => {
    for (const id of credentialIds) await keychain.delete(`credential/${id}/token`).catch(() => false)
    await engine.close()
    await srv.close()
    rmSync(dir, { recursive: true, force: true })
  })

  async function sessionWith(servers: { name: string; url: string }[], withCredential: boolean): Promise<string> {
    const vault = await client.beta.vaults.create({ display_name: 'mcp' })
    if (withCredential) {
      const c = await client.beta.vaults.credentials.create(vault.id, { auth: { type: 'static_bearer', mcp_server_url: servers[0]!.url, token: BEARER } })
      credentialIds.push(c.id)
    }
    const agent = await client.beta.agents.create({
      name: 'mcp agent',
      model: 'claude-sonnet-5-5',
      mcp_servers: servers.map((s) => ({ type: 'url' as const, ...s })),
      tools: [{ type: 'agent_toolset_20260401' }, ...servers.map((s) => ({ type: 'mcp_toolset' as const, mcp_server_name: s.name }))],
    })
    const env = await client.beta.environments.create({ name: 'mcp env', config: { type: 'cloud', networking: { type: 'limited', allow_mcp_servers: true } } })
    return (await client.beta.sessions.create({ agent: agent.id, environment_id: env.id, vault_ids: [vault.id] })).id
  }

  it("lists the session's MCP tools, runs them with the vault's token, and passes other tools to the sandbox router", async () => {
    const sessionId = await sessionWith([{ name: 'docs', url: `${srv.url}/mcp` }], true)
    const { tools, errors } = await mcp.tools(sessionId)
    expect(errors).toEqual([])
    expect(tools.map((t) => t.name).sort()).toEqual(['docs__echo', 'docs__whoami'])
    const echoed = await router.execute({ sessionId, toolUseId: 'sevt_1', name: 'docs__echo', input: { text: 'through the router' } })
    expect(echoed).toMatchObject({ content: 'echo: through the router', isError: false })
    expect((await router.execute({ sessionId, toolUseId: 'sevt_2', name: 'docs__whoami', input: {} })).content).not.toContain(BEARER)
    await router.execute({ sessionId, toolUseId: 'sevt_3', name: 'bash', input: { command: 'true' } })
    expect(inner.calls.map((c) => c.name)).toEqual(['bash'])
    expect(await router.recover({ sessionId, toolUseId: 'sevt_1', name: 'docs__echo', input: {} })).toEqual({ state: 'unknown' })
    // the same connection gives the same list (the context view finds a thread's tool set by identity) …
    expect((await mcp.tools(sessionId)).tools).toBe(tools)
    // … and a new connection a new one, with what the server lists now
    await mcp.release(sessionId)
    const again = (await mcp.tools(sessionId)).tools
    expect(again).not.toBe(tools)
    expect(again).toEqual(tools)
  })

  it('reports mcp_authentication_failed_error once and turns the call into a tool error when the vaults hold no credential', async () => {
    const sessionId = await sessionWith([{ name: 'locked', url: `${srv.url}/mcp` }], false)
    const out = await router.execute({ sessionId, toolUseId: 'sevt_4', name: 'locked__echo', input: { text: 'x' } })
    expect(out.isError).toBe(true)
    expect(out.content).toMatch(/^mcp_authentication_failed_error: /)
    expect(reported.filter(([s]) => s === sessionId).map(([, e]) => e.type)).toEqual(['mcp_authentication_failed_error'])
  })

  it("stops using a credential on the engine's open MCP connection once credentials.archive returns, and uses a replacement after sessions.update", async () => {
    const url = `${srv.url}/mcp`
    const vault = await client.beta.vaults.create({ display_name: 'mcp archive' })
    const c = await client.beta.vaults.credentials.create(vault.id, { auth: { type: 'static_bearer', mcp_server_url: url, token: BEARER } })
    credentialIds.push(c.id)
    const agent = await client.beta.agents.create({ name: 'mcp agent', model: 'claude-sonnet-5-5', mcp_servers: [{ type: 'url', name: 'docs', url }], tools: [{ type: 'mcp_toolset', mcp_server_name: 'docs' }] })
    const env = await client.beta.environments.create({ name: 'mcp env', config: { type: 'cloud', networking: { type: 'limited', allow_mcp_servers: true } } })
    const sessionId = (await client.beta.sessions.create({ agent: agent.id, environment_id: env.id, vault_ids: [vault.id] })).id
    const mcp = engine.mcp!
    expect(await mcp.execute({ sessionId, toolUseId: 'sevt_a1', name: 'docs__echo', input: { text: 'before' } })).toMatchObject({ content: 'echo: before', isError: false })
    await client.beta.vaults.credentials.archive(c.id, { vault_id: vault.id })
    const after = await mcp.execute({ sessionId, toolUseId: 'sevt_a2', name: 'docs__echo', input: { text: 'after' } })
    expect(after.isError).toBe(true)
    expect(after.content).toMatch(/^mcp_authentication_failed_error: /)
    // A second vault with a live credential, given to the running session, is used at once.
    const other = await client.beta.vaults.create({ display_name: 'mcp replacement' })
    const c2 = await client.beta.vaults.credentials.create(other.id, { auth: { type: 'static_bearer', mcp_server_url: url, token: BEARER } })
    credentialIds.push(c2.id)
    await client.beta.sessions.update(sessionId, { vault_ids: [other.id] })
    expect(await mcp.execute({ sessionId, toolUseId: 'sevt_a3', name: 'docs__echo', input: { text: 'again' } })).toMatchObject({ content: 'echo: again', isError: false })
    await client.beta.sessions.update(sessionId, { vault_ids: [] })
    expect((await mcp.execute({ sessionId, toolUseId: 'sevt_a4', name: 'docs__echo', input: { text: 'none' } })).isError).toBe(true)
  })

  it('reports mcp_connection_failed_error for a server that does not answer, and lists the other servers', async () => {
    const sessionId = await sessionWith([{ name: 'docs', url: `${srv.url}/mcp` }, { name: 'gone', url: 'http://127.0.0.1:9/mcp' }], true)
    const { tools, errors } = await mcp.tools(sessionId)
    expect(tools.map((t) => t.name)).toContain('docs__echo')
    expect(errors).toEqual([expect.objectContaining({ type: 'mcp_connection_failed_error', mcp_server_name: 'gone', retry_status: { type: 'exhausted' } })])
  })

  it('tells the session `retrying` while a first connection keeps failing, then `exhausted`, and stays quiet on later reconnects', async () => {
    const sessionId = await sessionWith([{ name: 'flaky', url: 'http://127.0.0.1:9/mcp' }], false)
    const retrying = new McpToolRouter({
      keychain,
      connectAttempts: 3,
      retryDelayMs: 5,
      serversFor: (id) => sessionMcpServers(engine.services.vaults, engine.services.sessions.retrieve(id)),
      onServerError: (id, e) => reported.push([id, e]),
    })
    await retrying.tools(sessionId)
    const statuses = () => reported.filter(([s]) => s === sessionId).map(([, e]) => `${e.type}:${e.retry_status.type}`)
    expect(statuses()).toEqual(['mcp_connection_failed_error:retrying', 'mcp_connection_failed_error:retrying', 'mcp_connection_failed_error:exhausted'])
    await retrying.execute({ sessionId, toolUseId: 'sevt_9', name: 'flaky__echo', input: {} })
    expect(statuses()).toHaveLength(3)
    await retrying.dispose()
  })
})
