import type { Statement } from 'better-sqlite3'
import { newId } from '../../shared/api/ids'
import {
  LOCAL_ORGANIZATION_ID,
  LOCAL_WORKSPACE_ID,
  MAX_WEBHOOK_ENDPOINTS,
  WEBHOOK_SOURCE_EVENTS,
  webhookTypesOf,
  type WebhookDelivery,
  type WebhookEndpoint,
  type WebhookEventType,
  type WebhookPayload,
} from '../../shared/api/webhooks'
import { invalid, notFound } from '../../shared/errors'
import type { Db } from './database'
import type { StoredEvent } from './event-log'
import type { SqliteEventLog } from './sqlite-event-log'

export interface WebhookEndpointCreateInput {
  url: string
  enabled_events: WebhookEventType[]
  name?: string
  description?: string
}

export interface WebhookEndpointUpdateInput {
  url?: string
  enabled_events?: WebhookEventType[]
  name?: string
  description?: string
  state?: 'enabled' | 'disabled'
}

/** The Page pagination of `/v1/organizations/webhooks` (the SDK's PageParams). */
export interface WebhookListParams {
  limit?: number
  after_id?: string
  before_id?: string
  order?: 'asc' | 'desc'
}

/** A delivery claimed for sending: its row, payload and endpoint. */
export interface ClaimedDelivery {
  rid: number
  endpointId: string
  url: string
  eventId: string
  eventType: string
  payload: string
  attempts: number
}

interface OutboxRow {
  rid: number
  endpoint_id: string
  event_id: string
  event_type: string
  resource_id: string
  payload: string
  created_at: string
  status: WebhookDelivery['status']
  attempts: number
  next_attempt_at_ms: number | null
  delivered_at: string | null
  last_status: number | null
  last_error: string | null
}

/**
 * A resource change, told inside the transaction of its write (WebhookStore.tell): the webhooks'
 * outbox commits with the change or not at all. `extra` goes into the payload's data (a
 * credential's `vault_id`).
 */
export type ResourceEvents = (type: WebhookEventType, resourceId: string, extra?: { vault_id: string }) => void

/** Deliveries kept per endpoint once delivered or given up (the newest; pending ones are all kept). */
const KEPT_DELIVERIES = 500

/**
 * Webhook endpoints and their outbox (spec resources.md §12, §17; docs/webhooks.md). An endpoint's
 * row holds everything but its signing secret (the keychain's: orchestrator/webhooks.ts). The
 * outbox gets one row per event and enabled endpoint that lists its type, written inside the
 * transaction of what it tells of: a session's log events (a batch projector of the log), a
 * session's creation, archive and deletion (SessionStoreHooks.inTransaction), the other stores'
 * resource changes (`tell`, their ResourceEvents). So an event that
 * committed is delivered after any crash, and one that rolled back never is. The sender claims
 * due rows, posts them and records each attempt here.
 */
export class WebhookStore {
  private readonly clock: () => Date
  /** Enqueues one event for every enabled endpoint that lists its type (prepared at first use). */
  private enqueueStmt: Statement | undefined
  /** Whether any endpoint exists (prepared at first use; null: the schema has no webhooks yet). */
  private anyEndpoint: Statement | null | undefined
  private readonly wakers = new Set<() => void>()
  /** Rows were enqueued in a transaction not yet told of (told once the log's group is on disk, or at once outside the log). */
  private enqueuedInLog = false

  constructor(
    private readonly db: Db,
    o: { log: SqliteEventLog; clock?: () => Date },
  ) {
    this.clock = o.clock ?? (() => new Date())
    o.log.addBatchProjector((_rid, stored) => this.project(stored))
    // the sender is woken once the events are on disk: a webhook never tells of what an OS crash could lose
    o.log.subscribeAll(() => {
      if (!this.enqueuedInLog) return
      this.enqueuedInLog = false
      this.wake()
    })
  }

  /** `wake` is called when deliveries were enqueued (after their commit); the returned function stops it. */
  onEnqueued(wake: () => void): () => void {
    this.wakers.add(wake)
    return () => this.wakers.delete(wake)
  }

