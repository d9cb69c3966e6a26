import type { Hono } from 'hono'
import { pageQuerySchema, sessionResourceAddSchema, sessionResourceUpdateSchema } from '../../../shared/api/schemas'
import { CorralError } from '../../../shared/errors'
import type { ApiServices } from '../services'
import { validate } from '../validate'
import { noQuery, query, readJson } from './common'

/** `/v1/sessions/{id}/resources[/{rid}]` (spec resources.md §9): the SDK's `sessions.resources.*`. */
export function sessionResourceRoutes(app: Hono, s: ApiServices): void {
  const store = () => {
    if (!s.sessionResources) throw new CorralError('not_found_error', 'this Corral has no session resources store')
    return s.sessionResources
  }
  app.get('/v1/sessions/:id/resources', (c) => c.json(store().list(c.req.param('id'), validate(pageQuerySchema, query(c), 'query'))))
  app.post('/v1/sessions/:id/resources', async (c) => (noQuery(c), c.json(store().add(c.req.param('id'), validate(sessionResourceAddSchema, await readJson(c))))))
  app.get('/v1/sessions/:id/resources/:rid', (c) => (noQuery(c), c.json(store().retrieve(c.req.param('id'), c.req.param('rid')))))
  app.post('/v1/sessions/:id/resources/:rid', async (c) =>
    c.json(await store().update(c.req.param('id'), c.req.param('rid'), validate(sessionResourceUpdateSchema, await readJson(c)))),
  )
  app.delete('/v1/sessions/:id/resources/:rid', (c) => (noQuery(c), c.json(store().delete(c.req.param('id'), c.req.param('rid')))))
}
