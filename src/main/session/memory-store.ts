import { createHash } from 'node:crypto'
import type { DeletedMemory, DeletedMemoryStore, Memory, MemoryActor, MemoryListItem, MemoryStore as MemoryStoreObject, MemoryVersion } from '../../shared/api/types'
import {
  MAX_FULL_VIEW_PAGE,
  type MemoryCreateInput,
  type MemoryListQuery,
  type MemoryStoreCreateInput,
  type MemoryStoreListQuery,
  type MemoryStoreUpdateInput,
  type MemoryUpdateInput,
  type MemoryVersionListQuery,
  type MemoryView,
} from '../../shared/api/memory-schemas'
import { newId } from '../../shared/api/ids'
import { conflict, CorralError, invalid, notFound } from '../../shared/errors'
import type { Db } from './database'
import type { ResourceEvents } from './webhook-store'
import { mergeMetadata } from './agent-store'
import { createdAtFilters, keysetList, type Page } from './pagination'

/** The actor of a change made with Corral's local API token (it has one key, this is its id). */
export const LOCAL_API_ACTOR: MemoryActor = { type: 'api_actor', api_key_id: 'apikey_corral_local' }

/** Lowercase hex SHA-256 of the UTF-8 bytes of `content`, no normalisation (what the API reports). */
export function contentSha256(content: string): string {
  return createHash('sha256').update(content, 'utf8').digest('hex')
}

interface MemoryRow {
  id: string
  store_id: string
  path: string
  content?: string
  content_sha256: string
  content_size_bytes: number
  version_id: string
  created_at: string
  updated_at: string
}

interface VersionRow {
  id: string
  store_id: string
  memory_id: string
  operation: MemoryVersion['operation']
  created_at: string
  path: string | null
  content: string | null
  content_sha256: string | null
  content_size_bytes: number | null
  created_by: string | null
  redacted_at: string | null
  redacted_by: string | null
}

/** A memory as the sync of a mount needs it: path, content and hash. */
export interface MemorySnapshotEntry {
  id: string
  path: string
  content: string
  content_sha256: string
}

export interface MemoryStoreOptions {
  clock?: () => Date
  /** Told of each store's creation, archive and deletion inside its transaction (the webhooks' outbox). */
  events?: ResourceEvents
}

/** Who made a change: the actor recorded on its version. */
export interface MemoryWriteContext {
  actor: MemoryActor
}

const DEFAULT_PAGE = 20

function actorKey(actor: MemoryActor): { type: string; id: string } {
  switch (actor.type) {
    case 'session_actor':
      return { type: actor.type, id: actor.session_id }
    case 'api_actor':
      return { type: actor.type, id: actor.api_key_id }
    case 'user_actor':
      return { type: actor.type, id: actor.user_id }
    case 'service_account_actor':
      return { type: actor.type, id: actor.service_account_id }
  }
}

/**
 * Memory stores, their memories and every memory's version history, in `corral.db` (spec
 * resources.md §6). Each change to a memory appends exactly one `memory_versions` row in the
 * same transaction; an update that changes nothing appends none. Paths are unique and never
 * overlap within a store (409 `memory_path_conflict_error` naming the path in the way); a stale
 * `content_sha256` is a 409 `memory_precondition_failed_error`. Errors are CorralError: 404 for
 * an unknown store, memory or version, 409 `conflict_error` for a write to an archived store.
 */
export class MemoryStore {
  private readonly clock: () => Date

  constructor(
    private readonly db: Db,
    options: MemoryStoreOptions = {},
  ) {
    this.clock = options.clock ?? (() => new Date())
    this.events = options.events ?? (() => {})
  }

  private readonly events: ResourceEvents

  // ---------- stores ----------

  createStore(input: MemoryStoreCreateInput): MemoryStoreObject {
    const now = this.clock().toISOString()
    const store: MemoryStoreObject = {
      type: 'memory_store',
      id: newId('memoryStore', Date.parse(now)),
      name: input.name,
      description: input.description ?? '',
      metadata: input.metadata ?? {},
      created_at: now,
      updated_at: now,
      archived_at: null,
    }
    this.db.transaction(() => {
      this.db.prepare('INSERT INTO memory_stores (id, created_at, archived_at, data) VALUES (?, ?, NULL, ?)').run(store.id, now, JSON.stringify(store))
      this.events('memory_store.created', store.id)
    })()
    return store
  }

