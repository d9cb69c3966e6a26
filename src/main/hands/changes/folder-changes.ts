import { execFile } from 'node:child_process'
import { constants, existsSync } from 'node:fs'
import { appendFile, chmod, chown, lstat, mkdir, open, readdir, readFile, readlink, rename, rm, rmdir, stat, symlink, writeFile } from 'node:fs/promises'
import { dirname, join, posix, sep } from 'node:path'
import { promisify } from 'node:util'
import { CorralError } from '../../../shared/errors'
import { BlobStore } from '../../session/blob-store'

const run = promisify(execFile)

/**
 * What the agent changed in one read-write host folder, and putting it back.
 *
 * The design (no overlay: bubblewrap 0.8 here has no `--overlay`, and an unprivileged Corral
 * cannot mount one): the folder is bound into the sandbox as is; Corral keeps, in the data
 * directory, a stat manifest of the folder (path → kind, size, mtime, ctime, inode, mode; no
 * content), taken before the session's first tool call, and after every tool call compares the
 * folder with it. Each difference is a change record with the content before and after, stored
 * content-addressed (sha256) — only what changed is ever stored. The content before is known when:
 * - the file did not exist (a creation: revert deletes it);
 * - a `write` / `edit` call names it: its bytes are read just before the call runs;
 * - Corral stored it already (an earlier change, or an earlier write/edit);
 * - the folder is a git work tree and the file was clean at the baseline: its blob is copied
 *   from the repository's objects into the store when the change is seen.
 * Otherwise (bash changed or deleted a file that is neither in git nor seen before) the change is
 * recorded with `before.hash: null`: shown, but not revertable, and the API and the UI say why and
 * what makes it revertable (`unknownBeforeReason`: a git repository with the files committed
 * before the session).
 *
 * Why bash's changes to a file of a non-git folder stay unrevertable (decided in issue #16, after
 * weighing each way to learn a file's bytes before a command overwrites it, under three rules: the
 * user's folder stays live on disk — they edit it in their IDE while the agent works —, nothing is
 * copied but what changes, and it works on Docker and bubblewrap without privileges):
 * - an overlay (lower = the folder, upper in the data directory) keeps the agent's writes out of
 *   the folder until applied, so the folder is not live for the user, and a lower layer edited
 *   while mounted is undefined behaviour in overlayfs; Docker's `local` volume with `type=overlay`
 *   would do it for Docker only (dockerd is root), bubblewrap 0.8 has no `--overlay`, and an
 *   unprivileged Corral cannot mount one (fuse-overlayfs needs /dev/fuse). A review-then-apply
 *   model is that overlay under another name: it gives up the live folder.
 * - fanotify permission events (FAN_OPEN_PERM) could copy a file as it is opened for writing, but
 *   they need CAP_SYS_ADMIN in the host's initial namespace (a desktop user has not got it), a
 *   native addon, and no event comes before an unlink or a rename over a file, so deletions stay
 *   unknown anyway.
 * - reflinks (FICLONE; `fs.copyFile` with COPYFILE_FICLONE_FORCE) would make a baseline copy of
 *   every file cost no bytes, but only on btrfs, XFS with reflink=1, bcachefs, ZFS ≥ 2.2 or APFS,
 *   and only when the data directory is on the same filesystem as the folder; on ext4 (most Linux
 *   desktops, and this build machine) it is a full copy. A possible addition where it works, not a
 *   rule for all folders.
 * - copying small text files at baseline is copying the folder.
 * The runner cannot snapshot what a command is about to overwrite (it does not know). git is the
 * store of record a developer already has: a clean file's blob is the before, at no cost.
 *
 * Files only: directories are implied (created as needed by a revert; emptied ones a revert made
 * are removed). `.git` is not tracked. A revert writes on the host with the recorded mode (and
 * owner, when Corral runs as root), refusing any path whose parent inside the folder is a symlink.
 */
export interface FileState {
  /** sha256 of the content in the store; null when Corral never saw the bytes. */
  hash: string | null
  mode: number
  size: number
  /** For a symlink: its target (then `hash` is of the target text). */
  link?: string
}

