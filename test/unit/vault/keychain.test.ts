import { describe, expect, it } from 'vitest'
import { MemoryKeychain } from '../../../src/main/vault/memory-keychain'
import { MemoryCiphertextStore, SafeStorageKeychain } from '../../../src/main/vault/safe-storage-keychain'
import { describeKeychainContract } from './keychain.contract'
import { FakeSafeStorage } from './fake-safe-storage'

describeKeychainContract('memory', async () => ({ keychain: new MemoryKeychain() }))

describeKeychainContract('safe-storage (memory ciphertexts)', async () => {
  const safe = new FakeSafeStorage()
  const store = new MemoryCiphertextStore()
  return { keychain: new SafeStorageKeychain(safe, store, 'linux'), reopen: () => new SafeStorageKeychain(safe, store, 'linux') }
})

describe('SafeStorageKeychain', () => {
  it('refuses to store when Linux reports the basic_text backend, and says how to fix it', async () => {
    const store = new MemoryCiphertextStore()
    const keychain = new SafeStorageKeychain(new FakeSafeStorage('basic_text'), store, 'linux')
    const err = await keychain.set('anthropic-api-key', 'sk-canary-basic-text').catch((e: unknown) => e as Error)
    expect((err as { code?: string }).code).toBe('keychain_error')
    expect((err as Error).message).toMatch(/basic_text/)
    expect((err as Error).message).toMatch(/gnome-keyring|--password-store/)
    expect((err as Error).message).not.toContain('sk-canary-basic-text')
    expect(store.raw().size).toBe(0)
  })

  it('stores on macOS even when the backend query would say basic_text (the check is Linux only)', async () => {
    const keychain = new SafeStorageKeychain(new FakeSafeStorage('basic_text'), new MemoryCiphertextStore(), 'darwin')
    await keychain.set('anthropic-api-key', 'v')
    expect(await keychain.get('anthropic-api-key')).toBe('v')
  })

  it('refuses to store when encryption is unavailable', async () => {
    const keychain = new SafeStorageKeychain(new FakeSafeStorage('gnome_libsecret', false), new MemoryCiphertextStore(), 'linux')
    await expect(keychain.set('anthropic-api-key', 'v')).rejects.toThrow(/encryption is unavailable/)
  })

  it('keeps only ciphertext at rest', async () => {
    const store = new MemoryCiphertextStore()
    const keychain = new SafeStorageKeychain(new FakeSafeStorage(), store, 'linux')
    await keychain.set('credential/vcrd_1/token', 'canary-plaintext-at-rest')
    const raw = [...store.raw().values()].map((b) => b.toString('latin1')).join('')
    expect(raw).not.toContain('canary-plaintext-at-rest')
    expect(store.raw().has('credential/vcrd_1/token')).toBe(true)
  })
})
