import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import { fetchWithHost, startApiServer, type TestApiServer } from '../support/api-server'

let t: TestApiServer
let client: Anthropic

beforeAll(async () => {
  t = await startApiServer()
  client = t.client
})
afterAll(() => t.close())

async function failure(p: Promise<unknown>): Promise<InstanceType<typeof Anthropic.APIError>> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(Anthropic.APIError)
  return err as InstanceType<typeof Anthropic.APIError>
}

describe('the SDK raises its own error classes', () => {
  it('raises BadRequestError (400) naming the field and the rule', async () => {
    const err = await failure(client.beta.agents.create({ name: '', model: 'claude-sonnet-4-6' }))
    expect(err).toBeInstanceOf(Anthropic.BadRequestError)
    expect(err.status).toBe(400)
    expect(err.message).toMatch(/name: .*(>=1|at least 1|too small)/i)
    expect(err.error).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } })
    const unknownType = await failure(
      client.beta.sessions.events.send('sesn_x', { events: [{ type: 'user.teleport' } as never] }),
    )
    expect(unknownType).toBeInstanceOf(Anthropic.BadRequestError)
    expect(unknownType.message).toMatch(/events\[0\]\.type/)
  })

  it('raises AuthenticationError (401) without a token and with a wrong one', async () => {
    const wrong = new Anthropic({ baseURL: t.url, apiKey: 'not-the-token', maxRetries: 0 })
    const err = await failure(wrong.beta.agents.list())
    expect(err).toBeInstanceOf(Anthropic.AuthenticationError)
    expect(err.status).toBe(401)
    const none = await fetch(`${t.url}/v1/agents`)
    expect(none.status).toBe(401)
    expect(await none.json()).toMatchObject({ type: 'error', error: { type: 'authentication_error', message: expect.stringMatching(/missing API token/) } })
  })

  it('raises PermissionDeniedError (403) for a request whose Host is not a loopback name', async () => {
    const rebinding = new Anthropic({ baseURL: t.url, apiKey: t.token, maxRetries: 0, fetch: fetchWithHost('attacker.example.com') })
    const err = await failure(rebinding.beta.agents.list())
    expect(err).toBeInstanceOf(Anthropic.PermissionDeniedError)
    expect(err.status).toBe(403)
    expect(err.message).toMatch(/Host header is not a loopback name/)
    const loopback = new Anthropic({ baseURL: t.url, apiKey: t.token, maxRetries: 0, fetch: fetchWithHost(`localhost:${t.server.port}`) })
    expect((await loopback.beta.agents.list()).data).toEqual([])
  })

  it('answers 403 to a foreign Origin and sends no CORS headers', async () => {
    const res = await t.fetch('/v1/agents', { headers: { origin: 'https://evil.example.com' } })
    expect(res.status).toBe(403)
    expect(res.headers.get('access-control-allow-origin')).toBeNull()
  })

  it('raises NotFoundError (404) for an unknown resource and an unknown path', async () => {
    const err = await failure(client.beta.agents.retrieve('agent_nope'))
    expect(err).toBeInstanceOf(Anthropic.NotFoundError)
    expect((err.error as { error: { message: string } }).error.message).toBe('agent "agent_nope" was not found')
    expect(await failure(client.beta.vaults.retrieve('vlt_nope'))).toBeInstanceOf(Anthropic.NotFoundError)
    expect(await failure(client.beta.sessions.events.list('sesn_nope'))).toBeInstanceOf(Anthropic.NotFoundError)
    const route = await t.fetch('/v1/nothing-here')
    expect(route.status).toBe(404)
    expect(await route.json()).toMatchObject({ type: 'error', error: { type: 'not_found_error' } })
  })

  it('raises ConflictError (409) for a stale agent version and for events sent to an archived session', async () => {
    const a = await client.beta.agents.create({ name: 'c', model: 'claude-sonnet-4-6' })
    await client.beta.agents.update(a.id, { version: 1, description: 'v2' })
    const err = await failure(client.beta.agents.update(a.id, { version: 1, description: 'stale' }))
    expect(err).toBeInstanceOf(Anthropic.ConflictError)
    expect(err.message).toMatch(/version: agent .* is at version 2, not 1/)
    const e = await client.beta.environments.create({ name: 'e' })
    const s = await client.beta.sessions.create({ agent: a.id, environment_id: e.id })
    await client.beta.sessions.archive(s.id)
    const archived = await failure(client.beta.sessions.events.send(s.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'x' }] }] }))
    expect(archived).toBeInstanceOf(Anthropic.ConflictError)
    expect(t.engine.services.log.lastSeq(s.id)).toBe(0)
  })
})
