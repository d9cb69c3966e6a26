import type { Hono } from 'hono'
import { corralModelTestSchema, corralSettingsUpdateSchema } from '../../../shared/api/schemas'
import { CorralError } from '../../../shared/errors'
import type { AdminServices, ApiServices } from '../services'
import { validate } from '../validate'
import { readJson } from './common'

/** Corral's own routes (not in the Managed Agents API): settings, doctor findings, environment packages. */
export function corralRoutes(app: Hono, s: ApiServices): void {
  const admin = (): AdminServices => {
    if (!s.admin) throw new CorralError('not_found_error', 'this engine offers no settings API')
    return s.admin
  }
  app.get('/v1/corral/settings', async (c) => c.json(await admin().getSettings()))
  app.post('/v1/corral/settings', async (c) => c.json(await admin().updateSettings(validate(corralSettingsUpdateSchema, await readJson(c)))))
  app.get('/v1/corral/doctor', async (c) => c.json({ findings: await admin().doctor() }))
  // Test connection: 200 with the outcome (a failing endpoint is a result, not an error of this API).
  app.post('/v1/corral/model/test', async (c) => c.json(await admin().testModel(validate(corralModelTestSchema, await readJson(c)))))

  // The sandbox backends and the default image (the app's banner), building the image with progress.
  const sandbox = () => {
    const x = admin().sandbox
    if (!x) throw new CorralError('not_found_error', 'this engine has no local sandboxes')
    return x
  }
  app.get('/v1/corral/sandbox', async (c) => c.json(await sandbox().status()))
  app.post('/v1/corral/sandbox/image/build', async (c) => c.json(await sandbox().buildImage(), 202))
  app.get('/v1/corral/sessions/:id/sandbox', async (c) => c.json({ sandbox: await sandbox().sessionBackend(c.req.param('id')) }))

  // An environment's packages on the local sandboxes: where they stand, and installing them ahead of a session.
  const packages = (id: string) => {
    s.environments.retrieve(id) // 404 for an unknown environment
    const p = admin().packages
    if (!p) throw new CorralError('not_found_error', 'this engine has no local sandboxes to install packages in')
    return p
  }
  app.get('/v1/corral/environments/:id/packages', async (c) => c.json(await packages(c.req.param('id')).status(c.req.param('id'))))
  app.post('/v1/corral/environments/:id/packages/prepare', async (c) => c.json(await packages(c.req.param('id')).prepare(c.req.param('id')), 202))
}
