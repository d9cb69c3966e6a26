import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js'
import type { StoredCredential } from '../../session/vault-store'
import type { ToolOutcome } from '../tool-router'
import type { BetaManagedAgentsCredentialValidation } from '@anthropic-ai/sdk/resources/beta/vaults/credentials'
import { CorralError } from '../../../shared/errors'
import { sameMcpUrl } from '../../../shared/api/mcp-url'
import { keychainAccount, type Keychain } from '../../vault/keychain'

/*
 * Remote MCP servers (streamable HTTP), reached by the harness in the main process with
 * @modelcontextprotocol/sdk. A server's credential comes from the session's vaults: the
 * credential whose `mcp_server_url` is the server's URL (static_bearer → its token; mcp_oauth →
 * its access token, refreshed with the refresh token on a 401 and kept in the keychain). The
 * token is added to each HTTP request by a fetch wrapper; it never enters a tool result (results
 * are scrubbed of it), an event, an error message or a log line. The model sees the server's
 * tools as `<server name>__<tool name>`.
 */

export type McpErrorType = 'mcp_connection_failed_error' | 'mcp_authentication_failed_error'
export type RetryStatus = { type: 'retrying' } | { type: 'exhausted' } | { type: 'terminal' }

/** The API's MCP error object, as a `session.error` event carries it. */
export interface McpErrorObject {
  type: McpErrorType
  mcp_server_name: string
  message: string
  retry_status: RetryStatus
}

/** An MCP server could not be used; `toErrorObject()` is what the session reports. */
export class McpServerError extends Error {
  constructor(
    readonly type: McpErrorType,
    readonly serverName: string,
    message: string,
    readonly retryStatus: RetryStatus,
    options?: { cause?: unknown },
  ) {
    super(message, options)
    this.name = 'McpServerError'
  }

  toErrorObject(): McpErrorObject {
    return { type: this.type, mcp_server_name: this.serverName, message: this.message, retry_status: this.retryStatus }
  }
}

export interface McpServerSpec {
  /** The agent's `mcp_servers[].name`. */
  name: string
  url: string
}

export interface McpTool {
  /** `<server>__<tool>`, the name the model calls. */
  name: string
  description?: string
  input_schema: Record<string, unknown>
}

export interface McpClientOptions {
  keychain: Keychain
  /** fetch used for the MCP server and token endpoints (tests may wrap it). */
  fetch?: typeof fetch
  /** Attempts to connect before a connection failure is `exhausted` (default 2). */
  connectAttempts?: number
  /** Per-request timeout in ms (default 30 s). */
  timeoutMs?: number
  /** Wait before attempt n+1 is n × this, in ms (default 500). */
  retryDelayMs?: number
  /** Told of each failed attempt that will be retried (`retry_status: retrying`). */
  onRetry?: (error: McpServerError) => void
  /**
   * Told when an mcp_oauth credential's access token was refreshed: when the new one expires
   * (from the token endpoint's `expires_in`; null when it did not say), for the credential's
   * `auth.expires_at`.
   */
  onRefreshed?: (credentialId: string, expiresAt: string | null) => void
  /** Told when the token endpoint refused an mcp_oauth credential's refresh (its owner must sign in again: a webhook). */
  onRefreshFailed?: (credentialId: string) => void
  /**
   * One refresh per credential across the engines of a data directory (the desktop and a `corral
   * serve` on one keychain): held around each exchange of a refresh token. Without it, only this
   * process's refreshes are one at a time.
   */
  refreshLock?: RefreshLock
  log?: (line: string) => void
}

/** A lock per credential shared by the processes that use one keychain (the engine's: session/vault-store.ts, credential_refresh_locks). */
export interface RefreshLock {
  /**
   * Resolves once this process may exchange the credential's refresh token (no other process is
   * exchanging it); `waited` when another one held the lock meanwhile. `release` gives it back.
   */
  acquire(credentialId: string): Promise<{ waited: boolean; release: () => void }>
}

