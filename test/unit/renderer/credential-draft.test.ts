import { describe, expect, it } from 'vitest'
import { credentialCreateSchema, credentialUpdateSchema } from '../../../src/shared/api/schemas'
import { checkWords, createBody, credentialTitle, emptyDraft, hostList, instantOf, missing, replaceBody, targetText, type CredentialDraft } from '../../../src/renderer/src/features/vaults/credential-draft'

const draft = (patch: Partial<CredentialDraft>): CredentialDraft => ({ ...emptyDraft(patch.kind), ...patch })

describe('the Vaults page’s credential form', () => {
  it('sends what the API accepts for each kind, and only the fields that were filled', () => {
    const bearer = createBody(draft({ kind: 'static_bearer', serverUrl: ' https://mcp.example.com/mcp ', token: 'tok', displayName: ' Docs ' }))
    expect(bearer).toEqual({ display_name: 'Docs', auth: { type: 'static_bearer', mcp_server_url: 'https://mcp.example.com/mcp', token: 'tok' } })
    expect(credentialCreateSchema.safeParse(bearer).success).toBe(true)

    const plain = createBody(draft({ kind: 'mcp_oauth', serverUrl: 'https://mcp.example.com/mcp', accessToken: 'a' }))
    expect(plain).toEqual({ auth: { type: 'mcp_oauth', mcp_server_url: 'https://mcp.example.com/mcp', access_token: 'a' } })
    expect(credentialCreateSchema.safeParse(plain).success).toBe(true)

    const later = new Date(Date.now() + 86_400_000)
    const local = `${later.getFullYear()}-${String(later.getMonth() + 1).padStart(2, '0')}-${String(later.getDate()).padStart(2, '0')}T${String(later.getHours()).padStart(2, '0')}:${String(later.getMinutes()).padStart(2, '0')}`
    const refreshing = createBody(
      draft({ kind: 'mcp_oauth', serverUrl: 'https://mcp.example.com/mcp', accessToken: 'a', expiresAt: local, refresh: true, tokenEndpoint: 'https://auth.example.com/token', clientId: 'cid', refreshToken: 'r', clientAuth: 'client_secret_post', clientSecret: 's', scope: 'read' }),
    )
    expect(refreshing.auth).toMatchObject({
      expires_at: new Date(local).toISOString(),
      refresh: { token_endpoint: 'https://auth.example.com/token', client_id: 'cid', refresh_token: 'r', token_endpoint_auth: { type: 'client_secret_post', client_secret: 's' }, scope: 'read' },
    })
    expect(credentialCreateSchema.safeParse(refreshing).success).toBe(true)

    const env = createBody(draft({ kind: 'environment_variable', secretName: 'GITHUB_TOKEN', secretValue: 'v', hosts: 'api.github.com\n*.githubusercontent.com, uploads.github.com\n' }))
    expect(env.auth).toEqual({ type: 'environment_variable', secret_name: 'GITHUB_TOKEN', secret_value: 'v', networking: { type: 'limited', allowed_hosts: ['api.github.com', '*.githubusercontent.com', 'uploads.github.com'] }, injection_location: { header: true, body: false } })
    expect(credentialCreateSchema.safeParse(env).success).toBe(true)
    const anywhere = createBody(draft({ kind: 'environment_variable', secretName: 'K', secretValue: 'v', anyHost: true, inBodies: true }))
    expect((anywhere.auth as { networking: unknown }).networking).toEqual({ type: 'unrestricted' })
    expect(credentialCreateSchema.safeParse(anywhere).success).toBe(true)
  })

  it('names what is still missing, field by field', () => {
    expect(missing(draft({ kind: 'static_bearer' }))).toBe('the MCP server URL')
    expect(missing(draft({ kind: 'static_bearer', serverUrl: 'https://x' }))).toBe('the token')
    expect(missing(draft({ kind: 'mcp_oauth', serverUrl: 'https://x', accessToken: 'a', expiresAt: 'soon' }))).toBe('a valid expiry')
    expect(missing(draft({ kind: 'mcp_oauth', serverUrl: 'https://x', accessToken: 'a', refresh: true, tokenEndpoint: 'https://t', clientId: 'c' }))).toBe('the refresh token')
    expect(missing(draft({ kind: 'mcp_oauth', serverUrl: 'https://x', accessToken: 'a', refresh: true, tokenEndpoint: 'https://t', clientId: 'c', refreshToken: 'r', clientAuth: 'client_secret_basic' }))).toBe('the client secret')
    expect(missing(draft({ kind: 'environment_variable', secretName: 'K', secretValue: 'v' }))).toBe('at least one allowed host')
    expect(missing(draft({ kind: 'environment_variable', secretName: 'K', secretValue: 'v', anyHost: true, inHeaders: false }))).toBe('where to put the secret (headers or bodies)')
    expect(missing(draft({ kind: 'environment_variable', secretName: 'K', secretValue: 'v', hosts: 'a.example' }))).toBeUndefined()
    expect(hostList(' a \n\n b,c ')).toEqual(['a', 'b', 'c'])
    expect(instantOf('')).toBeUndefined()
    expect(instantOf('not a date')).toBeUndefined()
  })

  it('replaces only the secrets given, in the update body the API accepts', () => {
    const oauth = { auth: { type: 'mcp_oauth' as const, mcp_server_url: 'https://x', refresh: { client_id: 'c', token_endpoint: 'https://t', token_endpoint_auth: { type: 'none' as const } } } }
    expect(replaceBody(oauth, { secret: '', expiresAt: '', refreshToken: '' })).toBeUndefined()
    const both = replaceBody(oauth, { secret: 'new-access', expiresAt: '', refreshToken: 'new-refresh' })
    expect(both).toEqual({ auth: { type: 'mcp_oauth', access_token: 'new-access', refresh: { refresh_token: 'new-refresh' } } })
    expect(credentialUpdateSchema.safeParse(both).success).toBe(true)
    const bearer = replaceBody({ auth: { type: 'static_bearer', mcp_server_url: 'https://x' } }, { secret: 't2', expiresAt: '', refreshToken: 'ignored' })
    expect(bearer).toEqual({ auth: { type: 'static_bearer', token: 't2' } })
    expect(credentialUpdateSchema.safeParse(bearer).success).toBe(true)
    const env = replaceBody({ auth: { type: 'environment_variable', secret_name: 'K', networking: { type: 'unrestricted' }, injection_location: { header: true, body: false } } }, { secret: 'v2', expiresAt: '', refreshToken: '' })
    expect(env).toEqual({ auth: { type: 'environment_variable', secret_value: 'v2' } })
    expect(credentialUpdateSchema.safeParse(env).success).toBe(true)
  })

  it('says what a credential is for, without a secret (the API returns none)', () => {
    const env = { display_name: null, auth: { type: 'environment_variable' as const, secret_name: 'GH', networking: { type: 'limited' as const, allowed_hosts: ['api.github.com'] }, injection_location: { header: true, body: true } } }
    expect(targetText(env)).toBe('$GH → api.github.com (headers and bodies)')
    expect(credentialTitle(env)).toBe('$GH')
    expect(credentialTitle({ display_name: null, auth: { type: 'static_bearer', mcp_server_url: 'https://mcp.example.com:8443/mcp' } })).toBe('mcp.example.com:8443')
    expect(credentialTitle({ display_name: 'Docs', auth: { type: 'static_bearer', mcp_server_url: 'https://x' } })).toBe('Docs')
  })

  it('words a check: valid, rejected with what each endpoint answered, unknown', () => {
    const base = { type: 'vault_credential_validation' as const, credential_id: 'vcrd_1', vault_id: 'vlt_1', validated_at: new Date().toISOString(), has_refresh_token: true }
    expect(checkWords({ ...base, status: 'valid', mcp_probe: null, refresh: { status: 'succeeded', http_response: null } })).toEqual({ tone: 'ok', headline: 'Works: the MCP server accepted the access token.', details: ['The access token was refreshed, and the new one is kept in the keychain.'] })
    const bad = checkWords({
      ...base,
      status: 'invalid',
      mcp_probe: { method: 'tools/list', http_response: { status_code: 401, content_type: 'application/json', body: '{"error":"unauthorized"}', body_truncated: false } },
      refresh: { status: 'failed', http_response: { status_code: 400, content_type: 'application/json', body: '{"error":"invalid_grant"}', body_truncated: true } },
    })
    expect(bad.tone).toBe('bad')
    expect(bad.headline).toMatch(/refused the access token/)
    expect(bad.details).toEqual(['The server answered tools/list with HTTP 401: {"error":"unauthorized"}', 'The token endpoint refused the refresh with HTTP 400: {"error":"invalid_grant"}…'])
    expect(checkWords({ ...base, status: 'invalid', mcp_probe: null, refresh: null }).headline).toBe('No access token is stored for this credential.')
    const unknown = checkWords({ ...base, status: 'unknown', mcp_probe: { method: 'initialize', http_response: null }, refresh: null })
    expect(unknown).toMatchObject({ tone: 'unknown', details: ['The server did not answer initialize (no connection, a timeout, or a DNS or TLS failure).'] })
  })
})