export interface ChangeRecord {
  seq: number
  /** The tool call that made it; null: seen outside a tool call (the user, a background process). */
  tool_use_id: string | null
  at: string
  /** Path inside the folder, `/`-separated. */
  path: string
  kind: 'created' | 'modified' | 'deleted'
  /** null: the file did not exist. */
  before: FileState | null
  /** null: the file no longer exists. */
  after: FileState | null
  /** Set on the records a revert wrote: the seqs of the records it undid. */
  reverts?: number[]
}

interface ManifestEntry {
  kind: 'file' | 'link'
  size: number
  mode: number
  uid: number
  gid: number
  mtime: string
  ctime: string
  ino: string
  hash?: string
  /** The blob id of the file in git's index, when it was clean at the baseline. */
  git?: string
}

type Manifest = Record<string, ManifestEntry>

export interface FolderChangesOptions {
  /** The host folder (a real path). */
  root: string
  /** Where this folder's records live: manifest.json, journal.jsonl, objects/. */
  dir: string
}

const MAX_TRACKED_FILE = 64 * 1024 * 1024

export class FolderChanges {
  readonly root: string
  private readonly dir: string
  /** The stored contents: the data directory's one blob layout, under `objects/`. */
  private readonly objects: BlobStore
  private manifest: Manifest | undefined
  private records: ChangeRecord[] | undefined
  /** One scan or revert at a time: records come out in order. */
  private queue: Promise<unknown> = Promise.resolve()

  constructor(options: FolderChangesOptions) {
    this.root = options.root
    this.dir = options.dir
    this.objects = new BlobStore(join(options.dir, 'objects'))
  }

  /** Whether the folder is a git work tree of its own (the only kind whose clean files' blobs serve as the content before). */
  isGitWorkTree(): boolean {
    return existsSync(join(this.root, '.git'))
  }

  /** Takes the baseline manifest once (before the first tool call); later calls load it. */
  baseline(): Promise<void> {
    return this.serial(async () => {
      await this.load()
    })
  }

  /** Before a write/edit of `relPath` runs: keeps the file's current bytes if they are the manifest's. */
  beforeWrite(relPath: string): Promise<void> {
    return this.serial(async () => {
      const m = await this.load()
      const entry = m[relPath]
      if (!entry || entry.hash) return
      const full = this.hostPath(relPath)
      const st = await lstat(full).catch(() => undefined)
      if (!st || !st.isFile() || !sameStat(entry, st) || st.size > MAX_TRACKED_FILE) return
      entry.hash = await this.storeFile(full)
      await this.saveManifest()
    })
  }

  /** After a tool call: records what differs from the manifest, stores the new contents. */
  afterCall(toolUseId: string | null): Promise<ChangeRecord[]> {
    return this.serial(() => this.scan(toolUseId))
  }

  /** Every record, oldest first. */
  async list(): Promise<ChangeRecord[]> {
    await this.serial(() => this.load())
    return [...(this.records ?? [])]
  }

  /** The bytes of a stored content. */
  async object(hash: string): Promise<Buffer> {
    return readFile(this.objects.path(hash)).catch((err) => {
      throw new CorralError('not_found_error', `content ${hash} is not in the change store`, { cause: err })
    })
  }

  /** Bytes the store holds (objects only; the manifest and journal are bookkeeping). */
  async storeBytes(): Promise<number> {
    let total = 0
    const walk = async (d: string) => {
      for (const e of await readdir(d, { withFileTypes: true }).catch(() => [])) {
        if (e.isDirectory()) await walk(join(d, e.name))
        else total += (await stat(join(d, e.name))).size
      }
    }
    await walk(this.objects.dir)
    return total
  }

