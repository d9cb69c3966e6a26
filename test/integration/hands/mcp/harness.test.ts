import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Engine } from '../../../../src/main/engine'
import type { LoggedEvent } from '../../../../src/main/session/event-log'
import { MemoryKeychain } from '../../../../src/main/vault/memory-keychain'
import { RecordingToolRouter } from '../../../support/harness-tool-router'
import { ScriptedModelServer, callTool, say, toolResultsOf } from '../../../support/model-server'
import { BEARER, mcpTestServer } from '../../../support/mcp-server'

type Ev = LoggedEvent & Record<string, unknown>

/**
 * The harness and remote MCP servers end to end: a real engine (SQLite log, brains, API, vault
 * credentials in a keychain), the scripted model server, and a real streamable-HTTP MCP server
 * from @modelcontextprotocol/sdk on 127.0.0.1 that demands the vault's bearer token.
 */
describe('MCP tools in a session', () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-mcp-harness-'))
  const keychain = new MemoryKeychain()
  let srv: Awaited<ReturnType<typeof mcpTestServer>>
  let model: ScriptedModelServer
  let engine: Engine
  let client: Anthropic
  let sandbox: RecordingToolRouter
  let deadUrl: string

  beforeAll(async () => {
    srv = await mcpTestServer()
    model = await ScriptedModelServer.start()
    // a port that was free a moment ago and has nothing listening now
    const probe = http.createServer()
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r))
    deadUrl = `http://127.0.0.1:${(probe.address() as AddressInfo).port}/mcp`
    await new Promise<void>((r) => probe.close(() => r()))
    sandbox = new RecordingToolRouter(join(dir, 'effects.log'))
    engine = Engine.open({
      dataDir: join(dir, 'data'),
      token: 'test-token',
      keychain,
      env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'test-key' },
      toolRouter: sandbox,
      harness: { backoffBaseMs: 5, backoffMaxMs: 40, stallTimeoutMs: 5000, leaseTtlMs: 3000 },
    })
    client = new Anthropic({ baseURL: (await engine.listen(0)).url, apiKey: 'test-token' })
  })

  afterAll(async () => {
    await engine.close()
    await model.close()
    await srv.close()
    rmSync(dir, { recursive: true, force: true })
  })

  const events = (sessionId: string): Ev[] => engine.services.log.read(sessionId, { limit: 10_000 }).map((r) => r.event as Ev)
  async function waitForIdle(sessionId: string, count: number): Promise<Ev> {
    const deadline = Date.now() + 15_000
    for (;;) {
      const idles = events(sessionId).filter((e) => e.type === 'session.status_idle')
      if (idles.length >= count) return idles[count - 1]!
      if (Date.now() > deadline) throw new Error(`no idle #${count}; events: ${events(sessionId).map((e) => e.type).join(', ')}`)
      await new Promise((r) => setTimeout(r, 10))
    }
  }

  async function session(servers: { name: string; url: string }[], toolsets: Record<string, unknown>[], text: string): Promise<string> {
    const vault = await client.beta.vaults.create({ display_name: 'mcp' })
    await client.beta.vaults.credentials.create(vault.id, { auth: { type: 'static_bearer', mcp_server_url: `${srv.url}/mcp`, token: BEARER } })
    const agent = await client.beta.agents.create({
      name: 'mcp agent',
      model: 'claude-sonnet-5-5',
      mcp_servers: servers.map((s) => ({ type: 'url' as const, ...s })),
      tools: [{ type: 'agent_toolset_20260401' }, ...toolsets] as unknown as Anthropic.Beta.Agents.AgentCreateParams['tools'],
    })
    const env = await client.beta.environments.create({ name: 'mcp env', config: { type: 'cloud', networking: { type: 'limited', allow_mcp_servers: true } } })
    const s = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id, vault_ids: [vault.id] })
    await client.beta.sessions.events.send(s.id, { events: [{ type: 'user.message', content: [{ type: 'text', text }] }] })
    return s.id
  }

  it("offers the server's enabled tools to the model, records an always_allow call as agent.mcp_tool_use / agent.mcp_tool_result, and answers the model", async () => {
    const before = model.requests.length
    model.push(callTool('docs__echo', { text: 'hello mcp' }), say('The server said hello.'))
    const id = await session(
      [{ name: 'docs', url: `${srv.url}/mcp` }],
      [{ type: 'mcp_toolset', mcp_server_name: 'docs', default_config: { permission_policy: { type: 'always_allow' } }, configs: [{ name: 'whoami', enabled: false }] }],
      'ask the docs server',
    )
    expect((await waitForIdle(id, 1)).stop_reason).toEqual({ type: 'end_turn' })
    const [first, second] = model.requests.slice(before)
    const offered = first!.body.tools!.map((t) => t.name)
    expect(offered).toContain('docs__echo')
    expect(offered).not.toContain('docs__whoami')
    const evs = events(id)
    const use = evs.find((e) => e.type === 'agent.mcp_tool_use')!
    expect(use).toMatchObject({ mcp_server_name: 'docs', name: 'echo', input: { text: 'hello mcp' }, evaluated_permission: 'allow', evaluation: { type: 'always_allow' } })
    const result = evs.find((e) => e.type === 'agent.mcp_tool_result')!
    expect(result).toMatchObject({ mcp_tool_use_id: use.id, content: [{ type: 'text', text: 'echo: hello mcp' }], is_error: false })
    expect(evs.some((e) => e.type === 'agent.tool_use' || e.type === 'agent.tool_result')).toBe(false)
    expect(toolResultsOf(second!)).toEqual([{ tool_use_id: use.id, text: 'echo: hello mcp', is_error: false }])
    expect(sandbox.calls).toHaveLength(0)
    // the client reads the same events through the API
    const listed = await client.beta.sessions.events.list(id)
    expect(listed.data.map((e) => e.type)).toContain('agent.mcp_tool_result')
  })

  it('idles with requires_action under the default always_ask policy, runs the call after an allow confirmation, and never shows the token', async () => {
    const before = model.requests.length
    model.push(callTool('docs__whoami', {}), say('done'))
    const id = await session([{ name: 'docs', url: `${srv.url}/mcp` }], [{ type: 'mcp_toolset', mcp_server_name: 'docs' }], 'who am I?')
    const idle = await waitForIdle(id, 1)
    const use = events(id).find((e) => e.type === 'agent.mcp_tool_use')!
    expect(use).toMatchObject({ mcp_server_name: 'docs', name: 'whoami', evaluated_permission: 'ask', evaluation: { type: 'always_ask' } })
    expect(idle.stop_reason).toEqual({ type: 'requires_action', event_ids: [use.id] })
    expect(events(id).some((e) => e.type === 'agent.mcp_tool_result')).toBe(false)

    await client.beta.sessions.events.send(id, { events: [{ type: 'user.tool_confirmation', tool_use_id: use.id, result: 'allow' }] })
    expect((await waitForIdle(id, 2)).stop_reason).toEqual({ type: 'end_turn' })
    const result = events(id).find((e) => e.type === 'agent.mcp_tool_result')!
    expect(result).toMatchObject({ mcp_tool_use_id: use.id, is_error: false })
    // the server reflected the Authorization header; the client scrubbed the token
    expect(JSON.stringify(result.content)).toContain('you sent Bearer [redacted by corral]')
    expect(toolResultsOf(model.requests[before + 1]!)[0]).toMatchObject({ tool_use_id: use.id, is_error: false })
  })

  it('reports an unreachable server as session.error mcp_connection_failed_error and a refused credential as mcp_authentication_failed_error; the model gets is_error results', async () => {
    const before = model.requests.length
    model.push(
      {
        kind: 'message',
        blocks: [
          // Servers that cannot be reached list no tools, so none is offered: a model calling them anyway.
          { type: 'tool_use', name: 'gone__echo', input: { text: 'x' }, offSchema: 'a model that calls a tool of an MCP server that listed none' },
          { type: 'tool_use', name: 'locked__echo', input: { text: 'y' }, offSchema: 'a model that calls a tool of an MCP server that listed none' },
        ],
      },
      say('Both servers failed.'),
    )
    const allow = { permission_policy: { type: 'always_allow' } }
    const id = await session(
      [
        { name: 'gone', url: deadUrl },
        // the vault's credential is for /mcp: this URL has none, and the server answers 401
        { name: 'locked', url: `${srv.url}/other` },
      ],
      [
        { type: 'mcp_toolset', mcp_server_name: 'gone', default_config: allow },
        { type: 'mcp_toolset', mcp_server_name: 'locked', default_config: allow },
      ],
      'use the broken servers',
    )
    expect((await waitForIdle(id, 1)).stop_reason).toEqual({ type: 'end_turn' })
    const evs = events(id)
    const errors = evs.filter((e) => e.type === 'session.error').map((e) => e.error as unknown as Record<string, unknown>)
    expect(errors).toContainEqual(expect.objectContaining({ type: 'mcp_connection_failed_error', mcp_server_name: 'gone', retry_status: { type: 'exhausted' } }))
    expect(errors).toContainEqual(expect.objectContaining({ type: 'mcp_authentication_failed_error', mcp_server_name: 'locked', retry_status: { type: 'terminal' } }))
    // both model requests and the calls tried each server again: each failure is reported once
    // (the unreachable one first as `retrying`, while its first connection was being retried)
    expect(errors.map((e) => `${e.mcp_server_name}:${(e.retry_status as { type: string }).type}`).sort()).toEqual(['gone:exhausted', 'gone:retrying', 'locked:terminal'])
    const results = evs.filter((e) => e.type === 'agent.mcp_tool_result')
    expect(results).toHaveLength(2)
    expect(results.every((r) => r.is_error === true)).toBe(true)
    const seen = toolResultsOf(model.requests[before + 1]!)
    expect(seen.map((r) => r.is_error)).toEqual([true, true])
    expect(seen[0]!.text).toContain('mcp_connection_failed_error')
    expect(seen[1]!.text).toContain('mcp_authentication_failed_error')
    // neither failing server's tools were offered
    expect(model.requests[before]!.body.tools!.map((t) => t.name).filter((n) => n.includes('__'))).toEqual([])
  })

  it('keeps the canary token out of every event, every model request and every file of the data directory', async () => {
    await engine.stores.log.drain()
    for (const s of engine.services.sessions.list({ limit: 100 }).data) expect(JSON.stringify(events(s.id))).not.toContain(BEARER)
    for (const r of model.requests) expect(JSON.stringify(r.body)).not.toContain(BEARER)
    for (const f of readdirSync(join(dir, 'data'), { recursive: true, withFileTypes: true })) {
      if (f.isFile()) expect(readFileSync(join(f.parentPath, f.name)).includes(BEARER), f.name).toBe(false)
    }
    // and the token did reach the server: the vault's credential is in the keychain
    expect(await keychain.get((await keychainAccounts())[0]!)).toBe(BEARER)
  })

  async function keychainAccounts(): Promise<string[]> {
    const vaults = await client.beta.vaults.list()
    const out: string[] = []
    for (const v of vaults.data) for (const c of (await client.beta.vaults.credentials.list(v.id)).data) out.push(`credential/${c.id}/token`)
    return out
  }
})
