import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { X509Certificate, createPrivateKey } from 'node:crypto'
import { dirname } from 'node:path'
import { createSecureContext, type SecureContext } from 'node:tls'
import { keychainAccount, type Keychain } from './keychain'
import { issueCertificate } from './x509'

const CA_NAME = 'Corral sandbox egress CA'
const DAY = 86_400_000

/**
 * The per-install certificate authority the egress proxy signs leaf certificates with, for the
 * hosts whose HTTPS requests it must open to inject a credential (see docs in egress-proxy.ts).
 * Its certificate is trusted only inside sandboxes (mounted CA bundle + env vars), never added
 * to the host's trust store. Its private key lives in the keychain; the certificate is public
 * and kept at `certPath`.
 */
export class EgressCertificateAuthority {
  private readonly leaves = new Map<string, { context: SecureContext; expires: number }>()

  private constructor(
    readonly certPem: string,
    private readonly keyPem: string,
    private readonly now: () => number,
  ) {}

  /** A CA that lives only in memory (tests, benches). */
  static generate(now: () => number = Date.now): EgressCertificateAuthority {
    const t = now()
    const ca = issueCertificate({ commonName: CA_NAME, isCa: true, validFrom: new Date(t - DAY), validTo: new Date(t + 3650 * DAY) })
    return new EgressCertificateAuthority(ca.certPem, ca.keyPem, now)
  }

  /**
   * Loads the install's CA (key from the keychain, certificate from `certPath`) or makes one at
   * first use or when the stored one is unusable or expires within 30 days.
   */
  static async open(params: { keychain: Keychain; certPath: string; now?: () => number }): Promise<EgressCertificateAuthority> {
    const now = params.now ?? Date.now
    const keyPem = await params.keychain.get(keychainAccount.egressCaKey)
    if (keyPem && existsSync(params.certPath)) {
      try {
        const certPem = readFileSync(params.certPath, 'utf8')
        const cert = new X509Certificate(certPem)
        if (cert.checkPrivateKey(createPrivateKey(keyPem)) && Date.parse(cert.validTo) - now() > 30 * DAY) {
          return new EgressCertificateAuthority(certPem, keyPem, now)
        }
      } catch {
        // Fall through: an unreadable pair is replaced by a new one.
      }
    }
    const ca = EgressCertificateAuthority.generate(now)
    await params.keychain.set(keychainAccount.egressCaKey, ca.keyPem)
    mkdirSync(dirname(params.certPath), { recursive: true, mode: 0o700 })
    writeFileSync(params.certPath, ca.certPem, { mode: 0o644 })
    chmodSync(params.certPath, 0o644)
    return ca
  }

  /** A TLS server context presenting a certificate for `host`, signed by this CA (cached ~30 days). */
  contextFor(host: string): SecureContext {
    const key = host.toLowerCase()
    const hit = this.leaves.get(key)
    const t = this.now()
    if (hit && hit.expires > t) return hit.context
    const leaf = issueCertificate({
      commonName: key.slice(0, 64),
      altNames: [key],
      isCa: false,
      validFrom: new Date(t - DAY),
      validTo: new Date(t + 90 * DAY),
      issuer: { certPem: this.certPem, keyPem: this.keyPem, commonName: CA_NAME },
    })
    const context = createSecureContext({ cert: leaf.certPem + this.certPem, key: leaf.keyPem })
    if (this.leaves.size > 1000) this.leaves.clear()
    this.leaves.set(key, { context, expires: t + 30 * DAY })
    return context
  }
}
