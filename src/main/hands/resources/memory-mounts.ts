import { createHash } from 'node:crypto'
import { chmod, lstat, mkdir, readdir, readFile, rename, rm, unlink, writeFile } from 'node:fs/promises'
import type { BigIntStats } from 'node:fs'
import { dirname, join } from 'node:path'
import { MAX_MEMORY_BYTES, memoryPathProblem } from '../../../shared/api/memory-schemas'
import { isCorralError } from '../../../shared/errors'
import type { MemoryStore } from '../../session/memory-store'
import type { FolderMount } from '../sandbox'

/** One store mounted in one session: its host folder and the hashes both sides last agreed on. */
interface Mount {
  storeId: string
  dir: string
  /** Where the sandbox sees it (the resource's mount_path). */
  target: string
  readOnly: boolean
  /** memory path → content_sha256 last agreed between the folder and the store */
  baseline: Map<string, string>
  /** memory path → the file's identity (inode, size, times) when last hashed, and that hash */
  hashed: Map<string, { stamp: string; sha: string }>
  /** memory path → when a sync first found the file of a known memory missing (its delete waits) */
  missingSince: Map<string, number>
  /** The state file's content as last written (a sync that agreed on nothing new writes none). */
  saved?: string
}

/** A file of the folder as a sync sees it: its hash, and its text when it must be pushed. */
interface LocalFile {
  sha: string
  text(): Promise<string>
}

/** What a sync did (for logs, tests and the bench). */
export interface MemorySyncReport {
  pushed: number
  pulled: number
  deleted: number
  /** Files that cannot be memories (too large, not UTF-8, a path the API refuses): left alone. */
  refused: string[]
}

export interface MemoryMountsOptions {
  /** The memory stores (lazily: the engine builds its services after its hands). */
  store: () => MemoryStore
  /** Where the per-session folders live on the host (`<dataDir>/memory-mounts`). */
  root: string
  log?: (message: string) => void
  /** The follow-up sync after a call (catches what processes the call left running write later); default 4 s. */
  followUpMs?: number
  /**
   * How long a file of a known memory must stay missing before its memory is deleted (spec
   * resources.md §6.6: 30 s and a re-check; the last sync, at release, waives the wait).
   */
  deleteAfterMs?: number
  /** The clock of that wait (tests move it). */
  now?: () => number
}

const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex')
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/**
 * The memory stores of a session's sandbox (spec resources.md §6.5–§6.6), kept host-side: each
 * attached store is written to `<root>/<session>/<slug>` and bound at its `mount_path`
 * (read-only for `read_only`); `sync` compares the folder, the store and the baseline per path
 * and moves whichever side changed (both changed: the store wins), pushing the folder's changes
 * as versions by the session (`session_actor`). Read-only stores never push. A folder emptied all
 * at once is re-filled, never mass-deleted; at most clamp(baseline/4, 8, 50) deletions per sync,
 * each only after its file stayed missing 30 s and a later sync found it still gone (release's
 * last sync waives the wait).
 * Syncs of one session run one at a time. `release` syncs a last time and removes the folders.
 */
export class MemoryMounts {
  private readonly sessions = new Map<string, Mount[]>()
  private readonly queue = new Map<string, Promise<unknown>>()
  private readonly followUps = new Map<string, ReturnType<typeof setTimeout>>()

  constructor(private readonly o: MemoryMountsOptions) {}