type TokenSource = {
  current(): Promise<string | undefined>
  /** Tries to get a new access token; true when one was stored. */
  refresh?(): Promise<boolean>
  known(): string[]
}

/** One connected MCP server. */
export class McpConnection {
  private constructor(
    readonly server: McpServerSpec,
    private readonly client: Client,
    private readonly tokens: TokenSource | undefined,
    readonly tools: McpTool[],
  ) {}

  /**
   * Connects and lists the server's tools. Throws McpServerError: `mcp_authentication_failed_error`
   * (terminal: the credential must change) on 401/403 after a refresh attempt, or when the
   * server needs a credential and the vaults have none; `mcp_connection_failed_error` otherwise
   * (`exhausted` after `connectAttempts`).
   */
  static async connect(server: McpServerSpec, credentials: readonly StoredCredential[], options: McpClientOptions): Promise<McpConnection> {
    const credential = mcpCredentialFor(server, credentials)
    const tokens = credential ? tokenSource(credential, options) : undefined
    const attempts = Math.max(1, options.connectAttempts ?? 2)
    let last: McpServerError | undefined
    for (let attempt = 1; attempt <= attempts; attempt++) {
      const client = new Client({ name: 'corral', version: '0.1.0' })
      const transport = new StreamableHTTPClientTransport(new URL(server.url), { fetch: authorizedFetch(tokens, options) })
      try {
        await client.connect(transport, { timeout: options.timeoutMs ?? 30_000 })
        const listed = await client.listTools(undefined, { timeout: options.timeoutMs ?? 30_000 })
        const tools = listed.tools.map((t) => ({ name: `${server.name}__${t.name}`, description: t.description, input_schema: t.inputSchema as Record<string, unknown> }))
        options.log?.(`mcp ${server.name}: connected, ${tools.length} tools`)
        return new McpConnection(server, client, tokens, tools)
      } catch (err) {
        await client.close().catch(() => {})
        last = classify(server, err, credential !== undefined, attempt < attempts, tokens?.known() ?? [])
        options.log?.(`mcp ${server.name}: ${last.type}: ${last.message}`)
        if (last.type === 'mcp_authentication_failed_error') throw last
        if (attempt < attempts) {
          options.onRetry?.(last)
          await new Promise((r) => setTimeout(r, attempt * (options.retryDelayMs ?? 500)))
        }
      }
    }
    throw new McpServerError(last!.type, server.name, last!.message, { type: 'exhausted' }, { cause: last })
  }

  /** Calls one tool (`name` without the server prefix or with it). A failure the model should see is `isError`. */
  async callTool(name: string, input: Record<string, unknown>, signal?: AbortSignal): Promise<ToolOutcome> {
    const tool = name.startsWith(`${this.server.name}__`) ? name.slice(this.server.name.length + 2) : name
    const started = Date.now()
    const secrets = this.tokens?.known() ?? []
    try {
      const result = await this.client.callTool({ name: tool, arguments: input }, undefined, { signal })
      const text = ((result.content ?? []) as Array<{ type: string; text?: string }>).map((c) => (c.type === 'text' ? (c.text ?? '') : `[${c.type} content]`)).join('\n')
      return { content: scrub(text, secrets), isError: result.isError === true, durationMs: Date.now() - started }
    } catch (err) {
      const e = classify(this.server, err, this.tokens !== undefined, false, secrets)
      return { content: `${e.type}: ${e.message}`, isError: true, durationMs: Date.now() - started }
    }
  }

  async close(): Promise<void> {
    await this.client.close().catch(() => {})
  }
}

/** The credential a connection to `server` uses: the first live static_bearer or mcp_oauth one for its URL, in vault order. */
export function mcpCredentialFor(server: McpServerSpec, credentials: readonly StoredCredential[]): StoredCredential | undefined {
  return credentials.find((c) => !c.archived_at && (c.auth.type === 'static_bearer' || c.auth.type === 'mcp_oauth') && sameMcpUrl(c.auth.mcp_server_url, server.url))
}

