/**
 * The Vaults page's forms as data (pure, unit-tested): what the "Add a credential" form holds,
 * the API body it sends, the "Replace the secret" body, and the words for a credential and for a
 * check of an MCP OAuth credential. Secrets only ever travel from a field to the API: nothing the
 * API answers carries one, so nothing here reads one back.
 */
import type { Credential } from '../../../../shared/api/types'
import type { BetaManagedAgentsCredentialValidation as CredentialValidation } from '@anthropic-ai/sdk/resources/beta/vaults/credentials'

export type CredentialKind = 'static_bearer' | 'mcp_oauth' | 'environment_variable'
export type ClientAuth = 'none' | 'client_secret_basic' | 'client_secret_post'

export const KIND_LABELS: Record<CredentialKind, string> = {
  static_bearer: 'MCP server: a token',
  mcp_oauth: 'MCP server: OAuth',
  environment_variable: 'A secret for the sandbox (environment variable)',
}

export interface CredentialDraft {
  kind: CredentialKind
  displayName: string
  /** static_bearer and mcp_oauth */
  serverUrl: string
  /** static_bearer */
  token: string
  /** mcp_oauth */
  accessToken: string
  /** mcp_oauth: a `datetime-local` value (the person's local time), or '' */
  expiresAt: string
  refresh: boolean
  tokenEndpoint: string
  clientId: string
  refreshToken: string
  clientAuth: ClientAuth
  clientSecret: string
  scope: string
  resource: string
  /** environment_variable */
  secretName: string
  secretValue: string
  /** true: any host through the proxy; false: only `hosts` */
  anyHost: boolean
  /** one per line (or comma-separated) */
  hosts: string
  inHeaders: boolean
  inBodies: boolean
}

export function emptyDraft(kind: CredentialKind = 'static_bearer'): CredentialDraft {
  return {
    kind,
    displayName: '',
    serverUrl: '',
    token: '',
    accessToken: '',
    expiresAt: '',
    refresh: false,
    tokenEndpoint: '',
    clientId: '',
    refreshToken: '',
    clientAuth: 'none',
    clientSecret: '',
    scope: '',
    resource: '',
    secretName: '',
    secretValue: '',
    anyHost: false,
    hosts: '',
    inHeaders: true,
    inBodies: false,
  }
}

/** The hosts of a list typed one per line or comma-separated. */
export function hostList(text: string): string[] {
  return text
    .split(/[\n,]/)
    .map((h) => h.trim())
    .filter(Boolean)
}

/** A `datetime-local` value as the API's RFC 3339 instant; undefined for '' or a value that is no date. */
export function instantOf(local: string): string | undefined {
  if (!local.trim()) return undefined
  const t = new Date(local).getTime()
  return Number.isNaN(t) ? undefined : new Date(t).toISOString()
}

/**
 * What the form still lacks before it can be sent (the API checks the rest and its 400 names
 * the field), or undefined when it can be sent.
 */
export function missing(d: CredentialDraft): string | undefined {
  if (d.kind === 'static_bearer') return !d.serverUrl.trim() ? 'the MCP server URL' : !d.token ? 'the token' : undefined
  if (d.kind === 'mcp_oauth') {
    if (!d.serverUrl.trim()) return 'the MCP server URL'
    if (!d.accessToken) return 'the access token'
    if (d.expiresAt.trim() && instantOf(d.expiresAt) === undefined) return 'a valid expiry'
    if (!d.refresh) return undefined
    if (!d.tokenEndpoint.trim()) return 'the token endpoint'
    if (!d.clientId.trim()) return 'the client ID'
    if (!d.refreshToken) return 'the refresh token'
    return d.clientAuth !== 'none' && !d.clientSecret ? 'the client secret' : undefined
  }
  if (!d.secretName.trim()) return 'the variable name'
  if (!d.secretValue) return 'the secret value'
  if (!d.anyHost && hostList(d.hosts).length === 0) return 'at least one allowed host'
  return !d.inHeaders && !d.inBodies ? 'where to put the secret (headers or bodies)' : undefined
}

/** The body of `POST /v1/vaults/{id}/credentials` for a draft (call `missing` first). */
export function createBody(d: CredentialDraft): Record<string, unknown> {
  const name = d.displayName.trim()
  return { ...(name ? { display_name: name } : {}), auth: authOf(d) }
}