  /**
   * Writes the session's stores to host folders; returns them as sandbox binds. A folder an
   * earlier process of this data directory left for the session (it was killed, or stopped with
   * the session's container still running) is taken over with the baseline it recorded, and
   * synced at once: what the sandbox wrote or deleted there that never reached the store does now.
   * Other folders start fresh from the store.
   */
  async prepare(sessionId: string, resources: readonly Record<string, unknown>[] | undefined): Promise<FolderMount[]> {
    const attached = (resources ?? []).map((r, index) => ({ r, index })).filter(({ r }) => r.type === 'memory_store' && typeof r.mount_path === 'string')
    if (attached.length === 0) return []
    const mounts: Mount[] = []
    const binds: FolderMount[] = []
    let adopted = false
    for (const { r, index } of attached) {
      const target = String(r.mount_path)
      const storeId = String(r.memory_store_id)
      const dir = join(this.o.root, sessionId, target.split('/').pop() || storeId)
      const readOnly = r.access === 'read_only'
      const left = await readMountState(dir)
      if (left && left.storeId === storeId && left.target === target && left.readOnly === readOnly && (await isDir(dir))) {
        const mount = mountFromState(dir, left)
        mounts.push(mount)
        binds.push({ index, source: dir, target, readOnly })
        adopted = true
        continue
      }
      // Emptied, not replaced: a container this process re-attaches to still binds this directory.
      await makeDir(dir)
      for (const entry of await readdir(dir)) await rm(join(dir, entry), { recursive: true, force: true })
      const mount: Mount = { storeId, dir, target, readOnly, baseline: new Map(), hashed: new Map(), missingSince: new Map() }
      let memories
      try {
        memories = this.o.store().snapshot(mount.storeId)
      } catch (err) {
        // A store deleted since the session attached it: the sandbox starts without it.
        if (!(isCorralError(err) && err.code === 'not_found_error')) throw err
        this.o.log?.(`[memory] ${sessionId}: memory store ${mount.storeId} no longer exists; not mounted`)
        continue
      }
      for (const m of memories) {
        await writeMemoryFile(dir, m.path, m.content)
        mount.baseline.set(m.path, m.content_sha256)
        const st = await lstat(join(dir, m.path.slice(1)), { bigint: true })
        mount.hashed.set(m.path, { stamp: stampOf(st), sha: m.content_sha256 })
      }
      await writeMountState(mount)
      mounts.push(mount)
      binds.push({ index, source: dir, target, readOnly })
    }
    this.sessions.set(sessionId, mounts)
    if (adopted) await this.sync(sessionId)
    return binds
  }

  /** Syncs every store of the session (after a tool call; at release, `final`). Resolves when it is done. */
  sync(sessionId: string, options: { final?: boolean } = {}): Promise<MemorySyncReport> {
    const run = (this.queue.get(sessionId) ?? Promise.resolve()).then(() => this.syncNow(sessionId, options.final === true))
    this.queue.set(sessionId, run.catch(() => undefined))
    return run
  }

  /**
   * Syncs the session once more `followUpMs` after its latest call (a later call restarts the
   * wait): a background process the call started still gets its writes in within 5 s, and the
   * end of a turn (no more calls) is synced too.
   */
  syncSoon(sessionId: string): void {
    if (!this.sessions.has(sessionId)) return
    clearTimeout(this.followUps.get(sessionId))
    const timer = setTimeout(() => {
      this.followUps.delete(sessionId)
      this.sync(sessionId).catch((err: Error) => this.o.log?.(`[memory] follow-up sync of ${sessionId} failed: ${err.message}`))
    }, this.o.followUpMs ?? 4000)
    timer.unref?.()
    this.followUps.set(sessionId, timer)
  }

  /** Stops the follow-up timers (the folders stay: release removes them). */
  dispose(): void {
    for (const t of this.followUps.values()) clearTimeout(t)
    this.followUps.clear()
  }

  /**
   * A last sync, then the session's folders are removed. Folders an earlier process left for the
   * session (killed before its release) are synced a last time too, from the baseline they recorded.
   */
  async release(sessionId: string): Promise<void> {
    clearTimeout(this.followUps.get(sessionId))
    this.followUps.delete(sessionId)
    if (!this.sessions.has(sessionId)) {
      const left = await this.leftBehind(sessionId)
      if (left.length === 0) return
      this.sessions.set(sessionId, left)
    }
    await this.sync(sessionId, { final: true }).catch((err: Error) => this.o.log?.(`[memory] last sync of ${sessionId} failed: ${err.message}`))
    this.sessions.delete(sessionId)
    this.queue.delete(sessionId)
    await rm(join(this.o.root, sessionId), { recursive: true, force: true })
  }

  /** The mounts an earlier process recorded for the session (each folder with its state file). */
  private async leftBehind(sessionId: string): Promise<Mount[]> {
    const root = join(this.o.root, sessionId)
    const out: Mount[] = []
    for (const name of await readdir(root).catch(() => [] as string[])) {
      if (!name.endsWith(STATE_SUFFIX)) continue
      const dir = join(root, name.slice(0, -STATE_SUFFIX.length))
      const state = await readMountState(dir)
      if (state && (await isDir(dir))) out.push(mountFromState(dir, state))
    }
    return out
  }

  /** Whether the session has stores mounted by this process. */
  has(sessionId: string): boolean {
    return this.sessions.has(sessionId)
  }

