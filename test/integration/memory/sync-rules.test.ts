import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, unlinkSync, writeFileSync, mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { MemoryMounts } from '../../../src/main/hands'
import { LOCAL_API_ACTOR } from '../../../src/main/session/memory-store'
import { openStoresAt, type Stores } from '../../../src/main/session/stores'

/*
 * The mount's sync against a real corral.db and a real host folder (what a sandbox binds): which
 * side wins, what a read-only store does, and what is never pushed or deleted.
 */

let dir: string
let stores: Stores
let mounts: MemoryMounts
let clock = 1_000_000
const api = { actor: LOCAL_API_ACTOR }
const SESSION = 'sesn_sync_rules'

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'corral-memory-sync-'))
  stores = openStoresAt(join(dir, 'corral.db'))
  clock = 1_000_000
  mounts = new MemoryMounts({ store: () => stores.memory, root: join(dir, 'mounts'), followUpMs: 50, now: () => clock })
})
afterEach(() => {
  mounts.dispose()
  stores.close()
  rmSync(dir, { recursive: true, force: true })
})

async function mount(access: 'read_write' | 'read_only' = 'read_write') {
  const store = stores.memory.createStore({ name: 'Team Notes' })
  stores.memory.createMemory(store.id, { path: '/a.md', content: 'a1' }, api)
  stores.memory.createMemory(store.id, { path: '/dir/b.md', content: 'b1' }, api)
  const [bind] = await mounts.prepare(SESSION, [{ type: 'memory_store', memory_store_id: store.id, access, mount_path: '/mnt/memory/team-notes' }])
  const content = (path: string) => stores.memory.snapshot(store.id).find((m) => m.path === path)?.content
  return { store, folder: bind.source, bind, content }
}

