import { join } from 'node:path'
import type { StoredCredential, VaultStore } from '../session/vault-store'
import { EgressCertificateAuthority } from './egress-ca'
import { defaultEgressRuntimeDir, EgressProxy, type Dialer, type EgressHandle, type Resolver } from './egress-proxy'
import type { Keychain } from './keychain'
import type { McpSessionServers } from './mcp-router'
import { buildEgressPolicy } from './vault-services'

export interface VaultOptions {
  keychain: Keychain
  dataDir: string
  env?: NodeJS.ProcessEnv
  log?: (line: string) => void
  /** Parent of the per-session socket directories (default: a fresh dir under $XDG_RUNTIME_DIR or the temp dir). */
  egressRuntimeDir?: string
  /** Test hooks: the proxy's resolver and dialer, extra upstream CAs. */
  resolver?: Resolver
  dialer?: Dialer
  upstreamCa?: readonly string[]
}

export interface SessionEgressParams {
  sessionId: string
  /** The environment's stored config (its `networking`). */
  environmentConfig: Record<string, unknown> | undefined
  /** The session's vault ids, in order (the first vault wins a secret_name clash). */
  vaultIds: readonly string[]
  repositories?: readonly { url: string; tokenAccount: string }[]
  mcpServerUrls?: readonly string[]
}

/**
 * The engine's vault: the keychain and the egress proxy, made on first use (making the proxy
 * reads or creates the install's CA, which needs the keychain). The engine owns it and
 * disposes it on close.
 */
export class Vault {
  private proxy?: Promise<EgressProxy>

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
        log: this.options.log,
      })
    })()
    this.proxy.catch(() => (this.proxy = undefined))
    return this.proxy
  }

  /** Opens one session's egress (socket, CA bundle, placeholders) from its environment and vaults. */
  async openSessionEgress(vaults: VaultStore, p: SessionEgressParams): Promise<EgressHandle> {
    const credentials = credentialsOf(vaults, p.vaultIds)
    const policy = buildEgressPolicy({ keychain: this.keychain, environmentConfig: p.environmentConfig, credentials, repositories: p.repositories, mcpServerUrls: p.mcpServerUrls })
    return (await this.egress()).open({ sessionId: p.sessionId, policy })
  }

  async dispose(): Promise<void> {
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

/** A session's MCP servers (its agent snapshot's `mcp_servers`) and its vaults' credentials, for McpToolRouter. */
export function sessionMcpServers(vaults: VaultStore, session: { agent?: unknown; vault_ids?: readonly string[] | null }): McpSessionServers {
  const servers = ((session.agent as { mcp_servers?: { type?: string; name: string; url: string }[] } | undefined)?.mcp_servers ?? [])
    .filter((s) => s.type === undefined || s.type === 'url')
    .map((s) => ({ name: s.name, url: s.url }))
  return { servers, credentials: credentialsOf(vaults, session.vault_ids ?? []) }
}
