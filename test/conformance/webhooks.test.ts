import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import { startApiServer, type TestApiServer } from '../support/api-server'
import { WebhookReceiver } from '../support/webhook-receiver'
import { ScriptedModelServer, say, toolCall, userTexts, type RecordedRequest } from '../support/model-server'
import { MemoryKeychain } from '../../src/main/vault/memory-keychain'
import { keychainAccount } from '../../src/main/vault/keychain'

// Webhooks through the official SDK (docs/webhooks.md): endpoints made with
// client.beta.organization.webhooks, deliveries verified with client.beta.webhooks.unwrap against a
// receiver on loopback, as a user's own webhook handler would. The scripted model plays the agent.

let t: TestApiServer
let client: Anthropic
let model: ScriptedModelServer
let receiver: WebhookReceiver
let agentId: string
let envId: string
const keychain = new MemoryKeychain()

// the agent: "ask" calls its custom tool (the session waits on the client), anything else is answered at once
function respond(req: RecordedRequest) {
  const last = userTexts(req).at(-1) ?? ''
  if (last === 'ask' && !req.body.messages.some((m) => m.role === 'assistant')) return toolCall(req, 'lookup_ticket', { ticket: 'T-1' })
  return say('done')
}

beforeAll(async () => {
  model = await ScriptedModelServer.start(respond)
  receiver = await new WebhookReceiver().start()
  t = await startApiServer({
    keychain,
    env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'test-key' },
    harness: { backoffBaseMs: 5, backoffMaxMs: 20, maxRetries: 1 },
    // retries come quickly in tests (the product waits 5 s, 30 s, 2 min, …)
    webhooks: { retryDelaysMs: [100, 100], idlePollMs: 200 },
  })
  client = t.client
  agentId = (await client.beta.agents.create({
    name: 'hooked',
    model: 'claude-sonnet-4-6',
    tools: [{ type: 'custom', name: 'lookup_ticket', description: 'Looks a ticket up', input_schema: { type: 'object', properties: { ticket: { type: 'string' } }, required: ['ticket'] } }],
  })).id
  envId = (await client.beta.environments.create({ name: 'hooked env' })).id
})
afterAll(async () => {
  await t?.close()
  await model?.close()
  await receiver?.close()
})

