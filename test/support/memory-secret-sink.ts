import type { CredentialKind, CredentialSecretFields, SecretSink } from '../../src/main/session/vault-store'

/**
 * A SecretSink in process memory, for tests only: it lets a test see exactly which secret
 * fields the vault store handed over (and that it handed over nothing else).
 */
export class MemorySecretSink implements SecretSink {
  private readonly store = new Map<string, { kind: CredentialKind; fields: CredentialSecretFields }>()

  async put(credentialId: string, kind: CredentialKind, secrets: CredentialSecretFields, removed: readonly (keyof CredentialSecretFields)[] = []): Promise<{ stored: boolean }> {
    const cur = this.store.get(credentialId)?.fields ?? {}
    const next: CredentialSecretFields = { ...cur, ...secrets }
    for (const k of removed) delete next[k]
    this.store.set(credentialId, { kind, fields: next })
    return { stored: true }
  }

  async delete(credentialId: string): Promise<void> {
    this.store.delete(credentialId)
  }

  /** The secret fields kept for a credential, or undefined. */
  get(credentialId: string): CredentialSecretFields | undefined {
    return this.store.get(credentialId)?.fields
  }
}