function scrub(text: string, secrets: readonly string[]): string {
  return secrets.filter(Boolean).reduce((t, s) => t.split(s).join('[redacted by corral]'), text)
}

function tokenSource(c: StoredCredential, options: McpClientOptions): TokenSource {
  const known: string[] = []
  const remember = (t: string | undefined) => {
    if (t && !known.includes(t)) known.push(t)
    return t
  }
  const k = options.keychain
  if (c.auth.type === 'static_bearer') {
    return { current: async () => remember(await k.get(keychainAccount.credential(c.id, 'token'))), known: () => known }
  }
  const auth = c.auth
  const refresh = async () => (await refreshAccessToken(c, options, remember)).status === 'succeeded'
  return {
    current: async () => {
      // an access token known to have expired (or to expire within the minute) is refreshed
      // before it is sent, not after the server refuses it
      const learned = tokenExpiry.get(expiryKey(c))
      const expires = learned !== undefined ? learned : auth.type === 'mcp_oauth' && auth.expires_at ? Date.parse(auth.expires_at) : null
      // a refresh that fails is not tried before every request: the server's 401 decides from then on
      if (auth.type === 'mcp_oauth' && auth.refresh && expires !== null && expires - EXPIRY_MARGIN_MS <= Date.now() && !(await refresh())) tokenExpiry.set(expiryKey(c), null)
      return remember(await k.get(keychainAccount.credential(c.id, 'access_token')))
    },
    known: () => known,
    refresh,
  }
}

/** An access token this close to its expiry is refreshed before it is used. */
const EXPIRY_MARGIN_MS = 60_000
/**
 * When each credential's access token expires, as the last refresh in this process learned it
 * (null: not said, or the refresh failed), by credential version: an API update (a new token,
 * a new expiry) starts from what it says.
 */
const tokenExpiry = new Map<string, number | null>()
const expiryKey = (c: StoredCredential) => `${c.id}@${c.updated_at}`

interface HttpCapture {
  body: string
  body_truncated: boolean
  content_type: string
  status_code: number
}

/** A captured body: at most CAPTURED_BODY_CHARS characters. */
const CAPTURED_BODY_CHARS = 4096
function truncated(text: string): { body: string; body_truncated: boolean } {
  return { body: text.slice(0, CAPTURED_BODY_CHARS), body_truncated: text.length > CAPTURED_BODY_CHARS }
}

async function capture(res: Response, secrets: readonly string[]): Promise<HttpCapture> {
  return captured(res, await res.text().catch(() => ''), secrets)
}

/** What a response said, its body (already read) scrubbed of `secrets` and cut. */
function captured(res: Response, text: string, secrets: readonly string[]): HttpCapture {
  return { status_code: res.status, content_type: res.headers.get('content-type') ?? '', ...truncated(scrub(text, secrets)) }
}

type RefreshResult = { status: 'succeeded' | 'failed' | 'connect_error' | 'no_refresh_token'; http_response: HttpCapture | null }

/** The refresh in flight per credential in this process (one keychain per process: the engine's). */
const refreshing = new Map<string, Promise<RefreshResult>>()

/**
 * Exchanges an mcp_oauth credential's refresh token for a new access token at its token
 * endpoint and stores the new tokens in the keychain. Never throws for the endpoint's answer.
 * One exchange per credential at a time: a caller that asks while one is in flight gets its
 * result. Token endpoints that rotate refresh tokens accept each once, so two sessions (or a
 * session and a Check) refreshing together would otherwise lose one of them to `invalid_grant`.
 * Across processes, `options.refreshLock` does the same: a process that had to wait for another's
 * refresh takes the access token that one stored (when it changed) instead of exchanging again.
 */
export function refreshAccessToken(c: StoredCredential, options: McpClientOptions, remember: (t: string | undefined) => string | undefined = (t) => t): Promise<RefreshResult> {
  const inFlight = refreshing.get(c.id)
  if (inFlight) {
    // the tokens it stores are this caller's to scrub too
    return inFlight.then(async (r) => {
      if (r.status === 'succeeded') remember(await options.keychain.get(keychainAccount.credential(c.id, 'access_token')).catch(() => undefined))
      return r
    })
  }
  const run = exchangeLocked(c, options, remember).finally(() => refreshing.delete(c.id))
  refreshing.set(c.id, run)
  return run
}

