import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto'
import { isIP } from 'node:net'

/*
 * Just enough DER and X.509 to issue the egress proxy's certificates with node:crypto alone:
 * an ECDSA P-256 CA (per install) and short-lived leaf certificates for the hosts whose
 * requests the proxy must see to inject credentials. Node can parse certificates
 * (X509Certificate) but not create them, and Corral ships no ASN.1 dependency for this.
 */

function len(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n])
  const bytes: number[] = []
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff)
  return Buffer.from([0x80 | bytes.length, ...bytes])
}
const tlv = (tag: number, body: Buffer): Buffer => Buffer.concat([Buffer.from([tag]), len(body.length), body])
const seq = (...items: Buffer[]) => tlv(0x30, Buffer.concat(items))
const set = (...items: Buffer[]) => tlv(0x31, Buffer.concat(items))
const explicit = (n: number, body: Buffer) => tlv(0xa0 + n, body)
const octets = (b: Buffer) => tlv(0x04, b)
const bool = (v: boolean) => tlv(0x01, Buffer.from([v ? 0xff : 0]))
const utf8 = (s: string) => tlv(0x0c, Buffer.from(s, 'utf8'))
const bits = (b: Buffer, unused = 0) => tlv(0x03, Buffer.concat([Buffer.from([unused]), b]))

function int(value: Buffer | number): Buffer {
  let b = typeof value === 'number' ? Buffer.from([value]) : value
  let i = 0
  while (i < b.length - 1 && b[i] === 0 && !(b[i + 1]! & 0x80)) i++
  b = b.subarray(i)
  if (b[0]! & 0x80) b = Buffer.concat([Buffer.from([0]), b])
  return tlv(0x02, b)
}

function oid(dotted: string): Buffer {
  const parts = dotted.split('.').map(Number)
  const out: number[] = [parts[0]! * 40 + parts[1]!]
  for (const p of parts.slice(2)) {
    const chunk: number[] = []
    let v = p
    do {
      chunk.unshift(v & 0x7f)
      v = Math.floor(v / 128)
    } while (v > 0)
    for (let i = 0; i < chunk.length - 1; i++) chunk[i]! |= 0x80
    out.push(...chunk)
  }
  return tlv(0x06, Buffer.from(out))
}

function time(d: Date): Buffer {
  const iso = d.toISOString().replace(/[-:T]/g, '').slice(0, 14) + 'Z' // YYYYMMDDHHMMSSZ
  return d.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(iso.slice(2), 'ascii')) : tlv(0x18, Buffer.from(iso, 'ascii'))
}

const OID = {
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  commonName: '2.5.4.3',
  organization: '2.5.4.10',
  subjectKeyId: '2.5.29.14',
  keyUsage: '2.5.29.15',
  subjectAltName: '2.5.29.17',
  basicConstraints: '2.5.29.19',
  authorityKeyId: '2.5.29.35',
  extKeyUsage: '2.5.29.37',
  serverAuth: '1.3.6.1.5.5.7.3.1',
}

const name = (cn: string) => seq(set(seq(oid(OID.organization), utf8('Corral sandbox egress'))), set(seq(oid(OID.commonName), utf8(cn))))
const ext = (id: string, critical: boolean, value: Buffer) => seq(oid(id), ...(critical ? [bool(true)] : []), octets(value))

function keyId(publicKey: KeyObject): Buffer {
  return createHash('sha1').update(publicKey.export({ type: 'spki', format: 'der' })).digest()
}

function ipBytes(ip: string): Buffer {
  if (isIP(ip) === 4) return Buffer.from(ip.split('.').map(Number))
  const [head, tail = ''] = ip.split('::')
  const h = head ? head.split(':') : []
  const t = tail ? tail.split(':') : []
  const groups = ip.includes('::') ? [...h, ...Array(8 - h.length - t.length).fill('0'), ...t] : h
  return Buffer.concat(groups.map((g) => Buffer.from(g.padStart(4, '0'), 'hex')))
}

export interface IssuedCertificate {
  certPem: string
  keyPem: string
}

export interface CertificateParams {
  commonName: string
  /** DNS names or IP addresses for subjectAltName (leaf certificates). */
  altNames?: string[]
  isCa: boolean
  validFrom: Date
  validTo: Date
  /** Signs the certificate; absent = self-signed (the CA). */
  issuer?: { certPem: string; keyPem: string; commonName: string }
}

/** Issues an ECDSA P-256 certificate. Pure computation: no disk, no network. */
export function issueCertificate(params: CertificateParams): IssuedCertificate {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' })
  const signerKey = params.issuer ? params.issuer.keyPem : privateKey
  const issuerPublic = params.issuer ? createPublicKey(params.issuer.certPem) : publicKey
  const algorithm = seq(oid(OID.ecdsaWithSha256))
  const extensions: Buffer[] = [
    ext(OID.basicConstraints, true, params.isCa ? seq(bool(true), int(0)) : seq()),
    ext(OID.keyUsage, true, params.isCa ? bits(Buffer.from([0x06]), 1) : bits(Buffer.from([0x80]), 7)),
    ext(OID.subjectKeyId, false, octets(keyId(publicKey))),
    ext(OID.authorityKeyId, false, seq(tlv(0x80, keyId(issuerPublic)))),
  ]
  if (!params.isCa) {
    extensions.push(ext(OID.extKeyUsage, false, seq(oid(OID.serverAuth))))
    const names = params.altNames ?? [params.commonName]
    extensions.push(ext(OID.subjectAltName, false, seq(...names.map((n) => (isIP(n) ? tlv(0x87, ipBytes(n)) : tlv(0x82, Buffer.from(n, 'ascii')))))))
  }
  const serial = randomBytes(16)
  serial[0]! &= 0x7f
  const tbs = seq(
    explicit(0, int(2)),
    int(serial),
    algorithm,
    name(params.issuer?.commonName ?? params.commonName),
    seq(time(params.validFrom), time(params.validTo)),
    name(params.commonName),
    publicKey.export({ type: 'spki', format: 'der' }),
    explicit(3, seq(...extensions)),
  )
  const signature = sign('sha256', tbs, { key: typeof signerKey === 'string' ? createPrivateKey(signerKey) : signerKey, dsaEncoding: 'der' })
  const der = seq(tbs, algorithm, bits(signature))
  const certPem = `-----BEGIN CERTIFICATE-----\n${der.toString('base64').replace(/.{1,64}/g, '$&\n')}-----END CERTIFICATE-----\n`
  return { certPem, keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() }
}