  retrieveStore(id: string): MemoryStoreObject {
    const row = this.db.prepare('SELECT data FROM memory_stores WHERE id = ?').get(id) as { data: string } | undefined
    if (!row) throw notFound('memory store', id)
    return JSON.parse(row.data) as MemoryStoreObject
  }

  updateStore(id: string, input: MemoryStoreUpdateInput): MemoryStoreObject {
    return this.db.transaction(() => {
      const cur = this.retrieveStore(id)
      if (cur.archived_at) throw conflict(`memory store ${id} is archived and cannot be updated`)
      const next: MemoryStoreObject = {
        ...cur,
        name: input.name ?? cur.name,
        description: input.description === undefined ? cur.description : (input.description ?? ''),
        metadata: input.metadata == null ? cur.metadata : mergeMetadata(cur.metadata, input.metadata),
      }
      if (Object.keys(next.metadata).length > 16) throw invalid('metadata: at most 16 metadata keys (after applying the patch)')
      if (JSON.stringify(next) === JSON.stringify(cur)) return cur
      next.updated_at = this.clock().toISOString()
      this.db.prepare('UPDATE memory_stores SET data = ? WHERE id = ?').run(JSON.stringify(next), id)
      return next
    })()
  }

  /** One-way: an archived store takes no memory writes and no new sessions (reads, deletes and redaction still work). */
  archiveStore(id: string): MemoryStoreObject {
    return this.db.transaction(() => {
      const cur = this.retrieveStore(id)
      if (cur.archived_at) return cur
      const now = this.clock().toISOString()
      const next = { ...cur, archived_at: now, updated_at: now }
      this.db.prepare('UPDATE memory_stores SET archived_at = ?, data = ? WHERE id = ?').run(now, JSON.stringify(next), id)
      this.events('memory_store.archived', id)
      return next
    })()
  }

  /** Deletes the store with its memories and all their versions. */
  deleteStore(id: string): DeletedMemoryStore {
    this.db.transaction(() => {
      this.retrieveStore(id)
      this.db.prepare('DELETE FROM memory_versions WHERE store_id = ?').run(id)
      this.db.prepare('DELETE FROM memories WHERE store_id = ?').run(id)
      this.db.prepare('DELETE FROM memory_stores WHERE id = ?').run(id)
      this.events('memory_store.deleted', id)
    })()
    return { id, type: 'memory_store_deleted' }
  }

  listStores(q: MemoryStoreListQuery): Page<MemoryStoreObject> {
    const where: string[] = []
    const args: unknown[] = []
    if (!q.include_archived) where.push('archived_at IS NULL')
    createdAtFilters(q, where, args)
    const page = keysetList<MemoryStoreObject>(this.db, { table: 'memory_stores', where, args, order: 'desc', limit: q.limit ?? DEFAULT_PAGE, page: q.page })
    return { data: page.data, next_page: page.next_page }
  }

  // ---------- memories ----------

  createMemory(storeId: string, input: MemoryCreateInput, ctx: MemoryWriteContext): Memory {
    return this.db.transaction(() => {
      this.writableStore(storeId)
      this.checkPathFree(storeId, input.path)
      const now = this.clock().toISOString()
      const content = input.content ?? ''
      const row: MemoryRow = {
        id: newId('memory', Date.parse(now)),
        store_id: storeId,
        path: input.path,
        content,
        content_sha256: contentSha256(content),
        content_size_bytes: Buffer.byteLength(content, 'utf8'),
        version_id: newId('memoryVersion', Date.parse(now)),
        created_at: now,
        updated_at: now,
      }
      this.db
        .prepare('INSERT INTO memories (id, store_id, path, content, content_sha256, content_size_bytes, version_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)')
        .run(row.id, storeId, row.path, content, row.content_sha256, row.content_size_bytes, row.version_id, now, now)
      this.appendVersion({ row, operation: 'created', actor: ctx.actor })
      return toMemory(row, 'full')
    })()
  }

  retrieveMemory(storeId: string, memoryId: string): Memory {
    this.retrieveStore(storeId)
    return toMemory(this.memoryRow(storeId, memoryId), 'full')
  }

