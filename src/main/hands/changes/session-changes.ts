import { createHash } from 'node:crypto'
import { lstat, readdir, realpath, rm } from 'node:fs/promises'
import { join, posix, sep } from 'node:path'
import { createTwoFilesPatch } from 'diff'
import type { ChangesRevertParams, FolderChange, SessionChangesResponse, WorkspaceEntry, WorkspaceListing } from '../../../shared/api/workspace'
import { CorralError } from '../../../shared/errors'
import type { EventLog } from '../../session/event-log'
import type { FolderMount } from '../folders'
import { WORKSPACE } from '../settings'
import { activeRecords, type ChangeRecord, FolderChanges, unknownBeforeReason } from './folder-changes'

export interface SessionChangesOptions {
  /** Where change records live: `<dataDir>/changes`. */
  dir: string
  /** The session's host folders (resolved and checked); [] when it has none. */
  resolveFolders(sessionId: string): Promise<readonly FolderMount[]> | readonly FolderMount[]
  /** The session log: a change's turn is the number of user messages before its tool call. */
  log: Pick<EventLog, 'read'>
}

const MAX_DIFF_BYTES = 256 * 1024
const READ_ONLY_TOOLS = new Set(['read', 'glob', 'grep'])
const textLike = (b: Buffer) => !b.subarray(0, 8192).includes(0)

/**
 * The change records of every session's read-write host folders (FolderChanges per folder, in
 * `<dir>/<session>/<resource index>/`), the router's hooks around a tool call, and what the
 * `/v1/corral/sessions/{id}/changes` and `/files` routes answer. Holds no handle: nothing to dispose.
 */
export class SessionChanges {
  private readonly folders = new Map<string, Promise<{ mount: FolderMount; changes?: FolderChanges }[]>>()

  constructor(private readonly options: SessionChangesOptions) {}

  /** Before a tool call runs: the baseline on the first one; the bytes a write/edit is about to replace. */
  async beforeCall(sessionId: string, call: { name: string; input: Record<string, unknown> }): Promise<void> {
    for (const f of await this.tracked(sessionId)) {
      await f.changes!.baseline()
      if ((call.name === 'write' || call.name === 'edit') && typeof call.input.file_path === 'string') {
        const rel = relativeTo(f.mount.target, posix.resolve(WORKSPACE, call.input.file_path))
        if (rel) await f.changes!.beforeWrite(rel)
      }
    }
  }

  /**
   * After a tool call (finished or failed): records what it changed. The read-only tools (read,
   * glob, grep) change nothing, so they cost no scan (a scan walks the folder: ≈ 0.4 s for 10,000
   * files here); whatever a background process changes meanwhile goes to the next scan's call.
   */
  async afterCall(sessionId: string, call: { toolUseId: string; name: string }): Promise<void> {
    if (READ_ONLY_TOOLS.has(call.name)) return
    for (const f of await this.tracked(sessionId)) await f.changes!.afterCall(call.toolUseId)
  }

  /** Forgets a session's records (it was deleted). */
  async remove(sessionId: string): Promise<void> {
    this.folders.delete(sessionId)
    await rm(join(this.options.dir, dirKey(sessionId)), { recursive: true, force: true })
  }

  async list(sessionId: string): Promise<SessionChangesResponse> {
    const turns = this.turnsOf(sessionId)
    const out: SessionChangesResponse = { folders: [] }
    for (const f of await this.tracked(sessionId)) {
      const records = await f.changes!.list()
      out.folders.push({
        resource_index: f.mount.index,
        host_path: f.mount.source,
        mount_path: f.mount.target,
        store_bytes: await f.changes!.storeBytes(),
        changes: await Promise.all(records.map((r) => this.view(f.changes!, r, records, turns))),
      })
    }
    return out
  }

