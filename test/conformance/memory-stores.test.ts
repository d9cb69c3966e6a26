import { createHash } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import { startApiServer, type TestApiServer } from '../support/api-server'

let t: TestApiServer
let client: Anthropic

beforeAll(async () => {
  t = await startApiServer()
  client = t.client
})
afterAll(() => t.close())

async function all<T>(pages: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const x of pages) out.push(x)
  return out
}

const sha = (s: string) => createHash('sha256').update(Buffer.from(s, 'utf8')).digest('hex')

/** The rejection of `p`, which must reject. */
async function rejection(p: Promise<unknown>): Promise<InstanceType<typeof Anthropic.APIError>> {
  try {
    await p
  } catch (err) {
    if (err instanceof Anthropic.APIError) return err
    throw err
  }
  throw new Error('expected the call to fail')
}

/** The API's own error message (the SDK's `message` carries the JSON body). */
const messageOf = (err: InstanceType<typeof Anthropic.APIError>) => (err.error as { error: { message: string } }).error.message

describe('memory stores through the official SDK', () => {
  it('has a test here for every method the SDK has on memory stores, memories and memory versions', () => {
    const methods = (o: object) => Object.getOwnPropertyNames(Object.getPrototypeOf(o)).filter((n) => n !== 'constructor').sort()
    // When the SDK grows a method, this fails until a test for it is added below.
    expect(methods(client.beta.memoryStores)).toEqual(['archive', 'create', 'delete', 'list', 'retrieve', 'update'])
    expect(methods(client.beta.memoryStores.memories)).toEqual(['create', 'delete', 'list', 'retrieve', 'update'])
    expect(methods(client.beta.memoryStores.memoryVersions)).toEqual(['list', 'redact', 'retrieve'])
  })

  it('creates, retrieves, updates, lists, archives and deletes a store', async () => {
    const made = await client.beta.memoryStores.create({ name: 'User Preferences', description: 'what the user likes', metadata: { team: 'a', drop: 'x' } })
    expect(made).toMatchObject({ type: 'memory_store', name: 'User Preferences', description: 'what the user likes', metadata: { team: 'a', drop: 'x' }, archived_at: null })
    expect(made.id).toMatch(/^memstore_/)
    expect(await client.beta.memoryStores.retrieve(made.id)).toEqual(made)

    const plain = await client.beta.memoryStores.create({ name: 'plain' })
    expect(plain.description).toBe('')
    expect(plain.metadata).toEqual({})

    const updated = await client.beta.memoryStores.update(made.id, { name: 'Prefs', description: '', metadata: { drop: null, added: 'y' } })
    expect(updated).toMatchObject({ name: 'Prefs', description: '', metadata: { team: 'a', added: 'y' } })
    expect(updated.metadata).not.toHaveProperty('drop')
    expect(updated.updated_at >= made.updated_at).toBe(true)

    const listed = (await all(client.beta.memoryStores.list({ limit: 1 }))).map((s) => s.id)
    expect(listed).toEqual(expect.arrayContaining([made.id, plain.id]))
    expect(listed.indexOf(plain.id)).toBeLessThan(listed.indexOf(made.id)) // newest first
    const windowed = await all(client.beta.memoryStores.list({ 'created_at[gte]': plain.created_at, 'created_at[lte]': plain.created_at }))
    expect(windowed.map((s) => s.id)).toContain(plain.id)
    expect(await all(client.beta.memoryStores.list({ 'created_at[lte]': '2000-01-01T00:00:00Z' }))).toEqual([])

    const archived = await client.beta.memoryStores.archive(plain.id)
    expect(archived.archived_at).not.toBeNull()
    expect((await all(client.beta.memoryStores.list())).map((s) => s.id)).not.toContain(plain.id)
    expect((await all(client.beta.memoryStores.list({ include_archived: true }))).map((s) => s.id)).toContain(plain.id)
    const refused = await rejection(client.beta.memoryStores.update(plain.id, { name: 'again' }))
    expect(refused).toBeInstanceOf(Anthropic.ConflictError)

    expect(await client.beta.memoryStores.delete(plain.id)).toEqual({ id: plain.id, type: 'memory_store_deleted' })
    expect(await rejection(client.beta.memoryStores.retrieve(plain.id))).toBeInstanceOf(Anthropic.NotFoundError)
  })

  it('refuses a store name that is empty or has control characters, naming the field', async () => {
    const empty = await rejection(client.beta.memoryStores.create({ name: '' }))
    expect(empty).toBeInstanceOf(Anthropic.BadRequestError)
    expect(empty.message).toMatch(/name/)
    const control = await rejection(client.beta.memoryStores.create({ name: 'a\u0007b' }))
    expect(messageOf(control)).toMatch(/name: must not contain control characters/)
  })
})

