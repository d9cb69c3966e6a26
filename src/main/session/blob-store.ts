import { createHash, randomBytes } from 'node:crypto'
import { createReadStream, existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs'
import { mkdir, open, readFile, rm } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import type { Readable } from 'node:stream'
import { CorralError } from '../../shared/errors'

/** What a blob was stored as. */
export interface StoredBlob {
  /** Plain hex SHA-256 of the bytes: the blob's name. */
  sha256: string
  size: number
}

/** A blob written to a temporary file, not yet under its name (see BlobStore.commit). */
export interface PendingBlob extends StoredBlob {
  readonly tmpPath: string
}

export interface PutStreamOptions {
  /** Refuse (413 `request_too_large`) once more than this many bytes arrive. */
  limit: number
  /** Names the cap in the 413's message (e.g. "the file size limit (settings: max_file_bytes)"). */
  limitName: string
}

const SHA256 = /^[0-9a-f]{64}$/

/**
 * Content-addressed bytes on disk: `<dir>/<first 2 hex>/<other 62 hex>`, each content stored
 * once, written to a temporary file and renamed into place (a crash never leaves a torn blob).
 * The one blob layout of the data directory: the Changes feature's objects
 * (hands/changes/folder-changes.ts) and the files API (file-store.ts) both keep their bytes here.
 */
export class BlobStore {
  constructor(readonly dir: string) {}

  path(sha256: string): string {
    if (!SHA256.test(sha256)) throw new CorralError('invalid_request_error', `hash: ${JSON.stringify(sha256)} is not a sha256`)
    return join(this.dir, sha256.slice(0, 2), sha256.slice(2))
  }

  has(sha256: string): boolean {
    return existsSync(this.path(sha256))
  }

  /** Stores bytes held in memory; returns their hash. */
  async putBytes(bytes: Buffer): Promise<string> {
    const sha256 = createHash('sha256').update(bytes).digest('hex')
    const p = this.path(sha256)
    if (!existsSync(p)) {
      await mkdir(dirname(p), { recursive: true })
      const tmp = `${p}.${randomBytes(6).toString('hex')}.tmp`
      const fh = await open(tmp, 'w', 0o600)
      try {
        await fh.writeFile(bytes)
      } finally {
        await fh.close()
      }
      renameSync(tmp, p)
    }
    return sha256
  }

  /**
   * Writes a stream to a temporary file while hashing and counting it: nothing past `limit` is
   * kept (413 naming the cap; the temporary file is removed). The caller commits it (under its
   * hash) or discards it.
   */
  async putStream(stream: Readable | AsyncIterable<Uint8Array> | Iterable<Uint8Array>, options: PutStreamOptions): Promise<PendingBlob> {
    const tmpDir = join(this.dir, 'tmp')
    await mkdir(tmpDir, { recursive: true })
    const tmpPath = join(tmpDir, randomBytes(12).toString('hex'))
    const hash = createHash('sha256')
    let size = 0
    const fh = await open(tmpPath, 'w', 0o600)
    try {
      for await (const chunk of stream as AsyncIterable<Uint8Array>) {
        size += chunk.byteLength
        if (size > options.limit) {
          throw new CorralError('request_too_large', `file is over ${options.limit} bytes, ${options.limitName}`)
        }
        hash.update(chunk)
        await fh.write(chunk)
      }
      await fh.close()
    } catch (err) {
      await fh.close().catch(() => {})
      await rm(tmpPath, { force: true })
      throw err
    }
    return { sha256: hash.digest('hex'), size, tmpPath }
  }

  /**
   * Puts a pending blob under its name (synchronously, so a caller can commit it and insert the
   * row that references it without a collection running in between). Idempotent.
   */
  commit(blob: PendingBlob): void {
    const p = this.path(blob.sha256)
    if (existsSync(p)) {
      rmSync(blob.tmpPath, { force: true })
      return
    }
    mkdirSync(dirname(p), { recursive: true })
    renameSync(blob.tmpPath, p)
  }

  discard(blob: PendingBlob): void {
    rmSync(blob.tmpPath, { force: true })
  }

  async read(sha256: string): Promise<Buffer> {
    return readFile(this.path(sha256)).catch((err) => {
      throw new CorralError('not_found_error', `content ${sha256} is not in the store`, { cause: err })
    })
  }

  /** The bytes as a stream (for downloads). Throws not_found_error when the blob is gone. */
  stream(sha256: string): { stream: Readable; size: number } {
    const p = this.path(sha256)
    let size: number
    try {
      size = statSync(p).size
    } catch (err) {
      throw new CorralError('not_found_error', `content ${sha256} is not in the store`, { cause: err })
    }
    return { stream: createReadStream(p), size }
  }

  /** Removes a blob (synchronously; see commit). */
  remove(sha256: string): void {
    rmSync(this.path(sha256), { force: true })
  }
}
