import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStoresAt, type Stores } from '../../../src/main/session/stores'
import type { WorkStore } from '../../../src/main/session/work-store'

// The work queue on a real SQLite file with the stores' clock moved by hand: what lease expiry,
// reclaim and the first heartbeat's claim do to items and their sessions tokens (spec resources.md §2.3–§3.4).
let dir: string
let stores: Stores
let work: WorkStore
let now = Date.parse('2026-06-01T10:00:00Z')
let envId: string
const advance = (ms: number) => (now += ms)

const tokenOf = (secret: string | null) => (JSON.parse(Buffer.from(secret!, 'base64url').toString()) as { sessions_token: string }).sessions_token

async function queuedSession(): Promise<string> {
  const agent = stores.agents.create({ name: 'a', model: 'claude-sonnet-4-6', tools: [] } as never)
  return (await stores.sessions.create({ agent: agent.id, environment_id: envId } as never)).id
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'corral-work-'))
  stores = openStoresAt(join(dir, 'corral.db'), { clock: () => new Date(now) })
  work = stores.work
  envId = stores.environments.create({ name: 'w', config: { type: 'self_hosted' } } as never).id
})
afterEach(() => {
  stores.close()
  rmSync(dir, { recursive: true, force: true })
})

describe('work store leases', () => {
  it('re-queues an active item whose lease ran out, revoking its sessions token, and delivers it again', async () => {
    const sessionId = await queuedSession()
    const item = (await work.poll({ environmentId: envId }))!
    const token = tokenOf(item.secret)
    work.ack(envId, item.id)
    const cred = work.authenticate(token)
    expect(cred).toMatchObject({ kind: 'session', sessionId, workId: item.id })
    work.heartbeat({ environmentId: envId, workId: item.id, expected: 'NO_HEARTBEAT', tokenId: cred!.kind === 'session' ? cred!.tokenId : undefined })
    expect(work.retrieve(envId, item.id).state).toBe('active')
    advance(119_000)
    expect(work.retrieve(envId, item.id).state).toBe('active')
    advance(2_000)
    const requeued = work.retrieve(envId, item.id)
    expect(requeued).toMatchObject({ state: 'queued', acknowledged_at: null, started_at: null })
    expect(work.authenticate(token)).toBeUndefined()
    // the dead worker's next beat: 412 showing the item queued with no heartbeat
    expect(() => work.heartbeat({ environmentId: envId, workId: item.id, expected: 'x' })).toThrow(/precondition failed/i)
    const again = (await work.poll({ environmentId: envId }))!
    expect(again.id).toBe(item.id)
    expect(tokenOf(again.secret)).not.toBe(token)
  })

  it('re-queues an item acked but never heartbeaten once the ttl has passed', async () => {
    await queuedSession()
    const item = (await work.poll({ environmentId: envId }))!
    work.ack(envId, item.id)
    advance(121_000)
    expect(work.retrieve(envId, item.id).state).toBe('queued')
    expect(work.stats(envId)).toMatchObject({ depth: 1, pending: 0 })
  })

  it('ends a stopping item whose lease runs out stopped', async () => {
    await queuedSession()
    const item = (await work.poll({ environmentId: envId }))!
    work.ack(envId, item.id)
    work.heartbeat({ environmentId: envId, workId: item.id, expected: 'NO_HEARTBEAT' })
    expect(work.stop(envId, item.id, false).state).toBe('stopping')
    advance(121_000)
    expect(work.retrieve(envId, item.id).state).toBe('stopped')
  })

  it('binds the lease to the token of the first claim: the other delivery\'s token is revoked', async () => {
    await queuedSession()
    const first = (await work.poll({ environmentId: envId }))!
    advance(6_000)
    const second = (await work.poll({ environmentId: envId }))!
    expect(second.id).toBe(first.id)
    const [t1, t2] = [tokenOf(first.secret), tokenOf(second.secret)]
    expect(work.authenticate(t1)).toBeDefined()
    work.ack(envId, second.id)
    const c2 = work.authenticate(t2)!
    work.heartbeat({ environmentId: envId, workId: second.id, expected: 'NO_HEARTBEAT', tokenId: c2.kind === 'session' ? c2.tokenId : undefined })
    expect(work.authenticate(t2)).toBeDefined()
    expect(work.authenticate(t1)).toBeUndefined()
  })

  it('counts workers that polled in the last 30 s by their worker id', async () => {
    await work.poll({ environmentId: envId, workerId: 'a' })
    await work.poll({ environmentId: envId, workerId: 'b' })
    await work.poll({ environmentId: envId })
    expect(work.stats(envId).workers_polling).toBe(2)
    advance(31_000)
    await work.poll({ environmentId: envId, workerId: 'b' })
    expect(work.stats(envId).workers_polling).toBe(1)
  })

  it('queues a session once however often it is enqueued, and again after its item stopped', async () => {
    const sessionId = await queuedSession()
    const a = work.enqueueSession(envId, sessionId)
    expect(work.enqueueSession(envId, sessionId)).toBe(a)
    work.stop(envId, a, true)
    const b = work.enqueueSession(envId, sessionId)
    expect(b).not.toBe(a)
    expect(work.liveItemOf(sessionId)?.id).toBe(b)
  })

  it('queues the session in the transaction that creates it: a session with initial events has its item too', async () => {
    const agent = stores.agents.create({ name: 'a', model: 'claude-sonnet-4-6', tools: [] } as never)
    const s = await stores.sessions.create({ agent: agent.id, environment_id: envId, initial_events: [{ type: 'user.message', content: [{ type: 'text', text: 'hi' }] }] } as never)
    expect(work.liveItemOf(s.id)?.state).toBe('queued')
  })

  it('lets a stopped item\'s sessions token hear of the stop for a minute, then revokes it', async () => {
    await queuedSession()
    const item = (await work.poll({ environmentId: envId }))!
    const token = tokenOf(item.secret)
    work.ack(envId, item.id)
    work.stop(envId, item.id, true)
    expect(work.authenticate(token)).toBeDefined()
    expect(work.heartbeat({ environmentId: envId, workId: item.id, expected: 'whatever' })).toMatchObject({ state: 'stopped', lease_extended: false })
    advance(61_000)
    expect(work.authenticate(token)).toBeUndefined()
  })
})