describe('memories through the official SDK', () => {
  it('creates a memory whose content_sha256 is the plain hex SHA-256 of its bytes, basic on create and full on retrieve', async () => {
    const store = await client.beta.memoryStores.create({ name: 'notes' })
    const text = 'Café — ünïcödé\r\nline two\n'
    const created = await client.beta.memoryStores.memories.create(store.id, { path: '/notes/todo.md', content: text })
    expect(created).toMatchObject({ type: 'memory', memory_store_id: store.id, path: '/notes/todo.md', content: null, content_sha256: sha(text), content_size_bytes: Buffer.byteLength(text) })
    expect(created.id).toMatch(/^mem_/)
    expect(created.memory_version_id).toMatch(/^memver_/)
    const full = await client.beta.memoryStores.memories.create(store.id, { path: '/empty.md', content: '', view: 'full' })
    expect(full).toMatchObject({ content: '', content_sha256: sha(''), content_size_bytes: 0 })

    expect((await client.beta.memoryStores.memories.retrieve(created.id, { memory_store_id: store.id })).content).toBe(text)
    expect((await client.beta.memoryStores.memories.retrieve(created.id, { memory_store_id: store.id, view: 'basic' })).content).toBeNull()
  })

  it('refuses bad paths and oversized content with a 400 naming the rule', async () => {
    const store = await client.beta.memoryStores.create({ name: 'rules' })
    const cases: [string, RegExp][] = [
      ['no-slash', /path: must start with "\/"/],
      ['/a//b', /path: must not have an empty segment/],
      ['/a/../b', /path: must not have a "\." or "\.\." segment/],
      ['/a/', /path: must not have an empty segment/],
      ['/a\u2028b', /path: must not contain control or format characters/],
      ['/e\u0301', /path: must be in Unicode Normalization Form C/],
      ['/' + Array.from({ length: 21 }, () => 'x').join('/'), /path: must have at most 20 segments/],
      ['/' + 'x'.repeat(1024), /path: must be at most 1024 bytes/],
      ['/.anthropic-memory-store', /path: .*reserved/],
    ]
    for (const [path, rule] of cases) {
      const err = await rejection(client.beta.memoryStores.memories.create(store.id, { path, content: 'x' }))
      expect(err, path).toBeInstanceOf(Anthropic.BadRequestError)
      expect(messageOf(err), path).toMatch(rule)
    }
    const big = await rejection(client.beta.memoryStores.memories.create(store.id, { path: '/big', content: 'é'.repeat(51_201) }))
    expect(messageOf(big)).toMatch(/content: must be at most 102400 bytes/)
    expect((await all(client.beta.memoryStores.memories.list(store.id))).length).toBe(0)
  })

  it('refuses a used or overlapping path with a final 409 memory_path_conflict_error naming the conflicting path and memory', async () => {
    const store = await client.beta.memoryStores.create({ name: 'paths' })
    const todo = await client.beta.memoryStores.memories.create(store.id, { path: '/notes/todo.md', content: 'a' })
    const cases: [string, string][] = [
      ['/notes/todo.md', '/notes/todo.md'], // taken
      ['/notes', '/notes/todo.md'], // an ancestor of an existing memory
      ['/notes/todo.md/deeper', '/notes/todo.md'], // below an existing memory
    ]
    for (const [path, conflicting] of cases) {
      const err = await rejection(client.beta.memoryStores.memories.create(store.id, { path, content: 'b' }))
      expect(err, path).toBeInstanceOf(Anthropic.ConflictError)
      expect(err.error, path).toMatchObject({ type: 'error', error: { type: 'memory_path_conflict_error', conflicting_path: conflicting, conflicting_memory_id: todo.id } })
      expect(err.headers?.get('x-should-retry')).toBe('false')
    }
    // Sibling names that only share a prefix of characters do not overlap.
    await client.beta.memoryStores.memories.create(store.id, { path: '/notes-archive/todo.md', content: 'c' })
    const other = await client.beta.memoryStores.memories.create(store.id, { path: '/other.md', content: 'd' })
    const rename = await rejection(client.beta.memoryStores.memories.update(other.id, { memory_store_id: store.id, path: '/notes' }))
    expect(rename.error).toMatchObject({ error: { type: 'memory_path_conflict_error', conflicting_path: '/notes/todo.md' } })
  })

  it('updates content and renames keeping the id, with a precondition that refuses a stale hash (409, nothing changed)', async () => {
    const store = await client.beta.memoryStores.create({ name: 'edits' })
    const m = await client.beta.memoryStores.memories.create(store.id, { path: '/a.md', content: 'one' })
    const two = await client.beta.memoryStores.memories.update(m.id, { memory_store_id: store.id, content: 'two', precondition: { type: 'content_sha256', content_sha256: sha('one') } })
    expect(two).toMatchObject({ id: m.id, content: null, content_sha256: sha('two') })
    expect(two.memory_version_id).not.toBe(m.memory_version_id)

    const stale = await rejection(client.beta.memoryStores.memories.update(m.id, { memory_store_id: store.id, content: 'three', precondition: { type: 'content_sha256', content_sha256: sha('one') } }))
    expect(stale).toBeInstanceOf(Anthropic.ConflictError)
    expect(stale.error).toMatchObject({ error: { type: 'memory_precondition_failed_error' } })
    expect(stale.headers?.get('x-should-retry')).toBe('false')
    expect((await client.beta.memoryStores.memories.retrieve(m.id, { memory_store_id: store.id })).content).toBe('two')

    // Asking for exactly what is stored succeeds despite a stale hash, and adds no version.
    const same = await client.beta.memoryStores.memories.update(m.id, { memory_store_id: store.id, content: 'two', precondition: { type: 'content_sha256', content_sha256: sha('one') } })
    expect(same.memory_version_id).toBe(two.memory_version_id)

    const moved = await client.beta.memoryStores.memories.update(m.id, { memory_store_id: store.id, path: '/dir/b.md', view: 'full' })
    expect(moved).toMatchObject({ id: m.id, path: '/dir/b.md', content: 'two' })
    const versions = await all(client.beta.memoryStores.memoryVersions.list(store.id, { memory_id: m.id }))
    expect(versions.map((v) => [v.operation, v.path])).toEqual([
      ['modified', '/dir/b.md'],
      ['modified', '/a.md'],
      ['created', '/a.md'],
    ])
    expect(await rejection(client.beta.memoryStores.memories.update('mem_missing', { memory_store_id: store.id, content: 'x' }))).toBeInstanceOf(Anthropic.NotFoundError)
  })

  it('deletes a memory (with expected_content_sha256 refusing a stale hash) and keeps its versions plus a deleted one', async () => {
    const store = await client.beta.memoryStores.create({ name: 'deletes' })
    const m = await client.beta.memoryStores.memories.create(store.id, { path: '/gone.md', content: 'bye' })
    const stale = await rejection(client.beta.memoryStores.memories.delete(m.id, { memory_store_id: store.id, expected_content_sha256: sha('other') }))
    expect(stale.error).toMatchObject({ error: { type: 'memory_precondition_failed_error' } })
    expect((await client.beta.memoryStores.memories.retrieve(m.id, { memory_store_id: store.id })).content).toBe('bye')
    expect(await client.beta.memoryStores.memories.delete(m.id, { memory_store_id: store.id, expected_content_sha256: sha('bye') })).toEqual({ id: m.id, type: 'memory_deleted' })
    expect(await rejection(client.beta.memoryStores.memories.retrieve(m.id, { memory_store_id: store.id }))).toBeInstanceOf(Anthropic.NotFoundError)
    expect(await rejection(client.beta.memoryStores.memories.delete(m.id, { memory_store_id: store.id }))).toBeInstanceOf(Anthropic.NotFoundError)
    const versions = await all(client.beta.memoryStores.memoryVersions.list(store.id, { memory_id: m.id, view: 'full' }))
    expect(versions.map((v) => v.operation)).toEqual(['deleted', 'created'])
    expect(versions[0]).toMatchObject({ content: null, content_sha256: null, content_size_bytes: null, path: '/gone.md' })
    expect(versions[1]).toMatchObject({ content: 'bye', content_sha256: sha('bye') })
  })

  it('lists by path_prefix on whole segments, rolls deeper memories into memory_prefix items at depth 1, and pages stably', async () => {
    const store = await client.beta.memoryStores.create({ name: 'tree' })
    for (const p of ['/projects/foo/a.md', '/projects/foo/deep/b.md', '/projects/bar.md', '/projects-old/c.md', '/top.md', '/projects/foo/z.md']) {
      await client.beta.memoryStores.memories.create(store.id, { path: p, content: p })
    }
    const under = await all(client.beta.memoryStores.memories.list(store.id, { path_prefix: '/projects/', limit: 2 }))
    expect(under.map((i) => i.path)).toEqual(['/projects/bar.md', '/projects/foo/a.md', '/projects/foo/deep/b.md', '/projects/foo/z.md'])
    expect(under.every((i) => i.type === 'memory' && i.content === null)).toBe(true)

    const top = await all(client.beta.memoryStores.memories.list(store.id, { depth: 1, limit: 1 }))
    expect(top).toEqual([
      { type: 'memory_prefix', path: '/projects-old/' },
      { type: 'memory_prefix', path: '/projects/' },
      expect.objectContaining({ type: 'memory', path: '/top.md' }),
    ])
    const level = await all(client.beta.memoryStores.memories.list(store.id, { path_prefix: '/projects/', depth: 1 }))
    expect(level.map((i) => [i.type, i.path])).toEqual([
      ['memory', '/projects/bar.md'],
      ['memory_prefix', '/projects/foo/'],
    ])
    const full = await client.beta.memoryStores.memories.list(store.id, { view: 'full', limit: 100 })
    expect(full.data.every((i) => i.type === 'memory' && i.content === i.path)).toBe(true)
    const bad = await rejection(client.beta.memoryStores.memories.list(store.id, { path_prefix: '/projects' }))
    expect(messageOf(bad)).toMatch(/path_prefix: must start and end with "\/"/)
  })

  it('caps a view=full page at 20 memories', async () => {
    const store = await client.beta.memoryStores.create({ name: 'cap' })
    for (let i = 0; i < 25; i++) await client.beta.memoryStores.memories.create(store.id, { path: `/m${String(i).padStart(2, '0')}.md`, content: String(i) })
    const page = await client.beta.memoryStores.memories.list(store.id, { view: 'full', limit: 100 })
    expect(page.data).toHaveLength(20)
    expect(page.hasNextPage()).toBe(true)
    expect((await all(client.beta.memoryStores.memories.list(store.id, { view: 'full', limit: 100 }))).length).toBe(25)
  })

  it('takes no memory writes on an archived store but still reads, deletes and redacts', async () => {
    const store = await client.beta.memoryStores.create({ name: 'archive' })
    const m = await client.beta.memoryStores.memories.create(store.id, { path: '/keep.md', content: 'k' })
    await client.beta.memoryStores.archive(store.id)
    expect(await rejection(client.beta.memoryStores.memories.create(store.id, { path: '/new.md', content: 'n' }))).toBeInstanceOf(Anthropic.ConflictError)
    expect(await rejection(client.beta.memoryStores.memories.update(m.id, { memory_store_id: store.id, content: 'x' }))).toBeInstanceOf(Anthropic.ConflictError)
    expect((await client.beta.memoryStores.memories.retrieve(m.id, { memory_store_id: store.id })).content).toBe('k')
    await client.beta.memoryStores.memoryVersions.redact(m.memory_version_id, { memory_store_id: store.id })
    expect((await client.beta.memoryStores.memories.delete(m.id, { memory_store_id: store.id })).type).toBe('memory_deleted')
  })
})

