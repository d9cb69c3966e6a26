import type { Session } from '../../shared/api/types'
import { fileMountPath, UPLOADS_DIR } from '../../shared/api/file-paths'
import { newId } from '../../shared/api/ids'
import { CorralError, conflict, invalid, notFound } from '../../shared/errors'
import type { Db } from './database'
import type { SessionResourceSecrets, SessionStore } from './session-store'

type Resource = Session['resources'][number] & { id: string; type: string; created_at?: string; updated_at?: string }

/** Most `file` resources a session holds (spec resources.md §9). */
export const MAX_SESSION_FILES = 500

export interface SessionResourceStoreOptions {
  sessions: SessionStore
  /** Whether a file id names a stored file (the FileStore). */
  files?: { has(fileId: string): boolean }
  /** Where a rotated repository token goes (the keychain); without it, rotation is refused. */
  secrets?: SessionResourceSecrets
  clock?: () => Date
  /** Called after a resource was added to or removed from a session (the engine tells its sandbox). Must not throw. */
  onChange?: (change: { sessionId: string; kind: 'added' | 'deleted' | 'updated'; resource: Resource }) => void
}

/**
 * `/v1/sessions/{id}/resources` (spec resources.md §9): the resources a session was created with,
 * and files added to or removed from it while it lives. The list is the session's own
 * `resources` array (so `sessions.retrieve` shows the same), in order; adding emits no event.
 */
export class SessionResourceStore {
  private readonly clock: () => Date

  constructor(
    private readonly db: Db,
    private readonly o: SessionResourceStoreOptions,
  ) {
    this.clock = o.clock ?? (() => new Date())
  }

  list(sessionId: string, params: { limit?: number; page?: string } = {}): { data: Resource[]; next_page: string | null } {
    const all = this.o.sessions.retrieve(sessionId).resources as Resource[]
    const start = params.page === undefined ? 0 : decodeOffset(params.page)
    const limit = params.limit ?? 20
    const data = all.slice(start, start + limit)
    return { data, next_page: start + limit < all.length ? encodeOffset(start + limit) : null }
  }

  retrieve(sessionId: string, resourceId: string): Resource {
    const found = (this.o.sessions.retrieve(sessionId).resources as Resource[]).find((r) => r.id === resourceId)
    if (!found) throw notFound('session resource', resourceId)
    return found
  }

  /** Adds a `file` to a live session: 404 for an unknown file, 409 on an archived session or a taken mount path. */
  add(sessionId: string, input: { type: 'file'; file_id: string; mount_path?: string | null }): Resource {
    const cur = this.o.sessions.retrieve(sessionId)
    if (cur.archived_at) throw conflict(`session ${sessionId} is archived; resources cannot be added`)
    if (this.o.sessions.answeredByWorker(sessionId)) {
      throw invalid(`type: session ${sessionId} runs on the self_hosted environment ${cur.environment_id}; it takes no file resources (its tools run on a worker: stage the file there yourself)`)
    }
    if (!this.o.files?.has(input.file_id)) throw new CorralError('not_found_error', `file_id: file ${JSON.stringify(input.file_id)} was not found`)
    const mountPath = fileMountPath(input.mount_path, input.file_id)
    if (!mountPath) throw invalid(`mount_path: ${JSON.stringify(input.mount_path)} must name a file inside ${UPLOADS_DIR} (taken relative to it)`)
    const resources = cur.resources as Resource[]
    if (resources.filter((r) => r.type === 'file').length >= MAX_SESSION_FILES) throw invalid(`a session holds at most ${MAX_SESSION_FILES} files`)
    const clash = resources.find((r) => r.type === 'file' && (r as { mount_path?: string }).mount_path === mountPath)
    if (clash) throw conflict(`mount_path: ${mountPath} is taken by resource ${clash.id}; remove it first or choose another mount_path`)
    const now = this.clock().toISOString()
    const resource = { id: newId('resource'), type: 'file', file_id: input.file_id, mount_path: mountPath, created_at: now, updated_at: now } as unknown as Resource
    this.write(cur, [...resources, resource], now)
    this.o.onChange?.({ sessionId, kind: 'added', resource })
    return resource
  }

  delete(sessionId: string, resourceId: string): { id: string; type: 'session_resource_deleted' } {
    const cur = this.o.sessions.retrieve(sessionId)
    if (cur.archived_at) throw conflict(`session ${sessionId} is archived; its resources cannot be removed`)
    const resources = cur.resources as Resource[]
    const resource = resources.find((r) => r.id === resourceId)
    if (!resource) throw notFound('session resource', resourceId)
    this.write(
      cur,
      resources.filter((r) => r.id !== resourceId),
      this.clock().toISOString(),
    )
    if (resource.type === 'github_repository') this.o.secrets?.delete(sessionId, [resourceId])
    this.o.onChange?.({ sessionId, kind: 'deleted', resource })
    return { id: resourceId, type: 'session_resource_deleted' }
  }

  /** Rotates a repository's authorization_token (kept by `secrets`, never in the database). */
  async update(sessionId: string, resourceId: string, input: { authorization_token: string }): Promise<Resource> {
    const cur = this.o.sessions.retrieve(sessionId)
    if (cur.archived_at) throw conflict(`session ${sessionId} is archived; its resources cannot be updated`)
    const resource = (cur.resources as Resource[]).find((r) => r.id === resourceId)
    if (!resource) throw notFound('session resource', resourceId)
    if (resource.type !== 'github_repository') throw invalid(`authorization_token: only a github_repository resource takes a token (resource ${resourceId} is a ${resource.type})`)
    if (!this.o.secrets) throw invalid('authorization_token: cannot be kept because the keychain is unavailable in this Corral (a token is never written to the database)')
    await this.o.secrets.put(sessionId, resourceId, 'authorization_token', input.authorization_token)
    const now = this.clock().toISOString()
    const updated = { ...resource, updated_at: now } as Resource
    const fresh = this.o.sessions.retrieve(sessionId)
    this.write(
      fresh,
      (fresh.resources as Resource[]).map((r) => (r.id === resourceId ? updated : r)),
      now,
    )
    this.o.onChange?.({ sessionId, kind: 'updated', resource: updated })
    return updated
  }

  private write(cur: Session, resources: Resource[], now: string): void {
    // `corral` is a projection read with the row, not part of the stored resource
    const { corral: _projected, ...data } = { ...cur, resources, updated_at: now } as Session & { corral?: unknown }
    this.db.prepare('UPDATE sessions SET updated_at = ?, data = ? WHERE id = ? AND deleting = 0').run(now, JSON.stringify(data), cur.id)
    this.o.sessions.changes.notify({ kind: 'session', id: cur.id })
  }
}

function encodeOffset(n: number): string {
  return Buffer.from(`r${n}`).toString('base64url')
}
function decodeOffset(page: string): number {
  const raw = Buffer.from(page, 'base64url').toString()
  const n = Number(raw.slice(1))
  if (raw[0] !== 'r' || !Number.isInteger(n) || n < 0) throw invalid('page: not a cursor this server issued')
  return n
}
