import type { Readable } from 'node:stream'
import { newId } from '../../shared/api/ids'
import { invalid, notFound } from '../../shared/errors'
import type { Db } from './database'
import type { BlobStore, PendingBlob, PutStreamOptions } from './blob-store'
import { keysetList, type Page } from './pagination'

/** A file as the API returns it (the SDK's BetaFileMetadata). */
export interface FileMetadata {
  id: string
  type: 'file'
  filename: string
  mime_type: string
  size_bytes: number
  created_at: string
  downloadable: boolean
  expires_at: string | null
  scope: { type: 'session'; id: string } | null
}

export interface FileListParams {
  limit?: number
  page?: string
  /** Only files produced in this session (`scope.id`). */
  scope_id?: string
  /** These files (deduplicated, ≤ 100; unknown and expired ids dropped), in one page. */
  ids?: string[]
}

export interface FileCreateParams {
  /** As sent; reduced to its last path component (empty: `unnamed` + the MIME type's extension). */
  filename: string
  /** As sent; a missing or generic type is guessed from the extension. */
  mimeType?: string
  /** 3600–7,776,000 (checked by the route's schema); absent: the file does not expire. */
  expiresInSeconds?: number
  /** A file a session produced (an output). */
  scopeSessionId?: string
}

/** A session's output as collected: where it was in the outputs folder, and the file that holds it now. */
export interface SessionOutput {
  /** Relative to the outputs folder (`report/summary.csv`). */
  path: string
  file_id: string
  sha256: string
  size_bytes: number
}

export interface FileStoreOptions {
  blobs: BlobStore
  clock?: () => Date
}

interface FileRow {
  id: string
  created_at: string
  filename: string
  mime_type: string
  size_bytes: number
  sha256: string
  downloadable: number
  expires_at: string | null
  scope_session_id: string | null
  output_path?: string | null
}

/** Most ids a list by `ids[]` takes (after removing duplicates). */
export const MAX_LIST_IDS = 100

/**
 * Files (`/v1/files`): one row each in `files`, the bytes in the BlobStore by SHA-256, so the same
 * content uploaded twice (or a session's copy of an input) is stored once. An expired file is
 * gone for every read (404, left out of lists) and is collected with its blob, when nothing
 * else holds the same content, by collectExpired (run on each upload and list, and when the
 * engine opens).
 *
 * Every blob change and the row that references it happen in one synchronous block, so a
 * collection can never remove a blob between an upload's write and its row.
 */
export class FileStore {
  private readonly blobs: BlobStore
  private readonly clock: () => Date

  constructor(
    private readonly db: Db,
    options: FileStoreOptions,
  ) {
    this.blobs = options.blobs
    this.clock = options.clock ?? (() => new Date())
  }

  /**
   * Writes an upload's bytes aside (hashed and counted as they arrive; past `limit` a 413 naming
   * `limitName` and nothing kept). The route then creates the file with createStaged (once it has
   * every field of the request) or drops it with discardStaged.
   */
  stage(stream: Readable | AsyncIterable<Uint8Array> | Iterable<Uint8Array>, options: PutStreamOptions): Promise<PendingBlob> {
    return this.blobs.putStream(stream, options)
  }

  /** Makes a staged upload a file. */
  createStaged(pending: PendingBlob, params: FileCreateParams): FileMetadata {
    try {
      this.blobs.commit(pending)
      const file = this.insertRow(pending, params)
      this.collectExpired()
      return file
    } catch (err) {
      this.blobs.discard(pending)
      throw err
    }
  }

  discardStaged(pending: PendingBlob): void {
    this.blobs.discard(pending)
  }

  /** Stores bytes held in memory as a new file (a session's output). */
  async createFromBytes(bytes: Buffer, params: FileCreateParams): Promise<FileMetadata> {
    const sha256 = await this.blobs.putBytes(bytes)
    return this.insertRow({ sha256, size: bytes.length }, params)
  }