  /**
   * Puts each path back to the state before the given records (the earliest of them per path),
   * appending one record per path written (with `reverts`). Scans first, so a change nobody
   * recorded yet is recorded, not overwritten silently. Throws conflict_error naming the paths
   * whose earlier content Corral never saw, or that changed after these records (unless
   * `includeLater`, which undoes the later records of those paths too: reverting a file or
   * everything).
   */
  revert(seqs: readonly number[], options: { includeLater?: boolean } = {}): Promise<ChangeRecord[]> {
    return this.serial(async () => {
      await this.scan(null)
      const records = this.records ?? []
      const active = new Set(activeRecords(records).map((r) => r.seq))
      const wanted = new Set(seqs)
      const chosen = records.filter((r) => wanted.has(r.seq))
      const missing = seqs.filter((s) => !chosen.some((r) => r.seq === s))
      if (missing.length) throw new CorralError('not_found_error', `no change record ${missing.join(', ')} in this folder`)
      const byPath = new Map<string, ChangeRecord[]>()
      for (const r of chosen) byPath.set(r.path, [...(byPath.get(r.path) ?? []), r])
      const plan: { path: string; target: FileState | null; undone: number[] }[] = []
      const problems: string[] = []
      for (const [path, rs] of byPath) {
        const first = rs.reduce((a, b) => (a.seq < b.seq ? a : b))
        const later = records.filter((r) => r.path === path && r.seq > first.seq && !wanted.has(r.seq) && active.has(r.seq))
        if (later.length && !options.includeLater) {
          problems.push(`${path} changed again later (record ${later.map((r) => r.seq).join(', ')}): revert those first, or revert the file`)
          continue
        }
        if (first.before && first.before.hash === null) {
          problems.push(`${path}: its content before record ${first.seq} is unknown, so it cannot be put back (${unknownBeforeReason(this.isGitWorkTree())})`)
          continue
        }
        plan.push({ path, target: first.before, undone: [...rs, ...later].map((r) => r.seq) })
      }
      if (problems.length) throw new CorralError('conflict_error', `cannot revert: ${problems.join('; ')}`)
      // Removals first (a symlink the agent put where a directory was goes before that directory's files come back).
      plan.sort((a, b) => Number(a.target !== null) - Number(b.target !== null) || a.path.localeCompare(b.path))
      for (const p of plan) await this.writeState(p.path, p.target)
      const written = await this.scan('revert')
      for (const r of written) {
        const p = plan.find((x) => x.path === r.path)
        if (p) r.reverts = p.undone
      }
      if (written.length) await this.rewriteJournal()
      return written
    })
  }

