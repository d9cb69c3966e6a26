import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import { CorralError } from '../../shared/errors'
import { checkAccount, checkSecret, keychainError, type Keychain } from './keychain'

/**
 * The part of Electron's `safeStorage` Corral uses. The Electron shell passes the real module
 * in (engine code never imports electron).
 */
export interface SafeStorageLike {
  isEncryptionAvailable(): boolean
  encryptString(plainText: string): Buffer
  decryptString(encrypted: Buffer): string
  /** Linux only: `basic_text`, `gnome_libsecret`, `kwallet`, `kwallet5`, `kwallet6` or `unknown`. */
  getSelectedStorageBackend?(): string
}

/** Where the encrypted blobs live; safeStorage only encrypts. */
export interface CiphertextStore {
  read(): Map<string, Buffer>
  write(entries: Map<string, Buffer>): void
}

/** Ciphertexts in one JSON file (mode 0600), replaced atomically on every write. */
export class FileCiphertextStore implements CiphertextStore {
  constructor(readonly path: string) {}

  read(): Map<string, Buffer> {
    if (!existsSync(this.path)) return new Map()
    let parsed: unknown
    try {
      parsed = JSON.parse(readFileSync(this.path, 'utf8'))
    } catch (err) {
      throw new CorralError('keychain_error', `the encrypted secrets file ${this.path} is not valid JSON`, { cause: err })
    }
    const entries = (parsed as { entries?: Record<string, string> }).entries
    if (!entries || typeof entries !== 'object') throw new CorralError('keychain_error', `the encrypted secrets file ${this.path} has no "entries" object`)
    return new Map(Object.entries(entries).map(([k, v]) => [k, Buffer.from(v, 'base64')]))
  }

  write(entries: Map<string, Buffer>): void {
    mkdirSync(dirname(this.path), { recursive: true, mode: 0o700 })
    const body = JSON.stringify({ version: 1, entries: Object.fromEntries([...entries].map(([k, v]) => [k, v.toString('base64')])) })
    const tmp = `${this.path}.${process.pid}.tmp`
    writeFileSync(tmp, body + '\n', { mode: 0o600 })
    renameSync(tmp, this.path)
  }
}

/** Ciphertexts in memory (unit tests). */
export class MemoryCiphertextStore implements CiphertextStore {
  private entries = new Map<string, Buffer>()
  read(): Map<string, Buffer> {
    return new Map(this.entries)
  }
  write(entries: Map<string, Buffer>): void {
    this.entries = new Map(entries)
  }
  /** What is at rest, for tests that check no plaintext is stored. */
  raw(): Map<string, Buffer> {
    return new Map(this.entries)
  }
}

export const BASIC_TEXT_REFUSAL =
  'Corral will not store secrets: Electron safeStorage on this Linux desktop uses the "basic_text" backend, ' +
  'which only obfuscates them with a fixed key. Install and unlock a Secret Service ' +
  '(gnome-keyring: `sudo apt install gnome-keyring libsecret-1-0`, or KWallet), make sure your desktop session starts it, ' +
  'or launch Corral with `--password-store=gnome-libsecret` (or `kwallet5`/`kwallet6`), then restart Corral. ' +
  'Alternatively run `corral serve`, which uses the Secret Service directly.'

/**
 * Secrets encrypted with Electron's safeStorage (the OS keychain holds the key), ciphertexts in
 * a `CiphertextStore`. Refuses to store anything when encryption is unavailable, and on Linux
 * when safeStorage reports the `basic_text` backend.
 */
export class SafeStorageKeychain implements Keychain {
  readonly backend = 'safe-storage'

  constructor(
    private readonly safeStorage: SafeStorageLike,
    private readonly store: CiphertextStore,
    private readonly platform: NodeJS.Platform = process.platform,
  ) {}

  /** Why secrets cannot be stored here, or undefined when they can. */
  refusal(): string | undefined {
    if (!this.safeStorage.isEncryptionAvailable()) {
      return 'Corral will not store secrets: Electron safeStorage reports that encryption is unavailable. On Linux install and unlock a Secret Service (gnome-keyring or KWallet); on macOS and Windows allow Corral access to the keychain, then restart Corral.'
    }
    if (this.platform === 'linux' && this.safeStorage.getSelectedStorageBackend?.() === 'basic_text') return BASIC_TEXT_REFUSAL
    return undefined
  }

  async set(account: string, secret: string): Promise<void> {
    checkAccount(account)
    checkSecret(secret)
    const refusal = this.refusal()
    if (refusal) throw new CorralError('keychain_error', refusal)
    let cipher: Buffer
    try {
      cipher = this.safeStorage.encryptString(secret)
    } catch (err) {
      throw keychainError('encrypt', account, err)
    }
    const entries = this.store.read()
    entries.set(account, cipher)
    this.store.write(entries)
  }

  async get(account: string): Promise<string | undefined> {
    checkAccount(account)
    const cipher = this.store.read().get(account)
    if (!cipher) return undefined
    try {
      return this.safeStorage.decryptString(cipher)
    } catch (err) {
      throw keychainError('decrypt', account, err)
    }
  }

  async delete(account: string): Promise<boolean> {
    checkAccount(account)
    const entries = this.store.read()
    if (!entries.delete(account)) return false
    this.store.write(entries)
    return true
  }
}
