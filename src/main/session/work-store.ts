import { createHash, randomBytes } from 'node:crypto'
import type { BetaSelfHostedWork, BetaSelfHostedWorkHeartbeatResponse, BetaSelfHostedWorkQueueStats, BetaWorkLeaseState } from '@anthropic-ai/sdk/resources/beta/environments/work'
import { CorralError, invalid, notFound } from '../../shared/errors'
import { newId } from '../../shared/api/ids'
import type { Db } from './database'
import { decodeCursor, encodeCursor, type Page } from './pagination'

/**
 * The work queue of `self_hosted` environments (spec resources.md §2–§3): work items and their
 * leases, the workers that poll, environment keys and the sessions tokens minted per delivery.
 *
 * State machine (§2.3): queued → (poll: delivered, secret minted) → ack → starting → first
 * heartbeat (NO_HEARTBEAT) → active → stop → stopping → stopped. A delivered item not acked within
 * `reclaim_older_than_ms` is pollable again; a lease not renewed within its ttl re-queues the
 * item (and revokes its tokens); a lease that runs out while stopping ends the item stopped.
 * Expiry is applied lazily, at the start of every operation that reads an item's state, so the
 * store needs no timer: what a caller sees is always up to date.
 *
 * Secrets are never stored: an environment key and a sessions token are kept as their sha256.
 */

export type WorkState = BetaSelfHostedWork['state']

/** Who a credential other than the local API token is (api/principal.ts maps it to rights). */
export type WorkCredential =
  | { kind: 'environment'; environmentId: string; keyId: string }
  | { kind: 'session'; environmentId: string; sessionId: string; workId: string; tokenId: string }

/** An environment key as the API shows it (Corral addition; `key` only on creation). */
export interface EnvironmentKey {
  id: string
  type: 'environment_key'
  environment_id: string
  prefix: string
  created_at: string
  last_used_at: string | null
  revoked_at: string | null
  key?: string
}

export interface WorkStoreOptions {
  clock?: () => Date
  /** Lease TTL the server gives when the worker asks for none (spec §2.5: 120 s). */
  defaultTtlSeconds?: number
  /** How long a poller counts in `workers_polling` (30 s). */
  pollerWindowMs?: number
}

interface WorkRow {
  id: string
  environment_id: string
  data_type: 'session' | 'healthcheck'
  data_id: string
  state: WorkState
  metadata: string
  created_at: string
  acknowledged_at: string | null
  started_at: string | null
  latest_heartbeat_at: string | null
  stop_requested_at: string | null
  stopped_at: string | null
  delivered_at_ms: number | null
  delivery_count: number
  last_heartbeat: string | null
  lease_expires_at_ms: number | null
  lease_token_id: string | null
  ttl_seconds: number
}

export const NO_HEARTBEAT = 'NO_HEARTBEAT'
const KEY_PREFIX = 'corral_envkey_'
const TOKEN_PREFIX = 'corral_sesstok_'
const MIN_TTL = 30
/** How long the sessions tokens of a stopped item still authenticate (see WorkStore.end). */
export const STOPPED_TOKEN_GRACE_MS = 60_000
const MAX_TTL = 600

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex')
const secretString = (prefix: string) => prefix + randomBytes(32).toString('base64url')

/** `secret` on the wire: base64url (no padding) of `{sessions_token, api_base_url?}` (spec §3.4). */
export function encodeWorkSecret(sessionsToken: string, apiBaseUrl?: string): string {
  return Buffer.from(JSON.stringify(apiBaseUrl ? { sessions_token: sessionsToken, api_base_url: apiBaseUrl } : { sessions_token: sessionsToken })).toString('base64url')
}


/** A delivered item nobody acked goes back to a poller after this long (the poll's `reclaim_older_than_ms` default); until then the stats count it pending, not in the queue's depth. */
const DEFAULT_RECLAIM_MS = 5000
export class WorkStore {
  private readonly clock: () => Date
  private readonly defaultTtl: number
  private readonly pollerWindowMs: number
  /** Woken by enqueue (and by an item becoming pollable again): the long polls waiting on an environment. */
  private readonly waiters = new Map<string, Set<() => void>>()

