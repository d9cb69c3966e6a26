// What a session's sandbox may reach and with which credentials: the policy's types and pure
// functions. The proxy (egress-proxy.ts) enforces it; this file imports nothing of the proxy.

export interface EgressCredential {
  credentialId: string
  secretName: string
  /** `unrestricted` = any host the environment allows; else these allow-list entries. */
  hosts: 'unrestricted' | readonly string[]
  header: boolean
  body: boolean
  /**
   * `host:port` destinations where the secret may be injected over plain HTTP (from the
   * credential's metadata `corral.plain_http_hosts`); elsewhere only over TLS.
   */
  plainHttpHosts?: readonly string[]
  /** Reads the secret (from the keychain) when a request needs it; never cached by the proxy. */
  secret: () => Promise<string | undefined>
}

export interface EgressRepository {
  /** The repository's URL as the session names it (https://host/owner/repo[.git]). */
  url: string
  /** Reads the authorization token when a request needs it. */
  token: () => Promise<string | undefined>
}

export type EgressNetworking = { type: 'none' } | { type: 'unrestricted' } | { type: 'limited'; allowedHosts: readonly string[] }

/** What one session's sandbox may reach and with which credentials. */
export interface EgressPolicy {
  networking: EgressNetworking
  credentials: readonly EgressCredential[]
  repositories: readonly EgressRepository[]
}

/** A policy that reaches nothing and injects nothing: what a session gets when its own cannot be read. */
export const NO_EGRESS_POLICY: EgressPolicy = Object.freeze({ networking: Object.freeze({ type: 'none' as const }), credentials: Object.freeze([]), repositories: Object.freeze([]) })

/**
 * What a policy decides, as a string: two policies with the same fingerprint allow the same hosts
 * and inject the same credentials (by id, name, hosts, location and plain-HTTP hosts) and repositories. Secrets are
 * not part of it (they are read per request), so rotating a secret changes no fingerprint.
 */
export function policyFingerprint(p: EgressPolicy): string {
  return JSON.stringify([
    p.networking,
    p.credentials.map((c) => [c.credentialId, c.secretName, c.hosts, c.header, c.body, c.plainHttpHosts ?? []]),
    p.repositories.map((r) => r.url),
  ])
}
