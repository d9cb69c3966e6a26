import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import type { StoredCredential, VaultStore } from '../session/vault-store'
import { EgressCertificateAuthority } from './egress-ca'
import { defaultEgressRuntimeDir, EgressProxy, SANDBOX_EGRESS_DIR, type Dialer, type EgressCredential, type EgressHandle, type EgressPolicy, type Resolver } from './egress-proxy'
import { NO_EGRESS_POLICY } from './egress-policy'
import { keychainAccount, type Keychain } from './keychain'
import { buildEgressPolicy, egressNetworking, packageEgressPolicy } from './vault-services'
import type { SessionStore } from '../session/session-store'
import type { EnvironmentStore } from '../session/environment-store'

export interface VaultOptions {
  keychain: Keychain
  dataDir: string
  env?: NodeJS.ProcessEnv
  log?: (line: string) => void
  /** Parent of the per-session socket directories (default: a fresh dir under $XDG_RUNTIME_DIR or the temp dir). */
  egressRuntimeDir?: string
  /** The uids the host sees for Docker sandboxes (default [1000]); see peer-credentials.ts. */
  egressContainerUids?: readonly number[]
  /** Test hooks: the proxy's resolver and dialer, extra upstream CAs. */
  resolver?: Resolver
  dialer?: Dialer
  upstreamCa?: readonly string[]
}

/** What `Vault.sessionEgress` reads a session's egress from. */
export interface SessionEgressServices {
  sessions: Pick<SessionStore, 'retrieve'>
  environments: Pick<EnvironmentStore, 'retrieve'>
  vaults: VaultStore
}

/** An open session egress and what its policy is re-derived from. */
interface LiveSessionEgress {
  handle: EgressHandle
  services: SessionEgressServices
  /** The repositories served since open (their tokens were in the keychain then). */
  repositories: readonly { url: string; tokenAccount: string }[]
  /** The policy in force (what `refreshSessionEgress` last gave the handle). */
  policy: EgressPolicy
}

/**
 * The engine's vault: the keychain and the egress proxy, made on first use (making the proxy
 * reads or creates the install's CA, which needs the keychain). The engine owns it and
 * disposes it on close.
 */
export class Vault {
  private proxy?: Promise<EgressProxy>
  private readonly sessions = new Map<string, Promise<EgressHandle | undefined>>()
  private readonly live = new Map<string, LiveSessionEgress>()

  constructor(private readonly options: VaultOptions) {}

  get keychain(): Keychain {
    return this.options.keychain
  }

  /** The egress proxy, created on first call. Throws keychain_error when the CA key cannot be kept. */
  egress(): Promise<EgressProxy> {
    this.proxy ??= (async () => {
      const ca = await EgressCertificateAuthority.open({ keychain: this.options.keychain, certPath: join(this.options.dataDir, 'egress-ca.pem') })
      return new EgressProxy({
        runtimeDir: this.options.egressRuntimeDir ?? defaultEgressRuntimeDir(this.options.env),
        ca,
        resolver: this.options.resolver,
        dialer: this.options.dialer,
        upstreamCa: this.options.upstreamCa,
        containerUids: this.options.egressContainerUids,
        log: this.options.log,
      })
    })()
    this.proxy.catch(() => (this.proxy = undefined))
    return this.proxy
  }

  /**
   * A session's policy as the stores say now: its environment's networking, the live
   * environment_variable credentials of its current vaults, the agent's MCP hosts, and the
   * repositories served since open. An archived session, or one whose rows cannot be read,
   * reaches nothing. Every credential's secret reader refuses once the credential has left the
   * policy in force, so a request decided just before an archive cannot inject it after.
   */
  private derivePolicy(sessionId: string, services: SessionEgressServices, repositories: readonly { url: string; tokenAccount: string }[]): EgressPolicy {
    try {
      const session = services.sessions.retrieve(sessionId)
      if (session.archived_at) return NO_EGRESS_POLICY
      const environment = services.environments.retrieve(session.environment_id)
      const mcpServerUrls = ((session.agent as { mcp_servers?: { url: string }[] } | undefined)?.mcp_servers ?? []).map((m) => m.url)
      const policy = buildEgressPolicy({
        keychain: this.keychain,
        environmentConfig: environment.config as unknown as Record<string, unknown>,
        credentials: credentialsOf(services.vaults, session.vault_ids ?? []),
        repositories,
        mcpServerUrls,
      })
      // In force = the policy the proxy holds now names this credential with the same hosts and locations.
      const shape = (c: EgressCredential) => JSON.stringify([c.credentialId, c.secretName, c.hosts, c.header, c.body])
      const inForce = (c: EgressCredential) => this.live.get(sessionId)?.policy.credentials.some((x) => shape(x) === shape(c)) === true
      return {
        ...policy,
        credentials: policy.credentials.map((c) => ({
          ...c,
          secret: async () => {
            const value = await c.secret()
            return inForce(c) ? value : undefined
          },
        })),
      }
    } catch (err) {
      // Fail closed: a policy that cannot be read allows nothing.
      this.options.log?.(`[corral] egress of ${sessionId} reaches nothing: its policy could not be read (${err instanceof Error ? err.message : String(err)})`)
      return NO_EGRESS_POLICY
    }
  }

