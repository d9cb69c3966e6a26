import type { Context, Hono } from 'hono'
import { workHeartbeatQuerySchema, workListQuerySchema, workPollQuerySchema, workStopSchema, workUpdateSchema } from '../../../shared/api/schemas'
import { CorralError, invalid } from '../../../shared/errors'
import type { WorkStore } from '../../session/work-store'
import { principalOf } from '../principal'
import type { ApiServices } from '../services'
import { validate } from '../validate'
import { noQuery, query, readJson } from './common'

/**
 * The work queue of a `self_hosted` environment (spec resources.md §2) and its environment keys
 * (Corral additions under /v1/corral, §3.4). Who may call which route is api/principal.ts's table.
 */
export function workRoutes(app: Hono, s: ApiServices): void {
  const work = (): WorkStore => {
    if (!s.work) throw new CorralError('not_found_error', 'this Corral has no work queue')
    return s.work
  }
  /** The environment, which must be self_hosted and (for the queue routes) not archived. */
  const queueOf = (c: Context, options: { live?: boolean } = {}) => {
    const id = c.req.param('env')!
    const env = s.environments.retrieve(id)
    if (env.config.type !== 'self_hosted') throw invalid(`environment ${id} is a ${env.config.type} environment; only a self_hosted environment has a work queue`)
    if (options.live && env.archived_at) throw invalid(`environment ${id} is archived; its queue takes no more polls`)
    return id
  }
  const base = '/v1/environments/:env/work'

  app.get(`${base}/poll`, async (c) => {
    const q = validate(workPollQuerySchema, query(c), 'query')
    const env = queueOf(c, { live: true })
    const p = principalOf(c.req.raw)
    const item = await work().poll({
      environmentId: env,
      workerId: c.req.header('anthropic-worker-id') || undefined,
      blockMs: q.block_ms,
      reclaimOlderThanMs: q.reclaim_older_than_ms,
      keyId: p.kind === 'environment' ? p.keyId : undefined,
      apiBaseUrl: new URL(c.req.url).origin,
      signal: c.req.raw.signal,
    })
    return c.json(item)
  })
  app.get(`${base}/stats`, (c) => (noQuery(c), c.json(work().stats(queueOf(c)))))
  app.get(base, (c) => c.json(work().list(queueOf(c), validate(workListQuerySchema, query(c), 'query'))))
  app.get(`${base}/:work`, (c) => (noQuery(c), c.json(work().retrieve(queueOf(c), c.req.param('work')))))
  app.post(`${base}/:work`, async (c) => {
    noQuery(c)
    const body = validate(workUpdateSchema, await readJson(c))
    return c.json(work().update(queueOf(c), c.req.param('work'), body.metadata))
  })
  app.post(`${base}/:work/ack`, (c) => (noQuery(c), c.json(work().ack(queueOf(c), c.req.param('work')))))
  app.post(`${base}/:work/heartbeat`, (c) => {
    const q = validate(workHeartbeatQuerySchema, query(c), 'query')
    const p = principalOf(c.req.raw)
    return c.json(
      work().heartbeat({
        environmentId: queueOf(c),
        workId: c.req.param('work'),
        expected: q.expected_last_heartbeat,
        desiredTtlSeconds: q.desired_ttl_seconds,
        tokenId: p.kind === 'session' ? p.tokenId : undefined,
      }),
    )
  })
  app.post(`${base}/:work/stop`, async (c) => {
    noQuery(c)
    const body = validate(workStopSchema, await readJson(c))
    return c.json(work().stop(queueOf(c), c.req.param('work'), body.force ?? false))
  })

  // environment keys (Corral additions): minted here, shown once, kept as a hash
  const keys = '/v1/corral/environments/:env/keys'
  app.post(keys, (c) => (noQuery(c), c.json(work().createKey(queueOf(c, { live: true })))))
  app.get(keys, (c) => (noQuery(c), c.json({ data: work().listKeys(queueOf(c)) })))
  app.post(`${keys}/:key/revoke`, (c) => (noQuery(c), c.json(work().revokeKey(queueOf(c), c.req.param('key')))))
}
