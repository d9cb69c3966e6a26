import type { ToolCall, ToolOutcome, ToolRecovery, ToolRouter, ToolTarget } from '../tool-router'
import type { StoredCredential } from '../../session/vault-store'
import type { Keychain } from '../../vault/keychain'
import { McpConnection, McpServerError, mcpCredentialFor, type McpErrorObject, type McpServerSpec, type McpTool, type RefreshLock } from './client'
import type { McpSessionServers } from './servers'

export interface McpToolRouterOptions {
  keychain: Keychain
  serversFor(sessionId: string): Promise<McpSessionServers> | McpSessionServers
  /** Told of each failed connection with the object a `session.error` event carries. */
  onServerError?(sessionId: string, error: McpErrorObject): void
  connectAttempts?: number
  timeoutMs?: number
  retryDelayMs?: number
  /** See McpClientOptions.onRefreshed. */
  onRefreshed?: (credentialId: string, expiresAt: string | null) => void
  /** See McpClientOptions.onRefreshFailed. */
  onRefreshFailed?: (credentialId: string) => void
  /** See McpClientOptions.refreshLock. */
  refreshLock?: RefreshLock
  log?: (line: string) => void
}

/**
 * The MCP hands: a ToolRouter that runs `<server>__<tool>` calls on the session's remote MCP
 * servers (one connection per session and server, made on first use and remade after a failure).
 * It serves only the names of the session's servers (`serves`); any other call is declined with
 * an `isError` outcome (the composite HandsRouter never sends it one). `tools(sessionId)` lists
 * what the model may call.
 */
export class McpToolRouter implements ToolRouter {
  private readonly connections = new Map<string, Map<string, Promise<McpConnection>>>()
  /** Which credential (id and version) each connection was made with, once it has read the vaults. */
  private readonly madeWith = new WeakMap<Promise<McpConnection>, string>()
  /** The error type last reported per session and server, until a connection succeeds: a dead server is reported once, not per model request. */
  private readonly reported = new Map<string, Map<string, string>>()
  /**
   * The list last given per session, with the connections' tool arrays it was made of: while they
   * are the same arrays, `tools` gives the same list again (the context view finds a thread's
   * tool set by its parts' identities; a new array every turn made it serialize every schema).
   */
  private readonly lastTools = new Map<string, { parts: readonly McpTool[][]; tools: McpTool[] }>()

  constructor(private readonly options: McpToolRouterOptions) {}

  /** The MCP tools of a session's servers, and the errors of those that could not be reached. */
  async tools(sessionId: string): Promise<{ tools: McpTool[]; errors: McpErrorObject[] }> {
    const { servers } = await this.options.serversFor(sessionId)
    const parts: McpTool[][] = []
    const errors: McpErrorObject[] = []
    for (const s of servers) {
      try {
        parts.push((await this.connection(sessionId, s)).tools)
      } catch (err) {
        errors.push(toErrorObject(s, err))
      }
    }
    const last = this.lastTools.get(sessionId)
    if (last && last.parts.length === parts.length && last.parts.every((p, i) => p === parts[i])) return { tools: last.tools, errors }
    const tools = parts.flat()
    this.lastTools.set(sessionId, { parts, tools })
    return { tools, errors }
  }

  /** Whether the call names a tool of one of the session's MCP servers (`<server>__<tool>`). */
  async serves(call: ToolTarget): Promise<boolean> {
    return (await this.serverOf(call.sessionId, call.name)) !== undefined
  }

  /** MCP calls need no sandbox: nothing stops one before it is asked. */
  async unavailable(): Promise<string | undefined> {
    return undefined
  }

  async execute(call: ToolCall): Promise<ToolOutcome> {
    const server = await this.serverOf(call.sessionId, call.name)
    if (!server) return { content: `unknown tool "${call.name}": none of this session's MCP servers has it`, isError: true }
    let conn: McpConnection
    try {
      conn = await this.connection(call.sessionId, server)
    } catch (err) {
      const e = toErrorObject(server, err)
      return { content: `${e.type}: ${e.message}`, isError: true }
    }
    return conn.callTool(call.name, call.input, call.signal)
  }

  async recover(): Promise<ToolRecovery> {
    // A remote MCP server keeps no record Corral can ask about: an interrupted call (or one that
    // is not this router's) is unknown.
    return { state: 'unknown' }
  }

  async release(sessionId: string): Promise<void> {
    const conns = this.connections.get(sessionId)
    this.connections.delete(sessionId)
    this.reported.delete(sessionId)
    this.lastTools.delete(sessionId)
    for (const c of conns?.values() ?? []) await (await c.catch(() => undefined))?.close()
  }

