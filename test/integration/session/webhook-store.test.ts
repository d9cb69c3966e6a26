import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStoresAt, type Stores } from '../../../src/main/session/stores'
import type { WebhookStore } from '../../../src/main/session/webhook-store'
import { webhookTypesOf, type WebhookEventType } from '../../../src/shared/api/webhooks'

// The webhooks' outbox on a real SQLite file (session/webhook-store.ts): what is enqueued with
// what, in which transaction, and how deliveries are claimed, retried and kept.
let dir: string
let stores: Stores
let hooks: WebhookStore
const now = Date.parse('2026-06-01T10:00:00Z')

async function session(): Promise<string> {
  const agent = stores.agents.create({ name: 'a', model: 'claude-sonnet-4-6', tools: [] } as never)
  const env = stores.environments.create({ name: 'e' } as never)
  return (await stores.sessions.create({ agent: agent.id, environment_id: env.id } as never)).id
}
const endpoint = (types: WebhookEventType[], url = 'http://127.0.0.1:9/hooks') => hooks.create({ url, enabled_events: types })
const rows = () => stores.db.prepare('SELECT endpoint_id, event_type, resource_id, status, payload FROM webhook_outbox ORDER BY rid').all() as { endpoint_id: string; event_type: string; resource_id: string; status: string; payload: string }[]

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'corral-webhooks-'))
  stores = openStoresAt(join(dir, 'corral.db'), { clock: () => new Date(now) })
  hooks = stores.webhooks
})
afterEach(() => {
  stores.close()
  rmSync(dir, { recursive: true, force: true })
})