  async revert(sessionId: string, params: ChangesRevertParams): Promise<{ reverted: FolderChange[] }> {
    const folders = await this.tracked(sessionId)
    const f = params.resource_index === undefined ? folders[0] : folders.find((x) => x.mount.index === params.resource_index)
    if (!f) throw new CorralError('not_found_error', params.resource_index === undefined ? `session ${sessionId} has no read-write host folder` : `resource_index: resources[${params.resource_index}] of session ${sessionId} is not a read-write host folder`)
    const records = await f.changes!.list()
    const turns = this.turnsOf(sessionId)
    const active = activeRecords(records)
    let chosen: ChangeRecord[]
    if (params.scope === 'file') {
      if (!params.path) throw new CorralError('invalid_request_error', 'path: required when scope is "file"')
      chosen = active.filter((r) => r.path === params.path)
      if (!chosen.length) throw new CorralError('not_found_error', `path: ${JSON.stringify(params.path)} has no change to revert`)
    } else if (params.scope === 'turn') {
      if (params.turn === undefined) throw new CorralError('invalid_request_error', 'turn: required when scope is "turn"')
      chosen = active.filter((r) => r.tool_use_id && turns.get(r.tool_use_id) === params.turn)
      if (!chosen.length) throw new CorralError('not_found_error', `turn: turn ${params.turn} has no change to revert`)
    } else {
      chosen = active
      if (!chosen.length) return { reverted: [] }
    }
    const written = await f.changes!.revert(
      chosen.map((r) => r.seq),
      { includeLater: params.scope !== 'turn' },
    )
    const all = await f.changes!.list()
    return { reverted: await Promise.all(written.map((r) => this.view(f.changes!, r, all, turns))) }
  }

  /** One directory of a mounted folder, as the sandbox path `path` (default: the first folder's root). */
  async listFiles(sessionId: string, path?: string): Promise<WorkspaceListing> {
    const mounts = await this.options.resolveFolders(sessionId)
    if (!mounts.length) throw new CorralError('not_found_error', `session ${sessionId} has no host folder to browse (the file browser shows mounted folders)`)
    const wanted = path ?? mounts[0].target
    const { host } = await this.hostPathOf(mounts, wanted, 'path')
    const st = await lstat(host)
    if (!st.isDirectory()) throw new CorralError('invalid_request_error', `path: ${JSON.stringify(wanted)} is not a directory`)
    const entries: WorkspaceEntry[] = []
    for (const e of await readdir(host, { withFileTypes: true })) {
      const s = await lstat(join(host, e.name)).catch(() => undefined)
      if (!s) continue
      entries.push({ name: e.name, path: posix.join(posix.resolve(WORKSPACE, wanted), e.name), kind: s.isDirectory() ? 'directory' : s.isFile() ? 'file' : s.isSymbolicLink() ? 'symlink' : 'other', size: s.size, modified_at: s.mtime.toISOString() })
    }
    entries.sort((a, b) => Number(b.kind === 'directory') - Number(a.kind === 'directory') || a.name.localeCompare(b.name))
    return { path: posix.resolve(WORKSPACE, wanted), roots: mounts.map((m) => ({ path: m.target, host_path: m.source, read_only: m.readOnly })), entries }
  }

  /** A file of a mounted folder for download: its real path must stay inside the folder. */
  async filePath(sessionId: string, path: string): Promise<{ host: string; name: string }> {
    const mounts = await this.options.resolveFolders(sessionId)
    const { host } = await this.hostPathOf(mounts, path, 'path')
    const st = await lstat(host)
    if (!st.isFile()) throw new CorralError('invalid_request_error', `path: ${JSON.stringify(path)} is not a regular file`)
    return { host, name: posix.basename(path) }
  }

  // ---------------------------------------------------------------------------------------------

  private async hostPathOf(mounts: readonly FolderMount[], path: string, field: string): Promise<{ mount: FolderMount; host: string }> {
    const abs = posix.resolve(WORKSPACE, path)
    const mount = [...mounts].sort((a, b) => b.target.length - a.target.length).find((m) => relativeTo(m.target, abs) !== undefined)
    if (!mount) throw new CorralError('invalid_request_error', `${field}: ${JSON.stringify(path)} is not inside a mounted folder (${mounts.map((m) => m.target).join(', ')})`)
    const rel = relativeTo(mount.target, abs)!
    const joined = rel === '' ? mount.source : join(mount.source, ...rel.split('/'))
    let real: string
    try {
      real = await realpath(joined)
    } catch {
      throw new CorralError('not_found_error', `${field}: ${JSON.stringify(path)} does not exist`)
    }
    // A symlink inside the folder may point anywhere on the host: what it resolves to must stay inside.
    if (real !== mount.source && !real.startsWith(mount.source + sep)) throw new CorralError('permission_error', `${field}: ${JSON.stringify(path)} resolves outside the mounted folder`)
    return { mount, host: real }
  }