const errorOf = async (p: Promise<unknown>) => {
  const err = (await p.catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>
  expect(err).toBeInstanceOf(Anthropic.APIError)
  return { status: err.status, ...(err.error as { error: { type: string; message: string } }).error }
}

/** The events the receiver verified with `secret`, as `client.beta.webhooks.unwrap` gives them. */
const verified = (secret: string) => receiver.got.map((g) => client.beta.webhooks.unwrap(g.body, { headers: g.headers, key: secret }))
const typesFor = (secret: string, sessionId: string) => verified(secret).filter((e) => e.data.id === sessionId).map((e) => e.data.type)

async function idleSession(text: string): Promise<string> {
  const s = await client.beta.sessions.create({ agent: agentId, environment_id: envId })
  await client.beta.sessions.events.send(s.id, { events: [{ type: 'user.message', content: [{ type: 'text', text }] }] })
  await expect.poll(async () => (await client.beta.sessions.retrieve(s.id)).status, { timeout: 10_000 }).toBe('idle')
  return s.id
}

describe('webhooks through the official SDK', () => {
  let secret = ''
  let endpointId = ''

  it('has a test here for every method the SDK has on organization webhooks and on webhooks', () => {
    const methods = (o: object) => Object.getOwnPropertyNames(Object.getPrototypeOf(o)).filter((n) => n !== 'constructor').sort()
    expect(methods(client.beta.organization.webhooks)).toEqual(['create', 'delete', 'list', 'regenerateSigningSecret', 'retrieve', 'update'])
    expect(methods(client.beta.webhooks)).toEqual(['parseUnverified', 'unwrap'])
  })

  it('creates an endpoint whose signing secret is shown once and kept in the keychain, then lists, retrieves and updates it', async () => {
    const created = await client.beta.organization.webhooks.create({
      url: receiver.url,
      name: 'my handler',
      // (the SDK types list the hosted API's organization events; Corral's endpoints take session events too)
      enabled_events: ['session.created', 'session.status_run_started', 'session.status_idled', 'session.requires_action', 'session.archived'] as never,
    })
    expect(created).toMatchObject({ url: receiver.url, name: 'my handler', description: '', state: 'enabled', disabled_reason: '' })
    expect(created.id).toMatch(/^whep_/)
    expect(created.signing_secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/)
    secret = created.signing_secret
    endpointId = created.id
    expect(await keychain.get(keychainAccount.webhookSecret(endpointId))).toBe(secret)
    const again = await client.beta.organization.webhooks.retrieve(endpointId)
    expect(again).not.toHaveProperty('signing_secret')
    expect(JSON.stringify(await t.fetch(`/v1/organizations/webhooks`).then((r) => r.json()))).not.toContain(secret)
    const page = await client.beta.organization.webhooks.list()
    expect(page.data.map((e) => e.id)).toEqual([endpointId])
    const renamed = await client.beta.organization.webhooks.update(endpointId, { description: 'posts to my script' })
    expect(renamed).toMatchObject({ description: 'posts to my script', name: 'my handler' })
  })

  it('refuses a bad endpoint, naming the field', async () => {
    expect(await errorOf(client.beta.organization.webhooks.create({ url: 'ftp://example.com/x', enabled_events: ['session.created'] as never }))).toMatchObject({
      status: 400,
      type: 'invalid_request_error',
      message: expect.stringMatching(/url: must be http or https/),
    })
    expect(await errorOf(client.beta.organization.webhooks.create({ url: receiver.url, enabled_events: ['session.finished'] as never }))).toMatchObject({
      status: 400,
      message: expect.stringMatching(/enabled_events\[0\]: "session\.finished" is not a webhook event type/),
    })
    expect(await errorOf(client.beta.organization.webhooks.create({ url: receiver.url, enabled_events: [] }))).toMatchObject({ status: 400, message: expect.stringMatching(/enabled_events: list at least one/) })
    expect(await errorOf(client.beta.organization.webhooks.create({ url: 'http://me:pw@127.0.0.1/x', enabled_events: ['session.created'] as never }))).toMatchObject({
      status: 400,
      message: expect.stringMatching(/url: must not carry a user name or password/),
    })
    expect(await errorOf(client.beta.organization.webhooks.retrieve('whep_nope'))).toMatchObject({ status: 404, type: 'not_found_error' })
    expect((await client.beta.organization.webhooks.list()).data).toHaveLength(1)
  })

  it('posts a session’s lifecycle, signed: created, run started, idled, requires_action, archived, each verified by webhooks.unwrap', async () => {
    const sid = await idleSession('hello')
    await expect.poll(() => typesFor(secret, sid), { timeout: 10_000 }).toEqual(['session.created', 'session.status_run_started', 'session.status_idled'])
    const asked = await idleSession('ask')
    await expect.poll(() => typesFor(secret, asked), { timeout: 10_000 }).toEqual(['session.created', 'session.status_run_started', 'session.status_idled', 'session.requires_action'])
    await client.beta.sessions.archive(sid)
    await expect.poll(() => typesFor(secret, sid).at(-1), { timeout: 10_000 }).toBe('session.archived')
    const first = verified(secret)[0]
    expect(first).toMatchObject({ type: 'event', id: expect.stringMatching(/^wevt_/), created_at: expect.any(String), data: { organization_id: 'local', workspace_id: 'local' } })
    // the webhook-id header is the event's id, and a forged body does not verify
    const g = receiver.got[0]
    expect(g.headers['webhook-id']).toBe(first.id)
    expect(() => client.beta.webhooks.unwrap(g.body.replace('session.created', 'session.deleted'), { headers: g.headers, key: secret })).toThrow()
    // each event once
    const ids = verified(secret).map((e) => e.id)
    expect(new Set(ids).size).toBe(ids.length)
  })

  it('retries a delivery the receiver failed, and lists each delivery with its attempts on the endpoint', async () => {
    const before = receiver.got.length
    receiver.answer = (n) => (n === before + 1 ? 500 : 204)
    const sid = (await client.beta.sessions.create({ agent: agentId, environment_id: envId })).id
    await expect.poll(() => typesFor(secret, sid), { timeout: 10_000 }).toEqual(['session.created', 'session.created'])
    const deliveries = (await t.fetch(`/v1/corral/webhooks/${endpointId}/deliveries`).then((r) => r.json())) as { data: { id: string; resource_id: string; status: string; attempts: number; last_status: number }[] }
    const d = deliveries.data.find((x) => x.resource_id === sid)
    expect(d).toMatchObject({ status: 'delivered', attempts: 2, last_status: 204 })
    receiver.answer = () => 204
  })

  it('gives a delivery up after its retries, with the last answer named', async () => {
    receiver.answer = () => 503
    const sid = (await client.beta.sessions.create({ agent: agentId, environment_id: envId })).id
    await expect
      .poll(async () => ((await t.fetch(`/v1/corral/webhooks/${endpointId}/deliveries`).then((r) => r.json())) as { data: { resource_id: string; status: string }[] }).data.find((x) => x.resource_id === sid)?.status, { timeout: 10_000 })
      .toBe('failed')
    const d = ((await t.fetch(`/v1/corral/webhooks/${endpointId}/deliveries`).then((r) => r.json())) as { data: { resource_id: string; attempts: number; last_error: string }[] }).data.find((x) => x.resource_id === sid)
    expect(d).toMatchObject({ attempts: 3, last_error: 'answered 503: receiver is down' })
    receiver.answer = () => 204
  })

  it('sends nothing to a disabled endpoint, only the listed types, and signs with a regenerated secret from then on', async () => {
    await client.beta.organization.webhooks.update(endpointId, { state: 'disabled' })
    const quiet = (await client.beta.sessions.create({ agent: agentId, environment_id: envId })).id
    await new Promise((r) => setTimeout(r, 500))
    expect(typesFor(secret, quiet)).toEqual([])
    await client.beta.organization.webhooks.update(endpointId, { state: 'enabled', enabled_events: ['session.archived'] as never })
    const { signing_secret } = await client.beta.organization.webhooks.regenerateSigningSecret(endpointId)
    expect(signing_secret).not.toBe(secret)
    const sid = (await client.beta.sessions.create({ agent: agentId, environment_id: envId })).id
    await client.beta.sessions.archive(sid)
    await expect.poll(() => receiver.got.filter((g) => g.body.includes(sid)).length, { timeout: 10_000 }).toBe(1)
    const g = receiver.got.find((x) => x.body.includes(sid))!
    expect(client.beta.webhooks.unwrap(g.body, { headers: g.headers, key: signing_secret }).data.type).toBe('session.archived')
    expect(() => client.beta.webhooks.unwrap(g.body, { headers: g.headers, key: secret })).toThrow()
  })

  it("tells of agents, environments, memory stores, vaults, credentials, deployments and deployment runs", async () => {
    const other = await client.beta.organization.webhooks.create({
      url: receiver.url,
      enabled_events: [
        'agent.created', 'agent.updated', 'agent.archived',
        'environment.created', 'environment.updated', 'environment.archived', 'environment.deleted',
        'memory_store.created', 'memory_store.archived', 'memory_store.deleted',
        'vault.created', 'vault_credential.created', 'vault_credential.archived', 'vault.archived', 'vault.deleted',
        'deployment.created', 'deployment.paused', 'deployment.unpaused', 'deployment.archived', 'deployment_run.started', 'deployment_run.succeeded',
      ] as never,
    })
    const key = other.signing_secret
    const agent = await client.beta.agents.create({ name: 'watched', model: 'claude-sonnet-4-6' })
    await client.beta.agents.update(agent.id, { version: 1, description: 'now described' })
    const env = await client.beta.environments.create({ name: 'watched env' })
    await client.beta.environments.update(env.id, { description: 'changed' })
    const store = await client.beta.memoryStores.create({ name: 'watched store' })
    await client.beta.memoryStores.archive(store.id)
    await client.beta.memoryStores.delete(store.id)
    const vault = await client.beta.vaults.create({ display_name: 'watched vault' })
    const cred = await client.beta.vaults.credentials.create(vault.id, { auth: { type: 'static_bearer', token: 'not-a-real-token', mcp_server_url: 'https://mcp.example.com/sse' } })
    await client.beta.vaults.archive(vault.id)
    await client.beta.vaults.delete(vault.id)
    const deployment = await client.beta.deployments.create({ name: 'watched', agent: agentId, environment_id: envId, initial_events: [{ type: 'user.message', content: [{ type: 'text', text: 'hello' }] }] })
    await client.beta.deployments.pause(deployment.id)
    await client.beta.deployments.unpause(deployment.id)
    const run = await client.beta.deployments.run(deployment.id)
    await client.beta.deployments.archive(deployment.id)
    await client.beta.agents.archive(agent.id)
    await client.beta.environments.archive(env.id)
    await client.beta.environments.delete(env.id)
    const want: [string, string, Record<string, string>?][] = [
      ['agent.created', agent.id],
      ['agent.updated', agent.id],
      ['environment.created', env.id],
      ['environment.updated', env.id],
      ['memory_store.created', store.id],
      ['memory_store.archived', store.id],
      ['memory_store.deleted', store.id],
      ['vault.created', vault.id],
      ['vault_credential.created', cred.id, { vault_id: vault.id }],
      ['vault.archived', vault.id],
      ['vault_credential.archived', cred.id, { vault_id: vault.id }],
      ['vault.deleted', vault.id],
      ['deployment.created', deployment.id],
      ['deployment.paused', deployment.id],
      ['deployment.unpaused', deployment.id],
      ['deployment_run.started', run.id],
      ['deployment_run.succeeded', run.id],
      ['deployment.archived', deployment.id],
      ['agent.archived', agent.id],
      ['environment.archived', env.id],
      ['environment.deleted', env.id],
    ]
    const mine = () =>
      receiver.got
        .filter((g) => {
          try {
            client.beta.webhooks.unwrap(g.body, { headers: g.headers, key })
            return true
          } catch {
            return false
          }
        })
        .map((g) => (JSON.parse(g.body) as { data: Record<string, string> }).data)
    await expect.poll(() => mine().length, { timeout: 10_000 }).toBe(want.length)
    // (deliveries go out concurrently: compared as a set, each once)
    const got = mine().map(({ type, id, organization_id: _o, workspace_id: _w, ...rest }) => JSON.stringify([type, id, ...(Object.keys(rest).length ? [rest] : [])]))
    expect(got.sort()).toEqual(want.map((w) => JSON.stringify(w)).sort())
    await client.beta.organization.webhooks.delete(other.id)
  })

  it('deletes an endpoint with its secret', async () => {
    expect(await client.beta.organization.webhooks.delete(endpointId)).toEqual({ id: endpointId, type: 'webhook_endpoint_deleted' })
    expect(await keychain.get(keychainAccount.webhookSecret(endpointId))).toBeUndefined()
    expect((await client.beta.organization.webhooks.list()).data).toEqual([])
    expect(await errorOf(client.beta.organization.webhooks.retrieve(endpointId))).toMatchObject({ status: 404 })
  })
})
