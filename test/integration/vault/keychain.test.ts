import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { keychainProbe, requirement } from '../../support/requirements'
import { KeyringKeychain } from '../../../src/main/vault/keyring-keychain'
import { FileCiphertextStore, SafeStorageKeychain } from '../../../src/main/vault/safe-storage-keychain'
import { describeKeychainContract } from '../../unit/vault/keychain.contract'
import { FakeSafeStorage } from '../../unit/vault/fake-safe-storage'

const keychain = requirement('keychain', keychainProbe)
const service = `corral-test-${process.pid}-${Date.now()}`

describeKeychainContract(
  'keyring (Secret Service via @napi-rs/keyring)',
  async () => ({ keychain: new KeyringKeychain({ service }), reopen: () => new KeyringKeychain({ service }) }),
  { skip: !keychain.ok },
)

describeKeychainContract('safe-storage (ciphertext file on disk)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-ss-'))
  const safe = new FakeSafeStorage()
  const file = join(dir, 'secrets.json')
  return {
    keychain: new SafeStorageKeychain(safe, new FileCiphertextStore(file), 'linux'),
    reopen: () => new SafeStorageKeychain(safe, new FileCiphertextStore(file), 'linux'),
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  }
})

describe('FileCiphertextStore', () => {
  it('writes the secrets file with mode 0600 and no plaintext', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'corral-ss-'))
    try {
      const file = join(dir, 'sub', 'secrets.json')
      const k = new SafeStorageKeychain(new FakeSafeStorage(), new FileCiphertextStore(file), 'linux')
      await k.set('anthropic-api-key', 'canary-on-disk-42')
      expect(statSync(file).mode & 0o777).toBe(0o600)
      expect(readFileSync(file, 'utf8')).not.toContain('canary-on-disk-42')
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe.skipIf(!keychain.ok)('KeyringKeychain', () => {
  it('files entries under its own service so two installs do not see each other', async () => {
    const a = new KeyringKeychain({ service: `${service}-a` })
    const b = new KeyringKeychain({ service: `${service}-b` })
    await a.set('anthropic-api-key', 'only-in-a')
    try {
      expect(await b.get('anthropic-api-key')).toBeUndefined()
      expect(await a.get('anthropic-api-key')).toBe('only-in-a')
    } finally {
      await a.delete('anthropic-api-key')
    }
  })
})

describe('KeyringKeychain without a session bus', () => {
  it('fails at once with keychain_error instead of hanging, and the message carries no secret', () => {
    // A child process: the native library keeps its bus connection for the life of a process.
    const script = `
      import { KeyringKeychain } from ${JSON.stringify(join(process.cwd(), 'src/main/vault/keyring-keychain.ts'))}
      const k = new KeyringKeychain({ service: 'corral-test-nobus' })
      k.set('anthropic-api-key', 'canary-no-bus').then(
        () => console.log(JSON.stringify({ ok: true })),
        (e) => console.log(JSON.stringify({ code: e.code, message: e.message })))
    `
    const env = { ...process.env, DBUS_SESSION_BUS_ADDRESS: 'unix:path=/nonexistent/corral-test-bus' }
    const out = execFileSync(join(process.cwd(), 'node_modules/.bin/tsx'), ['--eval', script], { env, encoding: 'utf8', timeout: 30_000 })
    const result = JSON.parse(out.trim().split('\n').pop()!) as { code?: string; message?: string }
    expect(result.code).toBe('keychain_error')
    expect(result.message).not.toContain('canary-no-bus')
  })
})
