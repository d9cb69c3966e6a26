import { describe, expect, it, beforeEach, afterEach } from 'vitest'
import type { Keychain } from '../../../src/main/vault/keychain'

export interface KeychainUnderTest {
  keychain: Keychain
  /** A second handle on the same store (a new process would see this), when the backend persists. */
  reopen?: () => Keychain
  cleanup?: () => Promise<void>
}

/**
 * The one contract every Keychain backend passes (keyring, safe-storage, memory), like Hono's
 * shared router suite. `make` builds a fresh, empty keychain for each test.
 */
export function describeKeychainContract(name: string, make: () => Promise<KeychainUnderTest>, options: { skip?: boolean } = {}): void {
  describe.skipIf(options.skip ?? false)(`Keychain contract: ${name}`, () => {
    let subject: KeychainUnderTest
    let accounts: string[]
    const account = (suffix: string) => {
      const a = `contract-test/${process.pid}/${Math.random().toString(36).slice(2)}/${suffix}`
      accounts.push(a)
      return a
    }
    beforeEach(async () => {
      accounts = []
      subject = await make()
    })
    afterEach(async () => {
      for (const a of accounts) await subject.keychain.delete(a).catch(() => false)
      await subject.cleanup?.()
    })

    it('returns undefined for an account that was never stored', async () => {
      expect(await subject.keychain.get(account('missing'))).toBeUndefined()
    })

    it('returns the secret that was stored, byte for byte, including unicode', async () => {
      const a = account('roundtrip')
      const secret = 'sk-ant-api03-ÄÖ-🔑-' + 'x'.repeat(300)
      await subject.keychain.set(a, secret)
      expect(await subject.keychain.get(a)).toBe(secret)
    })

    it('replaces a secret on a second set (rotation)', async () => {
      const a = account('rotate')
      await subject.keychain.set(a, 'first-value')
      await subject.keychain.set(a, 'second-value')
      expect(await subject.keychain.get(a)).toBe('second-value')
    })

    it('keeps accounts apart', async () => {
      const a = account('a')
      const b = account('b')
      await subject.keychain.set(a, 'value-a')
      await subject.keychain.set(b, 'value-b')
      expect([await subject.keychain.get(a), await subject.keychain.get(b)]).toEqual(['value-a', 'value-b'])
    })

    it('deletes a secret and reports whether one was there', async () => {
      const a = account('delete')
      await subject.keychain.set(a, 'to-be-deleted')
      expect(await subject.keychain.delete(a)).toBe(true)
      expect(await subject.keychain.get(a)).toBeUndefined()
      expect(await subject.keychain.delete(a)).toBe(false)
    })

    it('rejects an empty secret with a message naming the rule', async () => {
      await expect(subject.keychain.set(account('empty'), '')).rejects.toThrow(/non-empty string/)
    })

    it('rejects an account name with characters a backend could mangle', async () => {
      await expect(subject.keychain.set('bad account\n', 'v')).rejects.toThrow(/keychain account .* must be 1-200 characters/)
    })

    it('keeps a secret for a new handle on the same store when the backend persists', async () => {
      if (!subject.reopen) {
        expect(subject.keychain.backend).toBe('memory')
        return
      }
      const a = account('persist')
      await subject.keychain.set(a, 'persisted-value')
      expect(await subject.reopen().get(a)).toBe('persisted-value')
    })
  })
}
