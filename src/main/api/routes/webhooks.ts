import type { Hono } from 'hono'
import { webhookCreateSchema, webhookDeliveriesQuerySchema, webhookListQuerySchema, webhookUpdateSchema } from '../../../shared/api/webhook-schemas'
import { CorralError } from '../../../shared/errors'
import type { ApiServices, WebhookServices } from '../services'
import { validate } from '../validate'
import { noQuery, query, readJson } from './common'

/**
 * Webhook endpoints (spec resources.md §12, docs/webhooks.md): the SDK's organization endpoints
 * (`client.beta.organization.webhooks`), with or without their beta header, and Corral's own list
 * of an endpoint's deliveries. Without a keychain (an endpoint's signing secret lives there) every
 * route answers 503 (`keychain_error`), saying so.
 */
export function webhookRoutes(app: Hono, s: ApiServices): void {
  const hooks = (): WebhookServices => {
    if (!s.webhooks) throw new CorralError('keychain_error', 'this Corral sends no webhooks: it runs without a keychain, where their signing secrets are kept (the Settings page says why there is none)')
    return s.webhooks
  }
  const base = '/v1/organizations/webhooks'
  app.post(base, async (c) => (noQuery(c), c.json(await hooks().create(validate(webhookCreateSchema, await readJson(c))))))
  app.get(base, (c) => c.json(hooks().list(validate(webhookListQuerySchema, query(c), 'query'))))
  app.get(`${base}/:id`, (c) => (noQuery(c), c.json(hooks().retrieve(c.req.param('id')))))
  app.post(`${base}/:id`, async (c) => (noQuery(c), c.json(hooks().update(c.req.param('id'), validate(webhookUpdateSchema, await readJson(c))))))
  app.delete(`${base}/:id`, async (c) => (noQuery(c), c.json(await hooks().delete(c.req.param('id')))))
  app.post(`${base}/:id/regenerate_signing_secret`, async (c) => (noQuery(c), c.json(await hooks().regenerateSigningSecret(c.req.param('id')))))
  app.get('/v1/corral/webhooks/:id/deliveries', (c) => c.json(hooks().deliveries(c.req.param('id'), validate(webhookDeliveriesQuerySchema, query(c), 'query'))))
}
