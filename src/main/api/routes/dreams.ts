import type { Hono } from 'hono'
import { dreamCreateSchema, dreamListQuerySchema } from '../../../shared/api/dream-schemas'
import { CorralError } from '../../../shared/errors'
import type { DreamStore } from '../../session/dream-store'
import type { ApiServices } from '../services'
import { validate } from '../validate'
import { noQuery, query, readJson } from './common'

/**
 * Dreams (research preview; spec resources.md §11, docs/dreams.md). A dream is created pending;
 * the engine's DreamRunner starts its session and settles it, nothing here runs a brain.
 */
export function dreamRoutes(app: Hono, s: ApiServices): void {
  const dreams = (): DreamStore => {
    if (!s.dreams) throw new CorralError('not_found_error', 'this engine runs no dreams (it was built without a data directory)')
    return s.dreams
  }
  app.post('/v1/dreams', async (c) => (noQuery(c), c.json(dreams().create(validate(dreamCreateSchema, await readJson(c))))))
  app.get('/v1/dreams', (c) => c.json(dreams().list(validate(dreamListQuerySchema, query(c, ['statuses']), 'query'))))
  app.get('/v1/dreams/:id', (c) => (noQuery(c), c.json(dreams().retrieve(c.req.param('id')))))
  app.post('/v1/dreams/:id/archive', (c) => (noQuery(c), c.json(dreams().archive(c.req.param('id')))))
  app.post('/v1/dreams/:id/cancel', (c) => (noQuery(c), c.json(dreams().cancel(c.req.param('id')))))
}