  constructor(
    private readonly db: Db,
    options: WorkStoreOptions = {},
  ) {
    this.clock = options.clock ?? (() => new Date())
    this.defaultTtl = options.defaultTtlSeconds ?? 120
    this.pollerWindowMs = options.pollerWindowMs ?? 30_000
  }

  // ── items ────────────────────────────────────────────────────────────────────────────────

  /**
   * Queues a session on its environment's queue unless it already has a live item (one not
   * stopped). Synchronous, so a caller can run it inside the transaction that creates the session.
   * Returns the live item's id.
   */
  enqueueSession(environmentId: string, sessionId: string): string {
    const live = this.db.prepare("SELECT id FROM work_items WHERE data_type = 'session' AND data_id = ? AND state != 'stopped'").get(sessionId) as { id: string } | undefined
    if (live) return live.id
    const now = this.clock()
    const id = newId('work', now.getTime())
    this.db
      .prepare("INSERT INTO work_items (id, environment_id, data_type, data_id, state, metadata, created_at, delivery_count, ttl_seconds) VALUES (?, ?, 'session', ?, 'queued', '{}', ?, 0, ?)")
      .run(id, environmentId, sessionId, now.toISOString(), this.defaultTtl)
    queueMicrotask(() => this.wake(environmentId))
    return id
  }

  /** The live (not stopped) item of a session, if any. */
  liveItemOf(sessionId: string): BetaSelfHostedWork | undefined {
    this.expire()
    const row = this.db.prepare("SELECT * FROM work_items WHERE data_type = 'session' AND data_id = ? AND state != 'stopped' ORDER BY created_at DESC LIMIT 1").get(sessionId) as WorkRow | undefined
    return row && view(row)
  }

  /** Whether a worker is serving the session now (its item is acked and not stopped). */
  isServed(sessionId: string): boolean {
    const item = this.liveItemOf(sessionId)
    return !!item && item.state !== 'queued'
  }

  retrieve(environmentId: string, workId: string): BetaSelfHostedWork {
    this.expire()
    return view(this.row(environmentId, workId))
  }

  /** Metadata merge: a string upserts, null deletes (spec §2.1). */
  update(environmentId: string, workId: string, patch: Record<string, string | null>): BetaSelfHostedWork {
    const row = this.row(environmentId, workId)
    const metadata = JSON.parse(row.metadata) as Record<string, string>
    for (const [k, v] of Object.entries(patch)) {
      if (v === null) delete metadata[k]
      else metadata[k] = v
    }
    if (Object.keys(metadata).length > 16) throw invalid('metadata: at most 16 keys')
    this.db.prepare('UPDATE work_items SET metadata = ? WHERE id = ?').run(JSON.stringify(metadata), workId)
    return this.retrieve(environmentId, workId)
  }

  /** The environment's items, newest first (spec §2.1 `GET /work`). */
  list(environmentId: string, params: { limit?: number; page?: string } = {}): Page<BetaSelfHostedWork> {
    this.expire()
    const limit = params.limit ?? 20
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw invalid('limit: must be an integer from 1 to 1000')
    const where = ['environment_id = ?']
    const args: unknown[] = [environmentId]
    if (params.page) {
      const c = decodeCursor(params.page)
      where.push('(created_at < ? OR (created_at = ? AND id < ?))')
      args.push(c.c, c.c, c.i)
    }
    const rows = this.db.prepare(`SELECT * FROM work_items WHERE ${where.join(' AND ')} ORDER BY created_at DESC, id DESC LIMIT ?`).all(...args, limit + 1) as WorkRow[]
    const more = rows.length > limit
    const data = rows.slice(0, limit).map(view)
    const last = data.at(-1)
    return { data, next_page: more && last ? encodeCursor({ c: last.created_at, i: last.id, d: 'n' }) : null }
  }

