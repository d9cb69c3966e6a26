import { describe, expect, it } from 'vitest'
import { credentialCreateSchema, credentialUpdateSchema, describeZodError } from '../../../src/shared/api/schemas'

const envVar = { type: 'environment_variable', secret_name: 'API_TOKEN', secret_value: 'value-1234', networking: { type: 'limited', allowed_hosts: ['internal.example'] } }

describe('credential metadata corral.plain_http_hosts (a Corral addition)', () => {
  it('accepts host and host:port entries, and leaves other metadata free-form', () => {
    expect(credentialCreateSchema.safeParse({ auth: envVar, metadata: { 'corral.plain_http_hosts': 'internal.example, internal.example:8080, [2001:db8::1]:81', team: 'http://anything' } }).success).toBe(true)
    expect(credentialUpdateSchema.safeParse({ metadata: { 'corral.plain_http_hosts': null } }).success).toBe(true)
  })

  it.each(['http://internal.example', 'internal.example/path', '*.example', 'host:99999'])('refuses the entry %s naming the field and the rule, on create and update', (entry) => {
    for (const r of [credentialCreateSchema.safeParse({ auth: envVar, metadata: { 'corral.plain_http_hosts': entry } }), credentialUpdateSchema.safeParse({ metadata: { 'corral.plain_http_hosts': entry } })]) {
      expect(r.success).toBe(false)
      expect(describeZodError(r.error!)).toMatch(/metadata\.corral\.plain_http_hosts.*host or host:port entries where the credential may be injected over plain HTTP/)
    }
  })
})