function authOf(d: CredentialDraft): Record<string, unknown> {
  if (d.kind === 'static_bearer') return { type: 'static_bearer', mcp_server_url: d.serverUrl.trim(), token: d.token }
  if (d.kind === 'mcp_oauth') {
    const expires = instantOf(d.expiresAt)
    return {
      type: 'mcp_oauth',
      mcp_server_url: d.serverUrl.trim(),
      access_token: d.accessToken,
      ...(expires ? { expires_at: expires } : {}),
      ...(d.refresh
        ? {
            refresh: {
              token_endpoint: d.tokenEndpoint.trim(),
              client_id: d.clientId.trim(),
              refresh_token: d.refreshToken,
              token_endpoint_auth: d.clientAuth === 'none' ? { type: 'none' } : { type: d.clientAuth, client_secret: d.clientSecret },
              ...(d.scope.trim() ? { scope: d.scope.trim() } : {}),
              ...(d.resource.trim() ? { resource: d.resource.trim() } : {}),
            },
          }
        : {}),
    }
  }
  return {
    type: 'environment_variable',
    secret_name: d.secretName.trim(),
    secret_value: d.secretValue,
    networking: d.anyHost ? { type: 'unrestricted' } : { type: 'limited', allowed_hosts: hostList(d.hosts) },
    injection_location: { header: d.inHeaders, body: d.inBodies },
  }
}

/** New secrets for an existing credential; empty fields keep what the keychain holds. */
export interface Replacement {
  /** static_bearer's token, mcp_oauth's access token or environment_variable's value */
  secret: string
  /** mcp_oauth: a new expiry (`datetime-local`), or '' to leave it */
  expiresAt: string
  /** mcp_oauth with refresh: a new refresh token, or '' to keep it */
  refreshToken: string
}

/** The body of `POST /v1/vaults/{id}/credentials/{cid}` that replaces the given secrets, or undefined when nothing was given. */
export function replaceBody(c: Pick<Credential, 'auth'>, r: Replacement): Record<string, unknown> | undefined {
  const auth = c.auth
  if (auth.type === 'static_bearer') return r.secret ? { auth: { type: 'static_bearer', token: r.secret } } : undefined
  if (auth.type === 'environment_variable') return r.secret ? { auth: { type: 'environment_variable', secret_value: r.secret } } : undefined
  const expires = instantOf(r.expiresAt)
  const patch = {
    ...(r.secret ? { access_token: r.secret } : {}),
    ...(expires ? { expires_at: expires } : {}),
    ...(r.refreshToken && auth.refresh ? { refresh: { refresh_token: r.refreshToken } } : {}),
  }
  return Object.keys(patch).length ? { auth: { type: 'mcp_oauth', ...patch } } : undefined
}

/** A credential's kind in words. */
export function kindText(c: Pick<Credential, 'auth'>): string {
  return KIND_LABELS[c.auth.type]
}

/** What a credential is for: its MCP server, or its variable and where it may be sent. */
export function targetText(c: Pick<Credential, 'auth'>): string {
  const a = c.auth
  if (a.type !== 'environment_variable') return a.mcp_server_url
  const where = a.networking.type === 'unrestricted' ? 'any host' : a.networking.allowed_hosts.join(', ')
  const into = [a.injection_location.header ? 'headers' : '', a.injection_location.body ? 'bodies' : ''].filter(Boolean).join(' and ')
  return `$${a.secret_name} → ${where} (${into || 'nowhere'})`
}

/** A credential's name as the page lists it: its display name, else what it is for. */
export function credentialTitle(c: Pick<Credential, 'auth' | 'display_name'>): string {
  return c.display_name?.trim() || (c.auth.type === 'environment_variable' ? `$${c.auth.secret_name}` : hostOf(c.auth.mcp_server_url))
}

function hostOf(url: string): string {
  try {
    return new URL(url).host
  } catch {
    return url
  }
}

export interface CheckWords {
  tone: 'ok' | 'bad' | 'unknown'
  headline: string
  details: string[]
}

/** A check of an MCP OAuth credential (`credentials.mcpOAuthValidate`) in words. */
export function checkWords(v: CredentialValidation): CheckWords {
  const details: string[] = []
  const probe = v.mcp_probe
  if (probe) {
    const r = probe.http_response
    details.push(r ? `The server answered ${probe.method} with HTTP ${r.status_code}${r.body ? `: ${r.body}${r.body_truncated ? '…' : ''}` : '.'}` : `The server did not answer ${probe.method} (no connection, a timeout, or a DNS or TLS failure).`)
  }
  const refresh = v.refresh
  if (refresh?.status === 'succeeded') details.push('The access token was refreshed, and the new one is kept in the keychain.')
  else if (refresh?.status === 'failed') {
    const r = refresh.http_response
    details.push(r ? `The token endpoint refused the refresh with HTTP ${r.status_code}${r.body ? `: ${r.body}${r.body_truncated ? '…' : ''}` : '.'}` : 'The token endpoint refused the refresh.')
  } else if (refresh?.status === 'connect_error') details.push('The token endpoint could not be reached.')
  else if (refresh?.status === 'no_refresh_token') details.push('No refresh token is stored, so it could not be renewed.')
  if (v.status === 'valid') return { tone: 'ok', headline: 'Works: the MCP server accepted the access token.', details }
  if (v.status === 'invalid') {
    return { tone: 'bad', headline: probe ? 'Rejected: the MCP server refused the access token. Authorize again and replace the tokens.' : 'No access token is stored for this credential.', details }
  }
  return { tone: 'unknown', headline: 'Could not tell whether it works. Check again in a moment.', details }
}
