/**
 * Skills' query and body schemas (spec resources.md §7.1). The SDK's uploads are multipart (parsed
 * in the route); the JSON upload is Corral's own, for the renderer, whose browser requests must be
 * JSON (api/README.md, browser rules).
 */
import { z } from 'zod'
import { pageQuerySchema } from './schemas'

/** `GET /v1/skills`. */
export const skillListQuerySchema = pageQuerySchema.extend({
  source: z.enum(['custom', 'anthropic'], { error: 'must be custom or anthropic' }).optional(),
})
/** `GET /v1/skills/{id}/versions`. */
export const skillVersionListQuerySchema = pageQuerySchema
/** The multipart fields of `POST /v1/skills` besides its `files[]` parts. */
export const skillUploadFieldsSchema = z.strictObject({ display_name: z.string().max(255).optional() })

const uploadFile = z.strictObject({
  /** The file's path inside the upload (`my-skill/SKILL.md`), as a multipart part's filename. */
  path: z.string().min(1).max(4096),
  /** The file's bytes, base64. */
  content_base64: z.string().max(16 * 1024 * 1024).regex(/^[A-Za-z0-9+/]*={0,2}$/, 'base64'),
})
/** Corral's `POST /v1/corral/skills` (the desktop's upload): the same files as JSON. */
export const corralSkillUploadSchema = z.strictObject({
  display_name: z.string().max(255).nullable().optional(),
  files: z.array(uploadFile).min(1).max(1000),
})
/** Corral's `POST /v1/corral/skills/{id}/versions`. */
export const corralSkillVersionUploadSchema = z.strictObject({ files: z.array(uploadFile).min(1).max(1000) })
