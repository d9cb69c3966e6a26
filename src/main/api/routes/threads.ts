import type { Hono } from 'hono'
import { threadListQuerySchema } from '../../../shared/api/schemas'
import type { ApiServices } from '../services'
import { validate } from '../validate'
import { noQuery, query } from './common'

/**
 * /v1/sessions/{id}/threads (list), /threads/{thread_id} (retrieve), derived from the log, and
 * /threads/{thread_id}/archive (appends the thread's terminated event).
 * The thread's events and stream are served by the session routes.
 */
export function threadRoutes(app: Hono, s: ApiServices): void {
  app.get('/v1/sessions/:id/threads', (c) => c.json(s.threads.list(c.req.param('id'), validate(threadListQuerySchema, query(c, ['statuses']), 'query'))))
  app.get('/v1/sessions/:id/threads/:threadId', (c) => (noQuery(c), c.json(s.threads.retrieve(c.req.param('id'), c.req.param('threadId')))))
  app.post('/v1/sessions/:id/threads/:threadId/archive', async (c) => (noQuery(c), c.json(await s.threads.archive(c.req.param('id'), c.req.param('threadId')))))
}
