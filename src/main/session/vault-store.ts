import type { z } from 'zod'
import type { Credential, Vault } from '../../shared/api/types'
import type { credentialCreateSchema, credentialUpdateSchema, includeArchivedQuerySchema, vaultCreateSchema, vaultUpdateSchema } from '../../shared/api/schemas'
import { newId } from '../../shared/api/ids'
import { CorralError, conflict, invalid, notFound } from '../../shared/errors'
import type { Db } from './database'
import type { ResourceEvents } from './webhook-store'
import { mergeMetadata } from './agent-store'
import { keysetList, type Page } from './pagination'
import { StoreChanges } from './store-changes'

export type VaultCreateInput = z.infer<typeof vaultCreateSchema>
export type VaultUpdateInput = z.infer<typeof vaultUpdateSchema>
export type CredentialCreateInput = z.infer<typeof credentialCreateSchema>
export type CredentialUpdateInput = z.infer<typeof credentialUpdateSchema>
export type VaultListQuery = z.infer<typeof includeArchivedQuerySchema>

export type CredentialKind = 'static_bearer' | 'mcp_oauth' | 'environment_variable'

/**
 * The secret half of a credential: exactly the write-only fields of the API's create/update
 * params. On create every field of the kind is present; on update only the ones being replaced.
 *   static_bearer:        token
 *   mcp_oauth:            access_token, refresh_token?, client_secret? (client_secret_basic/post)
 *   environment_variable: secret_value
 */
export interface CredentialSecretFields {
  token?: string
  access_token?: string
  refresh_token?: string
  client_secret?: string
  secret_value?: string
}

/**
 * Where credential secrets go. The vault store never writes a secret to the database; it hands
 * them to this sink (the keychain, implemented by src/main/vault) and records only whether the
 * sink kept them.
 *
 * Contract:
 * - `put` stores or replaces the given fields of one credential; a field not given keeps its
 *   stored value; `removed` lists fields to forget (e.g. the refresh token when refresh is
 *   dropped). Resolves `{ stored: true }` once the secret is durably kept, `{ stored: false }`
 *   when this sink keeps nothing (the engine default until the keychain lands). Throws
 *   CorralError('keychain_error') when it cannot store: the API call then fails and the
 *   credential's metadata is left as it was.
 * - `delete` forgets every field of one credential; idempotent; never throws for an unknown id.
 */
export interface SecretSink {
  put(credentialId: string, kind: CredentialKind, secrets: CredentialSecretFields, removed?: readonly (keyof CredentialSecretFields)[]): Promise<{ stored: boolean }>
  delete(credentialId: string): Promise<void>
}

/**
 * The engine's default sink until the keychain is wired in: it keeps nothing and says so.
 * A credential created through it carries `corral.secret_stored: false`, so the proxy (and the
 * user) can tell that it has no usable secret; updating it with a new secret once a real sink is
 * configured stores it.
 */
export class DiscardingSecretSink implements SecretSink {
  async put(): Promise<{ stored: boolean }> {
    return { stored: false }
  }
  async delete(): Promise<void> {}
}

/** A credential as kept in the database (and returned): the API's shape plus Corral's marker. */
export type StoredCredential = Credential & { corral: { secret_stored: boolean } }

type Row = { id: string; data: string; archived_at: string | null; vault_id?: string }

/**
 * Vaults and their credentials, metadata only. Secrets are validated at the boundary, passed to
 * the SecretSink and dropped; nothing secret is ever stored in SQLite or returned.
 */
export class VaultStore {
  /**
   * Notified after every committed change to a vault or a credential (update, archive, delete,
   * a new credential): running sessions' egress policies follow it before the call returns.
   */
  readonly changes = new StoreChanges()

  private readonly secrets: SecretSink
  private readonly clock: () => Date
  private readonly events: ResourceEvents

  constructor(
    private readonly db: Db,
    /** events: told of each vault's and credential's creation, archive and deletion inside its transaction (the webhooks' outbox). */
    options: { secrets?: SecretSink; clock?: () => Date; events?: ResourceEvents } = {},
  ) {
    this.secrets = options.secrets ?? new DiscardingSecretSink()
    this.clock = options.clock ?? (() => new Date())
    this.events = options.events ?? (() => {})
  }

  // ---------- vaults ----------

