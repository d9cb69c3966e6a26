/**
 * Boundary validation for webhook endpoints (`/v1/organizations/webhooks`; the SDK's
 * WebhookCreateParams / WebhookUpdateParams / WebhookListParams). Strict like every schema of the
 * API: an unknown key is refused, naming it. `enabled_events` takes every event type of the SDK's
 * webhook union (docs/webhooks.md says which Corral sends).
 */
import { z } from 'zod'
import { WEBHOOK_EVENT_TYPES } from './webhooks'

const KNOWN = new Set<string>(WEBHOOK_EVENT_TYPES)

const webhookUrl = z
  .string()
  .max(2048, 'at most 2048 characters')
  .superRefine((v, ctx) => {
    let u: URL
    try {
      u = new URL(v)
    } catch {
      return ctx.addIssue({ code: 'custom', message: `${JSON.stringify(v.slice(0, 100))} is not an absolute URL (e.g. http://127.0.0.1:8787/hooks)` })
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') ctx.addIssue({ code: 'custom', message: `must be http or https (got ${u.protocol.replace(/:$/, '')})` })
    // the URL is stored in the database as it is: a secret in it would not be kept like one
    if (u.username || u.password) ctx.addIssue({ code: 'custom', message: 'must not carry a user name or password; check the webhook-signature header instead' })
  })

const enabledEvents = z
  .array(z.string())
  .min(1, 'list at least one event type')
  .max(WEBHOOK_EVENT_TYPES.length)
  .superRefine((types, ctx) => {
    types.forEach((t, i) => {
      if (!KNOWN.has(t)) ctx.addIssue({ code: 'custom', path: [i], message: `${JSON.stringify(t)} is not a webhook event type (e.g. session.status_idled, session.requires_action)` })
    })
  })
  .transform((types) => types as (typeof WEBHOOK_EVENT_TYPES)[number][])

export const webhookCreateSchema = z.strictObject({
  url: webhookUrl,
  enabled_events: enabledEvents,
  name: z.string().max(255, 'at most 255 characters').optional(),
  description: z.string().max(2048, 'at most 2048 characters').optional(),
})

export const webhookUpdateSchema = z.strictObject({
  url: webhookUrl.optional(),
  enabled_events: enabledEvents.optional(),
  name: z.string().max(255, 'at most 255 characters').optional(),
  description: z.string().max(2048, 'at most 2048 characters').optional(),
  state: z.enum(['enabled', 'disabled']).optional(),
})

export const webhookListQuerySchema = z
  .strictObject({
    limit: z.coerce.number().int().min(1).max(100).optional(),
    after_id: z.string().max(128).optional(),
    before_id: z.string().max(128).optional(),
    order: z.enum(['asc', 'desc']).optional(),
  })
  .refine((q) => q.after_id === undefined || q.before_id === undefined, { message: 'give after_id or before_id, not both' })

export const webhookDeliveriesQuerySchema = z.strictObject({ limit: z.coerce.number().int().min(1).max(500).optional() })
