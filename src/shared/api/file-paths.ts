/** Where a session's `file` resources appear in its sandbox (spec resources.md §9). */
export const UPLOADS_DIR = '/mnt/session/uploads'

/**
 * The folder of the sandbox whose files become the session's files (`scope: {type:'session'}`,
 * listed by `GET /v1/files?scope_id=<session>`): collected after each tool call and at release.
 */
export const OUTPUTS_DIR = '/mnt/session/outputs'

/**
 * A `file` resource's path in the sandbox: `/mnt/session/uploads/<file_id>` by default, or its
 * `mount_path` taken relative to that folder (`/data.csv` and `data.csv` are both
 * `/mnt/session/uploads/data.csv`). `.` and `..` segments are resolved and may not leave the
 * folder; null when the path is empty, leaves the folder or names the folder itself.
 */
export function fileMountPath(mountPath: string | null | undefined, fileId: string): string | null {
  const given = mountPath ?? fileId
  if (given.includes('\0')) return null
  const parts: string[] = []
  for (const seg of given.split('/')) {
    if (seg === '' || seg === '.') continue
    if (seg === '..') {
      if (parts.length === 0) return null
      parts.pop()
    } else parts.push(seg)
  }
  if (parts.length === 0) return null
  return `${UPLOADS_DIR}/${parts.join('/')}`
}
