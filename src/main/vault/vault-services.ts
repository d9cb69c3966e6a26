import { join } from 'node:path'
import { parsePlainHttpHosts, PLAIN_HTTP_HOSTS_KEY } from '../../shared/api/plain-http-hosts'
import { CorralError } from '../../shared/errors'
import type { CredentialKind, CredentialSecretFields, SecretSink, StoredCredential } from '../session/vault-store'
import type { SessionResourceSecretField, SessionResourceSecrets } from '../session/session-store'
import { keychainAccount, type Keychain } from './keychain'
import { KeyringKeychain } from './keyring-keychain'
import { FileCiphertextStore, SafeStorageKeychain, type SafeStorageLike } from './safe-storage-keychain'
import type { EgressCredential, EgressNetworking, EgressPolicy, EgressRepository } from './egress-proxy'

const SECRET_FIELDS: readonly (keyof CredentialSecretFields)[] = ['token', 'access_token', 'refresh_token', 'client_secret', 'secret_value']

/**
 * The vault store's SecretSink backed by a Keychain: each secret field of a credential is its
 * own keychain account (`credential/<id>/<field>`). Nothing else ever sees the values.
 */
export class KeychainSecretSink implements SecretSink {
  constructor(private readonly keychain: Keychain) {}

  async put(credentialId: string, _kind: CredentialKind, secrets: CredentialSecretFields, removed: readonly (keyof CredentialSecretFields)[] = []): Promise<{ stored: boolean }> {
    for (const field of SECRET_FIELDS) {
      const value = secrets[field]
      if (typeof value === 'string' && value.length > 0) await this.keychain.set(keychainAccount.credential(credentialId, field), value)
    }
    for (const field of removed) await this.keychain.delete(keychainAccount.credential(credentialId, field))
    return { stored: true }
  }

  async delete(credentialId: string): Promise<void> {
    for (const field of SECRET_FIELDS) await this.keychain.delete(keychainAccount.credential(credentialId, field))
  }
}

/**
 * The session store's SessionResourceSecrets backed by a Keychain: a session resource's secret
 * (a github_repository's `authorization_token`) is its own account,
 * `session/<sesn id>/resource/<sres id>/<field>`, read back only by the egress proxy.
 */
export class KeychainResourceSecrets implements SessionResourceSecrets {
  constructor(private readonly keychain: Keychain) {}

  async put(sessionId: string, resourceId: string, field: SessionResourceSecretField, value: string): Promise<void> {
    await this.keychain.set(keychainAccount.sessionResource(sessionId, resourceId, field), value)
  }

  async delete(sessionId: string, resourceIds: readonly string[]): Promise<void> {
    for (const id of resourceIds) await this.keychain.delete(keychainAccount.sessionResource(sessionId, id, 'authorization_token'))
  }
}

/** Reads one secret field of a credential, for the proxy and the MCP client only. */
export function credentialSecret(keychain: Keychain, credentialId: string, field: keyof CredentialSecretFields): () => Promise<string | undefined> {
  return () => keychain.get(keychainAccount.credential(credentialId, field))
}

/**
 * The keychain the engine uses: Electron's safeStorage when the shell passes it in (ciphertexts
 * in `<dataDir>/secrets.safe-storage.json`), else the OS keychain through @napi-rs/keyring.
 * `CORRAL_KEYCHAIN_SERVICE` names the keyring service (default `corral`; tests use their own).
 */
export function openKeychain(params: { dataDir: string; env?: NodeJS.ProcessEnv; safeStorage?: SafeStorageLike }): Keychain {
  if (params.safeStorage) return new SafeStorageKeychain(params.safeStorage, new FileCiphertextStore(join(params.dataDir, 'secrets.safe-storage.json')))
  return new KeyringKeychain({ service: (params.env ?? process.env).CORRAL_KEYCHAIN_SERVICE || 'corral' })
}

export interface EngineSecrets {
  /** ANTHROPIC_API_KEY, else the keychain's. */
  anthropicApiKey?: string
  /** CORRAL_TOKEN, else the keychain's (undefined → the engine falls back to its token file). */
  apiToken?: string
  /** Why the keychain could not be read, when it could not (the engine still starts). */
  keychainProblem?: string
}

/** The Anthropic API key and the local API token: environment variables first, then the keychain. */
export async function resolveEngineSecrets(keychain: Keychain, env: NodeJS.ProcessEnv = process.env): Promise<EngineSecrets> {
  const out: EngineSecrets = { anthropicApiKey: env.ANTHROPIC_API_KEY || undefined, apiToken: env.CORRAL_TOKEN || undefined }
  try {
    out.anthropicApiKey ??= await keychain.get(keychainAccount.anthropicApiKey)
    out.apiToken ??= await keychain.get(keychainAccount.apiToken)
  } catch (err) {
    out.keychainProblem = err instanceof Error ? err.message : String(err)
  }
  return out
}