  private async syncNow(sessionId: string, final: boolean): Promise<MemorySyncReport> {
    const report: MemorySyncReport = { pushed: 0, pulled: 0, deleted: 0, refused: [] }
    for (const mount of this.sessions.get(sessionId) ?? []) {
      await this.syncMount({ sessionId, mount, report, final })
      // the baseline this sync agreed on outlives the process (a restart takes the folder over)
      await writeMountState(mount)
    }
    return report
  }

  private async syncMount(p: { sessionId: string; mount: Mount; report: MemorySyncReport; final: boolean }): Promise<void> {
    const { mount, report } = p
    const store = this.o.store()
    const actor = { actor: { type: 'session_actor' as const, session_id: p.sessionId } }
    let remote: Map<string, { id: string; sha: string }>
    try {
      remote = new Map(store.index(mount.storeId).map((m) => [m.path, { id: m.id, sha: m.content_sha256 }]))
    } catch (err) {
      if (isCorralError(err) && err.code === 'not_found_error') return // the store was deleted: nothing to sync with
      throw err
    }
    const local = await scanFolder(mount, report)
    const contentOf = (id: string) => store.retrieveMemory(mount.storeId, id).content ?? ''
    // Everything gone at once is a lost folder, not a mass delete: fill it again.
    const vanished = local.files.size === 0 && local.refused.size === 0 && mount.baseline.size > 0
    let deletions = Math.min(50, Math.max(8, Math.floor(mount.baseline.size / 4)))
    const paths = new Set([...local.files.keys(), ...remote.keys(), ...mount.baseline.keys()])
    const now = (this.o.now ?? Date.now)()
    for (const path of [...paths].sort()) {
      if (local.refused.has(path)) continue
      const l = local.files.get(path)
      if (l) mount.missingSince.delete(path)
      const r = remote.get(path)
      const base = mount.baseline.get(path)
      const ls = vanished ? base : l?.sha
      if (ls === r?.sha) {
        if (r) mount.baseline.set(path, r.sha)
        else mount.baseline.delete(path)
        if (vanished && r && !l) await writeMemoryFile(mount.dir, path, contentOf(r.id)), report.pulled++
        continue
      }
      const localChanged = ls !== base
      const remoteChanged = r?.sha !== base
      if (localChanged && !remoteChanged) {
        if (mount.readOnly) continue // a read-only store never takes the folder's changes
        try {
          if (!l) {
            if (deletions === 0 || !r) continue
            // a missing file deletes its memory only once it stayed missing the wait and this
            // sync looked again (an editor's save-by-rename, a file moved away and back, is no delete)
            const since = mount.missingSince.get(path)
            if (!p.final && (since === undefined || now - since < (this.o.deleteAfterMs ?? 30_000))) {
              if (since === undefined) mount.missingSince.set(path, now)
              continue
            }
            mount.missingSince.delete(path)
            deletions--
            store.deleteMemory(mount.storeId, r.id, { expectedSha256: r.sha, ...actor })
            mount.baseline.delete(path)
            report.deleted++
          } else if (!r) {
            store.createMemory(mount.storeId, { path, content: await l.text() }, actor)
            mount.baseline.set(path, l.sha)
            report.pushed++
          } else {
            store.updateMemory(mount.storeId, r.id, { content: await l.text(), precondition: { type: 'content_sha256', content_sha256: r.sha } }, actor)
            mount.baseline.set(path, l.sha)
            report.pushed++
          }
        } catch (err) {
          // A race with another writer (409), an archived store, a path the store refuses: the
          // store's side stands; the next sync looks again.
          this.o.log?.(`[memory] ${p.sessionId}: ${path} not synced to ${mount.storeId}: ${(err as Error).message}`)
        }
        continue
      }
      // The store changed (alone, or both did: the store wins).
      if (r) await writeMemoryFile(mount.dir, path, contentOf(r.id))
      else await unlink(join(mount.dir, path.slice(1))).catch(() => undefined)
      if (r) mount.baseline.set(path, r.sha)
      else mount.baseline.delete(path)
      report.pulled++
    }
  }
}

/**
 * Beside each mounted folder (outside what the sandbox binds): `<folder>.mount.json`, the store it
 * mounts, how, and the baseline (memory path → content_sha256) its last sync agreed on.
 */
const STATE_SUFFIX = '.mount.json'
interface MountState {
  storeId: string
  target: string
  readOnly: boolean
  baseline: Record<string, string>
}

