import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import { startApiServer, type TestApiServer } from '../support/api-server'
import { MemorySecretSink } from '../support/memory-secret-sink'

let t: TestApiServer
let client: Anthropic
const secrets = new MemorySecretSink()

beforeAll(async () => {
  t = await startApiServer({ secrets })
  client = t.client
})
afterAll(() => t.close())

/** Every item of every page, following next_page (the SDK's own auto-pagination). */
async function all<T>(pages: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const x of pages) out.push(x)
  return out
}

describe('agents through the official SDK', () => {
  it('creates an agent with the API defaults filled in', async () => {
    const a = await client.beta.agents.create({ name: 'writer', model: 'claude-sonnet-4-6', tools: [{ type: 'agent_toolset_20260401' }] })
    expect(a).toMatchObject({ type: 'agent', name: 'writer', version: 1, model: { id: 'claude-sonnet-4-6' }, archived_at: null, metadata: {} })
    expect(a.id).toMatch(/^agent_/)
    expect(a.tools[0]).toMatchObject({ type: 'agent_toolset_20260401', default_config: { enabled: true, permission_policy: { type: 'always_allow' } } })
  })

  it('makes a new version on each update, keeps old versions retrievable, and refuses a stale version with ConflictError', async () => {
    const a = await client.beta.agents.create({ name: 'v', model: 'claude-sonnet-4-6', system: 'one' })
    const v2 = await client.beta.agents.update(a.id, { version: 1, system: 'two' })
    expect(v2.version).toBe(2)
    const v3 = await client.beta.agents.update(a.id, { system: 'three' })
    expect(v3.version).toBe(3)
    await expect(client.beta.agents.update(a.id, { version: 2, system: 'stale' })).rejects.toBeInstanceOf(Anthropic.ConflictError)
    expect((await client.beta.agents.retrieve(a.id)).system).toBe('three')
    expect((await client.beta.agents.retrieve(a.id, { version: 1 })).system).toBe('one')
    expect((await client.beta.agents.retrieve(a.id, { version: 2 })).system).toBe('two')
    await expect(client.beta.agents.retrieve(a.id, { version: 9 })).rejects.toBeInstanceOf(Anthropic.NotFoundError)
    const versions = await all(client.beta.agents.versions.list(a.id, { limit: 2 }))
    expect(versions.map((v) => v.version)).toEqual([3, 2, 1])
    // An update that changes nothing makes no version.
    expect((await client.beta.agents.update(a.id, { version: 3, system: 'three' })).version).toBe(3)
  })

  it('lists agents page by page, newest first, and hides archived ones unless asked', async () => {
    const made = []
    for (let i = 0; i < 7; i++) made.push(await client.beta.agents.create({ name: `page-${i}`, model: 'claude-sonnet-4-6', metadata: { batch: 'paging' } }))
    const first = await client.beta.agents.list({ limit: 3 })
    expect(first.data).toHaveLength(3)
    expect(first.hasNextPage()).toBe(true)
    const listed = (await all(client.beta.agents.list({ limit: 3 }))).filter((a) => a.metadata.batch === 'paging')
    expect(listed.map((a) => a.id)).toEqual(made.map((a) => a.id).reverse())
    const archived = await client.beta.agents.archive(made[0].id)
    expect(archived.archived_at).not.toBeNull()
    const active = (await all(client.beta.agents.list({ limit: 4 }))).map((a) => a.id)
    expect(active).not.toContain(made[0].id)
    const withArchived = (await all(client.beta.agents.list({ limit: 4, include_archived: true }))).map((a) => a.id)
    expect(withArchived).toContain(made[0].id)
    const since = (await all(client.beta.agents.list({ 'created_at[gte]': made[5].created_at }))).map((a) => a.id)
    expect(since).toEqual([made[6].id, made[5].id])
    await expect(client.beta.agents.update(made[0].id, { system: 'x' })).rejects.toBeInstanceOf(Anthropic.ConflictError)
  })
})

