import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic, { toFile } from '@anthropic-ai/sdk'
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { startApiServer, type TestApiServer } from '../support/api-server'

let t: TestApiServer
let client: Anthropic

beforeAll(async () => {
  t = await startApiServer({ harness: { enabled: false } })
  client = t.client
})
afterAll(() => t.close())

async function all<T>(pages: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const x of pages) out.push(x)
  return out
}

const upload = async (text: string, name: string, type?: string, extra: { expires_in_seconds?: number } = {}) =>
  client.beta.files.upload({ file: await toFile(Buffer.from(text), name, type ? { type } : undefined), ...extra })

/** Every blob file under <dataDir>/files (the content-addressed store), without the staging folder. */
function blobs(): string[] {
  const root = join(t.dataDir, 'files')
  const out: string[] = []
  if (!existsSync(root)) return out
  for (const d of readdirSync(root, { withFileTypes: true })) {
    if (!d.isDirectory() || d.name === 'tmp') continue
    for (const f of readdirSync(join(root, d.name))) out.push(d.name + f)
  }
  return out.sort()
}

const errorOf = async (p: Promise<unknown>) => {
  const err = (await p.catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>
  expect(err).toBeInstanceOf(Anthropic.APIError)
  return { status: err.status, ...(err.error as { error: { type: string; message: string } }).error }
}

describe('files through the official SDK', () => {
  it('uploads a file with its name and type, retrieves it and downloads the same bytes', async () => {
    const f = await upload('a,b\n1,2\n', 'data.csv', 'text/csv')
    expect(f).toMatchObject({ type: 'file', filename: 'data.csv', mime_type: 'text/csv', size_bytes: 8, downloadable: true, expires_at: null, scope: null })
    expect(f.id).toMatch(/^file_/)
    expect(Date.parse(f.created_at)).not.toBeNaN()
    expect(await client.beta.files.retrieveMetadata(f.id)).toEqual(f)
    const res = await client.beta.files.download(f.id)
    expect(res.headers.get('content-type')).toBe('text/csv')
    expect(await res.text()).toBe('a,b\n1,2\n')
  })

  it('reduces a filename to its last path component, names an empty one unnamed, and guesses a generic type from the extension', async () => {
    expect((await upload('x', '../../etc/notes.md')).filename).toBe('notes.md')
    expect((await upload('x', 'dir\\sub\\report.json', 'application/octet-stream')).mime_type).toBe('application/json')
    const unnamed = await upload('{}', '', 'application/json')
    expect(unnamed.filename).toBe('unnamed.json')
  })

  it('sets expires_at from expires_in_seconds and refuses a value outside 3600–7,776,000 naming the field', async () => {
    const before = Date.now()
    const f = await upload('soon', 'soon.txt', 'text/plain', { expires_in_seconds: 3600 })
    const at = Date.parse(f.expires_at!)
    expect(at - before).toBeGreaterThanOrEqual(3600_000 - 1000)
    expect(at - before).toBeLessThanOrEqual(3600_000 + 60_000)
    for (const v of [60, 7_776_001]) {
      const e = await errorOf(upload('x', 'x.txt', 'text/plain', { expires_in_seconds: v }))
      expect(e).toMatchObject({ status: 400, type: 'invalid_request_error', message: expect.stringMatching(/expires_in_seconds/) })
    }
  })

  it('stores the same content once however many files hold it, and collects it when the last one goes', async () => {
    const text = `shared content ${Math.random()}`
    const start = blobs()
    const a = await upload(text, 'a.txt', 'text/plain')
    const b = await upload(text, 'b.txt', 'text/plain')
    const added = blobs().filter((x) => !start.includes(x))
    expect(added).toHaveLength(1)
    expect(await client.beta.files.delete(a.id)).toEqual({ id: a.id, type: 'file_deleted' })
    expect(blobs()).toContain(added[0])
    await client.beta.files.delete(b.id)
    expect(blobs()).not.toContain(added[0])
    expect((await errorOf(client.beta.files.retrieveMetadata(b.id))).status).toBe(404)
  })

  it('lists newest first page by page, by ids[] (deduplicated, unknown ids dropped) and by scope_id', async () => {
    const made: Anthropic.Beta.Files.BetaFileMetadata[] = []
    for (let i = 0; i < 5; i++) made.push(await upload(`page ${i}`, `page-${i}.txt`, 'text/plain'))
    const first = await client.beta.files.list({ limit: 2 })
    expect(first.data).toHaveLength(2)
    expect(first.hasNextPage()).toBe(true)
    const ids = (await all(client.beta.files.list({ limit: 2 }))).map((f) => f.id)
    const mine = ids.filter((id) => made.some((m) => m.id === id))
    expect(mine).toEqual(made.map((m) => m.id).reverse())
    const byIds = await client.beta.files.list({ ids: [made[1].id, made[3].id, made[1].id, 'file_unknown'] })
    expect(byIds.data.map((f) => f.id)).toEqual([made[3].id, made[1].id])
    expect(byIds.hasNextPage()).toBe(false)
    expect((await client.beta.files.list({ scope_id: 'sesn_none' })).data).toEqual([])
  })

  it('refuses more than 100 distinct ids, and ids with a page or limit, naming ids', async () => {
    const many = Array.from({ length: 101 }, (_, i) => `file_${i}`)
    expect(await errorOf(client.beta.files.list({ ids: many }))).toMatchObject({ status: 400, message: expect.stringMatching(/ids: at most 100/) })
    expect(await errorOf(client.beta.files.list({ ids: ['file_a'], limit: 5 }))).toMatchObject({ status: 400, message: expect.stringMatching(/^ids:/) })
  })

  it('answers 404 not_found_error for an unknown file on retrieve, download and delete', async () => {
    for (const p of [client.beta.files.retrieveMetadata('file_nope'), client.beta.files.download('file_nope'), client.beta.files.delete('file_nope')]) {
      expect(await errorOf(p)).toMatchObject({ status: 404, type: 'not_found_error', message: expect.stringMatching(/file "file_nope" was not found/) })
    }
  })

  it('takes no anthropic-beta header and accepts one the caller adds', async () => {
    const f = await client.beta.files.upload({ file: await toFile(Buffer.from('b'), 'b.txt'), betas: ['files-api-2025-04-14'] })
    const res = await t.fetch(`/v1/files/${f.id}`)
    expect(res.status).toBe(200)
  })

  it('refuses an upload without a file part, or that is not multipart, with a 400', async () => {
    const form = new FormData()
    form.append('expires_in_seconds', '3600')
    const res = await fetch(`${t.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${t.token}` }, body: form })
    expect(res.status).toBe(400)
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/body\.file: required/)
    const json = await t.fetch('/v1/files', { method: 'POST', body: '{}' })
    expect(json.status).toBe(400)
  })
})