  private wake(): void {
    for (const w of [...this.wakers]) w()
  }

  // ---- endpoints ----

  create(input: WebhookEndpointCreateInput): WebhookEndpoint {
    return this.db.transaction(() => {
      const count = (this.db.prepare('SELECT COUNT(*) FROM webhook_endpoints').pluck().get() as number) ?? 0
      if (count >= MAX_WEBHOOK_ENDPOINTS) throw invalid(`at most ${MAX_WEBHOOK_ENDPOINTS} webhook endpoints (${count} exist); delete one first`)
      const now = this.clock().toISOString()
      const endpoint: WebhookEndpoint = {
        id: newId('webhookEndpoint'),
        created_at: now,
        updated_at: now,
        url: input.url,
        name: input.name ?? '',
        description: input.description ?? '',
        enabled_events: dedupe(input.enabled_events),
        state: 'enabled',
        disabled_reason: '',
      }
      this.db.prepare('INSERT INTO webhook_endpoints (id, created_at, data) VALUES (?, ?, ?)').run(endpoint.id, now, JSON.stringify(endpoint))
      return endpoint
    })()
  }

  retrieve(id: string): WebhookEndpoint {
    const data = this.db.prepare('SELECT data FROM webhook_endpoints WHERE id = ?').pluck().get(id) as string | undefined
    if (data === undefined) throw notFound('webhook endpoint', id)
    return JSON.parse(data) as WebhookEndpoint
  }

  update(id: string, input: WebhookEndpointUpdateInput): WebhookEndpoint {
    return this.db.transaction(() => {
      const cur = this.retrieve(id)
      const next: WebhookEndpoint = {
        ...cur,
        ...(input.url !== undefined ? { url: input.url } : {}),
        ...(input.name !== undefined ? { name: input.name } : {}),
        ...(input.description !== undefined ? { description: input.description } : {}),
        ...(input.enabled_events !== undefined ? { enabled_events: dedupe(input.enabled_events) } : {}),
        ...(input.state !== undefined ? { state: input.state, disabled_reason: '' } : {}),
      }
      if (JSON.stringify(next) === JSON.stringify(cur)) return cur
      next.updated_at = this.clock().toISOString()
      this.db.prepare('UPDATE webhook_endpoints SET data = ? WHERE id = ?').run(JSON.stringify(next), id)
      // a disabled endpoint gets nothing: what waited for it is given up, as its owner asked
      if (next.state === 'disabled' && cur.state !== 'disabled') {
        this.db.prepare("UPDATE webhook_outbox SET status = 'failed', next_attempt_at_ms = NULL, last_error = 'the endpoint was disabled' WHERE endpoint_id = ? AND status = 'pending'").run(id)
      }
      return next
    })()
  }

  /** The endpoints, oldest first by default (Page pagination: after_id / before_id, ≤ 32 in all). */
  list(params: WebhookListParams = {}): { data: WebhookEndpoint[]; has_more: boolean; first_id: string | null; last_id: string | null } {
    const rows = (this.db.prepare('SELECT data FROM webhook_endpoints ORDER BY created_at, id').pluck().all() as string[]).map((d) => JSON.parse(d) as WebhookEndpoint)
    if (params.order === 'desc') rows.reverse()
    const find = (id: string, field: string) => {
      const i = rows.findIndex((r) => r.id === id)
      if (i < 0) throw invalid(`${field}: no webhook endpoint ${JSON.stringify(id)}`)
      return i
    }
    const limit = params.limit ?? 20
    let page: WebhookEndpoint[]
    let more: boolean
    if (params.before_id !== undefined) {
      const end = find(params.before_id, 'before_id')
      const start = Math.max(0, end - limit)
      page = rows.slice(start, end)
      more = start > 0
    } else {
      const start = params.after_id !== undefined ? find(params.after_id, 'after_id') + 1 : 0
      page = rows.slice(start, start + limit)
      more = start + limit < rows.length
    }
    return { data: page, has_more: more, first_id: page[0]?.id ?? null, last_id: page[page.length - 1]?.id ?? null }
  }