  create(input: VaultCreateInput): Vault {
    const now = this.clock().toISOString()
    const vault: Vault = {
      type: 'vault',
      id: newId('vault'),
      display_name: input.display_name,
      metadata: input.metadata ?? {},
      created_at: now,
      updated_at: now,
      archived_at: null,
    }
    this.db.transaction(() => {
      this.db.prepare('INSERT INTO vaults (id, created_at, updated_at, archived_at, data) VALUES (?, ?, ?, NULL, ?)').run(vault.id, now, now, JSON.stringify(vault))
      this.events('vault.created', vault.id)
    })()
    return vault
  }

  retrieve(id: string): Vault {
    const row = this.db.prepare('SELECT data FROM vaults WHERE id = ?').get(id) as Row | undefined
    if (!row) throw notFound('vault', id)
    return JSON.parse(row.data) as Vault
  }

  update(id: string, input: VaultUpdateInput): Vault {
    const updated = this.db.transaction(() => {
      const cur = this.retrieve(id)
      if (cur.archived_at) throw conflict(`vault ${id} is archived and cannot be updated`)
      const next: Vault = {
        ...cur,
        display_name: input.display_name ?? cur.display_name,
        metadata: input.metadata === undefined ? cur.metadata : mergeMetadata(cur.metadata, input.metadata),
        updated_at: this.clock().toISOString(),
      }
      this.db.prepare('UPDATE vaults SET updated_at = ?, data = ? WHERE id = ?').run(next.updated_at, JSON.stringify(next), id)
      return next
    })()
    this.changes.notify({ kind: 'vault', id })
    return updated
  }

  /** Archives the vault and every credential in it (an archived vault lends no credential). */
  archive(id: string): Vault {
    const archived = this.db.transaction(() => {
      const cur = this.retrieve(id)
      if (cur.archived_at) return cur
      const now = this.clock().toISOString()
      const next: Vault = { ...cur, archived_at: now, updated_at: now }
      this.db.prepare('UPDATE vaults SET archived_at = ?, updated_at = ?, data = ? WHERE id = ?').run(now, now, JSON.stringify(next), id)
      const live = this.db.prepare('SELECT id, data FROM credentials WHERE vault_id = ? AND archived_at IS NULL').all(id) as Row[]
      const put = this.db.prepare('UPDATE credentials SET archived_at = ?, updated_at = ?, data = ? WHERE id = ?')
      for (const r of live) put.run(now, now, JSON.stringify({ ...(JSON.parse(r.data) as StoredCredential), archived_at: now, updated_at: now }), r.id)
      this.events('vault.archived', id)
      for (const r of live) this.events('vault_credential.archived', r.id, { vault_id: id })
      return next
    })()
    this.changes.notify({ kind: 'vault', id })
    return archived
  }

  /** Deletes the vault, its credentials' metadata, then their secrets. */
  async delete(id: string): Promise<{ id: string; type: 'vault_deleted' }> {
    this.retrieve(id)
    const ids = this.db.transaction(() => {
      const creds = (this.db.prepare('SELECT id FROM credentials WHERE vault_id = ?').all(id) as Row[]).map((r) => r.id)
      this.db.prepare('DELETE FROM credentials WHERE vault_id = ?').run(id)
      this.db.prepare('DELETE FROM vaults WHERE id = ?').run(id)
      for (const c of creds) this.events('vault_credential.deleted', c, { vault_id: id })
      this.events('vault.deleted', id)
      return creds
    })()
    this.changes.notify({ kind: 'vault', id })
    for (const c of ids) await this.forgetSecret(c)
    return { id, type: 'vault_deleted' }
  }

  list(q: VaultListQuery): Page<Vault> {
    const where: string[] = []
    if (!q.include_archived) where.push('archived_at IS NULL')
    return keysetList<Vault>(this.db, { table: 'vaults', where, args: [], order: 'desc', limit: q.limit ?? 20, page: q.page })
  }

  // ---------- credentials ----------

