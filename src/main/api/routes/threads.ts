import type { Hono } from 'hono'
import { threadListQuerySchema } from '../../../shared/api/schemas'
import type { ApiServices } from '../services'
import { validate } from '../validate'
import { noQuery, query } from './common'

/**
 * /v1/sessions/{id}/threads (list) and /threads/{thread_id} (retrieve), derived from the log.
 * The thread's events and stream are served by the session routes.
 */
export function threadRoutes(app: Hono, s: ApiServices): void {
  app.get('/v1/sessions/:id/threads', (c) => c.json(s.threads.list(c.req.param('id'), validate(threadListQuerySchema, query(c, ['statuses']), 'query'))))
  app.get('/v1/sessions/:id/threads/:threadId', (c) => (noQuery(c), c.json(s.threads.retrieve(c.req.param('id'), c.req.param('threadId')))))
}
