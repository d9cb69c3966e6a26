import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { openDatabase, type Db } from '../../../src/main/session/database'
import { DiscardingSecretSink, VaultStore, type CredentialCreateInput, type SecretSink } from '../../../src/main/session/vault-store'
import { credentialCreateSchema, credentialUpdateSchema } from '../../../src/shared/api/schemas'
import { CorralError } from '../../../src/shared/errors'
import { MemorySecretSink } from '../../support/memory-secret-sink'

let db: Db
beforeEach(() => {
  db = openDatabase({ path: ':memory:' })
})
afterEach(() => db.close())

const bearer = (url = 'https://mcp.example.com/', token = 'SECRET-token'): CredentialCreateInput => credentialCreateSchema.parse({ auth: { type: 'static_bearer', token, mcp_server_url: url } })
const oauth = (): CredentialCreateInput =>
  credentialCreateSchema.parse({
    auth: {
      type: 'mcp_oauth',
      access_token: 'SECRET-access',
      mcp_server_url: 'https://oauth.example.com/',
      refresh: { client_id: 'c', refresh_token: 'SECRET-refresh', token_endpoint: 'https://oauth.example.com/token', token_endpoint_auth: { type: 'client_secret_basic', client_secret: 'SECRET-client' } },
    },
  })
const dump = () => JSON.stringify([db.prepare('SELECT * FROM credentials').all(), db.prepare('SELECT * FROM vaults').all()])

describe('VaultStore with the default (discarding) sink', () => {
  it('stores no secret and marks the credential as having none', async () => {
    const store = new VaultStore(db, { secrets: new DiscardingSecretSink() })
    const v = store.create({ display_name: 'v' })
    const c = await store.createCredential(v.id, bearer())
    expect(c.corral).toEqual({ secret_stored: false })
    expect(store.retrieveCredential(v.id, c.id).corral.secret_stored).toBe(false)
    expect(dump()).not.toMatch(/SECRET/)
  })
})

describe('VaultStore with a sink that keeps secrets', () => {
  let sink: MemorySecretSink
  let store: VaultStore
  beforeEach(() => {
    sink = new MemorySecretSink()
    store = new VaultStore(db, { secrets: sink })
  })

  it('hands every secret field to the sink and none to the database', async () => {
    const v = store.create({ display_name: 'v' })
    const c = await store.createCredential(v.id, oauth())
    expect(c.corral.secret_stored).toBe(true)
    expect(sink.get(c.id)).toEqual({ access_token: 'SECRET-access', refresh_token: 'SECRET-refresh', client_secret: 'SECRET-client' })
    expect(c.auth).toEqual({
      type: 'mcp_oauth',
      mcp_server_url: 'https://oauth.example.com/',
      expires_at: null,
      refresh: { client_id: 'c', token_endpoint: 'https://oauth.example.com/token', token_endpoint_auth: { type: 'client_secret_basic' }, resource: null, scope: null },
    })
    expect(dump()).not.toMatch(/SECRET/)
  })

  it('drops the refresh secrets when the refresh configuration is removed', async () => {
    const v = store.create({ display_name: 'v' })
    const c = await store.createCredential(v.id, oauth())
    const u = await store.updateCredential(v.id, c.id, credentialUpdateSchema.parse({ auth: { type: 'mcp_oauth', refresh: null } }))
    expect((u.auth as { refresh: unknown }).refresh).toBeNull()
    expect(sink.get(c.id)).toEqual({ access_token: 'SECRET-access' })
  })

  it('refuses a client secret for a credential whose token endpoint uses no client auth', async () => {
    const v = store.create({ display_name: 'v' })
    const input = oauth()
    ;(input.auth as { refresh: { token_endpoint_auth: unknown } }).refresh.token_endpoint_auth = { type: 'none' }
    const c = await store.createCredential(v.id, input)
    await expect(
      store.updateCredential(v.id, c.id, credentialUpdateSchema.parse({ auth: { type: 'mcp_oauth', refresh: { token_endpoint_auth: { type: 'client_secret_post', client_secret: 'SECRET-x' } } } })),
    ).rejects.toThrow(/auth\.refresh\.token_endpoint_auth/)
  })

  it('leaves nothing behind when the sink refuses a secret', async () => {
    const failing: SecretSink = {
      put: async () => {
        throw new CorralError('keychain_error', 'keychain locked')
      },
      delete: async () => {},
    }
    const s = new VaultStore(db, { secrets: failing })
    const v = s.create({ display_name: 'v' })
    await expect(s.createCredential(v.id, bearer())).rejects.toMatchObject({ code: 'keychain_error' })
    expect(s.listCredentials(v.id, {}).data).toEqual([])
  })

  it('keeps secret_stored true after a partial update once the secret was stored', async () => {
    const v = store.create({ display_name: 'v' })
    const c = await store.createCredential(v.id, bearer())
    const u = await store.updateCredential(v.id, c.id, credentialUpdateSchema.parse({ display_name: 'renamed' }))
    expect(u).toMatchObject({ display_name: 'renamed', corral: { secret_stored: true } })
  })

  it('allows a credential for a server again once the old one is archived', async () => {
    const v = store.create({ display_name: 'v' })
    const c = await store.createCredential(v.id, bearer())
    await expect(store.createCredential(v.id, bearer())).rejects.toMatchObject({ code: 'conflict_error' })
    store.archiveCredential(v.id, c.id)
    const again = await store.createCredential(v.id, bearer(undefined, 'SECRET-new'))
    expect(again.id).not.toBe(c.id)
  })

  it('archives the credentials of an archived vault and refuses new ones', async () => {
    const v = store.create({ display_name: 'v' })
    const c = await store.createCredential(v.id, bearer())
    store.archive(v.id)
    expect(store.retrieveCredential(v.id, c.id).archived_at).not.toBeNull()
    await expect(store.createCredential(v.id, bearer('https://other.example.com/'))).rejects.toMatchObject({ code: 'conflict_error' })
  })

  it('deletes the secrets of every credential when the vault is deleted', async () => {
    const v = store.create({ display_name: 'v' })
    const a = await store.createCredential(v.id, bearer('https://a.example.com/'))
    const b = await store.createCredential(v.id, bearer('https://b.example.com/'))
    await store.delete(v.id)
    expect([sink.get(a.id), sink.get(b.id)]).toEqual([undefined, undefined])
    expect(db.prepare('SELECT COUNT(*) AS n FROM credentials').get()).toEqual({ n: 0 })
  })
})