describe('the webhooks outbox', () => {
  it('enqueues nothing without an endpoint, and for each enabled endpoint only the types it lists', async () => {
    await session()
    expect(rows()).toEqual([])
    const a = endpoint(['session.created', 'session.status_idled'])
    const b = endpoint(['session.status_idled'])
    const off = endpoint(['session.created', 'session.status_idled'])
    hooks.update(off.id, { state: 'disabled' })
    const sid = await session()
    await stores.log.append(sid, [{ type: 'session.status_running' }, { type: 'session.status_idle', stop_reason: { type: 'end_turn' } }] as never)
    // (a and b were made in the same millisecond: their order is their ids')
    expect(rows().map((r) => [r.endpoint_id, r.event_type, r.resource_id])).toEqual([
      [a.id, 'session.created', sid],
      ...[a.id, b.id].sort().map((id) => [id, 'session.status_idled', sid]),
    ])
    // one event, one id, one payload for every endpoint
    const [, x, y] = rows()
    expect(x.payload).toBe(y.payload)
    expect(JSON.parse(x.payload)).toEqual({ type: 'event', id: expect.stringMatching(/^wevt_/), created_at: '2026-06-01T10:00:00.000Z', data: { type: 'session.status_idled', id: sid, organization_id: 'local', workspace_id: 'local' } })
  })

  it('writes the outbox in the transaction of the event: an append that rolls back leaves no delivery', async () => {
    endpoint(['session.status_run_started'])
    const sid = await session()
    await expect(
      stores.log.append(sid, [{ type: 'session.status_running' }] as never, {
        precheck: () => {
          throw new Error('refused')
        },
      } as never),
    ).rejects.toThrow('refused')
    expect(rows()).toEqual([])
    await stores.log.append(sid, [{ type: 'session.status_running' }] as never)
    expect(rows().map((r) => r.event_type)).toEqual(['session.status_run_started'])
  })

  it("tells of a child thread's creation and idle with its thread id, and of a session's update, archive and deletion", async () => {
    endpoint(['session.thread_created', 'session.thread_idled', 'session.updated', 'session.archived', 'session.deleted'])
    const sid = await session()
    const tid = 'sthr_child'
    await stores.log.append(sid, [
      { type: 'session.thread_created', session_thread_id: tid, agent_name: 'worker' },
      { type: 'session.thread_status_idle', session_thread_id: tid, agent_name: 'worker', stop_reason: { type: 'end_turn' }, stop_details: null },
    ] as never)
    await stores.sessions.update(sid, { title: 'renamed' } as never)
    await stores.sessions.archive(sid)
    stores.sessions.delete(sid)
    const got = rows().map((r) => JSON.parse(r.payload) as { data: Record<string, unknown> })
    expect(got.map((g) => g.data)).toEqual([
      { type: 'session.thread_created', id: sid, session_thread_id: tid, organization_id: 'local', workspace_id: 'local' },
      { type: 'session.thread_idled', id: sid, session_thread_id: tid, organization_id: 'local', workspace_id: 'local' },
      { type: 'session.updated', id: sid, organization_id: 'local', workspace_id: 'local' },
      { type: 'session.archived', id: sid, organization_id: 'local', workspace_id: 'local' },
      { type: 'session.deleted', id: sid, organization_id: 'local', workspace_id: 'local' },
    ])
  })

  it('hands each due delivery to one engine at a time: a second claim gets the others, an expired claim is taken over', async () => {
    endpoint(['session.created'])
    for (let i = 0; i < 3; i++) await session()
    const first = hooks.claimDue('engine-a', now, 2, 60_000)
    const second = hooks.claimDue('engine-b', now + 30_000, 5, 60_000)
    expect(first).toHaveLength(2)
    expect(second).toHaveLength(1)
    expect(new Set([...first, ...second].map((d) => d.rid)).size).toBe(3)
    expect(hooks.claimDue('engine-b', now + 31_000, 5, 60_000)).toEqual([])
    // engine-a stopped mid-send: its claims count until they expire
    const taken = hooks.claimDue('engine-b', now + 60_000, 5, 60_000)
    expect(taken.map((d) => d.rid).sort()).toEqual(first.map((d) => d.rid).sort())
    // a stale owner's answer changes nothing
    hooks.recordDelivered(first[0].rid, 'engine-a', 204)
    expect(rows()[0].status).toBe('pending')
    hooks.recordDelivered(first[0].rid, 'engine-b', 204)
    expect(rows().filter((r) => r.status === 'delivered')).toHaveLength(1)
  })

  it('retries at the time given, gives up when told, and a disabled endpoint gives its pending deliveries up', async () => {
    const e = endpoint(['session.created'])
    const sid = await session()
    const [d] = hooks.claimDue('me', now, 5, 60_000)
    hooks.recordFailure(d.rid, 'me', { status: 500, error: 'answered 500', retryAtMs: now + 5_000 })
    expect(hooks.claimDue('me', now + 4_999, 5, 60_000)).toEqual([])
    expect(hooks.nextDueMs()).toBe(now + 5_000)
    const [again] = hooks.claimDue('me', now + 5_000, 5, 60_000)
    expect(again).toMatchObject({ rid: d.rid, attempts: 1 })
    hooks.recordFailure(again.rid, 'me', { status: null, error: 'connection refused' })
    expect(hooks.deliveries(e.id).data).toEqual([
      expect.objectContaining({ resource_id: sid, event_type: 'session.created', status: 'failed', attempts: 2, last_status: null, last_error: 'connection refused', next_attempt_at: null }),
    ])
    await session()
    hooks.update(e.id, { state: 'disabled' })
    expect(hooks.deliveries(e.id).data[0]).toMatchObject({ status: 'failed', last_error: 'the endpoint was disabled' })
    expect(hooks.nextDueMs()).toBeUndefined()
  })

  it('keeps the 500 newest settled deliveries of an endpoint, and every pending one', async () => {
    const e = endpoint(['session.status_run_started'])
    const sid = await session()
    await stores.log.append(sid, Array.from({ length: 505 }, () => ({ type: 'session.status_running' })) as never)
    for (const d of hooks.claimDue('me', now, 503, 60_000)) hooks.recordDelivered(d.rid, 'me', 200)
    const listed = hooks.deliveries(e.id, { limit: 1000 }).data
    expect(listed.filter((d) => d.status === 'pending')).toHaveLength(2)
    expect(listed.filter((d) => d.status === 'delivered')).toHaveLength(500)
  })

  it('refuses a 33rd endpoint, naming the limit', () => {
    for (let i = 0; i < 32; i++) endpoint(['session.created'])
    expect(() => endpoint(['session.created'])).toThrow(/at most 32 webhook endpoints/)
  })
})

describe('webhook types of a log event', () => {
  it('maps the session-level status events, with the idle reason', () => {
    expect(webhookTypesOf({ type: 'session.status_running' })).toEqual(['session.status_run_started', 'session.running'])
    expect(webhookTypesOf({ type: 'session.status_idle', stop_reason: { type: 'end_turn' } })).toEqual(['session.status_idled', 'session.idled'])
    expect(webhookTypesOf({ type: 'session.status_idle', stop_reason: { type: 'requires_action' } })).toEqual(['session.status_idled', 'session.idled', 'session.requires_action'])
    expect(webhookTypesOf({ type: 'session.status_idle', stop_reason: { type: 'budget_reached' } })).toEqual(['session.status_idled', 'session.idled', 'session.budget_reached'])
    expect(webhookTypesOf({ type: 'session.status_terminated' })).toEqual(['session.status_terminated'])
    expect(webhookTypesOf({ type: 'session.thread_status_terminated' })).toEqual(['session.thread_terminated'])
    expect(webhookTypesOf({ type: 'span.outcome_evaluation_end' })).toEqual(['session.outcome_evaluation_ended'])
    expect(webhookTypesOf({ type: 'session.updated' })).toEqual(['session.updated'])
    expect(webhookTypesOf({ type: 'agent.message' })).toEqual([])
    expect(webhookTypesOf({ type: 'session.thread_status_running' })).toEqual([])
  })
})