  /** Closes every MCP connection (engine shutdown). */
  async dispose(): Promise<void> {
    const all = [...this.connections.values()].flatMap((m) => [...m.values()])
    this.connections.clear()
    this.reported.clear()
    this.lastTools.clear()
    for (const c of all) await (await c.catch(() => undefined))?.close()
  }

  /**
   * Drops every open connection whose server or credential is no longer what the session's agent
   * and vaults say (a credential archived, deleted, rotated or replaced; a vault removed from the
   * session; the server gone): the next call connects again with what the vaults hold then, so an
   * archived credential is not used again. Synchronous when `serversFor` is (the engine's is):
   * call it from the stores' change signal and the change is in force before the API call returns.
   */
  refreshCredentials(): void {
    for (const [sessionId, perSession] of this.connections) {
      let current: Promise<McpSessionServers> | McpSessionServers | undefined
      try {
        current = this.options.serversFor(sessionId)
      } catch {
        current = undefined // the session is gone: none of its connections stays
      }
      const check = (now: McpSessionServers | undefined) => {
        for (const [name, conn] of perSession) {
          const server = now?.servers.find((s) => s.name === name)
          const key = server && now ? credentialKey(server, now.credentials) : undefined
          if (key !== undefined && this.madeWith.get(conn) === key) continue
          perSession.delete(name)
          void conn.then((c) => c.close()).catch(() => undefined)
        }
      }
      if (current instanceof Promise) void current.then(check, () => check(undefined))
      else check(current)
    }
  }

  private async serverOf(sessionId: string, toolName: string): Promise<McpServerSpec | undefined> {
    if (!toolName.includes('__')) return undefined
    const { servers } = await this.options.serversFor(sessionId)
    // The longest name wins when one server's name prefixes another's.
    return [...servers].sort((a, b) => b.name.length - a.name.length).find((s) => toolName.startsWith(`${s.name}__`))
  }

  private connection(sessionId: string, server: McpServerSpec): Promise<McpConnection> {
    let perSession = this.connections.get(sessionId)
    if (!perSession) this.connections.set(sessionId, (perSession = new Map()))
    let conn = perSession.get(server.name)
    if (!conn) {
      conn = (async () => {
        const { credentials } = await this.options.serversFor(sessionId)
        this.madeWith.set(conn!, credentialKey(server, credentials))
        return McpConnection.connect(server, credentials, {
          keychain: this.options.keychain,
          connectAttempts: this.options.connectAttempts,
          timeoutMs: this.options.timeoutMs,
          retryDelayMs: this.options.retryDelayMs,
          onRefreshed: this.options.onRefreshed,
          onRefreshFailed: this.options.onRefreshFailed,
          refreshLock: this.options.refreshLock,
          log: this.options.log,
          // The session hears `retrying` while its first connection to a server keeps failing;
          // a server already reported as failed is not reported again on every reconnect.
          onRetry: (e) => {
            if (!this.reported.get(sessionId)?.has(server.name)) this.options.onServerError?.(sessionId, e.toErrorObject())
          },
        })
      })()
      perSession.set(server.name, conn)
      conn.then(
        () => this.reported.get(sessionId)?.delete(server.name),
        (err: unknown) => {
          // A failed connection is forgotten, so the next call tries again; the session is told
          // of a failure once, and again only when it changes or after the server worked.
          if (perSession.get(server.name) === conn) perSession.delete(server.name)
          const e = toErrorObject(server, err)
          let seen = this.reported.get(sessionId)
          if (!seen) this.reported.set(sessionId, (seen = new Map()))
          if (seen.get(server.name) === e.type) return
          seen.set(server.name, e.type)
          this.options.onServerError?.(sessionId, e)
        },
      )
    }
    return conn
  }
}

/** The credential a connection to `server` would use, as a comparable string (id and last update, or none). */
function credentialKey(server: McpServerSpec, credentials: readonly StoredCredential[]): string {
  const c = mcpCredentialFor(server, credentials)
  return c ? `${c.id}@${c.updated_at}` : 'none'
}

function toErrorObject(server: McpServerSpec, err: unknown): McpErrorObject {
  if (err instanceof McpServerError) return err.toErrorObject()
  return { type: 'mcp_connection_failed_error', mcp_server_name: server.name, message: `could not connect to MCP server "${server.name}"`, retry_status: { type: 'exhausted' } }
}
