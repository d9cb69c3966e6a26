import { hostname } from 'node:os'
import { randomBytes } from 'node:crypto'
import type { Statement } from 'better-sqlite3'
import type { Db } from './database'
import { CorralError } from '../../shared/errors'

/** The `reason` of the conflict_error a write fenced by a lease this engine lost throws (SqliteLeaseStore.fence). */
export const LEASE_LOST = 'lease_lost'

/** Whether `err` is a write refused because the session's lease is another engine's now (SqliteLeaseStore.fence). */
export function isLeaseLost(err: unknown): boolean {
  return err instanceof CorralError && err.code === 'conflict_error' && err.fields.reason === LEASE_LOST
}

export interface LeaseStoreParams {
  /** How long a lease lasts unless renewed (default 15 s). */
  ttlMs?: number
  /** This brain's owner id; `host:pid:nonce` by default. */
  owner?: string
  clock?: () => number
}

/** A fresh owner id for this process: host, pid and a nonce (two engines in one process differ). */
export function newLeaseOwner(): string {
  return `${hostname()}:${process.pid}:${randomBytes(6).toString('hex')}`
}

/**
 * Session leases in the database: at most one brain runs a session. A lease is taken when it is
 * free, expired, already ours, or held by a process on this host that no longer exists (so a
 * brain restarted after kill -9 does not wait for the dead one's lease to expire).
 */
export class SqliteLeaseStore {
  private ownerOf?: Statement
  readonly owner: string
  readonly ttlMs: number
  private readonly clock: () => number

  constructor(
    private readonly db: Db,
    params: LeaseStoreParams = {},
  ) {
    this.owner = params.owner ?? newLeaseOwner()
    this.ttlMs = params.ttlMs ?? 15_000
    this.clock = params.clock ?? Date.now
  }

  /**
   * Lease writes skip the fsync (synchronous=NORMAL for the one transaction): a lease only
   * matters while its owner lives, and after an OS crash every owner is gone anyway. This keeps
   * a wake off the disk's latency. (better-sqlite3 is synchronous, so no other write interleaves.)
   */
  private relaxed<T>(fn: () => T): T {
    const prior = this.db.pragma('synchronous', { simple: true }) as number
    this.db.pragma('synchronous = NORMAL')
    try {
      return this.db.transaction(fn)()
    } finally {
      this.db.pragma(`synchronous = ${prior}`)
    }
  }

  /** Takes or renews the lease on a session; false when another live brain holds it. */
  acquire(sessionId: string): boolean {
    return this.relaxed(() => {
      const now = this.clock()
      const row = this.db.prepare('SELECT owner, expires_at FROM session_leases WHERE session_id = ?').get(sessionId) as { owner: string; expires_at: number } | undefined
      if (row && row.owner !== this.owner && row.expires_at > now && !ownerIsDead(row.owner)) return false
      this.db
        .prepare('INSERT INTO session_leases (session_id, owner, expires_at) VALUES (?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at')
        .run(sessionId, this.owner, now + this.ttlMs)
      return true
    })
  }

  /** Extends a lease we hold; false if it is no longer ours. */
  renew(sessionId: string): boolean {
    return this.renewAll([sessionId]).length === 0
  }

  /** Extends every lease in `sessionIds` in one transaction; returns the ids that are no longer ours. */
  renewAll(sessionIds: readonly string[]): string[] {
    if (sessionIds.length === 0) return []
    const stmt = this.db.prepare('UPDATE session_leases SET expires_at = ? WHERE session_id = ? AND owner = ?')
    return this.relaxed(() => {
      const until = this.clock() + this.ttlMs
      return sessionIds.filter((id) => stmt.run(until, id, this.owner).changes !== 1)
    })
  }

  release(sessionId: string): void {
    this.releaseAll([sessionId])
  }

  releaseAll(sessionIds: readonly string[]): void {
    if (sessionIds.length === 0) return
    const stmt = this.db.prepare('DELETE FROM session_leases WHERE session_id = ? AND owner = ?')
    this.relaxed(() => {
      for (const id of sessionIds) stmt.run(id, this.owner)
    })
  }

  /**
   * Whether the session's lease row names this owner (expired or not: nobody has taken it
   * since). Meant as a fence inside a write's transaction: a driver that lost its lease to
   * another process writes nothing more.
   */
  owns(sessionId: string): boolean {
    // prepared once: a workflow run's every write is fenced by it (about two per agent)
    this.ownerOf ??= this.db.prepare('SELECT owner FROM session_leases WHERE session_id = ?')
    const row = this.ownerOf.get(sessionId) as { owner: string } | undefined
    return row?.owner === this.owner
  }

  /**
   * Throws a conflict_error (reason LEASE_LOST, see isLeaseLost) unless the session's lease row
   * names this owner: the precheck of a write that only the lease's holder may make (a brain's, a
   * workflow run driver's), run inside the write's transaction. `doing` ends the message: who
   * does the work now ("which runs the session now").
   */
  fence(sessionId: string, doing = 'which runs the session now'): void {
    if (!this.owns(sessionId)) throw new CorralError('conflict_error', `the lease of session ${sessionId} is held by another engine, ${doing}`, { fields: { reason: LEASE_LOST } })
  }

  /** Who holds a session's lease now (undefined when free or expired). */
  holder(sessionId: string): string | undefined {
    const row = this.db.prepare('SELECT owner, expires_at FROM session_leases WHERE session_id = ?').get(sessionId) as { owner: string; expires_at: number } | undefined
    return row && row.expires_at > this.clock() ? row.owner : undefined
  }
}

/** True when `owner` names a process on this host that is gone. */
export function ownerIsDead(owner: string): boolean {
  const [host, pidText] = owner.split(':')
  const pid = Number(pidText)
  if (host !== hostname() || !Number.isInteger(pid) || pid <= 0 || pid === process.pid) return false
  try {
    process.kill(pid, 0)
    return false
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH'
  }
}
