/**
 * Boundary validation for memory stores, memories and memory versions (spec resources.md §6,
 * the SDK's resources/beta/memory-stores/*.d.ts). Kept beside schemas.ts, which it builds on.
 */
import { z } from 'zod'

/** Largest memory content, in UTF-8 bytes. */
export const MAX_MEMORY_BYTES = 102_400
/** Largest memory path, in UTF-8 bytes. */
export const MAX_MEMORY_PATH_BYTES = 1024
/** Most segments a memory path may have. */
export const MAX_MEMORY_PATH_SEGMENTS = 20
/** The path the SDK's sync worker keeps its marker at: never a memory. */
export const RESERVED_MEMORY_PATH = '/.anthropic-memory-store'
/** Most memory stores one session may attach. */
export const MAX_SESSION_MEMORY_STORES = 8
/** Largest page of a list with `view=full`. */
export const MAX_FULL_VIEW_PAGE = 20

const utf8Bytes = (s: string) => new TextEncoder().encode(s).length
// Control (Cc) and format (Cf) characters, and the line/paragraph separators.
const FORBIDDEN_PATH_CHARS = /[\p{Cc}\p{Cf}\u2028\u2029]/u

/**
 * The rule a memory path breaks (§6.3), or undefined when it is a valid path: starts with `/`,
 * 1–20 non-empty segments that are not `.` or `..`, no control, format or separator characters,
 * NFC, at most 1,024 UTF-8 bytes, not the sync worker's reserved marker path.
 */
export function memoryPathProblem(path: string): string | undefined {
  if (!path.startsWith('/')) return 'must start with "/"'
  if (utf8Bytes(path) > MAX_MEMORY_PATH_BYTES) return `must be at most ${MAX_MEMORY_PATH_BYTES} bytes of UTF-8`
  if (FORBIDDEN_PATH_CHARS.test(path)) return 'must not contain control or format characters, U+2028 or U+2029'
  if (path.normalize('NFC') !== path) return 'must be in Unicode Normalization Form C'
  const segments = path.slice(1).split('/')
  if (segments.length > MAX_MEMORY_PATH_SEGMENTS) return `must have at most ${MAX_MEMORY_PATH_SEGMENTS} segments`
  if (segments.some((s) => s === '')) return 'must not have an empty segment (no "//" and no trailing "/")'
  if (segments.some((s) => s === '.' || s === '..')) return 'must not have a "." or ".." segment'
  if (path === RESERVED_MEMORY_PATH || path.startsWith(RESERVED_MEMORY_PATH + '/')) return `${RESERVED_MEMORY_PATH} is reserved for the sync marker`
  return undefined
}

const memoryPath = z.string().superRefine((p, ctx) => {
  const problem = memoryPathProblem(p)
  if (problem) ctx.addIssue({ code: 'custom', message: problem })
})
const memoryContent = z.string().refine((c) => utf8Bytes(c) <= MAX_MEMORY_BYTES, `must be at most ${MAX_MEMORY_BYTES} bytes of UTF-8`)

const storeName = z
  .string()
  .min(1)
  .max(255)
  .refine((n) => !/\p{Cc}/u.test(n), 'must not contain control characters')
const storeDescription = z.string().max(1024)
const storeMetadata = z
  .record(z.string().min(1).max(64), z.string().max(512))
  .refine((m) => Object.keys(m).length <= 16, 'at most 16 metadata keys')
const storeMetadataPatch = z
  .record(z.string().min(1).max(64), z.string().max(512).nullable())
  .refine((m) => Object.keys(m).length <= 16, 'at most 16 metadata keys')

export const memoryStoreCreateSchema = z.strictObject({
  name: storeName,
  description: storeDescription.optional(),
  metadata: storeMetadata.optional(),
})
export const memoryStoreUpdateSchema = z.strictObject({
  name: storeName.nullable().optional(),
  /** `""` (or null) clears it. */
  description: storeDescription.nullable().optional(),
  /** A patch: a null value deletes its key; null as a whole leaves metadata as it is. */
  metadata: storeMetadataPatch.nullable().optional(),
})

const boolString = z.enum(['true', 'false']).transform((v) => v === 'true')
const isoDate = z.iso.datetime({ offset: true })
const limit = z.coerce.number().int().min(1).max(1000)
const page = z.string().max(2048)
const view = z.enum(['basic', 'full'])

export const memoryStoreListQuerySchema = z.strictObject({
  limit: limit.optional(),
  page: page.optional(),
  include_archived: boolString.optional(),
  'created_at[gte]': isoDate.optional(),
  'created_at[lte]': isoDate.optional(),
})

export const memoryViewQuerySchema = z.strictObject({ view: view.optional() })

export const memoryCreateSchema = z.strictObject({
  path: memoryPath,
  /** `""` makes an empty memory; null is taken as `""`. */
  content: memoryContent.nullable(),
})
export const memoryUpdateSchema = z.strictObject({
  content: memoryContent.nullable().optional(),
  path: memoryPath.nullable().optional(),
  precondition: z
    .strictObject({
      type: z.literal('content_sha256'),
      content_sha256: z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hexadecimal characters').optional(),
    })
    .optional(),
})

export const memoryListQuerySchema = z.strictObject({
  limit: limit.optional(),
  page: page.optional(),
  view: view.optional(),
  path_prefix: z
    .string()
    .max(MAX_MEMORY_PATH_BYTES)
    .refine((p) => p.startsWith('/') && p.endsWith('/'), 'must start and end with "/" (it matches whole segments)')
    .optional(),
  depth: z.coerce.number().int().min(0).max(MAX_MEMORY_PATH_SEGMENTS).optional(),
})

export const memoryDeleteQuerySchema = z.strictObject({
  expected_content_sha256: z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hexadecimal characters').optional(),
})

export const MEMORY_VERSION_OPERATIONS = ['created', 'modified', 'deleted'] as const
export const memoryVersionListQuerySchema = z.strictObject({
  limit: limit.optional(),
  page: page.optional(),
  view: view.optional(),
  memory_id: z.string().max(128).optional(),
  operation: z.enum(MEMORY_VERSION_OPERATIONS).optional(),
  session_id: z.string().max(128).optional(),
  api_key_id: z.string().max(128).optional(),
  service_account_id: z.string().max(128).optional(),
  'created_at[gte]': isoDate.optional(),
  'created_at[lte]': isoDate.optional(),
})

export type MemoryStoreCreateInput = z.infer<typeof memoryStoreCreateSchema>
export type MemoryStoreUpdateInput = z.infer<typeof memoryStoreUpdateSchema>
export type MemoryStoreListQuery = z.infer<typeof memoryStoreListQuerySchema>
export type MemoryCreateInput = z.infer<typeof memoryCreateSchema>
export type MemoryUpdateInput = z.infer<typeof memoryUpdateSchema>
export type MemoryListQuery = z.infer<typeof memoryListQuerySchema>
export type MemoryVersionListQuery = z.infer<typeof memoryVersionListQuerySchema>
export type MemoryView = z.infer<typeof view>

/** Where a session's memory stores are mounted in its sandbox, one folder per store. */
export const MEMORY_DIR = '/mnt/memory'

/**
 * The `mount_path` of a store in a session's sandbox (§6.3): the name lowercased, every run of
 * characters other than `[a-z0-9]` made one `-` (trimmed at both ends), under `/mnt/memory/`;
 * the store id when nothing is left.
 */
export function memoryMountPath(name: string, storeId: string): string {
  const slug = name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
  return `${MEMORY_DIR}/${slug || storeId}`
}
