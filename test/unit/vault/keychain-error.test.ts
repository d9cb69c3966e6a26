import { describe, expect, it } from 'vitest'
import { keychainAccount, keychainError } from '../../../src/main/vault/keychain'

const unreachable = new Error('Cannot autolaunch D-Bus without X11 $DISPLAY')

describe('keychainError', () => {
  it("says how to get a keychain, and offers the environment only for the model key (the one secret that has a way around it)", () => {
    const forCredential = keychainError('store', keychainAccount.credential('vcrd_1', 'token'), unreachable)
    expect(forCredential.code).toBe('keychain_error')
    expect(forCredential.message).toMatch(/^no OS keychain is available, so Corral could not store credential\/vcrd_1\/token \(Cannot autolaunch D-Bus/)
    expect(forCredential.message).toMatch(/to fix: .*gnome-keyring/)
    expect(forCredential.message).not.toMatch(/ANTHROPIC_API_KEY/)
    const forModelKey = keychainError('store', keychainAccount.anthropicApiKey, unreachable)
    expect(forModelKey.message).toMatch(/, or set ANTHROPIC_API_KEY in the environment instead$/)
  })

  it('keeps a reachable backend’s own failure, without the fix', () => {
    expect(keychainError('read', keychainAccount.apiToken, new Error('locked collection')).message).toBe('the keychain could not read local-api-token: locked collection')
  })
})
