import { createHash } from 'node:crypto'
import { constants } from 'node:fs'
import { chmod, copyFile, mkdir, rm, rmdir } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { UPLOADS_DIR } from '../../../shared/api/file-paths'
import type { FolderMount } from '../sandbox'

/** What FileMounts reads files from (the FileStore). */
export interface FileSource {
  /** The host path of the file's stored bytes (content-addressed; never written through). */
  blobPath(fileId: string): string
}

export interface FileMountsOptions {
  files: () => FileSource | undefined
  /** Host directory under which each session's uploads folder is made (<dataDir>/uploads). */
  root: string
  log?: (message: string) => void
}

/**
 * A session's `file` resources as one read-only folder: each file is copied (a reflink where the
 * filesystem has them) from the file store into `<root>/<session>/`, at its mount path under
 * /mnt/session/uploads, mode 0444, and the folder is bound read-only at /mnt/session/uploads in
 * Docker and in bubblewrap (a FolderMount, like host folders and memory stores). A file added to a
 * running session is copied into the bound folder, so it appears in the sandbox at once; a
 * removed one disappears.
 */
export class FileMounts {
  constructor(private readonly o: FileMountsOptions) {}

  /** The folder to bind for a session's file resources (none when it has none). */
  async prepare(sessionId: string, resources: readonly Record<string, unknown>[] | undefined): Promise<FolderMount[]> {
    const files = (resources ?? []).map((r, index) => ({ r, index })).filter(({ r }) => r.type === 'file')
    if (files.length === 0) return []
    const dir = this.dirOf(sessionId)
    await mkdir(dir, { recursive: true, mode: 0o755 })
    await chmod(dir, 0o755)
    for (const { r } of files) await this.add(sessionId, r)
    return [{ index: files[0].index, source: dir, target: UPLOADS_DIR, readOnly: true }]
  }

  /** Copies one file resource into the session's folder (kept if already there). */
  async add(sessionId: string, resource: Record<string, unknown>): Promise<void> {
    const target = this.hostPath(sessionId, resource)
    const source = this.o.files()?.blobPath(String(resource.file_id))
    if (!target || !source) return
    await mkdir(dirname(target), { recursive: true, mode: 0o755 })
    try {
      await copyFile(source, target, constants.COPYFILE_EXCL | constants.COPYFILE_FICLONE)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') return
      throw err
    }
    await chmod(target, 0o444)
  }

  /** Removes a file resource's copy (and the folders it leaves empty). */
  async remove(sessionId: string, resource: Record<string, unknown>): Promise<void> {
    const target = this.hostPath(sessionId, resource)
    if (!target) return
    await rm(target, { force: true })
    const root = this.dirOf(sessionId)
    for (let d = dirname(target); d.startsWith(root + '/'); d = dirname(d)) if (!(await rmdir(d).then(() => true, () => false))) break
  }

  /** Whether a session's folder exists (its sandbox binds it). */
  dirOf(sessionId: string): string {
    const key = /^[A-Za-z0-9_-]{1,100}$/.test(sessionId) ? sessionId : 'h' + createHash('sha256').update(sessionId).digest('hex').slice(0, 32)
    return join(this.o.root, key)
  }

  async release(sessionId: string): Promise<void> {
    await rm(this.dirOf(sessionId), { recursive: true, force: true })
  }

  /** The host path of a resource's copy; its mount_path was checked (and made absolute) at create. */
  private hostPath(sessionId: string, resource: Record<string, unknown>): string | undefined {
    const mountPath = typeof resource.mount_path === 'string' ? resource.mount_path : ''
    if (!mountPath.startsWith(UPLOADS_DIR + '/')) return undefined
    const rel = mountPath.slice(UPLOADS_DIR.length + 1)
    if (rel.split('/').some((seg) => seg === '' || seg === '.' || seg === '..')) return undefined
    return join(this.dirOf(sessionId), rel)
  }
}
