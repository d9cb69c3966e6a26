import type { Hono } from 'hono'
import { corralSettingsUpdateSchema } from '../../../shared/api/schemas'
import { CorralError } from '../../../shared/errors'
import type { AdminServices, ApiServices } from '../services'
import { validate } from '../validate'
import { readJson } from './common'

/** Corral's own routes (not in the Managed Agents API): settings and doctor findings. */
export function corralRoutes(app: Hono, s: ApiServices): void {
  const admin = (): AdminServices => {
    if (!s.admin) throw new CorralError('not_found_error', 'this engine offers no settings API')
    return s.admin
  }
  app.get('/v1/corral/settings', async (c) => c.json(await admin().getSettings()))
  app.post('/v1/corral/settings', async (c) => c.json(await admin().updateSettings(validate(corralSettingsUpdateSchema, await readJson(c)))))
  app.get('/v1/corral/doctor', async (c) => c.json({ findings: await admin().doctor() }))
}
