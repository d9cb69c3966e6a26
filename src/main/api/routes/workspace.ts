import { readFile, stat } from 'node:fs/promises'
import type { Hono } from 'hono'
import { changesRevertSchema, workspacePathQuerySchema } from '../../../shared/api/workspace'
import { CorralError } from '../../../shared/errors'
import type { ApiServices, WorkspaceServices } from '../services'
import { validate } from '../validate'
import { noQuery, query, readJson } from './common'

/** Largest file the browser downloads in one response. */
const MAX_DOWNLOAD_BYTES = 256 * 1024 * 1024
/** Largest file read as JSON (base64), the renderer's download over either transport. */
const MAX_READ_BYTES = 32 * 1024 * 1024

/**
 * Corral additions for a session's host folders: what the agent changed (per turn, with diffs),
 * reverting a file, a turn or everything, and browsing / downloading the folders' files.
 */
export function workspaceRoutes(app: Hono, s: ApiServices): void {
  const ws = (id: string): WorkspaceServices => {
    s.sessions.retrieve(id) // 404 for an unknown session
    if (!s.workspace) throw new CorralError('not_found_error', 'this engine has no local hands, so no host folders')
    return s.workspace
  }
  app.get('/v1/corral/sessions/:id/changes', async (c) => (noQuery(c), c.json(await ws(c.req.param('id')).list(c.req.param('id')))))
  app.post('/v1/corral/sessions/:id/changes/revert', async (c) => {
    const body = validate(changesRevertSchema, await readJson(c))
    return c.json(await ws(c.req.param('id')).revert(c.req.param('id'), body))
  })
  app.get('/v1/corral/sessions/:id/files', async (c) => {
    const q = validate(workspacePathQuerySchema, query(c), 'query')
    return c.json(await ws(c.req.param('id')).listFiles(c.req.param('id'), q.path))
  })
  app.get('/v1/corral/sessions/:id/files/read', async (c) => {
    const q = validate(workspacePathQuerySchema, query(c), 'query')
    if (!q.path) throw new CorralError('invalid_request_error', 'query.path: required (the file to read)')
    const { host, name } = await ws(c.req.param('id')).filePath(c.req.param('id'), q.path)
    const st = await stat(host)
    if (st.size > MAX_READ_BYTES) throw new CorralError('request_too_large', `path: ${q.path} is ${st.size} bytes; reading stops at ${MAX_READ_BYTES} (download it from /files/content)`)
    return c.json({ name, path: q.path, size: st.size, content_base64: (await readFile(host)).toString('base64') })
  })
  app.get('/v1/corral/sessions/:id/files/content', async (c) => {
    const q = validate(workspacePathQuerySchema, query(c), 'query')
    if (!q.path) throw new CorralError('invalid_request_error', 'query.path: required (the file to download)')
    const { host, name } = await ws(c.req.param('id')).filePath(c.req.param('id'), q.path)
    const st = await stat(host)
    if (st.size > MAX_DOWNLOAD_BYTES) throw new CorralError('request_too_large', `path: ${q.path} is ${st.size} bytes; downloads stop at ${MAX_DOWNLOAD_BYTES}`)
    const bytes = await readFile(host)
    return c.body(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) as Uint8Array<ArrayBuffer>, 200, { 'content-type': 'application/octet-stream', 'content-disposition': `attachment; filename*=UTF-8''${encodeURIComponent(name)}`, 'x-content-type-options': 'nosniff' })
  })
}