  /**
   * A poll (spec §2.4): records the worker, takes the oldest claimable item (queued, and never
   * delivered or delivered more than `reclaimOlderThanMs` ago without an ack), marks it
   * delivered and mints a sessions token bound to this delivery. Waits up to `blockMs` for an
   * enqueue when nothing is claimable. Resolves with the item and its secret, or null.
   */
  async poll(params: { environmentId: string; workerId?: string; blockMs?: number; reclaimOlderThanMs?: number; keyId?: string; apiBaseUrl?: string; signal?: AbortSignal }): Promise<BetaSelfHostedWork | null> {
    const { environmentId } = params
    if (params.workerId) {
      this.db
        .prepare('INSERT INTO work_pollers (environment_id, worker_id, last_poll_ms) VALUES (?, ?, ?) ON CONFLICT(environment_id, worker_id) DO UPDATE SET last_poll_ms = excluded.last_poll_ms')
        .run(environmentId, params.workerId.slice(0, 256), this.clock().getTime())
    }
    const first = this.claim(params)
    if (first || !params.blockMs) return first
    await new Promise<void>((resolve) => {
      const set = this.waiters.get(environmentId) ?? new Set()
      this.waiters.set(environmentId, set)
      const done = () => {
        clearTimeout(timer)
        set.delete(done)
        if (set.size === 0) this.waiters.delete(environmentId)
        params.signal?.removeEventListener('abort', done)
        resolve()
      }
      const timer = setTimeout(done, params.blockMs)
      set.add(done)
      params.signal?.addEventListener('abort', done)
    })
    return params.signal?.aborted ? null : this.claim(params)
  }

  private claim(params: { environmentId: string; reclaimOlderThanMs?: number; keyId?: string; apiBaseUrl?: string }): BetaSelfHostedWork | null {
    return this.db.transaction(() => {
      this.expire()
      const now = this.clock()
      const reclaim = params.reclaimOlderThanMs ?? DEFAULT_RECLAIM_MS
      const row = this.db
        .prepare("SELECT * FROM work_items WHERE environment_id = ? AND state = 'queued' AND (delivered_at_ms IS NULL OR delivered_at_ms <= ?) ORDER BY created_at, id LIMIT 1")
        .get(params.environmentId, now.getTime() - reclaim) as WorkRow | undefined
      if (!row) return null
      this.db.prepare('UPDATE work_items SET delivered_at_ms = ?, delivery_count = delivery_count + 1 WHERE id = ?').run(now.getTime(), row.id)
      const token = secretString(TOKEN_PREFIX)
      this.db
        .prepare('INSERT INTO sessions_tokens (id, token_hash, work_id, session_id, environment_key_id, created_at) VALUES (?, ?, ?, ?, ?, ?)')
        .run(newId('sessionsToken', now.getTime()), sha256(token), row.id, row.data_id, params.keyId ?? null, now.toISOString())
      return { ...view({ ...row, delivered_at_ms: now.getTime() }), secret: encodeWorkSecret(token, params.apiBaseUrl) }
    })()
  }

  /** Ack (spec §2.3): a delivered, queued item → starting; its lease runs from now. Else 409. */
  ack(environmentId: string, workId: string): BetaSelfHostedWork {
    return this.db.transaction(() => {
      this.expire()
      const row = this.row(environmentId, workId)
      if (row.state !== 'queued' || row.delivered_at_ms === null) {
        throw new CorralError('state_conflict', `work ${workId} is ${row.state === 'queued' ? 'queued but was never delivered by a poll' : row.state}: only a polled, queued item can be acknowledged`)
      }
      const now = this.clock()
      this.db
        .prepare("UPDATE work_items SET state = 'starting', acknowledged_at = ?, lease_expires_at_ms = ? WHERE id = ?")
        .run(now.toISOString(), now.getTime() + row.ttl_seconds * 1000, workId)
      return view(this.row(environmentId, workId))
    })()
  }

