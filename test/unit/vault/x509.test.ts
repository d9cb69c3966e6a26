import { X509Certificate, createPrivateKey } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { issueCertificate } from '../../../src/main/vault/x509'
import { EgressCertificateAuthority } from '../../../src/main/vault/egress-ca'

const day = 86_400_000

describe('issueCertificate', () => {
  const now = Date.UTC(2026, 10, 30)
  const ca = issueCertificate({ commonName: 'Test CA', isCa: true, validFrom: new Date(now), validTo: new Date(now + 3650 * day) })
  const leaf = issueCertificate({
    commonName: 'api.example.com',
    altNames: ['api.example.com', '*.example.com', '192.0.2.7', '2001:db8::1'],
    isCa: false,
    validFrom: new Date(now),
    validTo: new Date(now + 90 * day),
    issuer: { ...ca, commonName: 'Test CA' },
  })

  it('makes a self-signed CA certificate that Node parses as a CA', () => {
    const c = new X509Certificate(ca.certPem)
    expect(c.ca).toBe(true)
    expect(c.verify(c.publicKey)).toBe(true)
    expect(c.subject).toContain('CN=Test CA')
    expect(c.checkPrivateKey(createPrivateKey(ca.keyPem))).toBe(true)
  })

  it('makes a leaf signed by the CA with DNS and IP subject alternative names', () => {
    const l = new X509Certificate(leaf.certPem)
    const c = new X509Certificate(ca.certPem)
    expect(l.ca).toBe(false)
    expect(l.checkIssued(c)).toBe(true)
    expect(l.verify(c.publicKey)).toBe(true)
    expect(l.subjectAltName).toBe('DNS:api.example.com, DNS:*.example.com, IP Address:192.0.2.7, IP Address:2001:DB8:0:0:0:0:0:1')
    expect(l.checkHost('api.example.com')).toBe('api.example.com')
    expect(l.checkIP('192.0.2.7')).toBe('192.0.2.7')
    expect(l.checkHost('evil.com')).toBeUndefined()
  })

  it('writes the validity it was given (UTCTime before 2050, GeneralizedTime after)', () => {
    expect(Date.parse(new X509Certificate(leaf.certPem).validTo)).toBe(now + 90 * day)
    const late = issueCertificate({ commonName: 'late', isCa: true, validFrom: new Date(Date.UTC(2049, 0, 1)), validTo: new Date(Date.UTC(2051, 5, 1)) })
    expect(new X509Certificate(late.certPem).validTo).toMatch(/2051/)
  })
})

describe('EgressCertificateAuthority', () => {
  it('caches one TLS context per host and makes another for a new host', () => {
    const ca = EgressCertificateAuthority.generate()
    const a = ca.contextFor('api.example.com')
    expect(ca.contextFor('API.example.com')).toBe(a)
    expect(ca.contextFor('other.example.com')).not.toBe(a)
    expect(new X509Certificate(ca.certPem).ca).toBe(true)
  })
})
