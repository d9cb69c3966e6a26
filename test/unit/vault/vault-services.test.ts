import { describe, expect, it } from 'vitest'
import { MemoryKeychain } from '../../../src/main/vault/memory-keychain'
import { KeychainSecretSink, PACKAGE_MANAGER_HOSTS, buildEgressPolicy, egressNetworking, resolveEngineSecrets } from '../../../src/main/vault/vault-services'
import { keychainAccount } from '../../../src/main/vault/keychain'
import type { StoredCredential } from '../../../src/main/session/vault-store'

const cred = (id: string, auth: Record<string, unknown>, archived = false, metadata: Record<string, string> = {}) =>
  ({ id, type: 'vault_credential', vault_id: 'vlt_1', auth, metadata, created_at: '', updated_at: '', archived_at: archived ? 'x' : null, corral: { secret_stored: true } }) as unknown as StoredCredential

describe('KeychainSecretSink', () => {
  it('puts each secret field in its own keychain account and reports it stored', async () => {
    const k = new MemoryKeychain()
    const sink = new KeychainSecretSink(k)
    expect(await sink.put('vcrd_1', 'mcp_oauth', { access_token: 'at', refresh_token: 'rt', client_secret: 'cs' })).toEqual({ stored: true })
    expect(await k.get(keychainAccount.credential('vcrd_1', 'access_token'))).toBe('at')
    expect(await k.get(keychainAccount.credential('vcrd_1', 'refresh_token'))).toBe('rt')
  })

  it('rotates one field, keeps the others, and forgets removed ones', async () => {
    const k = new MemoryKeychain()
    const sink = new KeychainSecretSink(k)
    await sink.put('vcrd_1', 'mcp_oauth', { access_token: 'at1', refresh_token: 'rt1' })
    await sink.put('vcrd_1', 'mcp_oauth', { access_token: 'at2' }, ['refresh_token'])
    expect(await k.get(keychainAccount.credential('vcrd_1', 'access_token'))).toBe('at2')
    expect(await k.get(keychainAccount.credential('vcrd_1', 'refresh_token'))).toBeUndefined()
  })

  it('deletes every field of a credential and tolerates an unknown id', async () => {
    const k = new MemoryKeychain()
    const sink = new KeychainSecretSink(k)
    await sink.put('vcrd_1', 'static_bearer', { token: 't' })
    await sink.delete('vcrd_1')
    await sink.delete('vcrd_unknown')
    expect(await k.get(keychainAccount.credential('vcrd_1', 'token'))).toBeUndefined()
  })
})

describe('resolveEngineSecrets', () => {
  it('prefers the environment variables and falls back to the keychain', async () => {
    const k = new MemoryKeychain()
    await k.set(keychainAccount.anthropicApiKey, 'sk-from-keychain')
    await k.set(keychainAccount.apiToken, 'tok-from-keychain')
    expect(await resolveEngineSecrets(k, {})).toEqual({ anthropicApiKey: 'sk-from-keychain', apiToken: 'tok-from-keychain' })
    expect(await resolveEngineSecrets(k, { ANTHROPIC_API_KEY: 'sk-env', CORRAL_TOKEN: 'tok-env' })).toEqual({ anthropicApiKey: 'sk-env', apiToken: 'tok-env' })
  })

  it('reports an unreachable keychain instead of failing start-up', async () => {
    const broken = { backend: 'broken', set: async () => {}, get: async () => { throw new Error('no bus') }, delete: async () => false }
    const r = await resolveEngineSecrets(broken, {})
    expect(r.keychainProblem).toBe('no bus')
    expect(r.anthropicApiKey).toBeUndefined()
  })
})

describe('egressNetworking', () => {
  it('maps the API networking to the proxy policy, adding package-manager and MCP hosts when allowed', () => {
    expect(egressNetworking(undefined)).toEqual({ type: 'none' })
    expect(egressNetworking({ networking: { type: 'unrestricted' } })).toEqual({ type: 'unrestricted' })
    const limited = egressNetworking({ networking: { type: 'limited', allowed_hosts: ['api.example.com'], allow_package_managers: true, allow_mcp_servers: true } }, ['https://mcp.example.org/mcp'])
    expect(limited.type === 'limited' && limited.allowedHosts).toEqual(['api.example.com', ...PACKAGE_MANAGER_HOSTS, 'mcp.example.org'])
    expect(egressNetworking({ networking: { type: 'limited', allowed_hosts: ['a.b'] } })).toEqual({ type: 'limited', allowedHosts: ['a.b'] })
  })

  it('names the field and the rule for an unknown networking type', () => {
    expect(() => egressNetworking({ networking: { type: 'open' } })).toThrow(/config\.networking\.type must be "unrestricted" or "limited"/)
  })
})

describe('buildEgressPolicy', () => {
  it('allows plain-HTTP injection only to the host:port entries of the credential metadata corral.plain_http_hosts', () => {
    const env = (id: string, metadata?: Record<string, string>) => cred(id, { type: 'environment_variable', secret_name: id.toUpperCase(), networking: { type: 'unrestricted' } }, false, metadata)
    const policy = buildEgressPolicy({
      keychain: new MemoryKeychain(),
      environmentConfig: { networking: { type: 'unrestricted' } },
      credentials: [env('vcrd_none'), env('vcrd_plain', { 'corral.plain_http_hosts': 'Internal.Example, 10.0.0.1:8080' }), env('vcrd_bad', { 'corral.plain_http_hosts': 'http://x/' })],
    })
    expect(policy.credentials.map((c) => [c.credentialId, c.plainHttpHosts])).toEqual([
      ['vcrd_none', []],
      ['vcrd_plain', ['internal.example:80', '10.0.0.1:8080']],
      ['vcrd_bad', []],
    ])
  })

  it('takes environment_variable credentials only, skips archived ones, first vault wins a name clash, and reads secrets lazily', async () => {
    const k = new MemoryKeychain()
    await k.set(keychainAccount.credential('vcrd_a', 'secret_value'), 'secret-a')
    const policy = buildEgressPolicy({
      keychain: k,
      environmentConfig: { networking: { type: 'unrestricted' } },
      credentials: [
        cred('vcrd_a', { type: 'environment_variable', secret_name: 'API_KEY', networking: { type: 'limited', allowed_hosts: ['api.x.com'] }, injection_location: { header: true, body: false } }),
        cred('vcrd_b', { type: 'environment_variable', secret_name: 'API_KEY', networking: { type: 'unrestricted' }, injection_location: { header: true, body: true } }),
        cred('vcrd_c', { type: 'environment_variable', secret_name: 'OLD', networking: { type: 'unrestricted' }, injection_location: { header: true, body: true } }, true),
        cred('vcrd_d', { type: 'static_bearer', mcp_server_url: 'https://m.example/mcp' }),
      ],
      repositories: [{ url: 'https://github.com/o/r', tokenAccount: keychainAccount.sessionResource('sesn_1', 'sres_1', 'authorization_token') }],
    })
    expect(policy.credentials.map((c) => [c.credentialId, c.secretName, c.hosts, c.header, c.body])).toEqual([['vcrd_a', 'API_KEY', ['api.x.com'], true, false]])
    expect(await policy.credentials[0]!.secret()).toBe('secret-a')
    expect(JSON.stringify(policy)).not.toContain('secret-a')
    expect(policy.repositories[0]!.url).toBe('https://github.com/o/r')
  })
})