  /** Deletes an endpoint and its outbox rows. */
  delete(id: string): { id: string; type: 'webhook_endpoint_deleted' } {
    this.retrieve(id)
    this.db.prepare('DELETE FROM webhook_endpoints WHERE id = ?').run(id)
    return { id, type: 'webhook_endpoint_deleted' }
  }

  // ---- the outbox ----

  /** Inside a session's creation, archive or deletion (SessionStoreHooks.inTransaction). */
  enqueueSession(sessionId: string, what: 'created' | 'archived' | 'deleted'): void {
    this.tell(what === 'created' ? 'session.created' : what === 'archived' ? 'session.archived' : 'session.deleted', sessionId)
  }

  /** ResourceEvents: the stores call it inside their writes' transactions; the sender is woken once the write returned. */
  readonly tell: ResourceEvents = (type, resourceId, extra) => {
    if (this.enqueue(type, resourceId, this.clock().toISOString(), extra)) queueMicrotask(() => this.wake())
  }

  /** The log's batch projector: a session's events that stand for webhook types. */
  private project(stored: readonly StoredEvent[]): void {
    for (const { sessionId, event } of stored) {
      if (!WEBHOOK_SOURCE_EVENTS.has(event.type)) continue
      const e = event as unknown as { type: string; stop_reason?: unknown; session_thread_id?: unknown; processed_at: string }
      const thread = e.type.startsWith('session.thread_') && typeof e.session_thread_id === 'string' ? e.session_thread_id : undefined
      for (const type of webhookTypesOf(e)) if (this.enqueue(type, sessionId, e.processed_at, thread ? { session_thread_id: thread } : undefined)) this.enqueuedInLog = true
    }
  }

  /** One event for every enabled endpoint that lists its type; whether any did. */
  private enqueue(type: WebhookEventType, resourceId: string, at: string, extra?: Record<string, string>): boolean {
    if (this.anyEndpoint === undefined) {
      // stores opened over a schema from before webhooks (as tests of upgrades do) have no endpoints
      const exists = this.db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'webhook_endpoints'").get() !== undefined
      this.anyEndpoint = exists ? this.db.prepare('SELECT 1 FROM webhook_endpoints LIMIT 1').pluck() : null
    }
    if (this.anyEndpoint === null || this.anyEndpoint.get() === undefined) return false
    this.enqueueStmt ??= this.db.prepare(
      `INSERT OR IGNORE INTO webhook_outbox (endpoint_id, event_id, event_type, resource_id, payload, created_at, status, next_attempt_at_ms)
       SELECT e.id, @eventId, @type, @resourceId, @payload, @at, 'pending', @due FROM webhook_endpoints e
       WHERE json_extract(e.data, '$.state') = 'enabled' AND EXISTS (SELECT 1 FROM json_each(e.data, '$.enabled_events') WHERE value = @type)
       ORDER BY e.created_at, e.id`,
    )
    const eventId = newId('webhookEvent')
    const payload: WebhookPayload = {
      type: 'event',
      id: eventId,
      created_at: at,
      data: { type, id: resourceId, organization_id: LOCAL_ORGANIZATION_ID, workspace_id: LOCAL_WORKSPACE_ID, ...extra } as WebhookPayload['data'],
    }
    const r = this.enqueueStmt.run({ eventId, type, resourceId, payload: JSON.stringify(payload), at, due: 0 })
    return r.changes > 0
  }

  /**
   * Claims up to `limit` deliveries due at `nowMs` for `owner` until `nowMs + leaseMs` (another
   * engine's expired claim is taken over): each is sent by one engine at a time.
   */
  claimDue(owner: string, nowMs: number, limit: number, leaseMs: number): ClaimedDelivery[] {
    return this.db.transaction(() => {
      const rows = this.db
        .prepare(
          `SELECT o.rid, o.endpoint_id, o.event_id, o.event_type, o.payload, o.attempts, json_extract(e.data, '$.url') AS url FROM webhook_outbox o JOIN webhook_endpoints e ON e.id = o.endpoint_id
           WHERE o.status = 'pending' AND o.next_attempt_at_ms <= ? AND (o.claimed_until_ms IS NULL OR o.claimed_until_ms <= ?) ORDER BY o.next_attempt_at_ms, o.rid LIMIT ?`,
        )
        .all(nowMs, nowMs, limit) as { rid: number; endpoint_id: string; event_id: string; event_type: string; payload: string; attempts: number; url: string }[]
      const claim = this.db.prepare('UPDATE webhook_outbox SET claimed_by = ?, claimed_until_ms = ? WHERE rid = ?')
      for (const r of rows) claim.run(owner, nowMs + leaseMs, r.rid)
      return rows.map((r) => ({ rid: r.rid, endpointId: r.endpoint_id, url: r.url, eventId: r.event_id, eventType: r.event_type, payload: r.payload, attempts: r.attempts }))
    }).immediate()
  }

