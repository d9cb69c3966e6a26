import type { Hono } from 'hono'
import { environmentCreateSchema, environmentUpdateSchema, listQuerySchema } from '../../../shared/api/schemas'
import { invalid } from '../../../shared/errors'
import type { ApiServices } from '../services'
import { validate } from '../validate'
import { noQuery, readJson, query } from './common'

/** `config.corral.image` checked on save: an image the local Docker engine does not have is a 400 naming the field. */
async function checkImage(s: ApiServices, body: { config?: unknown }): Promise<void> {
  const image = (body.config as { corral?: { image?: unknown } } | undefined)?.corral?.image
  if (typeof image !== 'string' || !s.checkImage) return
  const problem = await s.checkImage(image)
  if (problem) throw invalid(`config.corral.image: ${problem}`)
}

export function environmentRoutes(app: Hono, s: ApiServices): void {
  app.post('/v1/environments', async (c) => {
    const body = validate(environmentCreateSchema, await readJson(c))
    await checkImage(s, body)
    return c.json(s.environments.create(body))
  })
  app.get('/v1/environments', (c) => c.json(s.environments.list(validate(listQuerySchema, query(c), 'query'))))
  app.get('/v1/environments/:id', (c) => (noQuery(c), c.json(s.environments.retrieve(c.req.param('id')))))
  app.post('/v1/environments/:id', async (c) => {
    const body = validate(environmentUpdateSchema, await readJson(c))
    await checkImage(s, body)
    return c.json(s.environments.update(c.req.param('id'), body))
  })
  app.delete('/v1/environments/:id', (c) => (noQuery(c), c.json(s.environments.delete(c.req.param('id')))))
  app.post('/v1/environments/:id/archive', (c) => (noQuery(c), c.json(s.environments.archive(c.req.param('id')))))
}
