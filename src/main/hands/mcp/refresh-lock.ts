import { randomBytes } from 'node:crypto'
import type { RefreshLock } from './client'
import type { VaultStore } from '../../session/vault-store'

export interface RefreshLockOptions {
  /** This engine, as the lock's owner (default: a new random name). */
  owner?: string
  /**
   * How long a lock counts when its engine stops before giving it back (default 45 s: a token
   * request's 30 s timeout and the keychain writes after it).
   */
  ttlMs?: number
  /** How often a waiting engine looks again (default 50 ms). */
  pollMs?: number
}

/**
 * One OAuth refresh per credential across the engines that share a data directory (and so its
 * database and keychain): the lock is a row of credential_refresh_locks (VaultStore.tryLockRefresh).
 * An engine that finds another's lock looks again every `pollMs` until it is given back or has
 * expired (an engine stopped mid-refresh), then reports that it waited, so the MCP client takes
 * the token the other stored instead of spending the refresh token again.
 */
export function credentialRefreshLock(vaults: Pick<VaultStore, 'tryLockRefresh' | 'unlockRefresh'>, options: RefreshLockOptions = {}): RefreshLock {
  const owner = options.owner ?? `engine-${process.pid}-${randomBytes(6).toString('hex')}`
  const ttlMs = options.ttlMs ?? 45_000
  const pollMs = options.pollMs ?? 50
  return {
    async acquire(credentialId) {
      let waited = false
      while (!vaults.tryLockRefresh(credentialId, owner, ttlMs)) {
        waited = true
        await new Promise((r) => setTimeout(r, pollMs))
      }
      return { waited, release: () => vaults.unlockRefresh(credentialId, owner) }
    },
  }
}