  // ---------------------------------------------------------------------------------------------

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.queue.then(fn, fn)
    this.queue = next.catch(() => undefined)
    return next
  }

  private hostPath(rel: string): string {
    const parts = rel.split('/')
    if (parts.some((p) => p === '' || p === '.' || p === '..')) throw new CorralError('invalid_request_error', `path: ${JSON.stringify(rel)} is not a path inside the folder`)
    return join(this.root, ...parts)
  }

  private async load(): Promise<Manifest> {
    if (this.manifest) return this.manifest
    await mkdir(this.objects.dir, { recursive: true })
    const manifestFile = join(this.dir, 'manifest.json')
    if (existsSync(manifestFile)) {
      this.manifest = JSON.parse(await readFile(manifestFile, 'utf8')) as Manifest
      const journal = await readFile(join(this.dir, 'journal.jsonl'), 'utf8').catch(() => '')
      this.records = journal
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as ChangeRecord)
      return this.manifest
    }
    const m = await this.walk()
    for (const [path, blob] of await gitCleanBlobs(this.root)) if (m[path]?.kind === 'file') m[path].git = blob
    this.manifest = m
    this.records = []
    await this.saveManifest()
    return m
  }

  private async saveManifest(): Promise<void> {
    const file = join(this.dir, 'manifest.json')
    await writeFile(file + '.tmp', JSON.stringify(this.manifest))
    await rename(file + '.tmp', file)
  }

  private async rewriteJournal(): Promise<void> {
    const file = join(this.dir, 'journal.jsonl')
    await writeFile(file + '.tmp', (this.records ?? []).map((r) => JSON.stringify(r) + '\n').join(''))
    await rename(file + '.tmp', file)
  }

  /** The folder as a manifest (lstat only: symlinks are entries, never followed). */
  private async walk(): Promise<Manifest> {
    const m: Manifest = {}
    const visit = async (dir: string, rel: string) => {
      const entries = await readdir(dir, { withFileTypes: true }).catch(() => [])
      for (const e of entries) {
        const r = rel ? `${rel}/${e.name}` : e.name
        if (r === '.git') continue
        const full = join(dir, e.name)
        const st = await lstat(full, { bigint: true }).catch(() => undefined)
        if (!st) continue
        if (st.isDirectory()) await visit(full, r)
        else if (st.isFile() || st.isSymbolicLink()) {
          m[r] = { kind: st.isFile() ? 'file' : 'link', size: Number(st.size), mode: Number(st.mode & 0o7777n), uid: Number(st.uid), gid: Number(st.gid), mtime: String(st.mtimeNs), ctime: String(st.ctimeNs), ino: String(st.ino) }
        }
      }
    }
    await visit(this.root, '')
    return m
  }

  private async scan(toolUseId: string | null): Promise<ChangeRecord[]> {
    const old = await this.load()
    const now = await this.walk()
    const out: ChangeRecord[] = []
    const at = new Date().toISOString()
    for (const path of new Set([...Object.keys(old), ...Object.keys(now)])) {
      const a = old[path]
      const b = now[path]
      if (a && b && a.kind === b.kind && sameEntry(a, b)) {
        b.hash = a.hash
        b.git = a.git
        continue
      }
      const before = a ? await this.stateOf(path, a) : null
      const after = b ? await this.captureNow(path, b) : null
      if (before && after && before.hash !== null && before.hash === after.hash && before.mode === after.mode) continue // touched, same bytes
      const record: ChangeRecord = { seq: 0, tool_use_id: toolUseId, at, path, kind: !a ? 'created' : !b ? 'deleted' : 'modified', before, after }
      out.push(record)
    }
    out.sort((x, y) => x.path.localeCompare(y.path))
    out.forEach((r, i) => (r.seq = (this.records!.length ? this.records![this.records!.length - 1].seq : 0) + i + 1))
    this.manifest = now
    if (out.length) {
      this.records!.push(...out)
      await appendFile(join(this.dir, 'journal.jsonl'), out.map((r) => JSON.stringify(r) + '\n').join(''))
    }
    await this.saveManifest()
    return out
  }

  /** The state a manifest entry stood for: its stored bytes, or git's blob copied into the store, or unknown. */
  private async stateOf(path: string, e: ManifestEntry): Promise<FileState> {
    let hash = e.hash ?? null
    if (!hash && e.git) {
      const blob = await git(this.root, ['cat-file', 'blob', e.git], { buffer: true }).catch(() => undefined)
      if (blob) hash = await this.storeBytesOf(blob.stdout as Buffer)
    }
    void path
    return { hash, mode: e.mode, size: e.size }
  }

  /** Reads a new or changed entry now and stores it; its hash goes into the manifest entry. */
  private async captureNow(path: string, e: ManifestEntry): Promise<FileState> {
    const full = this.hostPath(path)
    if (e.kind === 'link') {
      const target = await readlink(full).catch(() => '')
      e.hash = await this.storeBytesOf(Buffer.from(target))
      return { hash: e.hash, mode: e.mode, size: e.size, link: target }
    }
    e.hash = e.size <= MAX_TRACKED_FILE ? await this.storeFile(full).catch(() => undefined) : undefined
    return { hash: e.hash ?? null, mode: e.mode, size: e.size }
  }

  private async storeFile(full: string): Promise<string> {
    // O_NOFOLLOW: a file swapped for a symlink since the walk is not followed out of the folder.
    const fh = await open(full, constants.O_RDONLY | constants.O_NOFOLLOW)
    try {
      return await this.storeBytesOf(await fh.readFile())
    } finally {
      await fh.close()
    }
  }

  private storeBytesOf(bytes: Buffer): Promise<string> {
    return this.objects.putBytes(bytes)
  }

  /** Writes a state (or removes the path) on the host, never through a symlinked parent. */
  private async writeState(path: string, state: FileState | null): Promise<void> {
    const full = this.hostPath(path)
    await this.checkParents(path)
    const entry = this.manifest?.[path]
    if (!state) {
      await rm(full, { force: true })
      await this.removeEmptyParents(path)
      return
    }
    if (!state.hash) throw new CorralError('conflict_error', `${path}: its earlier content is unknown`)
    const bytes = await this.object(state.hash)
    await mkdir(dirname(full), { recursive: true })
    const tmp = join(dirname(full), `.${posix.basename(path)}.corral-revert-${process.pid}`)
    if (state.link !== undefined) await symlink(bytes.toString(), tmp)
    else {
      await writeFile(tmp, bytes, { mode: state.mode & 0o777 })
      await chmod(tmp, state.mode)
    }
    if (process.getuid?.() === 0 && entry) await chown(tmp, entry.uid, entry.gid).catch(() => undefined)
    else if (process.getuid?.() === 0) {
      const parent = await stat(dirname(full))
      await chown(tmp, parent.uid, parent.gid).catch(() => undefined)
    }
    await rm(full, { recursive: true, force: true }).catch(() => undefined)
    await rename(tmp, full)
  }

  /** Refuses a path whose parent directories inside the folder include a symlink. */
  private async checkParents(path: string): Promise<void> {
    const parts = path.split('/').slice(0, -1)
    let cur = this.root
    for (const p of parts) {
      cur = join(cur, p)
      const st = await lstat(cur).catch(() => undefined)
      if (!st) return
      if (!st.isDirectory()) throw new CorralError('conflict_error', `cannot revert ${path}: ${cur.slice(this.root.length + 1)} is ${st.isSymbolicLink() ? 'a symlink' : 'not a directory'} now`)
    }
  }

  private async removeEmptyParents(path: string): Promise<void> {
    const parts = path.split('/').slice(0, -1)
    while (parts.length) {
      const d = join(this.root, ...parts)
      if (!d.startsWith(this.root + sep)) return
      try {
        await rmdir(d)
      } catch {
        return
      }
      parts.pop()
    }
  }
}

