import { checkAccount, checkSecret, type Keychain } from './keychain'

/**
 * A keychain in process memory. For unit tests only: nothing survives the process, and the
 * engine never constructs one (see `openKeychain`).
 */
export class MemoryKeychain implements Keychain {
  readonly backend = 'memory'
  private readonly secrets = new Map<string, string>()

  async set(account: string, secret: string): Promise<void> {
    checkAccount(account)
    checkSecret(secret)
    this.secrets.set(account, secret)
  }

  async get(account: string): Promise<string | undefined> {
    checkAccount(account)
    return this.secrets.get(account)
  }

  async delete(account: string): Promise<boolean> {
    checkAccount(account)
    return this.secrets.delete(account)
  }
}
