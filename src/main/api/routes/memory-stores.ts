import type { Context, Hono } from 'hono'
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
import type { MemoryActor } from '../../../shared/api/types'
import { LOCAL_API_ACTOR, withView } from '../../session/memory-store'
import { principalOf } from '../principal'
import type { ApiServices } from '../services'
import { validate } from '../validate'
import { noQuery, query, readJson } from './common'

/**
 * Who a change made through the API is attributed to (spec resources.md §6.2, §17): a sessions
 * token's writes (a self-hosted worker syncing its mount) to its session (`session_actor`), the
 * local API token's to `api_actor`. Which stores a sessions token reaches is principal.ts's rule.
 */
function writerOf(c: Context): { actor: MemoryActor } {
  const p = principalOf(c.req.raw)
  return { actor: p.kind === 'session' ? { type: 'session_actor', session_id: p.sessionId } : LOCAL_API_ACTOR }
}

/**
 * Memory stores, memories and memory versions (spec resources.md §6.1). A change is attributed
 * to whoever made it (writerOf). `view` is `basic` on list, create and update, `full` on
 * retrieve, unless asked.
 */
export function memoryStoreRoutes(app: Hono, s: ApiServices): void {
  const m = s.memory

  app.post('/v1/memory_stores', async (c) => (noQuery(c), c.json(m.createStore(validate(memoryStoreCreateSchema, await readJson(c))))))
  app.get('/v1/memory_stores', (c) => c.json(m.listStores(validate(memoryStoreListQuerySchema, query(c), 'query'))))
  app.get('/v1/memory_stores/:id', (c) => (noQuery(c), c.json(m.retrieveStore(c.req.param('id')))))
  app.post('/v1/memory_stores/:id', async (c) => (noQuery(c), c.json(m.updateStore(c.req.param('id'), validate(memoryStoreUpdateSchema, await readJson(c))))))
  app.delete('/v1/memory_stores/:id', (c) => (noQuery(c), c.json(m.deleteStore(c.req.param('id')))))
  app.post('/v1/memory_stores/:id/archive', (c) => (noQuery(c), c.json(m.archiveStore(c.req.param('id')))))

  app.post('/v1/memory_stores/:id/memories', async (c) => {
    const { view } = validate(memoryViewQuerySchema, query(c), 'query')
    const memory = m.createMemory(c.req.param('id'), validate(memoryCreateSchema, await readJson(c)), writerOf(c))
    return c.json(withView(memory, view ?? 'basic'))
  })
  app.get('/v1/memory_stores/:id/memories', (c) => c.json(m.listMemories(c.req.param('id'), validate(memoryListQuerySchema, query(c), 'query'))))
  app.get('/v1/memory_stores/:id/memories/:mid', (c) => {
    const { view } = validate(memoryViewQuerySchema, query(c), 'query')
    return c.json(withView(m.retrieveMemory(c.req.param('id'), c.req.param('mid')), view ?? 'full'))
  })
  app.post('/v1/memory_stores/:id/memories/:mid', async (c) => {
    const { view } = validate(memoryViewQuerySchema, query(c), 'query')
    const memory = m.updateMemory(c.req.param('id'), c.req.param('mid'), validate(memoryUpdateSchema, await readJson(c)), writerOf(c))
    return c.json(withView(memory, view ?? 'basic'))
  })
  app.delete('/v1/memory_stores/:id/memories/:mid', (c) => {
    const q = validate(memoryDeleteQuerySchema, query(c), 'query')
    return c.json(m.deleteMemory(c.req.param('id'), c.req.param('mid'), { expectedSha256: q.expected_content_sha256, ...writerOf(c) }))
  })

  app.get('/v1/memory_stores/:id/memory_versions', (c) => c.json(m.listVersions(c.req.param('id'), validate(memoryVersionListQuerySchema, query(c), 'query'))))
  app.get('/v1/memory_stores/:id/memory_versions/:vid', (c) => {
    const { view } = validate(memoryViewQuerySchema, query(c), 'query')
    return c.json(m.retrieveVersion(c.req.param('id'), c.req.param('vid'), view ?? 'full'))
  })
  app.post('/v1/memory_stores/:id/memory_versions/:vid/redact', (c) => (noQuery(c), c.json(m.redactVersion(c.req.param('id'), c.req.param('vid'), writerOf(c)))))
}