/** exchangeRefreshToken under the cross-process lock, when there is one. */
async function exchangeLocked(c: StoredCredential, options: McpClientOptions, remember: (t: string | undefined) => string | undefined): Promise<RefreshResult> {
  const lock = options.refreshLock
  if (!lock) return exchangeRefreshToken(c, options, remember)
  const account = keychainAccount.credential(c.id, 'access_token')
  const before = await options.keychain.get(account).catch(() => undefined)
  const held = await lock.acquire(c.id)
  try {
    if (held.waited) {
      // another engine refreshed while this one waited: its new access token is in the keychain
      const now = await options.keychain.get(account).catch(() => undefined)
      if (now && now !== before) {
        remember(now)
        // when it expires is the other engine's to know (it recorded it on the credential): from
        // here the server's 401 decides, rather than an expiry this process knows to be old
        tokenExpiry.set(expiryKey(c), null)
        options.log?.(`mcp credential ${c.id}: access token refreshed by another Corral process on this data directory`)
        return { status: 'succeeded', http_response: null }
      }
    }
    return await exchangeRefreshToken(c, options, remember)
  } finally {
    held.release()
  }
}

async function exchangeRefreshToken(c: StoredCredential, options: McpClientOptions, remember: (t: string | undefined) => string | undefined): Promise<RefreshResult> {
  const k = options.keychain
  const r = c.auth.type === 'mcp_oauth' ? c.auth.refresh : undefined
  const refreshToken = r ? remember(await k.get(keychainAccount.credential(c.id, 'refresh_token'))) : undefined
  if (!r || !refreshToken) return { status: 'no_refresh_token', http_response: null }
  const form = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken })
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' }
  const method = r.token_endpoint_auth.type
  const secrets = [refreshToken]
  if (method === 'client_secret_basic' || method === 'client_secret_post') {
    const secret = remember(await k.get(keychainAccount.credential(c.id, 'client_secret')))
    if (!secret) return { status: 'failed', http_response: null }
    secrets.push(secret)
    if (method === 'client_secret_basic') headers.authorization = `Basic ${Buffer.from(`${encodeURIComponent(r.client_id)}:${encodeURIComponent(secret)}`).toString('base64')}`
    else form.set('client_secret', secret)
  }
  if (method !== 'client_secret_basic') form.set('client_id', r.client_id)
  if (r.scope) form.set('scope', r.scope)
  if (r.resource) form.set('resource', r.resource)
  let res: Response
  try {
    res = await (options.fetch ?? fetch)(r.token_endpoint, { method: 'POST', headers, body: form, signal: AbortSignal.timeout(options.timeoutMs ?? 30_000) })
  } catch {
    return { status: 'connect_error', http_response: null }
  }
  if (!res.ok) {
    options.onRefreshFailed?.(c.id)
    return { status: 'failed', http_response: await capture(res, secrets) }
  }
  const body = (await res.json().catch(() => ({}))) as { access_token?: unknown; refresh_token?: unknown }
  if (typeof body.access_token !== 'string' || !body.access_token) return { status: 'failed', http_response: null }
  await k.set(keychainAccount.credential(c.id, 'access_token'), remember(body.access_token)!)
  if (typeof body.refresh_token === 'string' && body.refresh_token) await k.set(keychainAccount.credential(c.id, 'refresh_token'), remember(body.refresh_token)!)
  const lifetime = Number((body as { expires_in?: unknown }).expires_in)
  const expiresAt = Number.isFinite(lifetime) && lifetime > 0 ? Date.now() + lifetime * 1000 : null
  tokenExpiry.set(expiryKey(c), expiresAt)
  options.onRefreshed?.(c.id, expiresAt === null ? null : new Date(expiresAt).toISOString())
  options.log?.(`mcp credential ${c.id}: access token refreshed`)
  return { status: 'succeeded', http_response: null }
}

