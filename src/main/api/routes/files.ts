import type { Context, Hono } from 'hono'
import { Readable } from 'node:stream'
import { fileListQuerySchema, fileUploadFieldsSchema } from '../../../shared/api/schemas'
import { CorralError, invalid } from '../../../shared/errors'
import type { PendingBlob } from '../../session/blob-store'
import type { FileStore } from '../../session/file-store'
import type { ApiServices } from '../services'
import { validate } from '../validate'
import { noQuery, query, readMultipart } from './common'

/** Room for the multipart framing and the other fields on top of the file's own bytes. */
const MULTIPART_OVERHEAD = 64 * 1024
/** A `file` part sent without a filename arrives as a field, held in memory: up to this size. */
const FIELD_FILE_BYTES = 1024 * 1024

/**
 * /v1/files (spec resources.md §8): no `anthropic-beta` header is required. An upload is
 * multipart `file` (+ `expires_in_seconds`), streamed to disk with the user's size cap
 * (settings `max_file_bytes`): over it is a 413 naming the cap, and nothing is kept.
 */
export function fileRoutes(app: Hono, s: ApiServices): void {
  const files = () => {
    if (!s.files) throw new CorralError('not_found_error', 'this Corral has no file store')
    return s.files
  }
  app.post('/v1/files', async (c) => (noQuery(c), c.json(await upload(c, files().store, files().maxBytes()))))
  app.get('/v1/files', (c) => {
    const q = validate(fileListQuerySchema, query(c, ['ids']), 'query')
    return c.json(files().store.list(q))
  })
  app.get('/v1/files/:id', (c) => (noQuery(c), c.json(files().store.retrieve(c.req.param('id')))))
  app.get('/v1/files/:id/content', (c) => {
    noQuery(c)
    const { stream, size, file } = files().store.content(c.req.param('id'))
    return new Response(Readable.toWeb(stream) as unknown as ReadableStream, {
      headers: {
        'content-type': file.mime_type,
        'content-length': String(size),
        'content-disposition': `attachment; filename*=UTF-8''${encodeURIComponent(file.filename)}`,
        'x-content-type-options': 'nosniff',
      },
    })
  })
  app.delete('/v1/files/:id', (c) => (noQuery(c), c.json(files().store.delete(c.req.param('id')))))
  // Corral addition: the bytes as base64 JSON, for the desktop's download over IPC (which carries JSON only).
  app.get('/v1/corral/files/:id/read', async (c) => {
    noQuery(c)
    const store = files().store
    const file = store.retrieve(c.req.param('id'))
    if (file.size_bytes > READ_JSON_MAX_BYTES) throw invalid(`file ${file.id} is ${file.size_bytes} bytes: download it from /v1/files/${file.id}/content (this route carries at most ${READ_JSON_MAX_BYTES} bytes)`)
    return c.json({ id: file.id, filename: file.filename, mime_type: file.mime_type, content_base64: (await store.bytes(file.id)).toString('base64') })
  })
}

/** Largest file /v1/corral/files/{id}/read answers (base64 in one JSON body). */
const READ_JSON_MAX_BYTES = 64 * 1024 * 1024

/** Parses the multipart body as it arrives: the `file` part goes straight to the store's staging. */
async function upload(c: Context, store: FileStore, cap: number) {
  const limitName = `the file size limit of ${cap} bytes (settings: max_file_bytes)`
  const fields: Record<string, string> = {}
  let staged: Promise<PendingBlob> | undefined
  let file: { filename: string; mimeType: string } | undefined
  let extraFiles = false
  try {
    await readMultipart(c, {
      expects: 'an upload is multipart/form-data with a `file` part',
      maxBytes: cap + MULTIPART_OVERHEAD,
      tooLarge: (declared) => `request body is ${declared} bytes; a file is at most ${limitName}`,
      limits: { files: 1, fileSize: cap + 1, fields: 16, fieldSize: FIELD_FILE_BYTES, parts: 17 },
      onParts: (parser, fail) => {
        parser.on('file', (name, stream, info) => {
          if (name !== 'file') {
            stream.resume()
            fail(invalid(`body: unknown part ${JSON.stringify(name)}; an upload takes a \`file\` part and \`expires_in_seconds\``))
            return
          }
          file = { filename: info.filename ?? '', mimeType: info.mimeType }
          staged = store.stage(stream, { limit: cap, limitName })
          staged.catch((err: unknown) => {
            stream.resume()
            fail(err)
          })
        })
        parser.on('field', (name, value, info) => {
          // A part with an empty filename comes as a field: its value is the file (named `unnamed`).
          if (name === 'file' && !staged) {
            if (info.valueTruncated) return fail(invalid(`body.file: a part without a filename is at most ${FIELD_FILE_BYTES} bytes; send a filename`))
            file = { filename: '', mimeType: info.mimeType }
            staged = store.stage([Buffer.from(value, 'utf8')], { limit: cap, limitName })
            staged.catch(fail)
          } else fields[name] = value
        })
        parser.on('filesLimit', () => (extraFiles = true))
      },
    })
  } catch (err) {
    if (staged) await staged.then((p) => store.discardStaged(p)).catch(() => {})
    throw err
  }
  if (!staged || !file) throw invalid('body.file: required (the multipart part named `file`)')
  const pending = await staged
  try {
    if (extraFiles) throw invalid('body.file: one file per upload')
    const opts = validate(fileUploadFieldsSchema, fields, 'body')
    return store.createStaged(pending, { filename: file.filename, mimeType: file.mimeType, expiresInSeconds: opts.expires_in_seconds })
  } catch (err) {
    store.discardStaged(pending)
    throw err
  }
}
