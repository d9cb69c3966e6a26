import type { Hono } from 'hono'
import { agentCreateSchema, agentRetrieveQuerySchema, agentUpdateSchema, listQuerySchema, pageQuerySchema } from '../../../shared/api/schemas'
import type { ApiServices } from '../services'
import { validate } from '../validate'
import { noQuery, readJson, query } from './common'

export function agentRoutes(app: Hono, s: ApiServices): void {
  app.post('/v1/agents', async (c) => c.json(s.agents.create(validate(agentCreateSchema, await readJson(c)))))
  app.get('/v1/agents', (c) => c.json(s.agents.list(validate(listQuerySchema, query(c), 'query'))))
  app.get('/v1/agents/:id', (c) => c.json(s.agents.retrieve(c.req.param('id'), validate(agentRetrieveQuerySchema, query(c), 'query').version)))
  app.post('/v1/agents/:id', async (c) => c.json(s.agents.update(c.req.param('id'), validate(agentUpdateSchema, await readJson(c)))))
  app.post('/v1/agents/:id/archive', (c) => (noQuery(c), c.json(s.agents.archive(c.req.param('id')))))
  app.get('/v1/agents/:id/versions', (c) => c.json(s.agents.versions(c.req.param('id'), validate(pageQuerySchema, query(c), 'query'))))
}