  /**
   * A heartbeat (spec §2.5). `NO_HEARTBEAT` claims the lease of an acked item (→ active) and binds
   * it to the presenting sessions token (the item's other tokens are revoked); later beats must
   * echo the last `last_heartbeat` exactly, else 412 with the lease as the server holds it. A
   * stopping or stopped item answers its state without comparing.
   */
  heartbeat(params: { environmentId: string; workId: string; expected?: string | null; desiredTtlSeconds?: number | null; tokenId?: string }): BetaSelfHostedWorkHeartbeatResponse {
    return this.db.transaction((): BetaSelfHostedWorkHeartbeatResponse => {
      this.expire()
      const row = this.row(params.environmentId, params.workId)
      const now = this.clock()
      if (params.desiredTtlSeconds !== undefined && params.desiredTtlSeconds !== null && (!Number.isFinite(params.desiredTtlSeconds) || params.desiredTtlSeconds <= 0)) {
        throw invalid('desired_ttl_seconds: must be a positive number of seconds')
      }
      const ttl = params.desiredTtlSeconds ? Math.min(MAX_TTL, Math.max(MIN_TTL, Math.round(params.desiredTtlSeconds))) : row.ttl_seconds
      if (row.state === 'stopped') return { type: 'work_heartbeat', last_heartbeat: row.last_heartbeat ?? '', lease_extended: false, state: row.state, ttl_seconds: row.ttl_seconds }
      if (row.state !== 'stopping') {
        const expected = params.expected ?? null
        if (row.state === 'queued' || (expected === NO_HEARTBEAT ? row.last_heartbeat !== null : expected !== row.last_heartbeat)) {
          const actual = row.last_heartbeat ?? 'NULL'
          throw new CorralError('precondition_failed', `Heartbeat precondition failed: expected ${expected ?? '(none)'}, actual was ${actual}`, {
            fields: { details: { error_code: 'heartbeat_precondition_failed', current_state: leaseState(row) } },
          })
        }
      }
      const stamp = now.toISOString()
      const claim = row.state === 'starting'
      this.db
        .prepare(`UPDATE work_items SET last_heartbeat = ?, latest_heartbeat_at = ?, lease_expires_at_ms = ?, ttl_seconds = ?${claim ? ", state = 'active', started_at = ?, lease_token_id = ?" : ''} WHERE id = ?`)
        .run(...(claim ? [stamp, stamp, now.getTime() + ttl * 1000, ttl, stamp, params.tokenId ?? null, row.id] : [stamp, stamp, now.getTime() + ttl * 1000, ttl, row.id]))
      if (claim && params.tokenId) {
        this.db.prepare('UPDATE sessions_tokens SET revoked_at = ? WHERE work_id = ? AND id != ? AND revoked_at IS NULL').run(stamp, row.id, params.tokenId)
      }
      const after = this.row(params.environmentId, params.workId)
      return { type: 'work_heartbeat', last_heartbeat: after.last_heartbeat ?? '', lease_extended: true, state: after.state, ttl_seconds: after.ttl_seconds }
    })()
  }

  /** Stop (spec §2.6): queued → stopped; starting/active → stopping (graceful) or stopped (force); stopping + force → stopped; stopped → 409. */
  stop(environmentId: string, workId: string, force: boolean): BetaSelfHostedWork {
    return this.db.transaction(() => {
      this.expire()
      const row = this.row(environmentId, workId)
      const now = this.clock().toISOString()
      if (row.state === 'stopped') throw new CorralError('state_conflict', `work ${workId} is already stopped`)
      if (row.state === 'queued' || force || row.state === 'stopping') this.end(row.id, now)
      else this.db.prepare("UPDATE work_items SET state = 'stopping', stop_requested_at = ? WHERE id = ?").run(now, row.id)
      return view(this.row(environmentId, workId))
    })()
  }

  /** Ends every live item of a session (the session was archived or deleted). */
  stopSession(sessionId: string): void {
    const now = this.clock().toISOString()
    const rows = this.db.prepare("SELECT id FROM work_items WHERE data_type = 'session' AND data_id = ? AND state != 'stopped'").all(sessionId) as { id: string }[]
    for (const r of rows) this.end(r.id, now)
  }

  /**
   * Ends an item. Its sessions tokens live on for STOPPED_TOKEN_GRACE_MS (then they are revoked):
   * the worker learns of the stop from its next heartbeat (200, `stopped`, lease not extended),
   * finishes its teardown (the final memory sync) and sends its closing stop (409) with the same
   * token. A token of an item re-queued by an expired lease, or of a revoked key, dies at once.
   */
  private end(workId: string, now: string): void {
    this.db
      .prepare("UPDATE work_items SET state = 'stopped', stopped_at = ?, stop_requested_at = COALESCE(stop_requested_at, ?), lease_expires_at_ms = NULL, lease_token_id = NULL WHERE id = ?")
      .run(now, now, workId)
    const until = new Date(Date.parse(now) + STOPPED_TOKEN_GRACE_MS).toISOString()
    this.db.prepare('UPDATE sessions_tokens SET revoked_at = ? WHERE work_id = ? AND (revoked_at IS NULL OR revoked_at > ?)').run(until, workId, until)
  }