describe('environments through the official SDK', () => {
  it('creates, retrieves, updates, lists, archives and deletes an environment', async () => {
    const e = await client.beta.environments.create({ name: 'box', config: { type: 'cloud', networking: { type: 'unrestricted' } } })
    expect(e).toMatchObject({ type: 'environment', name: 'box', config: { type: 'cloud', networking: { type: 'unrestricted' } } })
    expect(e.id).toMatch(/^env_/)
    expect(await client.beta.environments.retrieve(e.id)).toEqual(e)
    const u = await client.beta.environments.update(e.id, { name: 'box2', metadata: { team: 'a' } })
    expect(u).toMatchObject({ name: 'box2', metadata: { team: 'a' } })
    const others = []
    for (let i = 0; i < 4; i++) others.push(await client.beta.environments.create({ name: `e${i}` }))
    const listed = await all(client.beta.environments.list({ limit: 2 }))
    expect(listed.map((x) => x.id)).toEqual(expect.arrayContaining([e.id, ...others.map((o) => o.id)]))
    const arch = await client.beta.environments.archive(others[0].id)
    expect(arch.archived_at).not.toBeNull()
    expect((await all(client.beta.environments.list())).map((x) => x.id)).not.toContain(others[0].id)
    expect(await client.beta.environments.delete(e.id)).toEqual({ id: e.id, type: 'environment_deleted' })
    await expect(client.beta.environments.retrieve(e.id)).rejects.toBeInstanceOf(Anthropic.NotFoundError)
  })

  it('refuses to delete an environment an active session uses', async () => {
    const e = await client.beta.environments.create({ name: 'busy' })
    const a = await client.beta.agents.create({ name: 'x', model: 'claude-sonnet-4-6' })
    await client.beta.sessions.create({ agent: a.id, environment_id: e.id })
    await expect(client.beta.environments.delete(e.id)).rejects.toBeInstanceOf(Anthropic.ConflictError)
  })
})

