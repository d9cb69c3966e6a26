import type { Hono } from 'hono'
import { deploymentCreateSchema, deploymentListQuerySchema, deploymentRunListQuerySchema, deploymentUpdateSchema } from '../../../shared/api/deployment-schemas'
import type { ApiServices } from '../services'
import { validate } from '../validate'
import { noQuery, query, readJson } from './common'

/**
 * Deployments and deployment runs (spec resources.md §10.1). A deployment's sessions are created
 * by the store (run now) or the engine's DeploymentScheduler (its cron); nothing here runs a brain.
 */
export function deploymentRoutes(app: Hono, s: ApiServices): void {
  const d = s.deployments
  app.post('/v1/deployments', async (c) => (noQuery(c), c.json(d.create(validate(deploymentCreateSchema, await readJson(c))))))
  app.get('/v1/deployments', (c) => c.json(d.list(validate(deploymentListQuerySchema, query(c), 'query'))))
  app.get('/v1/deployments/:id', (c) => (noQuery(c), c.json(d.retrieve(c.req.param('id')))))
  app.post('/v1/deployments/:id', async (c) => (noQuery(c), c.json(d.update(c.req.param('id'), validate(deploymentUpdateSchema, await readJson(c))))))
  app.post('/v1/deployments/:id/archive', (c) => (noQuery(c), c.json(d.archive(c.req.param('id')))))
  app.post('/v1/deployments/:id/pause', (c) => (noQuery(c), c.json(d.pause(c.req.param('id')))))
  app.post('/v1/deployments/:id/unpause', (c) => (noQuery(c), c.json(d.unpause(c.req.param('id')))))
  app.post('/v1/deployments/:id/run', async (c) => (noQuery(c), c.json(await d.run(c.req.param('id')))))

  app.get('/v1/deployment_runs', (c) => c.json(d.listRuns(validate(deploymentRunListQuerySchema, query(c), 'query'))))
  app.get('/v1/deployment_runs/:id', (c) => (noQuery(c), c.json(d.retrieveRun(c.req.param('id')))))
}