  /**
   * Changes a memory's content, path or both (one `modified` version). Nothing to change: the
   * memory as it is, no version, even when the precondition's hash is stale (§6.3).
   */
  updateMemory(storeId: string, memoryId: string, input: MemoryUpdateInput, ctx: MemoryWriteContext): Memory {
    return this.db.transaction(() => {
      this.writableStore(storeId)
      const cur = this.memoryRow(storeId, memoryId)
      const content = input.content ?? cur.content ?? ''
      const path = input.path ?? cur.path
      if (content === cur.content && path === cur.path) return toMemory(cur, 'full')
      const expected = input.precondition?.content_sha256
      if (expected !== undefined && expected !== cur.content_sha256) throw preconditionFailed(memoryId)
      if (path !== cur.path) this.checkPathFree(storeId, path, memoryId)
      const now = this.clock().toISOString()
      const row: MemoryRow = {
        ...cur,
        path,
        content,
        content_sha256: contentSha256(content),
        content_size_bytes: Buffer.byteLength(content, 'utf8'),
        version_id: newId('memoryVersion', Date.parse(now)),
        updated_at: now,
      }
      this.db
        .prepare('UPDATE memories SET path = ?, content = ?, content_sha256 = ?, content_size_bytes = ?, version_id = ?, updated_at = ? WHERE id = ?')
        .run(path, content, row.content_sha256, row.content_size_bytes, row.version_id, now, memoryId)
      this.appendVersion({ row, operation: 'modified', actor: ctx.actor })
      return toMemory(row, 'full')
    })()
  }

  /** Deletes a memory (its versions stay, plus a `deleted` one); 409 when `expectedSha256` is stale. */
  deleteMemory(storeId: string, memoryId: string, params: { expectedSha256?: string } & MemoryWriteContext): DeletedMemory {
    return this.db.transaction(() => {
      this.retrieveStore(storeId)
      const cur = this.memoryRow(storeId, memoryId)
      if (params.expectedSha256 !== undefined && params.expectedSha256 !== cur.content_sha256) throw preconditionFailed(memoryId)
      this.db.prepare('DELETE FROM memories WHERE id = ?').run(memoryId)
      const now = this.clock().toISOString()
      this.appendVersion({ row: { ...cur, version_id: newId('memoryVersion', Date.parse(now)) }, operation: 'deleted', actor: params.actor })
      return { id: memoryId, type: 'memory_deleted' as const }
    })()
  }

  /**
   * Memories under `path_prefix` (default `/`) in path order (byte order of UTF-8, stable across
   * pages). With `depth` > 0, a memory more than `depth` segments below the prefix is rolled up
   * into one `memory_prefix` item for its folder at that depth (each counts toward `limit`).
   * `view=full` caps the page at 20.
   */
  listMemories(storeId: string, q: MemoryListQuery): Page<MemoryListItem> {
    this.retrieveStore(storeId)
    const view: MemoryView = q.view ?? 'basic'
    const limit = Math.min(q.limit ?? DEFAULT_PAGE, view === 'full' ? MAX_FULL_VIEW_PAGE : Infinity)
    const prefix = q.path_prefix ?? '/'
    const depth = q.depth ?? 0
    // Every path under `prefix` sorts below this bound: '0' is the character after '/'.
    const upper = prefix.slice(0, -1) + '0'
    let bound = q.page ? decodeMemoryCursor(q.page) : { op: '>=' as const, path: prefix }
    const columns = `id, store_id, path, content_sha256, content_size_bytes, version_id, created_at, updated_at${view === 'full' ? ', content' : ''}`
    const items: MemoryListItem[] = []
    const batch = (b: typeof bound, n: number) =>
      this.db
        .prepare(`SELECT ${columns} FROM memories WHERE store_id = ? AND path >= ? AND path ${b.op} ? AND path < ? ORDER BY path LIMIT ?`)
        .all(storeId, prefix, b.path, upper, n) as MemoryRow[]
    for (;;) {
      if (items.length === limit) {
        const more = batch(bound, 1).length > 0
        return { data: items, next_page: more ? encodeMemoryCursor(bound) : null }
      }
      const rows = batch(bound, Math.min(limit - items.length + 1, 200))
      if (rows.length === 0) return { data: items, next_page: null }
      for (const row of rows) {
        const segments = row.path.slice(prefix.length).split('/')
        if (depth > 0 && segments.length > depth) {
          const folder = prefix + segments.slice(0, depth).join('/') + '/'
          items.push({ type: 'memory_prefix', path: folder })
          bound = { op: '>=', path: folder.slice(0, -1) + '0' }
          break // the rest of this batch may sit under the folder just rolled up
        }
        items.push(toMemory(row, view))
        bound = { op: '>', path: row.path }
        if (items.length === limit) break
      }
    }
  }