  /**
   * Re-derives the policy of every open session egress from the stores and gives it to the proxy
   * (which closes a session's connections when its decisions change). Synchronous: call it from a
   * store's change signal, and the change is in force before the API call that made it returns.
   * `sessionId` limits it to one session.
   */
  refreshSessionEgress(sessionId?: string): void {
    for (const [id, live] of this.live) {
      if (sessionId !== undefined && id !== sessionId) continue
      const policy = this.derivePolicy(id, live.services, live.repositories)
      live.handle.update(policy)
      live.policy = policy
    }
  }

  /**
   * The egress of a session, opened on first call from its environment, vaults and repositories
   * (a repository is served when its authorization token is in the keychain under
   * `keychainAccount.sessionResource`), and kept until `releaseSessionEgress`. Returns undefined
   * when the session may reach nothing (networking none, no repository with a token): the sandbox
   * then gets no proxy at all. For the hands: mount `dir` at `sandboxDir`, add `env`, start
   * `bridgeCommand`. `options.dir`: a reserved directory (a warm sandbox mounts it) to open in,
   * when the session's egress is not open yet.
   */
  sessionEgress(services: SessionEgressServices, sessionId: string, options: { dir?: string } = {}): Promise<EgressHandle | undefined> {
    let h = this.sessions.get(sessionId)
    if (!h) {
      h = (async () => {
        const session = services.sessions.retrieve(sessionId)
        const environment = services.environments.retrieve(session.environment_id)
        const repositories: { url: string; tokenAccount: string }[] = []
        for (const r of (session.resources ?? []) as unknown as { id: string; type: string; url?: string }[]) {
          if (r.type !== 'github_repository' || !r.url || !/^https?:\/\//.test(r.url)) continue
          const tokenAccount = keychainAccount.sessionResource(sessionId, r.id, 'authorization_token')
          if ((await this.keychain.get(tokenAccount)) !== undefined) repositories.push({ url: r.url, tokenAccount })
        }
        const config = environment.config as unknown as Record<string, unknown>
        const mcpServerUrls = ((session.agent as { mcp_servers?: { url: string }[] } | undefined)?.mcp_servers ?? []).map((m) => m.url)
        const n = egressNetworking(config, mcpServerUrls)
        // `limited` with nothing allowed (the API's default) reaches nothing, like `none`.
        if ((n.type === 'none' || (n.type === 'limited' && n.allowedHosts.length === 0)) && repositories.length === 0) return undefined
        const proxy = await this.egress()
        // Derived last, synchronously before open: no store change can fall between the two.
        const handle = await proxy.open({ sessionId, policy: this.derivePolicy(sessionId, services, repositories), dir: options.dir })
        const live: LiveSessionEgress = { handle, services, repositories, policy: NO_EGRESS_POLICY }
        this.live.set(sessionId, live)
        // A change committed while the socket was being made is picked up here; later ones by the signal.
        this.refreshSessionEgress(sessionId)
        return handle
      })()
      this.sessions.set(sessionId, h)
      h.catch(() => this.sessions.delete(sessionId))
    }
    return h
  }

  /**
   * An egress for installing an environment's packages at provision: the package registries
   * (PACKAGE_MANAGER_HOSTS) and `extraHosts` (the environment's mirrors), no credential, whatever
   * the environment's own networking. The caller closes it when the install ends.
   */
  async packageEgress(extraHosts: readonly string[] = []): Promise<EgressHandle> {
    return (await this.egress()).open({ sessionId: `packages-${randomBytes(6).toString('hex')}`, policy: packageEgressPolicy(extraHosts) })
  }

  /**
   * An empty egress directory for a sandbox made before its session is known (a warm container):
   * mount it at `sandboxDir`; `sessionEgress(..., { dir })` opens a session in it.
   */
  async reserveEgressDir(): Promise<{ dir: string; sandboxDir: string }> {
    return { dir: (await this.egress()).reserveDir(), sandboxDir: SANDBOX_EGRESS_DIR }
  }

  /** Closes a session's egress (its sandbox is gone); idempotent. */
  async releaseSessionEgress(sessionId: string): Promise<void> {
    const h = this.sessions.get(sessionId)
    this.sessions.delete(sessionId)
    this.live.delete(sessionId)
    await (await h?.catch(() => undefined))?.close()
  }

  async dispose(): Promise<void> {
    this.sessions.clear()
    this.live.clear()
    const p = this.proxy
    this.proxy = undefined
    if (p) await (await p.catch(() => undefined))?.dispose()
  }
}

/** Every live credential of the given vaults, in vault order (metadata only). */
export function credentialsOf(vaults: VaultStore, vaultIds: readonly string[]): StoredCredential[] {
  const credentials: StoredCredential[] = []
  for (const vaultId of vaultIds) {
    let page: string | undefined
    do {
      const r = vaults.listCredentials(vaultId, { limit: 100, page })
      credentials.push(...r.data.filter((c) => !c.archived_at))
      page = r.next_page ?? undefined
    } while (page)
  }
  return credentials
}

