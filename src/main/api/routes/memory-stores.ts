import type { Hono } from 'hono'
import {
  memoryCreateSchema,
  memoryDeleteQuerySchema,
  memoryListQuerySchema,
  memoryStoreCreateSchema,
  memoryStoreListQuerySchema,
  memoryStoreUpdateSchema,
  memoryUpdateSchema,
  memoryVersionListQuerySchema,
  memoryViewQuerySchema,
} from '../../../shared/api/memory-schemas'
import { LOCAL_API_ACTOR, withView } from '../../session/memory-store'
import type { ApiServices } from '../services'
import { validate } from '../validate'
import { noQuery, query, readJson } from './common'

/**
 * Memory stores, memories and memory versions (spec resources.md §6.1). Every change made here
 * is attributed to the local API token (`api_actor`). `view` is `basic` on list, create and
 * update, `full` on retrieve, unless asked.
 */
export function memoryStoreRoutes(app: Hono, s: ApiServices): void {
  const m = s.memory
  const writer = { actor: LOCAL_API_ACTOR }

  app.post('/v1/memory_stores', async (c) => (noQuery(c), c.json(m.createStore(validate(memoryStoreCreateSchema, await readJson(c))))))
  app.get('/v1/memory_stores', (c) => c.json(m.listStores(validate(memoryStoreListQuerySchema, query(c), 'query'))))
  app.get('/v1/memory_stores/:id', (c) => (noQuery(c), c.json(m.retrieveStore(c.req.param('id')))))
  app.post('/v1/memory_stores/:id', async (c) => (noQuery(c), c.json(m.updateStore(c.req.param('id'), validate(memoryStoreUpdateSchema, await readJson(c))))))
  app.delete('/v1/memory_stores/:id', (c) => (noQuery(c), c.json(m.deleteStore(c.req.param('id')))))
  app.post('/v1/memory_stores/:id/archive', (c) => (noQuery(c), c.json(m.archiveStore(c.req.param('id')))))

  app.post('/v1/memory_stores/:id/memories', async (c) => {
    const { view } = validate(memoryViewQuerySchema, query(c), 'query')
    const memory = m.createMemory(c.req.param('id'), validate(memoryCreateSchema, await readJson(c)), writer)
    return c.json(withView(memory, view ?? 'basic'))
  })
  app.get('/v1/memory_stores/:id/memories', (c) => c.json(m.listMemories(c.req.param('id'), validate(memoryListQuerySchema, query(c), 'query'))))
  app.get('/v1/memory_stores/:id/memories/:mid', (c) => {
    const { view } = validate(memoryViewQuerySchema, query(c), 'query')
    return c.json(withView(m.retrieveMemory(c.req.param('id'), c.req.param('mid')), view ?? 'full'))
  })
  app.post('/v1/memory_stores/:id/memories/:mid', async (c) => {
    const { view } = validate(memoryViewQuerySchema, query(c), 'query')
    const memory = m.updateMemory(c.req.param('id'), c.req.param('mid'), validate(memoryUpdateSchema, await readJson(c)), writer)
    return c.json(withView(memory, view ?? 'basic'))
  })
  app.delete('/v1/memory_stores/:id/memories/:mid', (c) => {
    const q = validate(memoryDeleteQuerySchema, query(c), 'query')
    return c.json(m.deleteMemory(c.req.param('id'), c.req.param('mid'), { expectedSha256: q.expected_content_sha256, ...writer }))
  })

  app.get('/v1/memory_stores/:id/memory_versions', (c) => c.json(m.listVersions(c.req.param('id'), validate(memoryVersionListQuerySchema, query(c), 'query'))))
  app.get('/v1/memory_stores/:id/memory_versions/:vid', (c) => {
    const { view } = validate(memoryViewQuerySchema, query(c), 'query')
    return c.json(m.retrieveVersion(c.req.param('id'), c.req.param('vid'), view ?? 'full'))
  })
  app.post('/v1/memory_stores/:id/memory_versions/:vid/redact', (c) => (noQuery(c), c.json(m.redactVersion(c.req.param('id'), c.req.param('vid'), writer))))
}
