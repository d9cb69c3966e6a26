import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic, { toFile } from '@anthropic-ai/sdk'
import { startApiServer, type TestApiServer } from '../support/api-server'

/*
 * What a sessions token reaches among memory stores and files (spec resources.md §3.2), cell by
 * cell through the official SDK: the stores attached to its own session — reads on both
 * accesses, writes (memories, deletes, redaction) only on a read_write attachment, attributed to
 * the session (session_actor) — and nothing else: another store, the store-level routes, another
 * session's token, the environment key, and every files route are 403 permission_error.
 */

let t: TestApiServer
let api: Anthropic
let envKey: string
let token: string
let otherToken: string
let sessionId: string
let rw: string
let ro: string
let unattached: string
let roMemory: string
let roVersion: string

const clientWith = (credential: string) => new Anthropic({ baseURL: t.url, apiKey: null, authToken: credential, maxRetries: 0, timeout: 10_000 })
const secretOf = (work: { secret: string | null }) => JSON.parse(Buffer.from(work.secret!, 'base64url').toString('utf8')) as { sessions_token: string }

async function refusal(p: Promise<unknown>): Promise<{ status: number | undefined; type?: string; message?: string }> {
  const err = (await p.then(
    () => undefined,
    (e: unknown) => e,
  )) as InstanceType<typeof Anthropic.APIError> | undefined
  if (!err) return { status: 200 }
  const body = err.error as { error?: { type?: string; message?: string } } | undefined
  return { status: err.status, type: body?.error?.type, message: body?.error?.message }
}
const status = async (p: Promise<unknown>) => (await refusal(p)).status

beforeAll(async () => {
  t = await startApiServer({ harness: { enabled: false } })
  api = t.client
  const env = (await api.beta.environments.create({ name: 'workers', config: { type: 'self_hosted' } })).id
  const agent = (await api.beta.agents.create({ name: 'remote', model: 'claude-sonnet-4-6', tools: [{ type: 'agent_toolset_20260401' }] })).id
  rw = (await api.beta.memoryStores.create({ name: 'notes' })).id
  ro = (await api.beta.memoryStores.create({ name: 'handbook' })).id
  unattached = (await api.beta.memoryStores.create({ name: 'private' })).id
  const m = await api.beta.memoryStores.memories.create(ro, { path: '/rules.md', content: 'be kind' })
  roMemory = m.id
  roVersion = m.memory_version_id
  await api.beta.memoryStores.memories.create(unattached, { path: '/secret.md', content: 'no' })
  const r = await t.fetch(`/v1/corral/environments/${env}/keys`, { method: 'POST' })
  envKey = ((await r.json()) as { key: string }).key
  sessionId = (
    await api.beta.sessions.create({
      agent,
      environment_id: env,
      resources: [
        { type: 'memory_store', memory_store_id: rw, access: 'read_write' },
        { type: 'memory_store', memory_store_id: ro, access: 'read_only' },
      ],
    })
  ).id
  const other = (await api.beta.sessions.create({ agent, environment_id: env })).id
  const worker = clientWith(envKey)
  const tokens = new Map<string, string>()
  for (let i = 0; i < 10 && tokens.size < 2; i++) {
    const w = await worker.beta.environments.work.poll(env, { reclaim_older_than_ms: 60_000 })
    if (w) tokens.set(w.data.id, secretOf(w).sessions_token)
  }
  token = tokens.get(sessionId)!
  otherToken = tokens.get(other)!
  expect(token && otherToken).toBeTruthy()
})
afterAll(() => t.close())