/** Records not undone by a revert, and not a revert themselves: what a revert can still put back. */
export function activeRecords(records: readonly ChangeRecord[]): ChangeRecord[] {
  const undone = new Set(records.flatMap((r) => r.reverts ?? []))
  return records.filter((r) => !r.reverts && !undone.has(r.seq))
}

function sameStat(e: ManifestEntry, st: { size: number; mode: number; ino: number }): boolean {
  return e.size === st.size && e.mode === (st.mode & 0o7777) && e.ino === String(st.ino)
}

function sameEntry(a: ManifestEntry, b: ManifestEntry): boolean {
  return a.size === b.size && a.mode === b.mode && a.mtime === b.mtime && a.ctime === b.ctime && a.ino === b.ino
}

/**
 * git on the user's folder, as the user's git but with the folder's own hooks out of play:
 * no fsmonitor (a command the repository's config could name), no optional index writes, and
 * safe.directory for a folder another uid owns (the sandbox user's files when Corral runs as root).
 */
function git(root: string, args: string[], options: { buffer?: boolean } = {}): Promise<{ stdout: string | Buffer }> {
  const env = { ...process.env, GIT_OPTIONAL_LOCKS: '0', GIT_TERMINAL_PROMPT: '0' }
  return run('git', ['-C', root, '-c', 'core.fsmonitor=false', '-c', 'safe.directory=*', ...args], { env, maxBuffer: 256 * 1024 * 1024, timeout: 60_000, ...(options.buffer ? { encoding: 'buffer' as const } : {}) })
}

/**
 * Why a change bash made cannot be put back, and what would make such changes revertable: said
 * for a folder that is not a git repository, or for a file of one that was untracked or had
 * uncommitted changes when the session started.
 */
export function unknownBeforeReason(gitWorkTree: boolean): string {
  return gitWorkTree
    ? 'bash changed this file before Corral had seen its content, and it was untracked or had uncommitted changes when the session started, so its earlier content is unknown. Commit it before a session to make the changes bash makes to it revertable'
    : 'this folder is not a git repository: bash changed this file before Corral had seen its content, so its earlier content is unknown. To make the changes bash makes revertable, make the folder a git repository with everything committed before the session (git init && git add -A && git commit -m start)'
}

/** Paths of a git work tree whose content equals the index (clean), with their blob ids. */
async function gitCleanBlobs(root: string): Promise<Map<string, string>> {
  const out = new Map<string, string>()
  try {
    const top = String((await git(root, ['rev-parse', '--show-toplevel'])).stdout).trim()
    if (top !== root) return out // a folder inside a repository: its paths are not the index's
    const staged = String((await git(root, ['ls-files', '-s', '-z'])).stdout).split('\0').filter(Boolean)
    for (const line of staged) {
      const m = /^(\d+) ([0-9a-f]+) 0\t(.*)$/.exec(line)
      if (m && (m[1] === '100644' || m[1] === '100755')) out.set(m[3], m[2])
    }
    const dirty = String((await git(root, ['status', '--porcelain=v1', '-z', '--untracked-files=no', '--no-renames'])).stdout).split('\0').filter(Boolean)
    for (const d of dirty) out.delete(d.slice(3))
  } catch {
    // not a git work tree (or no git): content before is known only for what Corral saw
  }
  return out
}