describe('sessions through the official SDK', () => {
  it('creates a session pinned to a snapshot of its agent, with initial events', async () => {
    const e = await client.beta.environments.create({ name: 's-env' })
    const a = await client.beta.agents.create({ name: 'pin', model: 'claude-sonnet-4-6', system: 'v1' })
    const s = await client.beta.sessions.create({
      agent: a.id,
      environment_id: e.id,
      title: 'first',
      metadata: { k: 'v' },
      initial_events: [{ type: 'user.message', content: [{ type: 'text', text: 'hello' }] }],
    })
    expect(s).toMatchObject({ type: 'session', status: 'idle', title: 'first', metadata: { k: 'v' }, agent: { id: a.id, version: 1, system: 'v1' } })
    await client.beta.agents.update(a.id, { system: 'v2' })
    expect((await client.beta.sessions.retrieve(s.id)).agent).toMatchObject({ version: 1, system: 'v1' })
    const events = await all(client.beta.sessions.events.list(s.id))
    expect(events.map((x) => x.type)).toEqual(['user.message'])
    const pinned = await client.beta.sessions.create({ agent: { type: 'agent', id: a.id, version: 1 }, environment_id: e.id })
    expect(pinned.agent).toMatchObject({ version: 1, system: 'v1' })
  })

  it('updates, lists with filters and pages both ways, archives and deletes sessions', async () => {
    const e = await client.beta.environments.create({ name: 'list-env' })
    const a = await client.beta.agents.create({ name: 'lister', model: 'claude-sonnet-4-6' })
    const b = await client.beta.agents.create({ name: 'other', model: 'claude-sonnet-4-6' })
    const mine = []
    for (let i = 0; i < 5; i++) mine.push(await client.beta.sessions.create({ agent: a.id, environment_id: e.id, title: `s${i}` }))
    await client.beta.sessions.create({ agent: b.id, environment_id: e.id })
    const u = await client.beta.sessions.update(mine[0].id, { title: 'renamed', metadata: { x: '1' } })
    expect(u).toMatchObject({ title: 'renamed', metadata: { x: '1' } })
    const updates = await all(client.beta.sessions.events.list(mine[0].id, { types: ['session.updated'] }))
    expect(updates.map((e) => ({ title: (e as { title?: string }).title, metadata: (e as { metadata?: unknown }).metadata }))).toEqual([{ title: 'renamed', metadata: { x: '1' } }])
    const tools = await client.beta.sessions.update(mine[0].id, { agent: { tools: [{ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_ask' } } }] } })
    expect(tools.agent.tools[0]).toMatchObject({ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_ask' } } })
    expect((await client.beta.agents.retrieve(a.id)).tools).toEqual([])
    const page1 = await client.beta.sessions.list({ agent_id: a.id, limit: 2 })
    expect(page1.data.map((s) => s.id)).toEqual([mine[4].id, mine[3].id])
    const listed = await all(client.beta.sessions.list({ agent_id: a.id, limit: 2 }))
    expect(listed.map((s) => s.id)).toEqual(mine.map((s) => s.id).reverse())
    const page2 = await page1.getNextPage()
    expect(page2.data.map((s) => s.id)).toEqual([mine[2].id, mine[1].id])
    // BidirectionalPageCursor: prev_page leads back to the first page.
    const back = await client.beta.sessions.list({ agent_id: a.id, limit: 2, page: (page2 as unknown as { prev_page: string }).prev_page })
    expect(back.data.map((s) => s.id)).toEqual([mine[4].id, mine[3].id])
    expect((await all(client.beta.sessions.list({ agent_id: a.id, statuses: ['running'] }))).length).toBe(0)
    expect((await all(client.beta.sessions.list({ agent_id: a.id, statuses: ['idle'], agent_version: 1 }))).length).toBe(5)
    const archived = await client.beta.sessions.archive(mine[1].id)
    expect(archived.archived_at).not.toBeNull()
    expect((await all(client.beta.sessions.list({ agent_id: a.id }))).map((s) => s.id)).not.toContain(mine[1].id)
    expect((await all(client.beta.sessions.list({ agent_id: a.id, include_archived: true }))).map((s) => s.id)).toContain(mine[1].id)
    expect(await client.beta.sessions.delete(mine[2].id)).toEqual({ id: mine[2].id, type: 'session_deleted' })
    await expect(client.beta.sessions.retrieve(mine[2].id)).rejects.toBeInstanceOf(Anthropic.NotFoundError)
  })
})

describe('vaults and credentials through the official SDK', () => {
  it('creates, retrieves, updates, lists, archives and deletes vaults', async () => {
    const v = await client.beta.vaults.create({ display_name: 'Work', metadata: { owner: 'me' } })
    expect(v).toMatchObject({ type: 'vault', display_name: 'Work', metadata: { owner: 'me' }, archived_at: null })
    expect(v.id).toMatch(/^vlt_/)
    expect(await client.beta.vaults.retrieve(v.id)).toEqual(v)
    const u = await client.beta.vaults.update(v.id, { display_name: 'Work 2', metadata: { owner: null, tier: 'gold' } })
    expect(u).toMatchObject({ display_name: 'Work 2', metadata: { tier: 'gold' } })
    const more = []
    for (let i = 0; i < 4; i++) more.push(await client.beta.vaults.create({ display_name: `v${i}` }))
    const listed = await all(client.beta.vaults.list({ limit: 2 }))
    expect(listed.map((x) => x.id)).toEqual(expect.arrayContaining([v.id, ...more.map((m) => m.id)]))
    const ar = await client.beta.vaults.archive(more[0].id)
    expect(ar.archived_at).not.toBeNull()
    expect((await all(client.beta.vaults.list())).map((x) => x.id)).not.toContain(more[0].id)
    expect((await all(client.beta.vaults.list({ include_archived: true }))).map((x) => x.id)).toContain(more[0].id)
    await expect(client.beta.vaults.update(more[0].id, { display_name: 'x' })).rejects.toBeInstanceOf(Anthropic.ConflictError)
    expect(await client.beta.vaults.delete(more[1].id)).toEqual({ id: more[1].id, type: 'vault_deleted' })
    await expect(client.beta.vaults.retrieve(more[1].id)).rejects.toBeInstanceOf(Anthropic.NotFoundError)
  })

  it('keeps credential secrets out of every response and the database, handing them to the secret sink', async () => {
    const v = await client.beta.vaults.create({ display_name: 'creds' })
    const bearer = await client.beta.vaults.credentials.create(v.id, {
      display_name: 'GitHub MCP',
      auth: { type: 'static_bearer', token: 'SECRET-bearer-1', mcp_server_url: 'https://mcp.example.com/sse' },
    })
    const oauth = await client.beta.vaults.credentials.create(v.id, {
      auth: {
        type: 'mcp_oauth',
        access_token: 'SECRET-access-1',
        mcp_server_url: 'https://oauth.example.com/mcp',
        expires_at: new Date(Date.now() + 3600_000).toISOString(),
        refresh: {
          client_id: 'client-1',
          refresh_token: 'SECRET-refresh-1',
          token_endpoint: 'https://oauth.example.com/token',
          token_endpoint_auth: { type: 'client_secret_post', client_secret: 'SECRET-client-1' },
          scope: 'read',
        },
      },
    })
    const env = await client.beta.vaults.credentials.create(v.id, {
      auth: { type: 'environment_variable', secret_name: 'API_KEY', secret_value: 'SECRET-env-1', networking: { type: 'limited', allowed_hosts: ['api.example.com', '*.example.org'] } },
    })
    expect(bearer).toMatchObject({ type: 'vault_credential', vault_id: v.id, display_name: 'GitHub MCP', auth: { type: 'static_bearer', mcp_server_url: 'https://mcp.example.com/sse' } })
    expect(oauth.auth).toMatchObject({ type: 'mcp_oauth', refresh: { client_id: 'client-1', token_endpoint_auth: { type: 'client_secret_post' }, scope: 'read' } })
    expect(env.auth).toEqual({
      type: 'environment_variable',
      secret_name: 'API_KEY',
      networking: { type: 'limited', allowed_hosts: ['api.example.com', '*.example.org'] },
      injection_location: { header: true, body: false },
    })
    expect(secrets.get(bearer.id)).toEqual({ token: 'SECRET-bearer-1' })
    expect(secrets.get(oauth.id)).toEqual({ access_token: 'SECRET-access-1', refresh_token: 'SECRET-refresh-1', client_secret: 'SECRET-client-1' })
    expect(secrets.get(env.id)).toEqual({ secret_value: 'SECRET-env-1' })

    const rotated = await client.beta.vaults.credentials.update(bearer.id, { vault_id: v.id, auth: { type: 'static_bearer', token: 'SECRET-bearer-2' }, metadata: { rotated: 'yes' } })
    expect(rotated.metadata).toEqual({ rotated: 'yes' })
    expect(secrets.get(bearer.id)).toEqual({ token: 'SECRET-bearer-2' })
    const scoped = await client.beta.vaults.credentials.update(oauth.id, { vault_id: v.id, auth: { type: 'mcp_oauth', refresh: { scope: '', refresh_token: 'SECRET-refresh-2' } } })
    expect((scoped.auth as { refresh: { scope: string | null } }).refresh.scope).toBeNull()
    const inj = await client.beta.vaults.credentials.update(env.id, { vault_id: v.id, auth: { type: 'environment_variable', injection_location: { body: true } } })
    expect((inj.auth as { injection_location: unknown }).injection_location).toEqual({ header: true, body: true })

    const responses = JSON.stringify([
      bearer,
      oauth,
      env,
      rotated,
      scoped,
      inj,
      await client.beta.vaults.credentials.retrieve(oauth.id, { vault_id: v.id }),
      await all(client.beta.vaults.credentials.list(v.id)),
    ])
    const rows = JSON.stringify(t.engine.stores.db.prepare('SELECT * FROM credentials').all())
    for (const text of [responses, rows]) expect(text).not.toMatch(/SECRET-/)
  })

  it('lists, archives and deletes credentials, dropping the secret on delete', async () => {
    const v = await client.beta.vaults.create({ display_name: 'lifecycle' })
    const made = []
    for (let i = 0; i < 5; i++) {
      made.push(await client.beta.vaults.credentials.create(v.id, { auth: { type: 'static_bearer', token: `SECRET-${i}`, mcp_server_url: `https://mcp${i}.example.com/` } }))
    }
    expect((await all(client.beta.vaults.credentials.list(v.id, { limit: 2 }))).map((c) => c.id)).toEqual(made.map((c) => c.id).reverse())
    const ar = await client.beta.vaults.credentials.archive(made[0].id, { vault_id: v.id })
    expect(ar.archived_at).not.toBeNull()
    expect((await all(client.beta.vaults.credentials.list(v.id))).map((c) => c.id)).not.toContain(made[0].id)
    expect((await all(client.beta.vaults.credentials.list(v.id, { include_archived: true }))).map((c) => c.id)).toContain(made[0].id)
    await expect(client.beta.vaults.credentials.update(made[0].id, { vault_id: v.id, display_name: 'x' })).rejects.toBeInstanceOf(Anthropic.ConflictError)
    expect(await client.beta.vaults.credentials.delete(made[1].id, { vault_id: v.id })).toEqual({ id: made[1].id, type: 'vault_credential_deleted' })
    expect(secrets.get(made[1].id)).toBeUndefined()
    await expect(client.beta.vaults.credentials.retrieve(made[1].id, { vault_id: v.id })).rejects.toBeInstanceOf(Anthropic.NotFoundError)
    // A credential is only reachable through its own vault.
    const other = await client.beta.vaults.create({ display_name: 'other' })
    await expect(client.beta.vaults.credentials.retrieve(made[2].id, { vault_id: other.id })).rejects.toBeInstanceOf(Anthropic.NotFoundError)
    // Deleting the vault drops its credentials and their secrets.
    await client.beta.vaults.delete(v.id)
    expect(secrets.get(made[2].id)).toBeUndefined()
    await expect(client.beta.vaults.credentials.list(v.id)).rejects.toBeInstanceOf(Anthropic.NotFoundError)
  })

  it('refuses a second live credential for the same MCP server and a change of auth type', async () => {
    const v = await client.beta.vaults.create({ display_name: 'dupes' })
    const c = await client.beta.vaults.credentials.create(v.id, { auth: { type: 'static_bearer', token: 'SECRET-a', mcp_server_url: 'https://same.example.com/' } })
    await expect(
      client.beta.vaults.credentials.create(v.id, { auth: { type: 'static_bearer', token: 'SECRET-b', mcp_server_url: 'https://same.example.com/' } }),
    ).rejects.toBeInstanceOf(Anthropic.ConflictError)
    const err = await client.beta.vaults.credentials
      .update(c.id, { vault_id: v.id, auth: { type: 'environment_variable', secret_value: 'SECRET-c' } })
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(Anthropic.BadRequestError)
    expect((err as Error).message).toMatch(/auth\.type/)
  })

  it('rejects invalid credential params naming the field and the rule', async () => {
    const v = await client.beta.vaults.create({ display_name: 'invalid' })
    const cases: [unknown, RegExp][] = [
      [{ auth: { type: 'static_bearer', token: '', mcp_server_url: 'https://x.example.com' } }, /auth\.token: must not be empty/],
      [{ auth: { type: 'static_bearer', token: 't', mcp_server_url: 'ftp://x.example.com' } }, /auth\.mcp_server_url/],
      [{ auth: { type: 'environment_variable', secret_name: '1BAD', secret_value: 'v', networking: { type: 'unrestricted' } } }, /auth\.secret_name: an environment variable name/],
      [{ auth: { type: 'environment_variable', secret_name: 'OK', secret_value: 'v', networking: { type: 'limited', allowed_hosts: ['https://a.com/x'] } } }, /auth\.networking\.allowed_hosts\[0\]: a bare host name/],
      [{ auth: { type: 'mcp_oauth', access_token: 'a', mcp_server_url: 'https://x.example.com', expires_at: '2001-01-01T00:00:00Z' } }, /auth\.expires_at: must be in the future/],
      [{ auth: { type: 'nope' } }, /auth\.type/],
    ]
    for (const [body, rule] of cases) {
      const err = await client.beta.vaults.credentials.create(v.id, body as never).catch((e: unknown) => e)
      expect(err).toBeInstanceOf(Anthropic.BadRequestError)
      expect((err as Error).message).toMatch(rule)
    }
    expect((await all(client.beta.vaults.credentials.list(v.id))).length).toBe(0)
  })
})