  private tracked(sessionId: string): Promise<{ mount: FolderMount; changes?: FolderChanges }[]> {
    let p = this.folders.get(sessionId)
    if (!p) {
      p = (async () => {
        const mounts = await this.options.resolveFolders(sessionId)
        return mounts.filter((m) => !m.readOnly).map((mount) => ({ mount, changes: new FolderChanges({ root: mount.source, dir: join(this.options.dir, dirKey(sessionId), String(mount.index)) }) }))
      })()
      this.folders.set(sessionId, p)
      p.catch(() => this.folders.delete(sessionId))
    }
    return p
  }

  /** tool_use id → turn number (1 after the first user message of the primary thread, …). */
  private turnsOf(sessionId: string): Map<string, number> {
    const turns = new Map<string, number>()
    let turn = 0
    let after = 0
    for (;;) {
      const batch = this.options.log.read(sessionId, { after, limit: 1000, types: ['user.message', 'agent.tool_use'] })
      for (const s of batch) {
        if (s.event.type === 'user.message' && !s.event.session_thread_id) turn++
        else if (s.event.type === 'agent.tool_use') turns.set(s.event.id, Math.max(turn, 1))
      }
      if (batch.length < 1000) return turns
      after = batch[batch.length - 1].seq
    }
  }

  private async view(changes: FolderChanges, r: ChangeRecord, all: readonly ChangeRecord[], turns: Map<string, number>): Promise<FolderChange> {
    const undone = new Set(all.flatMap((x) => x.reverts ?? []))
    const unknown = r.before !== null && r.before.hash === null
    return {
      seq: r.seq,
      tool_use_id: r.tool_use_id === 'revert' ? null : r.tool_use_id,
      turn: r.tool_use_id ? (turns.get(r.tool_use_id) ?? null) : null,
      path: r.path,
      kind: r.kind,
      before: r.before,
      after: r.after,
      diff: await diffOf(changes, r),
      revertable: !unknown && !undone.has(r.seq) && !r.reverts,
      reason: unknown
        ? unknownBeforeReason(changes.isGitWorkTree())
        : undone.has(r.seq)
          ? 'already reverted'
          : r.reverts
            ? 'this is a revert'
            : null,
      reverted: undone.has(r.seq),
      ...(r.reverts ? { reverts: r.reverts } : {}),
    }
  }
}

async function diffOf(changes: FolderChanges, r: ChangeRecord): Promise<string | null> {
  if ((r.before && !r.before.hash) || (r.after && !r.after.hash)) return null
  if ((r.before?.size ?? 0) > MAX_DIFF_BYTES || (r.after?.size ?? 0) > MAX_DIFF_BYTES) return null
  const a = r.before?.hash ? await changes.object(r.before.hash).catch(() => undefined) : Buffer.alloc(0)
  const b = r.after?.hash ? await changes.object(r.after.hash).catch(() => undefined) : Buffer.alloc(0)
  if (!a || !b || !textLike(a) || !textLike(b)) return null
  return createTwoFilesPatch(r.before ? `a/${r.path}` : '/dev/null', r.after ? `b/${r.path}` : '/dev/null', a.toString('utf8'), b.toString('utf8'), undefined, undefined, { context: 3 })
}

/** The path of `abs` inside `root` ('' for the root itself), or undefined when it is outside. */
function relativeTo(root: string, abs: string): string | undefined {
  if (abs === root) return ''
  return abs.startsWith(root + '/') ? abs.slice(root.length + 1) : undefined
}

const dirKey = (sessionId: string) => (/^[A-Za-z0-9_-]{1,100}$/.test(sessionId) ? sessionId : 'h' + createHash('sha256').update(sessionId).digest('hex').slice(0, 32))