  /** Every memory of a store with its content, in path order (what a mount starts from). */
  snapshot(storeId: string): MemorySnapshotEntry[] {
    this.retrieveStore(storeId)
    return this.db.prepare('SELECT id, path, content, content_sha256 FROM memories WHERE store_id = ? ORDER BY path').all(storeId) as MemorySnapshotEntry[]
  }

  /** Every memory of a store without its content (id, path, hash), in path order: what a sync compares. */
  index(storeId: string): Omit<MemorySnapshotEntry, 'content'>[] {
    this.retrieveStore(storeId)
    return this.db.prepare('SELECT id, path, content_sha256 FROM memories WHERE store_id = ? ORDER BY path').all(storeId) as Omit<MemorySnapshotEntry, 'content'>[]
  }

  // ---------- versions ----------

  /** Versions newest first, filtered by memory, operation, actor and creation time. */
  listVersions(storeId: string, q: MemoryVersionListQuery): Page<MemoryVersion> {
    this.retrieveStore(storeId)
    const view: MemoryView = q.view ?? 'basic'
    const where = ['store_id = ?']
    const args: unknown[] = [storeId]
    if (q.memory_id) where.push('memory_id = ?'), args.push(q.memory_id)
    if (q.operation) where.push('operation = ?'), args.push(q.operation)
    const actors: [string, string | undefined][] = [
      ['session_actor', q.session_id],
      ['api_actor', q.api_key_id],
      ['service_account_actor', q.service_account_id],
    ]
    for (const [type, id] of actors) if (id !== undefined) where.push('actor_type = ? AND actor_id = ?'), args.push(type, id)
    createdAtFilters(q, where, args)
    const limit = Math.min(q.limit ?? DEFAULT_PAGE, view === 'full' ? MAX_FULL_VIEW_PAGE : Infinity)
    const page = keysetList<MemoryVersion, VersionRow>(this.db, { table: 'memory_versions', where, args, order: 'desc', limit, page: q.page }, (row) => toVersion(row, view))
    return { data: page.data, next_page: page.next_page }
  }

  retrieveVersion(storeId: string, versionId: string, view: MemoryView = 'full'): MemoryVersion {
    this.retrieveStore(storeId)
    return toVersion(this.versionRow(storeId, versionId), view)
  }

  /** Empties a version's content, path, hash and size for good; its actor and operation stay. */
  redactVersion(storeId: string, versionId: string, ctx: MemoryWriteContext): MemoryVersion {
    return this.db.transaction(() => {
      this.retrieveStore(storeId)
      const cur = this.versionRow(storeId, versionId)
      if (cur.redacted_at) return toVersion(cur, 'full')
      const now = this.clock().toISOString()
      this.db
        .prepare('UPDATE memory_versions SET path = NULL, content = NULL, content_sha256 = NULL, content_size_bytes = NULL, redacted_at = ?, redacted_by = ? WHERE id = ?')
        .run(now, JSON.stringify(ctx.actor), versionId)
      return toVersion(this.versionRow(storeId, versionId), 'full')
    })()
  }

  // ---------- internals ----------

  private writableStore(id: string): MemoryStoreObject {
    const store = this.retrieveStore(id)
    if (store.archived_at) throw conflict(`memory store ${id} is archived: its memories can be read and deleted, not created or changed`)
    return store
  }

  private memoryRow(storeId: string, memoryId: string): MemoryRow {
    const row = this.db.prepare('SELECT * FROM memories WHERE id = ? AND store_id = ?').get(memoryId, storeId) as MemoryRow | undefined
    if (!row) throw notFound('memory', memoryId)
    return row
  }

  private versionRow(storeId: string, versionId: string): VersionRow {
    const row = this.db.prepare('SELECT * FROM memory_versions WHERE id = ? AND store_id = ?').get(versionId, storeId) as VersionRow | undefined
    if (!row) throw notFound('memory version', versionId)
    return row
  }

