import { AsyncEntry, type EntryOptions } from '@napi-rs/keyring'
import { checkAccount, checkSecret, keychainError, type Keychain } from './keychain'

export interface KeyringKeychainOptions {
  /** Service name the entries are filed under (default `corral`); tests use their own. */
  service?: string
  /**
   * On Linux, require the Secret Service (gnome-keyring, KWallet) instead of silently falling
   * back to the kernel keyring, whose entries vanish at reboot. Default true.
   */
  requireSecretService?: boolean
}

/**
 * The OS keychain through @napi-rs/keyring: Secret Service on Linux, Keychain on macOS,
 * Credential Manager on Windows. Used by `corral serve` and the CLI. Without a session bus
 * on Linux every call fails at once with keychain_error (it never hangs).
 */
export class KeyringKeychain implements Keychain {
  readonly backend = 'keyring'
  readonly service: string
  private readonly entryOptions: EntryOptions | undefined

  constructor(options: KeyringKeychainOptions = {}) {
    this.service = options.service ?? 'corral'
    this.entryOptions = process.platform === 'linux' && options.requireSecretService !== false ? { linux: { store: 'secret-service' } } : undefined
  }

  async set(account: string, secret: string): Promise<void> {
    checkAccount(account)
    checkSecret(secret)
    try {
      await new AsyncEntry(this.service, account, this.entryOptions).setPassword(secret)
    } catch (err) {
      throw keychainError('store', account, err)
    }
  }

  async get(account: string): Promise<string | undefined> {
    checkAccount(account)
    try {
      return (await new AsyncEntry(this.service, account, this.entryOptions).getPassword()) ?? undefined
    } catch (err) {
      throw keychainError('read', account, err)
    }
  }

  async delete(account: string): Promise<boolean> {
    checkAccount(account)
    try {
      return await new AsyncEntry(this.service, account, this.entryOptions).deleteCredential()
    } catch (err) {
      throw keychainError('delete', account, err)
    }
  }
}