type Probe = { ok: true } | { ok: false; auth: boolean; probe: { method: string; http_response: HttpCapture | null } }

/**
 * The MCP session a client opens, step by step, with `token` as its bearer: `initialize`, the
 * `notifications/initialized` that must follow it, and `tools/list` (what a session connecting to
 * the server does first). A server may answer `initialize` without looking at the token, so a
 * working credential is one that gets through `tools/list`. The first step that fails names the
 * method; a 401 or 403 is the credential's fault (`auth`), anything else (no answer, another
 * status, a JSON-RPC error) leaves it unknown. The session the server opened is ended (DELETE).
 */
async function probeMcp(url: string, token: string, options: McpClientOptions): Promise<Probe> {
  const f = options.fetch ?? fetch
  const timeoutMs = options.timeoutMs ?? 30_000
  let sessionId: string | undefined
  /** The version the server answered `initialize` with, sent on every later request. */
  let version: string | undefined
  const headers = () => ({
    authorization: `Bearer ${token}`,
    accept: 'application/json, text/event-stream',
    ...(sessionId ? { 'mcp-session-id': sessionId } : {}),
    ...(version ? { 'mcp-protocol-version': version } : {}),
  })
  const steps: { method: string; body: { id?: number; [k: string]: unknown } }[] = [
    { method: 'initialize', body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'corral', version: '0.1.0' } } } },
    { method: 'notifications/initialized', body: { jsonrpc: '2.0', method: 'notifications/initialized' } },
    { method: 'tools/list', body: { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} } },
  ]
  try {
    for (const step of steps) {
      let res: Response
      try {
        res = await f(url, { method: 'POST', headers: { ...headers(), 'content-type': 'application/json' }, body: JSON.stringify(step.body), signal: AbortSignal.timeout(timeoutMs) })
      } catch {
        return { ok: false, auth: false, probe: { method: step.method, http_response: null } }
      }
      if (!res.ok) return { ok: false, auth: res.status === 401 || res.status === 403, probe: { method: step.method, http_response: await capture(res, [token]) } }
      sessionId ??= res.headers.get('mcp-session-id') ?? undefined
      if (step.body.id === undefined) {
        await res.body?.cancel().catch(() => {})
        continue
      }
      // the JSON-RPC answer (a JSON body, or an event stream carrying it): an error is no success
      const text = await res.text().catch(() => '')
      const answer = jsonRpcAnswer(text, res.headers.get('content-type') ?? '', step.body.id)
      if (answer?.error !== undefined) return { ok: false, auth: false, probe: { method: step.method, http_response: captured(res, text, [token]) } }
      const negotiated = (answer?.result as { protocolVersion?: unknown } | undefined)?.protocolVersion
      if (step.method === 'initialize' && typeof negotiated === 'string') version = negotiated
    }
    return { ok: true }
  } finally {
    if (sessionId) await f(url, { method: 'DELETE', headers: headers(), signal: AbortSignal.timeout(timeoutMs) }).then((r) => r.body?.cancel(), () => undefined).catch(() => undefined)
  }
}

/** The JSON-RPC message answering request `id` in a response body (JSON, or SSE `data:` lines), if any. */
function jsonRpcAnswer(text: string, contentType: string, id: number): { result?: unknown; error?: unknown } | undefined {
  const payloads = /text\/event-stream/i.test(contentType) ? text.split(/\r\n|\n|\r/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5)) : [text]
  for (const p of payloads) {
    try {
      const m = JSON.parse(p) as { id?: unknown; result?: unknown; error?: unknown }
      if (m && m.id === id) return m
    } catch {
      // not JSON: not the answer
    }
  }
  return undefined
}

/**
 * Live-probes an mcp_oauth credential against its MCP server, as the API's
 * `credentials.mcpOAuthValidate` does (probeMcp: `initialize`, then `tools/list`): `valid` when
 * the server accepts the access token (after a refresh if the first try got 401/403), `invalid`
 * when it rejects it and a refresh did not help or no access token is stored, `unknown` when the
 * server or the token endpoint could not be reached. Captured bodies are scrubbed of every secret of the credential.
 */