  /** 409 `memory_path_conflict_error` when `path`, an ancestor of it or a descendant of it is another memory's path. */
  private checkPathFree(storeId: string, path: string, self = ''): void {
    const segments = path.slice(1).split('/')
    const lineage = segments.map((_, i) => '/' + segments.slice(0, i + 1).join('/'))
    const sameOrAncestor = this.db
      .prepare(`SELECT id, path FROM memories WHERE store_id = ? AND id != ? AND path IN (${lineage.map(() => '?').join(', ')}) LIMIT 1`)
      .get(storeId, self, ...lineage) as { id: string; path: string } | undefined
    const descendant =
      sameOrAncestor ??
      (this.db.prepare('SELECT id, path FROM memories WHERE store_id = ? AND id != ? AND path > ? AND path < ? ORDER BY path LIMIT 1').get(storeId, self, path + '/', path + '0') as
        | { id: string; path: string }
        | undefined)
    if (!descendant) return
    const taken = descendant.path === path
    throw new CorralError(
      'memory_path_conflict_error',
      taken
        ? `path: ${JSON.stringify(path)} is already the path of memory ${descendant.id}`
        : `path: ${JSON.stringify(path)} overlaps memory ${descendant.id} at ${JSON.stringify(descendant.path)} (one path cannot be a folder of another)`,
      { fields: { conflicting_path: descendant.path, conflicting_memory_id: descendant.id } },
    )
  }

  private appendVersion(params: { row: MemoryRow; operation: MemoryVersion['operation']; actor: MemoryActor }): void {
    const { row, operation, actor } = params
    const deleted = operation === 'deleted'
    const key = actorKey(actor)
    this.db
      .prepare(
        'INSERT INTO memory_versions (id, store_id, memory_id, operation, created_at, path, content, content_sha256, content_size_bytes, created_by, actor_type, actor_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
      )
      .run(
        row.version_id,
        row.store_id,
        row.id,
        operation,
        deleted ? this.clock().toISOString() : row.updated_at,
        row.path,
        deleted ? null : (row.content ?? ''),
        deleted ? null : row.content_sha256,
        deleted ? null : row.content_size_bytes,
        JSON.stringify(actor),
        key.type,
        key.id,
      )
  }
}

function preconditionFailed(memoryId: string): CorralError {
  return new CorralError('memory_precondition_failed_error', `precondition: the content_sha256 of memory ${memoryId} is not the one expected; retrieve it and retry`)
}

function toMemory(row: MemoryRow, view: MemoryView): Memory {
  return {
    type: 'memory',
    id: row.id,
    memory_store_id: row.store_id,
    path: row.path,
    content: view === 'full' ? (row.content ?? '') : null,
    content_sha256: row.content_sha256,
    content_size_bytes: row.content_size_bytes,
    memory_version_id: row.version_id,
    created_at: row.created_at,
    updated_at: row.updated_at,
  }
}

/** Applies `view` to a memory answered by a write (create and update answer `basic` unless asked). */
export function withView(memory: Memory, view: MemoryView): Memory {
  return view === 'full' ? memory : { ...memory, content: null }
}

function toVersion(row: VersionRow, view: MemoryView): MemoryVersion {
  return {
    type: 'memory_version',
    id: row.id,
    memory_id: row.memory_id,
    memory_store_id: row.store_id,
    operation: row.operation,
    created_at: row.created_at,
    path: row.path,
    content: view === 'full' ? row.content : null,
    content_sha256: row.content_sha256,
    content_size_bytes: row.content_size_bytes,
    // null when unset, as the API answers (the SDK's type leaves these optional).
    created_by: row.created_by ? (JSON.parse(row.created_by) as MemoryActor) : (null as unknown as undefined),
    redacted_at: row.redacted_at,
    redacted_by: row.redacted_by ? (JSON.parse(row.redacted_by) as MemoryActor) : (null as unknown as undefined),
  }
}

function encodeMemoryCursor(bound: { op: '>' | '>='; path: string }): string {
  return Buffer.from(JSON.stringify({ o: bound.op, p: bound.path })).toString('base64url')
}

function decodeMemoryCursor(page: string): { op: '>' | '>='; path: string } {
  try {
    const body = JSON.parse(Buffer.from(page, 'base64url').toString('utf8')) as { o?: unknown; p?: unknown }
    if ((body.o === '>' || body.o === '>=') && typeof body.p === 'string') return { op: body.o, path: body.p }
  } catch {
    // falls through to the error below
  }
  throw invalid('page: not a cursor this server issued')
}