/** Hosts of the common package registries, reachable under `limited` networking with `allow_package_managers`. */
export const PACKAGE_MANAGER_HOSTS: readonly string[] = [
  'registry.npmjs.org',
  'registry.yarnpkg.com',
  'pypi.org',
  'files.pythonhosted.org',
  'deb.debian.org',
  'security.debian.org',
  'archive.ubuntu.com',
  'security.ubuntu.com',
  'dl-cdn.alpinelinux.org',
  'crates.io',
  'index.crates.io',
  'static.crates.io',
  'proxy.golang.org',
  'sum.golang.org',
  'rubygems.org',
  'repo.maven.apache.org',
  'repo1.maven.org',
]

/**
 * The policy of a package install's egress: the package registries and `extraHosts` (an
 * environment's mirrors), no credential, no repository.
 */
export function packageEgressPolicy(extraHosts: readonly string[] = []): EgressPolicy {
  return { networking: { type: 'limited', allowedHosts: [...new Set([...PACKAGE_MANAGER_HOSTS, ...extraHosts])] }, credentials: [], repositories: [] }
}

/** The egress part of an environment's stored `config` (the API's `networking`). */
export function egressNetworking(config: Record<string, unknown> | undefined, mcpServerUrls: readonly string[] = []): EgressNetworking {
  const n = (config?.networking ?? null) as { type?: string; allowed_hosts?: string[] | null; allow_package_managers?: boolean | null; allow_mcp_servers?: boolean | null } | null
  if (!n || !n.type) return { type: 'none' }
  if (n.type === 'unrestricted') return { type: 'unrestricted' }
  if (n.type === 'limited') {
    const hosts = [...(n.allowed_hosts ?? [])]
    if (n.allow_package_managers) hosts.push(...PACKAGE_MANAGER_HOSTS)
    if (n.allow_mcp_servers) for (const u of mcpServerUrls) {
      try {
        hosts.push(new URL(u).hostname)
      } catch {
        // an unparsable URL names no host
      }
    }
    return { type: 'limited', allowedHosts: hosts }
  }
  throw new CorralError('invalid_request_error', `config.networking.type must be "unrestricted" or "limited", got ${JSON.stringify(n.type)}`)
}

export interface EgressPolicyParams {
  keychain: Keychain
  /** The environment's stored config. */
  environmentConfig: Record<string, unknown> | undefined
  /** Credentials of the session's vaults (archived ones are skipped). */
  credentials: readonly StoredCredential[]
  /** The session's repositories with a token in the keychain (account from keychainAccount.sessionResource). */
  repositories?: readonly { url: string; tokenAccount: string }[]
  /** The agent's MCP server URLs (reachable under `limited` with `allow_mcp_servers`). */
  mcpServerUrls?: readonly string[]
}

/**
 * One session's egress policy: the environment's networking, its vaults' environment_variable
 * credentials (secrets read lazily from the keychain), its repositories. Holds no secret itself.
 */
export function buildEgressPolicy(p: EgressPolicyParams): EgressPolicy {
  const credentials: EgressCredential[] = []
  const seen = new Set<string>()
  for (const c of p.credentials) {
    if (c.archived_at || c.auth.type !== 'environment_variable') continue
    // The first vault listed wins a name clash, as with the API's vault order.
    if (seen.has(c.auth.secret_name)) continue
    seen.add(c.auth.secret_name)
    const net = c.auth.networking
    // Validated at the boundary; an entry that does not parse allows nothing.
    const plain = c.metadata?.[PLAIN_HTTP_HOSTS_KEY] ? parsePlainHttpHosts(c.metadata[PLAIN_HTTP_HOSTS_KEY]) : undefined
    credentials.push({
      credentialId: c.id,
      secretName: c.auth.secret_name,
      hosts: net.type === 'limited' ? net.allowed_hosts : 'unrestricted',
      header: c.auth.injection_location?.header ?? true,
      body: c.auth.injection_location?.body ?? false,
      plainHttpHosts: plain && 'hosts' in plain ? plain.hosts : [],
      secret: credentialSecret(p.keychain, c.id, 'secret_value'),
    })
  }
  const repositories: EgressRepository[] = (p.repositories ?? []).map((r) => ({ url: r.url, token: () => p.keychain.get(r.tokenAccount) }))
  return { networking: egressNetworking(p.environmentConfig, p.mcpServerUrls), credentials, repositories }
}