  /**
   * Creates a credential: metadata in the database, secrets to the sink (first, so a sink
   * failure leaves nothing behind). 409 when the vault is archived or already holds a live
   * credential for the same MCP server URL or environment variable name.
   */
  async createCredential(vaultId: string, input: CredentialCreateInput): Promise<StoredCredential> {
    const vault = this.retrieve(vaultId)
    if (vault.archived_at) throw conflict(`vault ${vaultId} is archived; it accepts no new credentials`)
    const { auth: publicAuth, secrets } = splitCreateAuth(input.auth)
    this.checkUnique(vaultId, publicAuth, undefined)
    const id = newId('credential')
    const { stored } = await this.secrets.put(id, input.auth.type, secrets)
    const now = this.clock().toISOString()
    const cred: StoredCredential = {
      type: 'vault_credential',
      id,
      vault_id: vaultId,
      display_name: input.display_name ?? null,
      auth: publicAuth,
      metadata: input.metadata ?? {},
      created_at: now,
      updated_at: now,
      archived_at: null,
      corral: { secret_stored: stored },
    }
    try {
      this.db.transaction(() => {
        // Re-checked inside the write: another create may have landed while the sink worked.
        const v = this.retrieve(vaultId)
        if (v.archived_at) throw conflict(`vault ${vaultId} is archived; it accepts no new credentials`)
        this.checkUnique(vaultId, publicAuth, undefined)
        this.db
          .prepare('INSERT INTO credentials (id, vault_id, created_at, updated_at, archived_at, data) VALUES (?, ?, ?, ?, NULL, ?)')
          .run(id, vaultId, now, now, JSON.stringify(cred))
        this.events('vault_credential.created', id, { vault_id: vaultId })
      })()
    } catch (err) {
      await this.forgetSecret(id)
      throw err
    }
    this.changes.notify({ kind: 'credential', id })
    return cred
  }

  retrieveCredential(vaultId: string, id: string): StoredCredential {
    this.retrieve(vaultId)
    const row = this.db.prepare('SELECT data FROM credentials WHERE id = ? AND vault_id = ?').get(id, vaultId) as Row | undefined
    if (!row) throw notFound(`credential in vault ${vaultId}`, id)
    return JSON.parse(row.data) as StoredCredential
  }

  /**
   * Updates display name, metadata and the public part of `auth`; new secret values go to the
   * sink. `auth.type` must be the credential's kind; `mcp_server_url` and `secret_name` are
   * immutable (the update schemas have no such fields).
   */
  async updateCredential(vaultId: string, id: string, input: CredentialUpdateInput): Promise<StoredCredential> {
    const cur = this.retrieveCredential(vaultId, id)
    if (cur.archived_at) throw conflict(`credential ${id} is archived and cannot be updated`)
    let auth = cur.auth
    let secrets: CredentialSecretFields = {}
    let removed: (keyof CredentialSecretFields)[] = []
    if (input.auth) {
      if (input.auth.type !== cur.auth.type) throw invalid(`auth.type: credential ${id} is ${cur.auth.type}; its type cannot change to ${input.auth.type}`)
      ;({ auth, secrets, removed } = applyAuthUpdate(cur.auth, input.auth))
    }
    let secretStored = cur.corral?.secret_stored ?? false
    if (Object.keys(secrets).length > 0 || removed.length > 0) {
      const { stored } = await this.secrets.put(id, cur.auth.type, secrets, removed)
      // A partial update to a sink that keeps nothing cannot make the credential usable.
      secretStored = stored && (secretStored || coversAllSecrets(auth, secrets))
    }
    const updated = this.db.transaction(() => {
      const latest = this.retrieveCredential(vaultId, id)
      if (latest.archived_at) throw conflict(`credential ${id} is archived and cannot be updated`)
      const next: StoredCredential = {
        ...latest,
        auth,
        display_name: input.display_name === undefined ? latest.display_name : input.display_name,
        metadata: input.metadata === undefined ? latest.metadata : mergeMetadata(latest.metadata, input.metadata),
        updated_at: this.clock().toISOString(),
        corral: { secret_stored: secretStored },
      }
      this.db.prepare('UPDATE credentials SET updated_at = ?, data = ? WHERE id = ?').run(next.updated_at, JSON.stringify(next), id)
      return next
    })()
    this.changes.notify({ kind: 'credential', id })
    return updated
  }

  /**
   * Records when an mcp_oauth credential's access token, refreshed by Corral, expires
   * (`auth.expires_at`; null when the token endpoint did not say). Not an API write: `updated_at`
   * stays, and nothing is notified (an open connection keeps the token it just refreshed). A
   * credential deleted or changed to another kind meanwhile is left alone.
   */
  /**
   * Takes the credential's refresh lock for `owner` (an engine) until `ttlMs` from now, unless
   * another owner holds one that has not expired; true when `owner` holds it now. A lock of the
   * same owner is taken again (its engine's own refreshes are one at a time already).
   */
  tryLockRefresh(credentialId: string, owner: string, ttlMs: number, now = Date.now()): boolean {
    const taken = this.db
      .prepare(
        `INSERT INTO credential_refresh_locks (credential_id, owner, expires_at_ms) VALUES (?, ?, ?)
         ON CONFLICT(credential_id) DO UPDATE SET owner = excluded.owner, expires_at_ms = excluded.expires_at_ms
         WHERE credential_refresh_locks.owner = excluded.owner OR credential_refresh_locks.expires_at_ms <= ?`,
      )
      .run(credentialId, owner, now + ttlMs, now).changes
    return taken > 0
  }

