import type { Context, Hono } from 'hono'
import { MAX_SKILL_BYTES, MAX_SKILL_FILES } from '../../../shared/api/skills'
import { corralSkillUploadSchema, corralSkillVersionUploadSchema, skillListQuerySchema, skillUploadFieldsSchema, skillVersionListQuerySchema } from '../../../shared/api/skill-schemas'
import { CorralError, invalid } from '../../../shared/errors'
import type { SkillStore, SkillUploadPart } from '../../session/skill-store'
import type { ApiServices } from '../services'
import { validate } from '../validate'
import { noQuery, query, readJson, readMultipart } from './common'

/** Room for the multipart framing and the display_name field on top of the files' bytes. */
const MULTIPART_OVERHEAD = 256 * 1024

/**
 * /v1/skills and /v1/skills/{id}/versions (spec resources.md §7.1): no `anthropic-beta` header
 * is required. An upload is multipart `files[]` (each part's filename its path in the skill) and
 * `display_name`; a version's `content` is its zip. Corral adds `POST /v1/corral/skills` and
 * `POST /v1/corral/skills/{id}/versions`, the same uploads as JSON (base64 contents) for the
 * desktop, whose browser requests must be JSON.
 */
export function skillRoutes(app: Hono, s: ApiServices): void {
  const skills = (): SkillStore => {
    if (!s.skills) throw new CorralError('not_found_error', 'this Corral has no skill store')
    return s.skills
  }
  app.post('/v1/skills', async (c) => {
    noQuery(c)
    const { parts, fields } = await readSkillUpload(c)
    const { display_name } = validate(skillUploadFieldsSchema, fields, 'body')
    return c.json(await skills().create({ files: parts, display_name }))
  })
  app.get('/v1/skills', (c) => c.json(skills().list(validate(skillListQuerySchema, query(c), 'query'))))
  app.get('/v1/skills/:id', (c) => (noQuery(c), c.json(skills().retrieve(c.req.param('id')))))
  app.delete('/v1/skills/:id', (c) => (noQuery(c), c.json(skills().delete(c.req.param('id')))))

  app.post('/v1/skills/:id/versions', async (c) => {
    noQuery(c)
    const store = skills()
    store.retrieve(c.req.param('id')) // 404 before reading the upload
    const { parts, fields } = await readSkillUpload(c)
    validate(skillUploadFieldsSchema.omit({ display_name: true }), fields, 'body')
    return c.json(await store.createVersion(c.req.param('id'), parts))
  })
  app.get('/v1/skills/:id/versions', (c) => c.json(skills().listVersions(c.req.param('id'), validate(skillVersionListQuerySchema, query(c), 'query'))))
  app.get('/v1/skills/:id/versions/:version', (c) => (noQuery(c), c.json(skills().retrieveVersion(c.req.param('id'), c.req.param('version')))))
  app.delete('/v1/skills/:id/versions/:version', (c) => (noQuery(c), c.json(skills().deleteVersion(c.req.param('id'), c.req.param('version')))))
  app.get('/v1/skills/:id/versions/:version/content', async (c) => {
    noQuery(c)
    const { version, zip } = await skills().archive(c.req.param('id'), c.req.param('version'))
    return new Response(new Uint8Array(zip), {
      headers: {
        'content-type': 'application/zip',
        'content-length': String(zip.length),
        'content-disposition': `attachment; filename="${version.name}.zip"`,
        'x-content-type-options': 'nosniff',
      },
    })
  })

  app.post('/v1/corral/skills', async (c) => {
    noQuery(c)
    const body = validate(corralSkillUploadSchema, await readJson(c))
    return c.json(await skills().create({ files: decodeFiles(body.files), display_name: body.display_name }))
  })
  app.post('/v1/corral/skills/:id/versions', async (c) => {
    noQuery(c)
    const body = validate(corralSkillVersionUploadSchema, await readJson(c))
    return c.json(await skills().createVersion(c.req.param('id'), decodeFiles(body.files)))
  })
}

function decodeFiles(files: readonly { path: string; content_base64: string }[]): SkillUploadPart[] {
  return files.map((f) => ({ filename: f.path, bytes: Buffer.from(f.content_base64, 'base64') }))
}

/**
 * Reads a skill upload's multipart body: every `files[]` (or `files`) part in memory, counted
 * against the skill cap as it arrives (past it: 413 naming the cap, the rest unread), and the
 * other fields. A part of another name is a 400 naming it.
 */
async function readSkillUpload(c: Context): Promise<{ parts: SkillUploadPart[]; fields: Record<string, string> }> {
  const capName = `a skill version is at most ${MAX_SKILL_BYTES} bytes (the sum of its files)`
  const parts: SkillUploadPart[] = []
  const fields: Record<string, string> = {}
  let total = 0
  await readMultipart(c, {
    expects: 'a skill upload is multipart/form-data with one `files[]` part per file',
    maxBytes: MAX_SKILL_BYTES + MULTIPART_OVERHEAD,
    tooLarge: (declared) => `request body is ${declared} bytes; ${capName}`,
    preservePath: true,
    limits: { files: MAX_SKILL_FILES + 1, fileSize: MAX_SKILL_BYTES + 1, fields: 8, fieldSize: 64 * 1024, parts: MAX_SKILL_FILES + 9 },
    onParts: (parser, fail) => {
      parser.on('file', (name, stream, info) => {
        if (name !== 'files[]' && name !== 'files') {
          stream.resume()
          return fail(invalid(`body: unknown part ${JSON.stringify(name)}; a skill upload takes \`files[]\` parts and \`display_name\``))
        }
        const chunks: Buffer[] = []
        const part: SkillUploadPart = { filename: info.filename ?? '', bytes: Buffer.alloc(0) }
        parts.push(part)
        stream.on('data', (chunk: Buffer) => {
          total += chunk.length
          if (total > MAX_SKILL_BYTES) {
            stream.resume()
            return fail(new CorralError('request_too_large', `files: the upload passed ${MAX_SKILL_BYTES} bytes; ${capName}`))
          }
          chunks.push(chunk)
        })
        stream.on('end', () => (part.bytes = Buffer.concat(chunks)))
      })
      parser.on('field', (name, value) => {
        if (name === 'files[]' || name === 'files') return fail(invalid(`body.files[${parts.length}]: a part without a filename; each file's filename is its path in the skill (e.g. my-skill/SKILL.md)`))
        fields[name] = value
      })
      parser.on('filesLimit', () => fail(invalid(`files: at most ${MAX_SKILL_FILES} files per skill`)))
      parser.on('partsLimit', () => fail(invalid(`body: too many parts (at most ${MAX_SKILL_FILES} files and a few fields)`)))
    },
  })
  return { parts, fields }
}
