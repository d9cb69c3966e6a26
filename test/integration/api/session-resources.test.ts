import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import { createIpcAdapter, type IpcAdapter } from '../../../src/main/api/ipc'
import { startApiServer, type TestApiServer } from '../../support/api-server'

// Red-team issue #15, finding 10: a `file` resource with `source_path: /proc/self/environ` put
// Corral's own environment (its API token, the Anthropic key) into the sandbox. Every transport
// must refuse a host path, and a file_id that names no stored file, before anything is created.
describe('session resources at the API boundary', () => {
  let api: TestApiServer
  let ipc: IpcAdapter
  let agentId: string
  let envId: string

  beforeAll(async () => {
    api = await startApiServer({ harness: { enabled: false } })
    ipc = createIpcAdapter({ app: api.engine.app, token: api.token, services: api.engine.services })
    agentId = (await api.client.beta.agents.create({ name: 'resources', model: 'claude-sonnet-4-5' })).id
    envId = (await api.client.beta.environments.create({ name: 'resources env' })).id
  })
  afterAll(async () => api?.close())

  const sessionCount = async () => (await api.client.beta.sessions.list({ limit: 100 })).data.length

  it('refuses a file resource with a source_path over HTTP with a 400 that names the field, and creates nothing', async () => {
    const before = await sessionCount()
    const err = await api.client.beta.sessions
      .create({ agent: agentId, environment_id: envId, resources: [{ type: 'file', file_id: 'file_x', source_path: '/proc/self/environ' } as never] })
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(Anthropic.BadRequestError)
    const message = (err as { error: { error: { message: string } } }).error.error.message
    expect(message).toMatch(/resources\[0\]/)
    expect(message).toMatch(/source_path/)
    expect(await sessionCount()).toBe(before)
  })

  it('refuses a file resource with a source_path through the IPC adapter too', async () => {
    const before = await sessionCount()
    const res = await ipc.call('sessions.create', {}, { agent: agentId, environment_id: envId, resources: [{ type: 'file', file_id: 'file_x', source_path: '/proc/self/environ' }] })
    expect(res).toMatchObject({ ok: false, status: 400, error: { type: 'invalid_request_error', message: expect.stringMatching(/resources\[0\].*source_path/) } })
    expect(await sessionCount()).toBe(before)
  })

  it('refuses inline bytes and unknown keys on every resource kind', async () => {
    const resources = [
      { type: 'file', file_id: 'file_x', content: 'inline bytes' },
      { type: 'github_repository', url: 'https://example.com/a.git', clone_from: '/etc' },
      { type: 'memory_store', memory_store_id: 'memstore_1', path: '/etc' },
    ]
    for (const r of resources) {
      const res = await api.fetch('/v1/sessions', { method: 'POST', body: JSON.stringify({ agent: agentId, environment_id: envId, resources: [r] }) })
      expect(res.status).toBe(400)
      expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/^invalid body: resources\[0\]/)
    }
  })

  it('refuses a file resource whose file_id names no stored file with a 404 naming resources[i].file_id', async () => {
    const before = await sessionCount()
    const err = await api.client.beta.sessions
      .create({ agent: agentId, environment_id: envId, resources: [{ type: 'memory_store', memory_store_id: 'memstore_1' }, { type: 'file', file_id: 'file_missing' }] })
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(Anthropic.NotFoundError)
    expect((err as { error: { error: { type: string; message: string } } }).error.error).toMatchObject({ type: 'not_found_error', message: expect.stringMatching(/^resources\[1\]\.file_id: file "file_missing" was not found/) })
    const viaIpc = await ipc.call('sessions.create', {}, { agent: agentId, environment_id: envId, resources: [{ type: 'file', file_id: 'file_missing' }] })
    expect(viaIpc).toMatchObject({ ok: false, status: 404, error: { type: 'not_found_error', message: expect.stringMatching(/^resources\[0\]\.file_id/) } })
    expect(await sessionCount()).toBe(before)
  })

  it('still accepts the resources the SDK defines, with their documented fields', async () => {
    const store = await api.client.beta.memoryStores.create({ name: 'notes' })
    const session = await api.client.beta.sessions.create({
      agent: agentId,
      environment_id: envId,
      resources: [
        { type: 'github_repository', url: 'https://example.com/a.git', mount_path: 'a', checkout: { type: 'branch', name: 'main' } },
        { type: 'memory_store', memory_store_id: store.id, access: 'read_only', instructions: 'notes' },
      ],
    })
    expect(session.resources.map((r) => r.type)).toEqual(['github_repository', 'memory_store'])
  })
})
