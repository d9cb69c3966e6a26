import type { EgressPolicy } from './egress-proxy'

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