  /** When the next pending delivery is due (ms since the epoch), or undefined when none is pending. */
  nextDueMs(): number | undefined {
    const v = this.db.prepare("SELECT MIN(MAX(next_attempt_at_ms, COALESCE(claimed_until_ms, 0))) FROM webhook_outbox WHERE status = 'pending'").pluck().get() as number | null
    return v ?? undefined
  }

  /** An attempt the endpoint answered with a 2xx. */
  recordDelivered(rid: number, owner: string, status: number): void {
    this.db
      .prepare("UPDATE webhook_outbox SET status = 'delivered', attempts = attempts + 1, delivered_at = ?, last_status = ?, last_error = NULL, next_attempt_at_ms = NULL, claimed_by = NULL, claimed_until_ms = NULL WHERE rid = ? AND claimed_by = ?")
      .run(this.clock().toISOString(), status, rid, owner)
    this.trim(rid)
  }

  /** A failed attempt: retried at `retryAtMs`, or given up when it is undefined. */
  recordFailure(rid: number, owner: string, failure: { status: number | null; error: string; retryAtMs?: number }): void {
    this.db
      .prepare('UPDATE webhook_outbox SET status = ?, attempts = attempts + 1, last_status = ?, last_error = ?, next_attempt_at_ms = ?, claimed_by = NULL, claimed_until_ms = NULL WHERE rid = ? AND claimed_by = ?')
      .run(failure.retryAtMs === undefined ? 'failed' : 'pending', failure.status, failure.error.slice(0, 500), failure.retryAtMs ?? null, rid, owner)
    if (failure.retryAtMs === undefined) this.trim(rid)
  }

  /** An endpoint's deliveries, newest first (`before`: the rid-ordered page after that event's). */
  deliveries(endpointId: string, params: { limit?: number } = {}): { data: WebhookDelivery[] } {
    this.retrieve(endpointId)
    const rows = this.db.prepare('SELECT * FROM webhook_outbox WHERE endpoint_id = ? ORDER BY rid DESC LIMIT ?').all(endpointId, params.limit ?? 50) as OutboxRow[]
    return {
      data: rows.map((r) => ({
        id: r.event_id,
        event_type: r.event_type as WebhookEventType,
        resource_id: r.resource_id,
        created_at: r.created_at,
        status: r.status,
        attempts: r.attempts,
        next_attempt_at: r.status === 'pending' && r.next_attempt_at_ms !== null ? new Date(r.next_attempt_at_ms).toISOString() : null,
        delivered_at: r.delivered_at,
        last_status: r.last_status,
        last_error: r.last_error,
      })),
    }
  }

  /** Keeps an endpoint's settled deliveries to the newest KEPT_DELIVERIES. */
  private trim(rid: number): void {
    const endpoint = this.db.prepare('SELECT endpoint_id FROM webhook_outbox WHERE rid = ?').pluck().get(rid) as string | undefined
    if (endpoint === undefined) return
    this.db
      .prepare(
        `DELETE FROM webhook_outbox WHERE endpoint_id = ? AND status != 'pending' AND rid < (
           SELECT MIN(rid) FROM (SELECT rid FROM webhook_outbox WHERE endpoint_id = ? AND status != 'pending' ORDER BY rid DESC LIMIT ?))`,
      )
      .run(endpoint, endpoint, KEPT_DELIVERIES)
  }
}

function dedupe(types: readonly WebhookEventType[]): WebhookEventType[] {
  return [...new Set(types)]
}

