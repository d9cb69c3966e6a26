import type { Hono } from 'hono'
import { credentialCreateSchema, credentialUpdateSchema, includeArchivedQuerySchema, vaultCreateSchema, vaultUpdateSchema } from '../../../shared/api/schemas'
import { CorralError } from '../../../shared/errors'
import type { ApiServices } from '../services'
import { validate } from '../validate'
import { noQuery, readJson, query } from './common'

/** /v1/vaults and /v1/vaults/{id}/credentials: metadata only; no response carries a secret. */
export function vaultRoutes(app: Hono, s: ApiServices): void {
  app.post('/v1/vaults', async (c) => c.json(s.vaults.create(validate(vaultCreateSchema, await readJson(c)))))
  app.get('/v1/vaults', (c) => c.json(s.vaults.list(validate(includeArchivedQuerySchema, query(c), 'query'))))
  app.get('/v1/vaults/:id', (c) => (noQuery(c), c.json(s.vaults.retrieve(c.req.param('id')))))
  app.post('/v1/vaults/:id', async (c) => c.json(s.vaults.update(c.req.param('id'), validate(vaultUpdateSchema, await readJson(c)))))
  app.delete('/v1/vaults/:id', async (c) => (noQuery(c), c.json(await s.vaults.delete(c.req.param('id')))))
  app.post('/v1/vaults/:id/archive', (c) => (noQuery(c), c.json(s.vaults.archive(c.req.param('id')))))

  app.post('/v1/vaults/:id/credentials', async (c) =>
    c.json(await s.vaults.createCredential(c.req.param('id'), validate(credentialCreateSchema, await readJson(c)))),
  )
  app.get('/v1/vaults/:id/credentials', (c) => c.json(s.vaults.listCredentials(c.req.param('id'), validate(includeArchivedQuerySchema, query(c), 'query'))))
  app.get('/v1/vaults/:id/credentials/:credentialId', (c) => (noQuery(c), c.json(s.vaults.retrieveCredential(c.req.param('id'), c.req.param('credentialId')))))
  app.post('/v1/vaults/:id/credentials/:credentialId', async (c) =>
    c.json(await s.vaults.updateCredential(c.req.param('id'), c.req.param('credentialId'), validate(credentialUpdateSchema, await readJson(c)))),
  )
  app.delete('/v1/vaults/:id/credentials/:credentialId', async (c) => (noQuery(c), c.json(await s.vaults.deleteCredential(c.req.param('id'), c.req.param('credentialId')))))
  app.post('/v1/vaults/:id/credentials/:credentialId/archive', (c) => (noQuery(c), c.json(s.vaults.archiveCredential(c.req.param('id'), c.req.param('credentialId')))))
  // a live probe of an mcp_oauth credential against its MCP server (hands/mcp/client.ts); no body
  app.post('/v1/vaults/:id/credentials/:credentialId/mcp_oauth_validate', async (c) => {
    noQuery(c)
    const [vaultId, credentialId] = [c.req.param('id'), c.req.param('credentialId')]
    if (!s.validateMcpOAuth) {
      s.vaults.retrieveCredential(vaultId, credentialId) // 404 first
      throw new CorralError('keychain_error', `credential ${credentialId} cannot be validated: this Corral runs without a keychain, so it holds none of its secrets`)
    }
    return c.json(await s.validateMcpOAuth(vaultId, credentialId))
  })
}
