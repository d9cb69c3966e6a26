import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import type { SafeStorageLike } from '../../../src/main/vault/safe-storage-keychain'

/**
 * Stands in for Electron's safeStorage, whose binary cannot run on these machines: real
 * AES-256-GCM with a per-instance key, and a configurable Linux backend name.
 */
export class FakeSafeStorage implements SafeStorageLike {
  private readonly key = randomBytes(32)
  constructor(
    public backend = 'gnome_libsecret',
    public available = true,
  ) {}
  isEncryptionAvailable(): boolean {
    return this.available
  }
  getSelectedStorageBackend(): string {
    return this.backend
  }
  encryptString(plainText: string): Buffer {
    const iv = randomBytes(12)
    const c = createCipheriv('aes-256-gcm', this.key, iv)
    const body = Buffer.concat([c.update(plainText, 'utf8'), c.final()])
    return Buffer.concat([iv, c.getAuthTag(), body])
  }
  decryptString(encrypted: Buffer): string {
    const d = createDecipheriv('aes-256-gcm', this.key, encrypted.subarray(0, 12))
    d.setAuthTag(encrypted.subarray(12, 28))
    return Buffer.concat([d.update(encrypted.subarray(28)), d.final()]).toString('utf8')
  }
}
