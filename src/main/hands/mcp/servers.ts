import type { StoredCredential, VaultStore } from '../../session/vault-store'
import { credentialsOf } from '../../vault/vault'
import type { McpServerSpec } from './client'

/** What the MCP hands need of a session: which servers it may call, and which credentials it holds for them. */
export interface McpSessionServers {
  /** The session's agent's `mcp_servers` (type `url`). */
  servers: readonly McpServerSpec[]
  /** The credentials of the session's vaults, in vault order. */
  credentials: readonly StoredCredential[]
}

/** A session's MCP servers (its agent snapshot's `mcp_servers`) and its vaults' credentials, for McpToolRouter. */
export function sessionMcpServers(vaults: VaultStore, session: { agent?: unknown; vault_ids?: readonly string[] | null }): McpSessionServers {
  const servers = ((session.agent as { mcp_servers?: { type?: string; name: string; url: string }[] } | undefined)?.mcp_servers ?? [])
    .filter((s) => s.type === undefined || s.type === 'url')
    .map((s) => ({ name: s.name, url: s.url }))
  return { servers, credentials: credentialsOf(vaults, session.vault_ids ?? []) }
}