describe('the file size cap the user sets', () => {
  it('refuses a file over the cap with a 413 that names the cap and the setting, keeps nothing, and takes one at the cap', async () => {
    const view = await (await t.fetch('/v1/corral/settings', { method: 'POST', body: JSON.stringify({ max_file_bytes: 2048 }) })).json()
    expect(view).toMatchObject({ max_file_bytes: 2048 })
    const before = blobs()
    const listed = (await all(client.beta.files.list({ limit: 100 }))).length
    const e = await errorOf(client.beta.files.upload({ file: await toFile(Buffer.alloc(2049, 1), 'big.bin') }))
    expect(e).toMatchObject({ status: 413, type: 'request_too_large', message: expect.stringMatching(/2048 bytes \(settings: max_file_bytes\)/) })
    expect(blobs()).toEqual(before)
    expect(readdirSync(join(t.dataDir, 'files', 'tmp'))).toEqual([])
    expect((await all(client.beta.files.list({ limit: 100 }))).length).toBe(listed)
    const ok = await client.beta.files.upload({ file: await toFile(Buffer.alloc(2048, 2), 'fits.bin') })
    expect(ok.size_bytes).toBe(2048)
    await t.fetch('/v1/corral/settings', { method: 'POST', body: JSON.stringify({ max_file_bytes: null }) })
    expect(await (await t.fetch('/v1/corral/settings')).json()).toMatchObject({ max_file_bytes: 500 * 1024 * 1024 })
  })
})