  /** Gives the credential's refresh lock back (only `owner`'s). */
  unlockRefresh(credentialId: string, owner: string): void {
    this.db.prepare('DELETE FROM credential_refresh_locks WHERE credential_id = ? AND owner = ?').run(credentialId, owner)
  }

  /**
   * The token endpoint refused the credential's refresh token: told once per version of the
   * credential in this process (a later update, a new token, may fail again and is told again).
   */
  recordRefreshFailed(id: string): void {
    const row = this.db.prepare('SELECT vault_id, updated_at FROM credentials WHERE id = ?').get(id) as { vault_id: string; updated_at: string } | undefined
    if (!row) return
    const version = `${id}@${row.updated_at}`
    if (this.refreshFailures.has(version)) return
    this.refreshFailures.add(version)
    this.events('vault_credential.refresh_failed', id, { vault_id: row.vault_id })
  }

  /** Credential versions whose refused refresh was told (recordRefreshFailed). */
  private readonly refreshFailures = new Set<string>()

  recordTokenExpiry(id: string, expiresAt: string | null): void {
    this.db
      .prepare("UPDATE credentials SET data = json_set(data, '$.auth.expires_at', ?) WHERE id = ? AND json_extract(data, '$.auth.type') = 'mcp_oauth'")
      .run(expiresAt, id)
  }

  archiveCredential(vaultId: string, id: string): StoredCredential {
    const cur = this.retrieveCredential(vaultId, id)
    if (cur.archived_at) return cur
    const now = this.clock().toISOString()
    const next: StoredCredential = { ...cur, archived_at: now, updated_at: now }
    this.db.transaction(() => {
      this.db.prepare('UPDATE credentials SET archived_at = ?, updated_at = ?, data = ? WHERE id = ?').run(now, now, JSON.stringify(next), id)
      this.events('vault_credential.archived', id, { vault_id: vaultId })
    })()
    this.changes.notify({ kind: 'credential', id })
    return next
  }

  async deleteCredential(vaultId: string, id: string): Promise<{ id: string; type: 'vault_credential_deleted' }> {
    this.retrieveCredential(vaultId, id)
    this.db.transaction(() => {
      this.db.prepare('DELETE FROM credentials WHERE id = ?').run(id)
      this.events('vault_credential.deleted', id, { vault_id: vaultId })
    })()
    this.changes.notify({ kind: 'credential', id })
    await this.forgetSecret(id)
    return { id, type: 'vault_credential_deleted' }
  }

  listCredentials(vaultId: string, q: VaultListQuery): Page<StoredCredential> {
    this.retrieve(vaultId)
    const where = ['vault_id = ?']
    if (!q.include_archived) where.push('archived_at IS NULL')
    return keysetList<StoredCredential>(this.db, { table: 'credentials', where, args: [vaultId], order: 'desc', limit: q.limit ?? 20, page: q.page })
  }

  private checkUnique(vaultId: string, auth: Credential['auth'], exceptId: string | undefined): void {
    const [field, value] = auth.type === 'environment_variable' ? ['secret_name', auth.secret_name] : ['mcp_server_url', auth.mcp_server_url]
    const clash = this.db
      .prepare(`SELECT id FROM credentials WHERE vault_id = ? AND archived_at IS NULL AND json_extract(data, '$.auth.${field}') = ? AND id IS NOT ? LIMIT 1`)
      .get(vaultId, value, exceptId ?? null) as Row | undefined
    if (clash) throw conflict(`auth.${field}: vault ${vaultId} already holds credential ${clash.id} for ${JSON.stringify(value)}; update or archive it`)
  }

  private async forgetSecret(id: string): Promise<void> {
    try {
      await this.secrets.delete(id)
    } catch (err) {
      // The metadata is gone either way; a secret the sink failed to drop is reported, not hidden.
      throw err instanceof CorralError ? err : new CorralError('keychain_error', `credential ${id}: removing its secret failed: ${(err as Error).message}`, { cause: err })
    }
  }
}

type CreateAuth = CredentialCreateInput['auth']
type UpdateAuth = NonNullable<CredentialUpdateInput['auth']>