  /**
   * Keeps a session's output (a file the agent wrote at `path` under its outputs folder) as a
   * session-scoped file. An output already kept for the path with the same bytes is returned as
   * it is; with other bytes, a new file replaces it (new id, the old one deleted), so the
   * session's files list one file per output path, its latest content.
   */
  async recordOutput(sessionId: string, path: string, bytes: Buffer): Promise<{ file: FileMetadata; replaced?: string; unchanged: boolean }> {
    if (!path || path.startsWith('/') || path.split('/').some((s) => s === '' || s === '.' || s === '..') || path.includes('\0')) throw invalid(`output path ${JSON.stringify(path)} must be a relative path without empty, . or .. segments`)
    const sha256 = await this.blobs.putBytes(bytes)
    const previous = this.db.prepare('SELECT * FROM files WHERE scope_session_id = ? AND output_path = ?').get(sessionId, path) as FileRow | undefined
    if (previous && previous.sha256 === sha256) return { file: toMetadata(previous), unchanged: true }
    const now = this.clock()
    const mime = mimeTypeOf(path, undefined)
    const row: FileRow = {
      id: newId('file', now.getTime()),
      created_at: now.toISOString(),
      filename: fileNameOf(path, mime),
      mime_type: mime,
      size_bytes: bytes.length,
      sha256,
      downloadable: 1,
      expires_at: null,
      scope_session_id: sessionId,
      output_path: path,
    }
    const orphaned = this.db.transaction(() => {
      if (previous) this.db.prepare('DELETE FROM files WHERE id = ?').run(previous.id)
      this.db
        .prepare('INSERT INTO files (id, created_at, filename, mime_type, size_bytes, sha256, downloadable, expires_at, scope_session_id, output_path) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)')
        .run(row.id, row.created_at, row.filename, row.mime_type, row.size_bytes, row.sha256, row.downloadable, row.expires_at, row.scope_session_id, row.output_path)
      return previous && !this.db.prepare('SELECT 1 FROM files WHERE sha256 = ? LIMIT 1').get(previous.sha256) ? previous.sha256 : undefined
    })()
    if (orphaned) this.blobs.remove(orphaned)
    return { file: toMetadata(row), replaced: previous?.id, unchanged: false }
  }

  /** The outputs kept for a session, by path. */
  outputs(sessionId: string): SessionOutput[] {
    const rows = this.db.prepare('SELECT id, output_path, sha256, size_bytes FROM files WHERE scope_session_id = ? AND output_path IS NOT NULL ORDER BY output_path').all(sessionId) as { id: string; output_path: string; sha256: string; size_bytes: number }[]
    return rows.map((r) => ({ path: r.output_path, file_id: r.id, sha256: r.sha256, size_bytes: r.size_bytes }))
  }

  private insertRow(blob: { sha256: string; size: number }, params: FileCreateParams): FileMetadata {
    const now = this.clock()
    const mime = mimeTypeOf(params.filename, params.mimeType)
    const row: FileRow = {
      id: newId('file', now.getTime()),
      created_at: now.toISOString(),
      filename: fileNameOf(params.filename, mime),
      mime_type: mime,
      size_bytes: blob.size,
      sha256: blob.sha256,
      downloadable: 1,
      expires_at: params.expiresInSeconds !== undefined ? new Date(now.getTime() + params.expiresInSeconds * 1000).toISOString() : null,
      scope_session_id: params.scopeSessionId ?? null,
    }
    this.db
      .prepare('INSERT INTO files (id, created_at, filename, mime_type, size_bytes, sha256, downloadable, expires_at, scope_session_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)')
      .run(row.id, row.created_at, row.filename, row.mime_type, row.size_bytes, row.sha256, row.downloadable, row.expires_at, row.scope_session_id)
    return toMetadata(row)
  }

  /** Whether `id` names a file that has not expired. */
  has(id: string): boolean {
    return this.row(id) !== undefined
  }

  retrieve(id: string): FileMetadata {
    const row = this.row(id)
    if (!row) throw notFound('file', id)
    return toMetadata(row)
  }

  /** Newest first; `ids` is one page of those files; `scope_id` a session's outputs. */
  list(params: FileListParams = {}): Page<FileMetadata> {
    this.collectExpired()
    const now = this.clock().toISOString()
    if (params.ids !== undefined) {
      if (params.page !== undefined || params.limit !== undefined) throw invalid('ids: a list by ids is one page; it takes no page or limit')
      const ids = [...new Set(params.ids)]
      if (ids.length > MAX_LIST_IDS) throw invalid(`ids: at most ${MAX_LIST_IDS} distinct ids (got ${ids.length})`)
      const where = [`id IN (${ids.map(() => '?').join(', ') || "''"})`, '(expires_at IS NULL OR expires_at > ?)']
      const args: unknown[] = [...ids, now]
      if (params.scope_id !== undefined) (where.push('scope_session_id = ?'), args.push(params.scope_id))
      const rows = this.db.prepare(`SELECT * FROM files WHERE ${where.join(' AND ')} ORDER BY created_at DESC, id DESC`).all(...args) as FileRow[]
      return { data: rows.map(toMetadata), next_page: null }
    }
    const where = ['(expires_at IS NULL OR expires_at > ?)']
    const args: unknown[] = [now]
    if (params.scope_id !== undefined) (where.push('scope_session_id = ?'), args.push(params.scope_id))
    const page = keysetList<FileMetadata, FileRow>(this.db, { table: 'files', where, args, order: 'desc', limit: params.limit ?? 20, page: params.page }, toMetadata)
    return { data: page.data, next_page: page.next_page }
  }

