import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStoresAt, type Stores } from '../../../src/main/session/stores'
import type { FileStore } from '../../../src/main/session/file-store'

// The file store on a real SQLite file and a real blob directory, with the stores' clock moved
// by hand: what expiry does to reads, lists and the bytes on disk.
let dir: string
let stores: Stores
let files: FileStore
let now = Date.parse('2026-06-01T10:00:00Z')

const blobCount = () =>
  existsSync(join(dir, 'files'))
    ? readdirSync(join(dir, 'files'), { withFileTypes: true })
        .filter((d) => d.isDirectory() && d.name !== 'tmp')
        .reduce((n, d) => n + readdirSync(join(dir, 'files', d.name)).length, 0)
    : 0

const put = async (text: string, expiresInSeconds?: number) => files.createStaged(await files.stage([Buffer.from(text)], { limit: 1 << 20, limitName: 'the test cap' }), { filename: 'x.txt', expiresInSeconds })

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'corral-files-'))
  stores = openStoresAt(join(dir, 'corral.db'), { clock: () => new Date(now) })
  files = stores.files!
})
afterEach(() => {
  stores.close()
  rmSync(dir, { recursive: true, force: true })
})

describe('file expiry', () => {
  it('hides an expired file from retrieve (404), content and list, and collects its bytes', async () => {
    const soon = await put('expires', 3600)
    const kept = await put('stays')
    expect(blobCount()).toBe(2)
    now += 3600_000 - 1
    expect(files.retrieve(soon.id).id).toBe(soon.id)
    now += 1
    expect(() => files.retrieve(soon.id)).toThrow(/file "file_.*" was not found/)
    expect(() => files.content(soon.id)).toThrow(/was not found/)
    expect(files.has(soon.id)).toBe(false)
    expect(files.list().data.map((f) => f.id)).toEqual([kept.id])
    expect(files.list({ ids: [soon.id, kept.id] }).data.map((f) => f.id)).toEqual([kept.id])
    // the list collected it: the row and its bytes are gone
    expect(stores.db.prepare('SELECT COUNT(*) FROM files WHERE id = ?').pluck().get(soon.id)).toBe(0)
    expect(blobCount()).toBe(1)
  })

  it('keeps bytes an expired file shares with a live one', async () => {
    await put('same bytes', 3600)
    const live = await put('same bytes')
    now += 7200_000
    expect(files.collectExpired()).toBe(1)
    expect(blobCount()).toBe(1)
    const { stream } = files.content(live.id)
    const chunks: Buffer[] = []
    for await (const c of stream) chunks.push(c as Buffer)
    expect(Buffer.concat(chunks).toString()).toBe('same bytes')
  })

  it('collects a file that expired while Corral was closed at the next collection after reopening', async () => {
    await put('old', 3600)
    stores.close()
    now += 10_000_000
    stores = openStoresAt(join(dir, 'corral.db'), { clock: () => new Date(now) })
    files = stores.files!
    expect(files.collectExpired()).toBe(1)
    expect(blobCount()).toBe(0)
  })
})