  /** Queue statistics (spec §2.2). */
  stats(environmentId: string): BetaSelfHostedWorkQueueStats {
    this.expire()
    const now = this.clock().getTime()
    const q = this.db
      .prepare(
        `SELECT
           SUM(CASE WHEN delivered_at_ms IS NULL OR delivered_at_ms <= ? THEN 1 ELSE 0 END) AS depth,
           SUM(CASE WHEN delivered_at_ms > ? THEN 1 ELSE 0 END) AS pending,
           MIN(created_at) AS oldest
         FROM work_items WHERE environment_id = ? AND state = 'queued'`,
      )
      .get(now - DEFAULT_RECLAIM_MS, now - DEFAULT_RECLAIM_MS, environmentId) as { depth: number | null; pending: number | null; oldest: string | null }
    const polling = this.db.prepare('SELECT COUNT(*) AS n FROM work_pollers WHERE environment_id = ? AND last_poll_ms > ?').get(environmentId, now - this.pollerWindowMs) as { n: number }
    return { type: 'work_queue_stats', depth: q.depth ?? 0, pending: q.pending ?? 0, oldest_queued_at: q.oldest ?? null, workers_polling: polling.n }
  }

  /** Applies lease expiry: an expired lease re-queues its item (tokens revoked), or ends a stopping one. */
  private expire(): void {
    const now = this.clock()
    const rows = this.db
      .prepare("SELECT id, environment_id, state FROM work_items WHERE state IN ('starting', 'active', 'stopping') AND lease_expires_at_ms IS NOT NULL AND lease_expires_at_ms <= ?")
      .all(now.getTime()) as { id: string; environment_id: string; state: WorkState }[]
    if (rows.length === 0) return
    const stamp = now.toISOString()
    for (const r of rows) {
      if (r.state === 'stopping') {
        this.end(r.id, stamp)
        continue
      }
      this.db
        .prepare(
          "UPDATE work_items SET state = 'queued', acknowledged_at = NULL, started_at = NULL, last_heartbeat = NULL, latest_heartbeat_at = NULL, lease_expires_at_ms = NULL, lease_token_id = NULL, delivered_at_ms = NULL WHERE id = ?",
        )
        .run(r.id)
      this.db.prepare('UPDATE sessions_tokens SET revoked_at = ? WHERE work_id = ? AND revoked_at IS NULL').run(stamp, r.id)
      queueMicrotask(() => this.wake(r.environment_id))
    }
  }

  private wake(environmentId: string): void {
    for (const w of [...(this.waiters.get(environmentId) ?? [])]) w()
  }

  private row(environmentId: string, workId: string): WorkRow {
    const row = this.db.prepare('SELECT * FROM work_items WHERE id = ? AND environment_id = ?').get(workId, environmentId) as WorkRow | undefined
    if (!row) throw notFound('work', workId)
    return row
  }

  // ── credentials ──────────────────────────────────────────────────────────────────────────

  /** Mints an environment key (Corral addition): the answer is the only place `key` ever appears. */
  createKey(environmentId: string): EnvironmentKey {
    const now = this.clock()
    const key = secretString(KEY_PREFIX)
    const id = newId('environmentKey', now.getTime())
    const prefix = key.slice(0, KEY_PREFIX.length + 6)
    this.db.prepare('INSERT INTO environment_keys (id, environment_id, key_hash, prefix, created_at) VALUES (?, ?, ?, ?, ?)').run(id, environmentId, sha256(key), prefix, now.toISOString())
    return { ...this.key(environmentId, id), key }
  }

  listKeys(environmentId: string): EnvironmentKey[] {
    const rows = this.db.prepare('SELECT * FROM environment_keys WHERE environment_id = ? ORDER BY created_at, id').all(environmentId) as KeyRow[]
    return rows.map(keyView)
  }

