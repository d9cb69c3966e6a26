import type { Hono } from 'hono'
import { z } from 'zod'
import type { ApiServices } from '../services'
import { validate } from '../validate'
import { query } from './common'

const searchQuerySchema = z.strictObject({
  q: z.string().trim().min(2, 'at least 2 characters').max(200),
  limit: z.coerce.number().int().min(1).max(100).optional(),
  page: z.string().min(1).max(200).optional(),
})

/**
 * Corral addition: `GET /v1/corral/search?q=…` finds messages (user and agent) whose text contains
 * `q` across sessions, newest first, a page at a time (`next_page`), so the sessions list can
 * search what was said, not only titles.
 */
export function searchRoutes(app: Hono, s: ApiServices): void {
  app.get('/v1/corral/search', (c) => {
    const q = validate(searchQuerySchema, query(c, []), 'query')
    return c.json(s.searchMessages({ query: q.q, limit: q.limit ?? 20, page: q.page }))
  })
}