  /** The bytes of a file, streamed. */
  content(id: string): { stream: Readable; size: number; file: FileMetadata } {
    const row = this.row(id)
    if (!row) throw notFound('file', id)
    return { ...this.blobs.stream(row.sha256), file: toMetadata(row) }
  }

  /** The host path of a file's stored bytes (to copy from; never to be written through). */
  blobPath(id: string): string {
    const row = this.row(id)
    if (!row) throw notFound('file', id)
    return this.blobs.path(row.sha256)
  }

  /** The bytes of a file, in memory (placing it in a sandbox). */
  async bytes(id: string): Promise<Buffer> {
    const row = this.row(id)
    if (!row) throw notFound('file', id)
    return this.blobs.read(row.sha256)
  }

  delete(id: string): { id: string; type: 'file_deleted' } {
    const row = this.row(id)
    if (!row) throw notFound('file', id)
    this.removeRows([row])
    return { id, type: 'file_deleted' }
  }

  /** Removes every file a session produced (the session was deleted). */
  deleteSessionFiles(sessionId: string): number {
    const rows = this.db.prepare('SELECT * FROM files WHERE scope_session_id = ?').all(sessionId) as FileRow[]
    this.removeRows(rows)
    return rows.length
  }

  /** Removes expired files and the blobs nothing else holds. Returns how many files went. */
  collectExpired(): number {
    const rows = this.db.prepare('SELECT * FROM files WHERE expires_at IS NOT NULL AND expires_at <= ?').all(this.clock().toISOString()) as FileRow[]
    this.removeRows(rows)
    return rows.length
  }

  private removeRows(rows: FileRow[]): void {
    if (rows.length === 0) return
    const del = this.db.prepare('DELETE FROM files WHERE id = ?')
    const users = this.db.prepare('SELECT 1 FROM files WHERE sha256 = ? LIMIT 1')
    const orphaned = new Set<string>()
    this.db.transaction(() => {
      for (const r of rows) del.run(r.id)
      for (const r of rows) if (!users.get(r.sha256)) orphaned.add(r.sha256)
    })()
    for (const sha of orphaned) this.blobs.remove(sha)
  }

  private row(id: string): FileRow | undefined {
    const row = this.db.prepare('SELECT * FROM files WHERE id = ?').get(id) as FileRow | undefined
    if (!row || (row.expires_at !== null && row.expires_at <= this.clock().toISOString())) return undefined
    return row
  }
}

function toMetadata(row: FileRow): FileMetadata {
  return {
    id: row.id,
    type: 'file',
    filename: row.filename,
    mime_type: row.mime_type,
    size_bytes: row.size_bytes,
    created_at: row.created_at,
    downloadable: row.downloadable === 1,
    expires_at: row.expires_at,
    scope: row.scope_session_id ? { type: 'session', id: row.scope_session_id } : null,
  }
}

const MIME_BY_EXT: Record<string, string> = {
  txt: 'text/plain',
  md: 'text/markdown',
  csv: 'text/csv',
  tsv: 'text/tab-separated-values',
  json: 'application/json',
  jsonl: 'application/jsonl',
  html: 'text/html',
  xml: 'application/xml',
  yaml: 'application/yaml',
  yml: 'application/yaml',
  pdf: 'application/pdf',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  svg: 'image/svg+xml',
  zip: 'application/zip',
  gz: 'application/gzip',
  tar: 'application/x-tar',
  py: 'text/x-python',
  js: 'text/javascript',
  ts: 'text/plain',
  sh: 'text/x-shellscript',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
}
const GENERIC = new Set(['', 'application/octet-stream', 'binary/octet-stream'])

/** The MIME type kept for a file: the one sent, unless missing or generic; then the extension's. */
export function mimeTypeOf(filename: string, sent: string | undefined): string {
  const given = (sent ?? '').split(';')[0].trim().toLowerCase()
  if (!GENERIC.has(given) && /^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+$/.test(given)) return given
  const ext = /\.([A-Za-z0-9]+)$/.exec(baseName(filename))?.[1]?.toLowerCase()
  return (ext && MIME_BY_EXT[ext]) || 'application/octet-stream'
}

/** A filename reduced to its last path component; empty: `unnamed` + the MIME type's extension. */
export function fileNameOf(sent: string, mimeType: string): string {
  const name = baseName(sent).replace(/[\0-\x1f\x7f]/g, '').slice(0, 255)
  if (name && name !== '.' && name !== '..') return name
  const ext = Object.entries(MIME_BY_EXT).find(([, m]) => m === mimeType)?.[0]
  return ext ? `unnamed.${ext}` : 'unnamed'
}

function baseName(p: string): string {
  const parts = p.split(/[/\\]/)
  return parts[parts.length - 1] ?? ''
}