describe('memory versions through the official SDK', () => {
  it('records exactly one version per change, filters the list, retrieves full by default and redacts keeping the actor', async () => {
    const store = await client.beta.memoryStores.create({ name: 'history' })
    const a = await client.beta.memoryStores.memories.create(store.id, { path: '/a.md', content: 'a1' })
    const b = await client.beta.memoryStores.memories.create(store.id, { path: '/b.md', content: 'b1' })
    await client.beta.memoryStores.memories.update(a.id, { memory_store_id: store.id, content: 'a2' })
    await client.beta.memoryStores.memories.update(a.id, { memory_store_id: store.id, content: 'a2' }) // no change: no version
    await client.beta.memoryStores.memories.delete(b.id, { memory_store_id: store.id })

    const every = await all(client.beta.memoryStores.memoryVersions.list(store.id, { limit: 2 }))
    expect(every).toHaveLength(4)
    expect(every.every((v) => v.content === null && v.type === 'memory_version' && v.memory_store_id === store.id)).toBe(true)
    expect(every.every((v) => v.created_by?.type === 'api_actor')).toBe(true)
    const apiKeyId = (every[0].created_by as { api_key_id: string }).api_key_id

    expect((await all(client.beta.memoryStores.memoryVersions.list(store.id, { operation: 'created' }))).map((v) => v.memory_id).sort()).toEqual([a.id, b.id].sort())
    expect((await all(client.beta.memoryStores.memoryVersions.list(store.id, { operation: 'deleted' }))).map((v) => v.memory_id)).toEqual([b.id])
    expect(await all(client.beta.memoryStores.memoryVersions.list(store.id, { api_key_id: apiKeyId }))).toHaveLength(4)
    expect(await all(client.beta.memoryStores.memoryVersions.list(store.id, { api_key_id: 'apikey_someone_else' }))).toHaveLength(0)
    expect(await all(client.beta.memoryStores.memoryVersions.list(store.id, { session_id: 'sesn_none' }))).toHaveLength(0)
    expect(await all(client.beta.memoryStores.memoryVersions.list(store.id, { service_account_id: 'svac_none' }))).toHaveLength(0)
    const first = every[every.length - 1]
    expect((await all(client.beta.memoryStores.memoryVersions.list(store.id, { 'created_at[lte]': first.created_at }))).map((v) => v.id)).toContain(first.id)
    expect(await all(client.beta.memoryStores.memoryVersions.list(store.id, { 'created_at[gte]': '2999-01-01T00:00:00Z' }))).toHaveLength(0)
    const fullPage = await client.beta.memoryStores.memoryVersions.list(store.id, { view: 'full', limit: 100 })
    expect(fullPage.data.find((v) => v.operation === 'created' && v.memory_id === a.id)?.content).toBe('a1')

    const v1 = every.find((v) => v.memory_id === a.id && v.operation === 'created')!
    const retrieved = await client.beta.memoryStores.memoryVersions.retrieve(v1.id, { memory_store_id: store.id })
    expect(retrieved).toMatchObject({ id: v1.id, content: 'a1', content_sha256: sha('a1'), content_size_bytes: 2, path: '/a.md', redacted_at: null })
    expect((await client.beta.memoryStores.memoryVersions.retrieve(v1.id, { memory_store_id: store.id, view: 'basic' })).content).toBeNull()

    const redacted = await client.beta.memoryStores.memoryVersions.redact(v1.id, { memory_store_id: store.id })
    expect(redacted).toMatchObject({ id: v1.id, operation: 'created', content: null, path: null, content_sha256: null, content_size_bytes: null, created_by: retrieved.created_by })
    expect(redacted.redacted_at).not.toBeNull()
    expect(redacted.redacted_by).toMatchObject({ type: 'api_actor' })
    expect(await client.beta.memoryStores.memoryVersions.retrieve(v1.id, { memory_store_id: store.id })).toEqual(redacted)
    // The memory itself is untouched: redaction is of history.
    expect((await client.beta.memoryStores.memories.retrieve(a.id, { memory_store_id: store.id })).content).toBe('a2')
    expect(await rejection(client.beta.memoryStores.memoryVersions.retrieve('memver_missing', { memory_store_id: store.id }))).toBeInstanceOf(Anthropic.NotFoundError)
  })
})

