import type { Hono } from 'hono'
import { environmentCreateSchema, environmentUpdateSchema, listQuerySchema } from '../../../shared/api/schemas'
import type { ApiServices } from '../services'
import { validate } from '../validate'
import { noQuery, readJson, query } from './common'

export function environmentRoutes(app: Hono, s: ApiServices): void {
  app.post('/v1/environments', async (c) => c.json(s.environments.create(validate(environmentCreateSchema, await readJson(c)))))
  app.get('/v1/environments', (c) => c.json(s.environments.list(validate(listQuerySchema, query(c), 'query'))))
  app.get('/v1/environments/:id', (c) => (noQuery(c), c.json(s.environments.retrieve(c.req.param('id')))))
  app.post('/v1/environments/:id', async (c) => c.json(s.environments.update(c.req.param('id'), validate(environmentUpdateSchema, await readJson(c)))))
  app.delete('/v1/environments/:id', (c) => (noQuery(c), c.json(s.environments.delete(c.req.param('id')))))
  app.post('/v1/environments/:id/archive', (c) => (noQuery(c), c.json(s.environments.archive(c.req.param('id')))))
}