describe('a sessions token on memory stores', () => {
  it('reads, writes, deletes and redacts in a store attached read_write to its session, each change a version by session_actor', async () => {
    const c = clientWith(token).beta.memoryStores
    expect((await c.retrieve(rw)).id).toBe(rw)
    const created = await c.memories.create(rw, { path: '/todo.md', content: 'one' })
    const updated = await c.memories.update(created.id, { memory_store_id: rw, content: 'two' })
    expect((await c.memories.retrieve(created.id, { memory_store_id: rw })).content).toBe('two')
    expect((await c.memories.list(rw)).data.map((x) => (x as { path: string }).path)).toEqual(['/todo.md'])
    const versions = (await c.memoryVersions.list(rw, { memory_id: created.id })).data
    expect(versions).toHaveLength(2)
    for (const v of versions) expect(v.created_by).toEqual({ type: 'session_actor', session_id: sessionId })
    expect((await c.memoryVersions.retrieve(updated.memory_version_id, { memory_store_id: rw })).content).toBe('two')
    const redacted = await c.memoryVersions.redact(created.memory_version_id, { memory_store_id: rw })
    expect(redacted.content).toBeNull()
    expect(redacted.created_by).toEqual({ type: 'session_actor', session_id: sessionId })
    await c.memories.delete(created.id, { memory_store_id: rw })
    const deleted = (await api.beta.memoryStores.memoryVersions.list(rw, { memory_id: created.id, operation: 'deleted' })).data
    expect(deleted.map((v) => v.created_by)).toEqual([{ type: 'session_actor', session_id: sessionId }])
  })

  it('reads a store attached read_only and is refused every write there with 403 permission_error naming the access', async () => {
    const c = clientWith(token).beta.memoryStores
    expect((await c.retrieve(ro)).id).toBe(ro)
    expect((await c.memories.retrieve(roMemory, { memory_store_id: ro })).content).toBe('be kind')
    expect((await c.memories.list(ro)).data).toHaveLength(1)
    expect((await c.memoryVersions.list(ro)).data).toHaveLength(1)
    expect(await status(c.memoryVersions.retrieve(roVersion, { memory_store_id: ro }))).toBe(200)
    const create = await refusal(c.memories.create(ro, { path: '/new.md', content: 'x' }))
    expect(create).toMatchObject({ status: 403, type: 'permission_error' })
    expect(create.message).toContain('read_only')
    expect(await status(c.memories.update(roMemory, { memory_store_id: ro, content: 'changed' }))).toBe(403)
    expect(await status(c.memories.delete(roMemory, { memory_store_id: ro }))).toBe(403)
    expect(await status(c.memoryVersions.redact(roVersion, { memory_store_id: ro }))).toBe(403)
    // nothing was written
    expect((await api.beta.memoryStores.memories.retrieve(roMemory, { memory_store_id: ro })).content).toBe('be kind')
    expect((await api.beta.memoryStores.memoryVersions.list(ro)).data).toHaveLength(1)
  })

  it('is refused a store not attached to its session, for reads and writes alike', async () => {
    const c = clientWith(token).beta.memoryStores
    const read = await refusal(c.retrieve(unattached))
    expect(read).toMatchObject({ status: 403, type: 'permission_error' })
    expect(read.message).toContain(`not attached to session ${sessionId}`)
    expect(await status(c.memories.list(unattached))).toBe(403)
    expect(await status(c.memoryVersions.list(unattached))).toBe(403)
    expect(await status(c.memories.create(unattached, { path: '/x.md', content: 'x' }))).toBe(403)
  })

  it('is refused the store-level routes: list, create, update, archive and delete', async () => {
    const c = clientWith(token).beta.memoryStores
    expect(await status(c.list())).toBe(403)
    expect(await status(c.create({ name: 'mine' }))).toBe(403)
    expect(await status(c.update(rw, { description: 'changed' }))).toBe(403)
    expect(await status(c.archive(rw))).toBe(403)
    expect(await status(c.delete(rw))).toBe(403)
    const store = await api.beta.memoryStores.retrieve(rw)
    expect(store.description).toBe('')
    expect(store.archived_at).toBeNull()
  })

  it("refuses another session's token and the environment key on the session's stores", async () => {
    expect(await status(clientWith(otherToken).beta.memoryStores.retrieve(rw))).toBe(403)
    expect(await status(clientWith(otherToken).beta.memoryStores.memories.create(rw, { path: '/intruder.md', content: 'x' }))).toBe(403)
    const env = await refusal(clientWith(envKey).beta.memoryStores.retrieve(rw))
    expect(env).toMatchObject({ status: 403, type: 'permission_error' })
    expect(env.message).toContain('sessions token')
    expect(await status(clientWith(envKey).beta.memoryStores.memories.list(rw))).toBe(403)
  })

  it('keeps attributing the API token’s own writes to api_actor', async () => {
    const m = await api.beta.memoryStores.memories.create(rw, { path: '/by-api.md', content: 'api' })
    const v = await api.beta.memoryStores.memoryVersions.retrieve(m.memory_version_id, { memory_store_id: rw })
    expect(v.created_by?.type).toBe('api_actor')
  })
})

describe('a sessions token on files', () => {
  it('is refused every files route (spec §3.2: files take the API token), even for its own session’s files', async () => {
    const upload = await api.beta.files.upload({ file: await toFile(Buffer.from('hello'), 'hello.txt') })
    const c = clientWith(token).beta.files
    const up = await refusal(c.upload({ file: await toFile(Buffer.from('x'), 'x.txt') }))
    expect(up).toMatchObject({ status: 403, type: 'permission_error' })
    expect(up.message).toContain('takes the API token')
    expect(await status(c.list())).toBe(403)
    expect(await status(c.list({ scope_id: sessionId }))).toBe(403)
    expect(await status(c.retrieveMetadata(upload.id))).toBe(403)
    expect(await status(c.download(upload.id))).toBe(403)
    expect(await status(c.delete(upload.id))).toBe(403)
    expect(await status(clientWith(envKey).beta.files.download(upload.id))).toBe(403)
    expect((await api.beta.files.retrieveMetadata(upload.id)).id).toBe(upload.id)
  })
})