async function readMountState(dir: string): Promise<MountState | undefined> {
  try {
    const state = JSON.parse(await readFile(dir + STATE_SUFFIX, 'utf8')) as MountState
    return typeof state.storeId === 'string' && typeof state.baseline === 'object' && state.baseline ? state : undefined
  } catch {
    return undefined
  }
}

/** A mount taken over from the state an earlier process left beside its folder. */
function mountFromState(dir: string, state: MountState): Mount {
  const text = JSON.stringify(state)
  return { storeId: state.storeId, dir, target: state.target, readOnly: state.readOnly, baseline: new Map(Object.entries(state.baseline)), hashed: new Map(), missingSince: new Map(), saved: text }
}

/** Written whole to a temporary file and renamed over the old one (a kill leaves one or the other); only when it changed. */
async function writeMountState(mount: Mount): Promise<void> {
  const state: MountState = { storeId: mount.storeId, target: mount.target, readOnly: mount.readOnly, baseline: Object.fromEntries(mount.baseline) }
  const text = JSON.stringify(state)
  if (text === mount.saved) return
  const file = mount.dir + STATE_SUFFIX
  await writeFile(`${file}.tmp`, text, { mode: 0o600 })
  await rename(`${file}.tmp`, file)
  mount.saved = text
}

async function isDir(path: string): Promise<boolean> {
  return (await lstat(path).catch(() => undefined))?.isDirectory() === true
}

/** What says a file is the one last hashed: inode, size, modification and change times (ns). */
function stampOf(st: BigIntStats): string {
  return `${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`
}

async function makeDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true })
  // The sandbox's user (uid 1000 in the image, the mapped user in bubblewrap) writes here.
  await chmod(dir, 0o777)
}

async function writeMemoryFile(root: string, path: string, content: string): Promise<void> {
  const file = join(root, path.slice(1))
  const parent = dirname(file)
  const segments = path.slice(1).split('/').slice(0, -1)
  let at = root
  for (const s of segments) {
    at = join(at, s)
    const st = await lstat(at).catch(() => undefined)
    if (st && !st.isDirectory()) await rm(at, { recursive: true, force: true })
    if (!st || !st.isDirectory()) await makeDir(at)
  }
  await mkdir(parent, { recursive: true })
  const st = await lstat(file).catch(() => undefined)
  if (st && !st.isFile()) await rm(file, { recursive: true, force: true }) // never write through a link
  await writeFile(file, content, { mode: 0o666 })
  await chmod(file, 0o666)
}

/**
 * Every regular file of the mount's folder as memory path → hash (links are never followed). A
 * file whose inode, size and times are those it had when last hashed is not read again.
 */
async function scanFolder(mount: Mount, report: MemorySyncReport): Promise<{ files: Map<string, LocalFile>; refused: Set<string> }> {
  const files = new Map<string, LocalFile>()
  const refused = new Set<string>()
  const seen = new Set<string>()
  const decode = (bytes: Buffer): string | undefined => {
    if (bytes.length > MAX_MEMORY_BYTES) return undefined
    try {
      return utf8.decode(bytes)
    } catch {
      return undefined
    }
  }
  const walk = async (abs: string, rel: string): Promise<void> => {
    const entries = await readdir(abs, { withFileTypes: true }).catch(() => [])
    for (const e of entries) {
      const path = `${rel}/${e.name}`
      const file = join(abs, e.name)
      if (e.isDirectory()) await walk(file, path)
      if (!e.isFile()) continue
      if (memoryPathProblem(path)) {
        refused.add(path)
        report.refused.push(path)
        continue
      }
      const st = await lstat(file, { bigint: true }).catch(() => undefined)
      if (!st?.isFile()) continue
      seen.add(path)
      const stamp = stampOf(st)
      const known = mount.hashed.get(path)
      if (known?.stamp === stamp) {
        files.set(path, { sha: known.sha, text: async () => decode(await readFile(file)) ?? '' })
        continue
      }
      const bytes = await readFile(file)
      const content = decode(bytes)
      if (content === undefined) {
        refused.add(path)
        report.refused.push(path)
        mount.hashed.delete(path)
        continue
      }
      const digest = sha(bytes)
      mount.hashed.set(path, { stamp, sha: digest })
      files.set(path, { sha: digest, text: async () => content })
    }
  }
  await walk(mount.dir, '')
  for (const path of mount.hashed.keys()) if (!seen.has(path)) mount.hashed.delete(path)
  return { files, refused }
}