  /** Revokes a key, and the sessions tokens of the deliveries made with it (spec §3.4). */
  revokeKey(environmentId: string, keyId: string): EnvironmentKey {
    const cur = this.key(environmentId, keyId)
    if (!cur.revoked_at) {
      const now = this.clock().toISOString()
      this.db.transaction(() => {
        this.db.prepare('UPDATE environment_keys SET revoked_at = ? WHERE id = ?').run(now, keyId)
        this.db.prepare('UPDATE sessions_tokens SET revoked_at = ? WHERE environment_key_id = ? AND revoked_at IS NULL').run(now, keyId)
      })()
    }
    return this.key(environmentId, keyId)
  }

  private key(environmentId: string, keyId: string): EnvironmentKey {
    const row = this.db.prepare('SELECT * FROM environment_keys WHERE id = ? AND environment_id = ?').get(keyId, environmentId) as KeyRow | undefined
    if (!row) throw notFound('environment key', keyId)
    return keyView(row)
  }

  /**
   * Who a bearer credential is, when it is an environment key or a sessions token that is live:
   * unknown, revoked (or of a stopped or re-queued item) → undefined (the API answers 401).
   */
  authenticate(credential: string): WorkCredential | undefined {
    if (credential.startsWith(KEY_PREFIX)) {
      const row = this.db.prepare('SELECT id, environment_id FROM environment_keys WHERE key_hash = ? AND revoked_at IS NULL').get(sha256(credential)) as { id: string; environment_id: string } | undefined
      if (!row) return undefined
      this.db.prepare('UPDATE environment_keys SET last_used_at = ? WHERE id = ?').run(this.clock().toISOString(), row.id)
      return { kind: 'environment', environmentId: row.environment_id, keyId: row.id }
    }
    if (credential.startsWith(TOKEN_PREFIX)) {
      this.expire()
      const row = this.db
        .prepare('SELECT t.id, t.work_id, t.session_id, w.environment_id FROM sessions_tokens t JOIN work_items w ON w.id = t.work_id WHERE t.token_hash = ? AND (t.revoked_at IS NULL OR t.revoked_at > ?)')
        .get(sha256(credential), this.clock().toISOString()) as { id: string; work_id: string; session_id: string; environment_id: string } | undefined
      if (!row) return undefined
      return { kind: 'session', environmentId: row.environment_id, sessionId: row.session_id, workId: row.work_id, tokenId: row.id }
    }
    return undefined
  }

  /** The sessions that have (or had) a work item on this environment. */
  sessionsOf(environmentId: string): string[] {
    return this.db.prepare("SELECT DISTINCT data_id FROM work_items WHERE environment_id = ? AND data_type = 'session'").pluck().all(environmentId) as string[]
  }

  /** Whether the session has (or had) a work item on this environment: the sessions an environment key may serve. */
  servesSession(environmentId: string, sessionId: string): boolean {
    return !!this.db.prepare("SELECT 1 FROM work_items WHERE environment_id = ? AND data_type = 'session' AND data_id = ? LIMIT 1").get(environmentId, sessionId)
  }
}

interface KeyRow {
  id: string
  environment_id: string
  key_hash: string
  prefix: string
  created_at: string
  last_used_at: string | null
  revoked_at: string | null
}

const keyView = (r: KeyRow): EnvironmentKey => ({ id: r.id, type: 'environment_key', environment_id: r.environment_id, prefix: r.prefix, created_at: r.created_at, last_used_at: r.last_used_at, revoked_at: r.revoked_at })

function leaseState(row: WorkRow): BetaWorkLeaseState {
  return { state: row.state, last_heartbeat: row.last_heartbeat, lease_extended: false, ttl_seconds: row.ttl_seconds }
}

function view(row: WorkRow): BetaSelfHostedWork {
  return {
    type: 'work',
    id: row.id,
    environment_id: row.environment_id,
    data: row.data_type === 'session' ? { type: 'session', id: row.data_id } : { type: 'healthcheck', id: row.data_id },
    state: row.state,
    metadata: JSON.parse(row.metadata) as Record<string, string>,
    secret: null,
    created_at: row.created_at,
    acknowledged_at: row.acknowledged_at,
    started_at: row.started_at,
    latest_heartbeat_at: row.latest_heartbeat_at,
    stop_requested_at: row.stop_requested_at,
    stopped_at: row.stopped_at,
  }
}