export async function validateMcpOAuthCredential(c: StoredCredential, options: McpClientOptions & { now?: () => Date }): Promise<BetaManagedAgentsCredentialValidation> {
  if (c.auth.type !== 'mcp_oauth') throw new CorralError('invalid_request_error', `credential ${c.id} is ${c.auth.type}: only mcp_oauth credentials can be validated`)
  const k = options.keychain
  const hasRefresh = c.auth.refresh != null && (await k.get(keychainAccount.credential(c.id, 'refresh_token'))) !== undefined
  const base = { type: 'vault_credential_validation' as const, credential_id: c.id, vault_id: c.vault_id, has_refresh_token: hasRefresh, validated_at: (options.now?.() ?? new Date()).toISOString() }
  const access = await k.get(keychainAccount.credential(c.id, 'access_token'))
  if (!access) return { ...base, status: 'invalid', mcp_probe: null, refresh: null }
  const first = await probeMcp(c.auth.mcp_server_url, access, options)
  if (first.ok) return { ...base, status: 'valid', mcp_probe: null, refresh: null }
  if (!first.auth) return { ...base, status: 'unknown', mcp_probe: first.probe, refresh: null }
  const refresh = await refreshAccessToken(c, options)
  if (refresh.status !== 'succeeded') return { ...base, status: refresh.status === 'connect_error' ? 'unknown' : 'invalid', mcp_probe: first.probe, refresh }
  const fresh = await k.get(keychainAccount.credential(c.id, 'access_token'))
  const second = await probeMcp(c.auth.mcp_server_url, fresh ?? '', options)
  if (second.ok) return { ...base, status: 'valid', mcp_probe: null, refresh }
  return { ...base, status: second.auth ? 'invalid' : 'unknown', mcp_probe: second.probe, refresh }
}

/** fetch with the credential's bearer token; on a 401 it refreshes once (mcp_oauth) and retries. */
function authorizedFetch(tokens: TokenSource | undefined, options: McpClientOptions): typeof fetch {
  const base = options.fetch ?? fetch
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const send = async () => {
      const headers = new Headers(init?.headers)
      const token = await tokens?.current()
      if (token) headers.set('authorization', `Bearer ${token}`)
      return base(input, { ...init, headers })
    }
    const res = await send()
    if (res.status === 401 && tokens?.refresh && !(init?.body instanceof ReadableStream) && (await tokens.refresh())) {
      await res.body?.cancel().catch(() => {})
      return send()
    }
    return res
  }) as typeof fetch
}

function classify(server: McpServerSpec, err: unknown, hadCredential: boolean, willRetry: boolean, secrets: readonly string[]): McpServerError {
  const origin = (() => {
    try {
      return new URL(server.url).origin
    } catch {
      return 'its URL'
    }
  })()
  const status = err instanceof StreamableHTTPError ? err.code : undefined
  const text = scrub(err instanceof Error ? err.message : String(err), secrets)
  if (status === 401 || status === 403 || /\b(401|403)\b|unauthori[sz]ed/i.test(text)) {
    const why = hadCredential ? 'rejected the credential from the session\'s vaults' : 'requires a credential and the session\'s vaults have none for this URL'
    return new McpServerError('mcp_authentication_failed_error', server.name, `MCP server "${server.name}" at ${origin} ${why} (HTTP ${status ?? 401}); update the credential for ${server.url}`, { type: 'terminal' }, { cause: err })
  }
  const detail = status ? `HTTP ${status}` : ((err as { cause?: { code?: string } }).cause?.code ?? text.slice(0, 200))
  return new McpServerError('mcp_connection_failed_error', server.name, `could not connect to MCP server "${server.name}" at ${origin} (${detail})`, willRetry ? { type: 'retrying' } : { type: 'exhausted' }, { cause: err })
}