describe('the memory mount sync', () => {
  it('writes the store into the folder it binds at the mount path, read-only for read_only', async () => {
    const rw = await mount()
    expect(rw.bind).toMatchObject({ target: '/mnt/memory/team-notes', readOnly: false })
    expect(readFileSync(join(rw.folder, 'a.md'), 'utf8')).toBe('a1')
    expect(readFileSync(join(rw.folder, 'dir', 'b.md'), 'utf8')).toBe('b1')
    await mounts.release(SESSION)
    expect(existsSync(rw.folder)).toBe(false)
    expect((await mount('read_only')).bind.readOnly).toBe(true)
  })

  it('pushes a new, a changed and a deleted file as versions by the session', async () => {
    const { store, folder, content } = await mount()
    writeFileSync(join(folder, 'a.md'), 'a2')
    writeFileSync(join(folder, 'new.md'), 'n1')
    unlinkSync(join(folder, 'dir', 'b.md'))
    // the delete waits until the file stayed missing 30 s and a later sync looked again (spec §6.6)
    expect(await mounts.sync(SESSION)).toMatchObject({ pushed: 2, deleted: 0 })
    expect(content('/dir/b.md')).toBe('b1')
    clock += 29_000
    expect(await mounts.sync(SESSION)).toMatchObject({ deleted: 0 })
    clock += 2_000
    expect(await mounts.sync(SESSION)).toMatchObject({ pushed: 0, deleted: 1 })
    expect([content('/a.md'), content('/new.md'), content('/dir/b.md')]).toEqual(['a2', 'n1', undefined])
    const bySession = stores.memory.listVersions(store.id, { session_id: SESSION }).data
    expect(bySession.map((v) => v.operation).sort()).toEqual(['created', 'deleted', 'modified'])
    // Nothing changed since: no more versions.
    expect(await mounts.sync(SESSION)).toMatchObject({ pushed: 0, pulled: 0, deleted: 0 })
  })

  it('brings the store changes into the folder, and lets the store win when both sides changed', async () => {
    const { store, folder } = await mount()
    const [a, b] = stores.memory.snapshot(store.id)
    stores.memory.updateMemory(store.id, a.id, { content: 'a-remote' }, api)
    stores.memory.updateMemory(store.id, b.id, { content: 'b-remote' }, api)
    writeFileSync(join(folder, 'dir', 'b.md'), 'b-local')
    stores.memory.createMemory(store.id, { path: '/from/elsewhere.md', content: 'e' }, api)
    await mounts.sync(SESSION)
    expect(readFileSync(join(folder, 'a.md'), 'utf8')).toBe('a-remote')
    expect(readFileSync(join(folder, 'dir', 'b.md'), 'utf8')).toBe('b-remote')
    expect(readFileSync(join(folder, 'from', 'elsewhere.md'), 'utf8')).toBe('e')
    expect(stores.memory.listVersions(store.id, { session_id: SESSION }).data).toEqual([])
  })

  it('re-fills a folder emptied all at once instead of deleting every memory', async () => {
    const { folder, content } = await mount()
    rmSync(join(folder, 'a.md'))
    rmSync(join(folder, 'dir'), { recursive: true })
    await mounts.sync(SESSION)
    expect([content('/a.md'), content('/dir/b.md')]).toEqual(['a1', 'b1'])
    expect(readFileSync(join(folder, 'dir', 'b.md'), 'utf8')).toBe('b1')
  })

  it('never pushes from a read_only store, nor files that cannot be memories, nor links', async () => {
    const ro = await mount('read_only')
    writeFileSync(join(ro.folder, 'a.md'), 'changed anyway')
    expect(await mounts.sync(SESSION)).toMatchObject({ pushed: 0 })
    expect(ro.content('/a.md')).toBe('a1')
    await mounts.release(SESSION)

    const rw = await mount()
    writeFileSync(join(rw.folder, 'big.md'), 'x'.repeat(102_401))
    writeFileSync(join(rw.folder, 'binary.bin'), Buffer.from([0xff, 0xfe, 0x00, 0x80]))
    mkdirSync(join(rw.folder, '.anthropic-memory-store'), { recursive: true })
    writeFileSync(join(rw.folder, '.anthropic-memory-store', 'marker'), 'x')
    // A link is never followed: a sandbox cannot make the host read a file outside the folder.
    symlinkSync('/etc/hostname', join(rw.folder, 'link.md'))
    const report = await mounts.sync(SESSION)
    expect(report.refused.sort()).toEqual(['/.anthropic-memory-store/marker', '/big.md', '/binary.bin'])
    expect(report.pushed).toBe(0)
    expect(stores.memory.snapshot(rw.store.id).map((m) => m.path)).toEqual(['/a.md', '/dir/b.md'])
  })

  it('syncs again shortly after a call, so what a process left running writes later still reaches the store', async () => {
    const { folder, content } = await mount()
    await mounts.sync(SESSION)
    mounts.syncSoon(SESSION)
    writeFileSync(join(folder, 'later.md'), 'written after the call returned')
    for (let i = 0; i < 100 && content('/later.md') === undefined; i++) await new Promise((r) => setTimeout(r, 20))
    expect(content('/later.md')).toBe('written after the call returned')
  })

  it('mounts into the same directory again, so a re-attached container keeps its bind; a folder without its recorded state starts fresh', async () => {
    const { store, folder } = await mount()
    writeFileSync(join(folder, 'stale.md'), 'left by a crashed run')
    const inode = statSync(folder).ino
    rmSync(`${folder}.mount.json`)
    const [again] = await mounts.prepare(SESSION, [{ type: 'memory_store', memory_store_id: store.id, access: 'read_write', mount_path: '/mnt/memory/team-notes' }])
    expect(again.source).toBe(folder)
    expect(statSync(folder).ino).toBe(inode) // the same directory, not a new one at the same path
    expect(existsSync(join(folder, 'stale.md'))).toBe(false)
    expect(readFileSync(join(folder, 'a.md'), 'utf8')).toBe('a1')
  })

  it('takes over the folder a killed process left: what the sandbox wrote there and never synced reaches the store, the store\'s own changes win', async () => {
    const { store, folder, content } = await mount()
    // the sandbox writes, the process dies before the sync (no release, no dispose)
    writeFileSync(join(folder, 'unsynced.md'), 'written just before the kill')
    writeFileSync(join(folder, 'a.md'), 'a2 from the sandbox')
    const b = stores.memory.snapshot(store.id).find((m) => m.path === '/dir/b.md')!
    stores.memory.updateMemory(store.id, b.id, { content: 'b2 from the API' }, api) // while no process ran the session
    const inode = statSync(folder).ino
    const next = new MemoryMounts({ store: () => stores.memory, root: join(dir, 'mounts'), followUpMs: 50, now: () => clock })
    try {
      const [bind] = await next.prepare(SESSION, [{ type: 'memory_store', memory_store_id: store.id, access: 'read_write', mount_path: '/mnt/memory/team-notes' }])
      expect(bind.source).toBe(folder)
      expect(statSync(folder).ino).toBe(inode)
      expect(content('/unsynced.md')).toBe('written just before the kill')
      expect(content('/a.md')).toBe('a2 from the sandbox')
      expect(readFileSync(join(folder, 'dir', 'b.md'), 'utf8')).toBe('b2 from the API')
      const versions = stores.memory.listVersions(store.id, { limit: 10 } as never).data
      expect(versions.filter((v) => v.created_by?.type === 'session_actor').map((v) => v.path).sort()).toEqual(['/a.md', '/unsynced.md'])
    } finally {
      next.dispose()
    }
  })

  it('applies at release, in the next process, a deletion that was still waiting when the process was killed', async () => {
    const { store, folder, content } = await mount()
    unlinkSync(join(folder, 'dir', 'b.md'))
    expect(await mounts.sync(SESSION)).toMatchObject({ deleted: 0 }) // waits its 30 s
    expect(content('/dir/b.md')).toBe('b1')
    // killed: the next process never mounted the session; archiving it releases its hands
    const next = new MemoryMounts({ store: () => stores.memory, root: join(dir, 'mounts'), followUpMs: 50, now: () => clock })
    expect(next.has(SESSION)).toBe(false)
    await next.release(SESSION)
    expect(content('/dir/b.md')).toBeUndefined()
    expect(content('/a.md')).toBe('a1')
    expect(existsSync(folder)).toBe(false)
    expect(existsSync(join(dir, 'mounts', SESSION))).toBe(false)
    expect(stores.memory.snapshot(store.id).map((m) => m.path)).toEqual(['/a.md'])
  })

  it('starts the sandbox without a store deleted since the session attached it', async () => {
    const kept = stores.memory.createStore({ name: 'kept' })
    const gone = stores.memory.createStore({ name: 'gone' })
    stores.memory.deleteStore(gone.id)
    const binds = await mounts.prepare(SESSION, [
      { type: 'memory_store', memory_store_id: gone.id, access: 'read_write', mount_path: '/mnt/memory/gone' },
      { type: 'memory_store', memory_store_id: kept.id, access: 'read_write', mount_path: '/mnt/memory/kept' },
    ])
    expect(binds.map((b) => [b.index, b.target])).toEqual([[1, '/mnt/memory/kept']])
    expect(await mounts.sync(SESSION)).toMatchObject({ pushed: 0, pulled: 0 })
  })

  it('keeps the memory of a file that was missing for less than 30 s (a save by rename), and the last sync deletes without waiting', async () => {
    const { folder, content } = await mount()
    unlinkSync(join(folder, 'a.md'))
    expect(await mounts.sync(SESSION)).toMatchObject({ deleted: 0 })
    clock += 10_000
    writeFileSync(join(folder, 'a.md'), 'a1')
    expect(await mounts.sync(SESSION)).toMatchObject({ deleted: 0 })
    clock += 40_000
    expect(await mounts.sync(SESSION)).toMatchObject({ deleted: 0, pushed: 0 })
    expect(content('/a.md')).toBe('a1')
    // removed just before the session ends: the release's last sync deletes it at once
    unlinkSync(join(folder, 'dir', 'b.md'))
    await mounts.release(SESSION)
    expect(content('/dir/b.md')).toBeUndefined()
  })
})

