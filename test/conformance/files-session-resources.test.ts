import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic, { toFile } from '@anthropic-ai/sdk'
import { startApiServer, type TestApiServer } from '../support/api-server'
import { MemorySecretSink } from '../support/memory-secret-sink'
import { MemoryKeychain } from '../../src/main/vault/memory-keychain'
import { keychainAccount } from '../../src/main/vault/keychain'

let t: TestApiServer
let client: Anthropic
let agentId: string
let envId: string
const keychain = new MemoryKeychain()

beforeAll(async () => {
  t = await startApiServer({ harness: { enabled: false }, secrets: new MemorySecretSink(), keychain })
  client = t.client
  agentId = (await client.beta.agents.create({ name: 'resources', model: 'claude-sonnet-4-6' })).id
  envId = (await client.beta.environments.create({ name: 'resources env' })).id
})
afterAll(() => t.close())

async function all<T>(pages: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const x of pages) out.push(x)
  return out
}
const errorOf = async (p: Promise<unknown>) => {
  const err = (await p.catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>
  expect(err).toBeInstanceOf(Anthropic.APIError)
  return { status: err.status, ...(err.error as { error: { type: string; message: string } }).error }
}
const file = async (name = 'data.csv') => client.beta.files.upload({ file: await toFile(Buffer.from('a,b\n'), name, { type: 'text/csv' }) })

describe('session resources through the official SDK', () => {
  it('creates a session with a file resource mounted under /mnt/session/uploads, by file id or relative mount_path', async () => {
    const f = await file()
    const s = await client.beta.sessions.create({
      agent: agentId,
      environment_id: envId,
      resources: [
        { type: 'file', file_id: f.id },
        { type: 'file', file_id: f.id, mount_path: '/data.csv' },
      ],
    })
    const [a, b] = s.resources as Anthropic.Beta.Sessions.BetaManagedAgentsFileResource[]
    expect(a).toMatchObject({ type: 'file', file_id: f.id, mount_path: `/mnt/session/uploads/${f.id}` })
    expect(b.mount_path).toBe('/mnt/session/uploads/data.csv')
    expect(a.id).not.toBe(b.id)
  })

  it('refuses a file resource whose mount_path leaves the uploads folder, naming resources[i].mount_path', async () => {
    const f = await file()
    const e = await errorOf(client.beta.sessions.create({ agent: agentId, environment_id: envId, resources: [{ type: 'file', file_id: f.id, mount_path: '../../etc/passwd' }] }))
    expect(e).toMatchObject({ status: 400, message: expect.stringMatching(/^resources\[0\]\.mount_path/) })
  })

  it('adds, lists (page by page), retrieves and deletes a file on a live session', async () => {
    const s = await client.beta.sessions.create({ agent: agentId, environment_id: envId })
    const f = await file('report.csv')
    const added = await client.beta.sessions.resources.add(s.id, { type: 'file', file_id: f.id, mount_path: 'in/report.csv' })
    expect(added).toMatchObject({ type: 'file', file_id: f.id, mount_path: '/mnt/session/uploads/in/report.csv' })
    expect(Date.parse(added.created_at)).not.toBeNaN()
    const second = await client.beta.sessions.resources.add(s.id, { type: 'file', file_id: f.id })
    expect(second.mount_path).toBe(`/mnt/session/uploads/${f.id}`)
    const page = await client.beta.sessions.resources.list(s.id, { limit: 1 })
    expect(page.data.map((r) => (r as { id: string }).id)).toEqual([added.id])
    expect(page.hasNextPage()).toBe(true)
    expect((await all(client.beta.sessions.resources.list(s.id, { limit: 1 }))).map((r) => (r as { id: string }).id)).toEqual([added.id, second.id])
    expect(await client.beta.sessions.resources.retrieve(added.id, { session_id: s.id })).toEqual(added)
    expect((await client.beta.sessions.retrieve(s.id)).resources.map((r) => (r as { id: string }).id)).toEqual([added.id, second.id])
    expect(await client.beta.sessions.resources.delete(added.id, { session_id: s.id })).toEqual({ id: added.id, type: 'session_resource_deleted' })
    expect((await all(client.beta.sessions.resources.list(s.id))).map((r) => (r as { id: string }).id)).toEqual([second.id])
    expect(await errorOf(client.beta.sessions.resources.retrieve(added.id, { session_id: s.id }))).toMatchObject({ status: 404, type: 'not_found_error' })
  })

  it('answers 404 for an unknown file, session or resource, and 409 for a mount path already taken', async () => {
    const s = await client.beta.sessions.create({ agent: agentId, environment_id: envId })
    expect(await errorOf(client.beta.sessions.resources.add(s.id, { type: 'file', file_id: 'file_missing' }))).toMatchObject({
      status: 404,
      type: 'not_found_error',
      message: expect.stringMatching(/^file_id: file "file_missing" was not found/),
    })
    const f = await file()
    expect((await errorOf(client.beta.sessions.resources.add('sesn_missing', { type: 'file', file_id: f.id }))).status).toBe(404)
    expect((await errorOf(client.beta.sessions.resources.delete('sesrsc_missing', { session_id: s.id }))).status).toBe(404)
    await client.beta.sessions.resources.add(s.id, { type: 'file', file_id: f.id, mount_path: 'x.csv' })
    expect(await errorOf(client.beta.sessions.resources.add(s.id, { type: 'file', file_id: f.id, mount_path: '/x.csv' }))).toMatchObject({ status: 409, message: expect.stringMatching(/^mount_path: \/mnt\/session\/uploads\/x\.csv is taken/) })
  })

  it('refuses to add anything but a file, naming the field', async () => {
    const s = await client.beta.sessions.create({ agent: agentId, environment_id: envId })
    const e = await errorOf(client.beta.sessions.resources.add(s.id, { type: 'github_repository', url: 'https://example.com/r.git' } as never))
    expect(e).toMatchObject({ status: 400, message: expect.stringMatching(/type/) })
  })

  it('rotates a repository token with update, and refuses a token on a file resource', async () => {
    const f = await file()
    const s = await client.beta.sessions.create({
      agent: agentId,
      environment_id: envId,
      resources: [
        { type: 'github_repository', url: 'https://example.com/r.git', authorization_token: 'ghp_first_token_value' },
        { type: 'file', file_id: f.id },
      ],
    })
    const [repo, fileRes] = s.resources as { id: string; updated_at: string }[]
    const rotated = await client.beta.sessions.resources.update(repo.id, { session_id: s.id, authorization_token: 'ghp_second_token_value' })
    expect(rotated).toMatchObject({ id: repo.id, type: 'github_repository', url: 'https://example.com/r.git' })
    expect(JSON.stringify(rotated)).not.toContain('ghp_')
    expect(JSON.stringify(await client.beta.sessions.retrieve(s.id))).not.toContain('ghp_')
    // the keychain holds the new token (where the egress proxy reads it), the database none
    expect(await keychain.get(keychainAccount.sessionResource(s.id, repo.id, 'authorization_token'))).toBe('ghp_second_token_value')
    const e = await errorOf(client.beta.sessions.resources.update(fileRes.id, { session_id: s.id, authorization_token: 'ghp_x_token_value' }))
    expect(e).toMatchObject({ status: 400, message: expect.stringMatching(/^authorization_token: only a github_repository/) })
  })
})