describe('memory stores attached to a session through the official SDK', () => {
  it('attaches stores at creation with their access, instructions, snapshotted name and description, and mount_path', async () => {
    const agent = await client.beta.agents.create({ name: 'rememberer', model: 'claude-sonnet-4-6' })
    const env = await client.beta.environments.create({ name: 'mem-env' })
    const prefs = await client.beta.memoryStores.create({ name: 'User Preferences', description: 'likes and dislikes' })
    const notes = await client.beta.memoryStores.create({ name: 'notes' })
    const session = await client.beta.sessions.create({
      agent: agent.id,
      environment_id: env.id,
      resources: [
        { type: 'memory_store', memory_store_id: prefs.id, instructions: 'Check before answering.' },
        { type: 'memory_store', memory_store_id: notes.id, access: 'read_only' },
      ],
    })
    expect(session.resources).toEqual([
      expect.objectContaining({ type: 'memory_store', memory_store_id: prefs.id, access: 'read_write', name: 'User Preferences', description: 'likes and dislikes', instructions: 'Check before answering.', mount_path: '/mnt/memory/user-preferences' }),
      expect.objectContaining({ type: 'memory_store', memory_store_id: notes.id, access: 'read_only', name: 'notes', description: '', instructions: null, mount_path: '/mnt/memory/notes' }),
    ])
    // Renaming the store later does not change what the session attached.
    await client.beta.memoryStores.update(prefs.id, { name: 'Renamed' })
    expect((await client.beta.sessions.retrieve(session.id)).resources[0]).toMatchObject({ name: 'User Preferences' })
    expect((await all(client.beta.sessions.list({ memory_store_id: notes.id }))).map((s) => s.id)).toEqual([session.id])
  })

  it('refuses more than 8 stores, an unknown store (404) and an archived one (409), creating no session', async () => {
    const agent = await client.beta.agents.create({ name: 'limits', model: 'claude-sonnet-4-6' })
    const env = await client.beta.environments.create({ name: 'mem-limits' })
    const stores = []
    for (let i = 0; i < 9; i++) stores.push(await client.beta.memoryStores.create({ name: `s${i}` }))
    const before = (await all(client.beta.sessions.list({ agent_id: agent.id }))).length
    const tooMany = await rejection(
      client.beta.sessions.create({ agent: agent.id, environment_id: env.id, resources: stores.map((s) => ({ type: 'memory_store' as const, memory_store_id: s.id })) }),
    )
    expect(tooMany).toBeInstanceOf(Anthropic.BadRequestError)
    expect(messageOf(tooMany)).toMatch(/resources: at most 8 memory_store resources/)
    const unknown = await rejection(client.beta.sessions.create({ agent: agent.id, environment_id: env.id, resources: [{ type: 'memory_store', memory_store_id: 'memstore_nope' }] }))
    expect(unknown).toBeInstanceOf(Anthropic.NotFoundError)
    expect(messageOf(unknown)).toMatch(/resources\[0\]\.memory_store_id/)
    await client.beta.memoryStores.archive(stores[0].id)
    const archived = await rejection(client.beta.sessions.create({ agent: agent.id, environment_id: env.id, resources: [{ type: 'memory_store', memory_store_id: stores[0].id }] }))
    expect(archived).toBeInstanceOf(Anthropic.ConflictError)
    const bad = await rejection(client.beta.sessions.create({ agent: agent.id, environment_id: env.id, resources: [{ type: 'memory_store', memory_store_id: stores[1].id, instructions: 'x'.repeat(4097) }] }))
    expect(messageOf(bad)).toMatch(/resources\[0\]\.instructions/)
    expect((await all(client.beta.sessions.list({ agent_id: agent.id }))).length).toBe(before)
  })
})