/** Splits create params into the public auth (stored, returned) and the secret fields (sink only). */
export function splitCreateAuth(a: CreateAuth): { auth: Credential['auth']; secrets: CredentialSecretFields } {
  switch (a.type) {
    case 'static_bearer':
      return { auth: { type: 'static_bearer', mcp_server_url: a.mcp_server_url }, secrets: { token: a.token } }
    case 'mcp_oauth': {
      const secrets: CredentialSecretFields = { access_token: a.access_token }
      let refresh = null
      if (a.refresh) {
        secrets.refresh_token = a.refresh.refresh_token
        const tea = a.refresh.token_endpoint_auth
        if (tea.type !== 'none') secrets.client_secret = tea.client_secret
        refresh = {
          client_id: a.refresh.client_id,
          token_endpoint: a.refresh.token_endpoint,
          token_endpoint_auth: { type: tea.type },
          resource: a.refresh.resource ?? null,
          scope: a.refresh.scope ?? null,
        }
      }
      return { auth: { type: 'mcp_oauth', mcp_server_url: a.mcp_server_url, expires_at: a.expires_at ?? null, refresh }, secrets }
    }
    case 'environment_variable':
      return {
        auth: {
          type: 'environment_variable',
          secret_name: a.secret_name,
          networking: a.networking.type === 'limited' ? { type: 'limited', allowed_hosts: a.networking.allowed_hosts } : { type: 'unrestricted' },
          injection_location: { header: a.injection_location?.header ?? true, body: a.injection_location?.body ?? false },
        },
        secrets: { secret_value: a.secret_value },
      }
  }
}

function applyAuthUpdate(
  cur: Credential['auth'],
  u: UpdateAuth,
): { auth: Credential['auth']; secrets: CredentialSecretFields; removed: (keyof CredentialSecretFields)[] } {
  const secrets: CredentialSecretFields = {}
  const removed: (keyof CredentialSecretFields)[] = []
  if (u.type === 'static_bearer' && cur.type === 'static_bearer') {
    if (u.token != null) secrets.token = u.token
    return { auth: cur, secrets, removed }
  }
  if (u.type === 'environment_variable' && cur.type === 'environment_variable') {
    if (u.secret_value != null) secrets.secret_value = u.secret_value
    const injection = { header: u.injection_location?.header ?? cur.injection_location.header, body: u.injection_location?.body ?? cur.injection_location.body }
    if (!injection.header && !injection.body) throw invalid('auth.injection_location: at least one of body and header must stay enabled')
    const networking = u.networking ? (u.networking.type === 'limited' ? { type: 'limited' as const, allowed_hosts: u.networking.allowed_hosts } : { type: 'unrestricted' as const }) : cur.networking
    return { auth: { ...cur, networking, injection_location: injection }, secrets, removed }
  }
  if (u.type === 'mcp_oauth' && cur.type === 'mcp_oauth') {
    if (u.access_token != null) secrets.access_token = u.access_token
    const next = { ...cur }
    if (u.expires_at !== undefined && u.expires_at !== null) next.expires_at = u.expires_at
    if (u.refresh === null) {
      // Dropping the refresh configuration drops its secrets too.
      next.refresh = null
      removed.push('refresh_token', 'client_secret')
    } else if (u.refresh) {
      if (!cur.refresh) throw invalid(`auth.refresh: credential has no refresh configuration to update; create a new credential with one`)
      const r = { ...cur.refresh }
      if (u.refresh.refresh_token != null) secrets.refresh_token = u.refresh.refresh_token
      if (u.refresh.scope != null) r.scope = u.refresh.scope === '' ? null : u.refresh.scope
      if (u.refresh.token_endpoint_auth) {
        if (r.token_endpoint_auth.type === 'none') {
          throw invalid('auth.refresh.token_endpoint_auth: the credential uses token endpoint auth "none"; a client secret can only replace one of client_secret_basic or client_secret_post')
        }
        // The credential keeps its auth type even if the other secret type was sent (API rule).
        if (u.refresh.token_endpoint_auth.client_secret != null) secrets.client_secret = u.refresh.token_endpoint_auth.client_secret
      }
      next.refresh = r
    }
    return { auth: next, secrets, removed }
  }
  throw invalid(`auth.type: expected ${cur.type}`)
}

/** True when `secrets` holds every secret field the credential needs (a full replacement). */
function coversAllSecrets(auth: Credential['auth'], secrets: CredentialSecretFields): boolean {
  switch (auth.type) {
    case 'static_bearer':
      return !!secrets.token
    case 'environment_variable':
      return !!secrets.secret_value
    case 'mcp_oauth':
      return (
        !!secrets.access_token &&
        (!auth.refresh || (!!secrets.refresh_token && (auth.refresh.token_endpoint_auth.type === 'none' || !!secrets.client_secret)))
      )
  }
}
