/**
 * Boundary validation for dreams (research preview; spec resources.md §11, the SDK's
 * DreamCreateParams / DreamListParams). Strict like every schema of the API: an unknown key is
 * refused, naming it.
 */
import { z } from 'zod'
import { boolString, isoDate, pageQuerySchema } from './schemas'

export const MAX_DREAM_SESSIONS = 100
export const DREAM_STATUSES = ['pending', 'running', 'completed', 'failed', 'canceled'] as const

const memoryStoreInputSchema = z.strictObject({ type: z.literal('memory_store'), memory_store_id: z.string().min(1).max(128) })
const sessionsInputSchema = z.strictObject({
  type: z.literal('sessions'),
  session_ids: z
    .array(z.string().min(1).max(128))
    .min(1, 'at least 1 session')
    .max(MAX_DREAM_SESSIONS, `at most ${MAX_DREAM_SESSIONS} sessions`)
    .superRefine((ids, ctx) => {
      const seen = new Map<string, number>()
      ids.forEach((id, i) => {
        const first = seen.get(id)
        if (first !== undefined) ctx.addIssue({ code: 'custom', path: [i], message: `${id} is listed twice (session_ids[${first}] already)` })
        else seen.set(id, i)
      })
    }),
})

export const dreamCreateSchema = z
  .strictObject({
    inputs: z
      .array(z.discriminatedUnion('type', [memoryStoreInputSchema, sessionsInputSchema], { error: 'must be a {type:"memory_store"} or {type:"sessions"} input' }))
      .superRefine((inputs, ctx) => {
        for (const type of ['memory_store', 'sessions'] as const) {
          const at = inputs.flatMap((x, i) => (x.type === type ? [i] : []))
          if (at.length !== 1) ctx.addIssue({ code: 'custom', message: `exactly one ${type} input is required (found ${at.length})` })
        }
      }),
    model: z.union(
      [
        z.string().min(1).max(256),
        z.strictObject({ id: z.string().min(1).max(256), speed: z.literal('standard', { error: 'dreams run at the standard speed only' }).nullable().optional() }),
      ],
      { error: 'a model id, or {id, speed:"standard"}' },
    ),
    instructions: z.string().min(1, 'must not be empty').max(4096).nullable().optional(),
    output_behavior: z
      .discriminatedUnion(
        'type',
        [z.strictObject({ type: z.literal('create_new') }), z.strictObject({ type: z.literal('update_existing'), memory_store_id: z.string().min(1).max(128) })],
        { error: 'must be {type:"create_new"} or {type:"update_existing", memory_store_id}' },
      )
      .optional(),
  })
  .superRefine((p, ctx) => {
    const store = p.inputs.find((x) => x.type === 'memory_store')
    if (p.output_behavior?.type === 'update_existing' && store && p.output_behavior.memory_store_id !== store.memory_store_id) {
      ctx.addIssue({
        code: 'custom',
        path: ['output_behavior', 'memory_store_id'],
        message: `must be the memory store of inputs (${store.memory_store_id}): a dream updates the store it reads`,
      })
    }
  })

export const dreamListQuerySchema = pageQuerySchema.extend({
  'created_at[gt]': isoDate.optional(),
  'created_at[lt]': isoDate.optional(),
  include_archived: boolString.optional(),
  statuses: z.array(z.enum(DREAM_STATUSES)).optional(),
})
