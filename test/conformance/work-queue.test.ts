import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic, { toFile } from '@anthropic-ai/sdk'
import { startApiServer, type TestApiServer } from '../support/api-server'

/*
 * The work queue of a self_hosted environment through the official SDK (spec resources.md §2–§3):
 * routes, the state machine, the lease protocol's 412, stop's 409, stats, environment keys and
 * their revocation, and the authorization matrix cell by cell.
 */

let t: TestApiServer
let api: Anthropic
let envId: string
let otherEnvId: string
let agentId: string

interface Key {
  id: string
  type: string
  environment_id: string
  key?: string
  prefix: string
  created_at: string
  revoked_at: string | null
}

const clientWith = (credential: string, headers: Record<string, string> = {}) => new Anthropic({ baseURL: t.url, apiKey: null, authToken: credential, maxRetries: 0, timeout: 10_000, defaultHeaders: headers })

async function mintKey(env = envId): Promise<Key> {
  const r = await t.fetch(`/v1/corral/environments/${env}/keys`, { method: 'POST' })
  expect(r.status).toBe(200)
  return (await r.json()) as Key
}

async function newSession(env = envId): Promise<string> {
  return (await api.beta.sessions.create({ agent: agentId, environment_id: env })).id
}

const secretOf = (work: { secret: string | null }) => JSON.parse(Buffer.from(work.secret!, 'base64url').toString('utf8')) as { sessions_token: string; api_base_url?: string }

const errorOf = async (p: Promise<unknown>) => {
  const err = (await p.catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>
  expect(err).toBeInstanceOf(Anthropic.APIError)
  return { status: err.status, headers: err.headers, ...(err.error as { error: { type: string; message: string; details?: unknown } }).error }
}

/** Polls until an item for `sessionId` comes (other tests' items may be ahead of it in the queue: they are stopped). */
async function pollFor(worker: Anthropic, sessionId: string, env = envId) {
  for (let i = 0; i < 50; i++) {
    const w = await worker.beta.environments.work.poll(env, { reclaim_older_than_ms: 60_000 })
    if (!w) continue
    if (w.data.id === sessionId) return w
    await api.beta.environments.work.stop(w.id, { environment_id: env, force: true })
  }
  throw new Error(`no work item for ${sessionId}`)
}

beforeAll(async () => {
  t = await startApiServer({ harness: { enabled: false } })
  api = t.client
  envId = (await api.beta.environments.create({ name: 'workers', config: { type: 'self_hosted' } })).id
  otherEnvId = (await api.beta.environments.create({ name: 'other workers', config: { type: 'self_hosted' } })).id
  agentId = (await api.beta.agents.create({ name: 'remote', model: 'claude-sonnet-4-6', tools: [{ type: 'agent_toolset_20260401' }] })).id
})
afterAll(() => t.close())

describe('environment keys (Corral additions)', () => {
  it('mints a key shown once, lists it without the key, and refuses a cloud environment', async () => {
    const key = await mintKey()
    expect(key).toMatchObject({ type: 'environment_key', environment_id: envId, revoked_at: null })
    expect(key.id).toMatch(/^envkey_/)
    expect(key.key).toMatch(/^corral_envkey_/)
    expect(key.key!.startsWith(key.prefix)).toBe(true)
    const listed = (await (await t.fetch(`/v1/corral/environments/${envId}/keys`)).json()) as { data: Key[] }
    const mine = listed.data.find((k) => k.id === key.id)!
    expect(mine).not.toHaveProperty('key')
    expect(JSON.stringify(listed)).not.toContain(key.key)
    const cloud = (await api.beta.environments.create({ name: 'cloud', config: { type: 'cloud' } })).id
    const r = await t.fetch(`/v1/corral/environments/${cloud}/keys`, { method: 'POST' })
    expect(r.status).toBe(400)
    expect(((await r.json()) as { error: { message: string } }).error.message).toContain('only a self_hosted environment has a work queue')
  })

  it('keeps only a hash of the key in corral.db', async () => {
    const key = await mintKey()
    const { readFileSync } = await import('node:fs')
    const { join } = await import('node:path')
    const raw = Buffer.concat([readFileSync(join(t.dataDir, 'corral.db')), ...['corral.db-wal'].map((f) => { try { return readFileSync(join(t.dataDir, f)) } catch { return Buffer.alloc(0) } })])
    expect(raw.includes(Buffer.from(key.key!))).toBe(false)
  })
})

describe('a session on a self_hosted environment', () => {
  it('is queued at creation: stats show it, the environment key lists it, and a poll delivers it with a sessions token', async () => {
    const key = await mintKey()
    const worker = clientWith(key.key!, { 'Anthropic-Worker-ID': 'worker-a' })
    const sessionId = await newSession()
    const stats = await api.beta.environments.work.stats(envId)
    expect(stats).toMatchObject({ type: 'work_queue_stats' })
    expect(stats.depth).toBeGreaterThanOrEqual(1)
    expect(stats.oldest_queued_at).not.toBeNull()
    const listed = (await worker.beta.environments.work.list(envId, { limit: 100 })).data
    const item = listed.find((w) => w.data.id === sessionId)!
    expect(item).toMatchObject({ type: 'work', environment_id: envId, state: 'queued', secret: null, data: { type: 'session', id: sessionId }, acknowledged_at: null })
    expect(item.id).toMatch(/^work_/)

    const polled = await pollFor(worker, sessionId)
    expect(polled.state).toBe('queued')
    const secret = secretOf(polled)
    expect(secret.sessions_token).toMatch(/^corral_sesstok_/)
    expect(secret.api_base_url).toBe(t.url)
    const after = await api.beta.environments.work.stats(envId)
    expect(after.pending).toBeGreaterThanOrEqual(1)
    expect(after.workers_polling).toBe(1)
    // the secret is on the poll's answer only
    expect((await api.beta.environments.work.retrieve(polled.id, { environment_id: envId })).secret).toBeNull()
  })

  it('answers JSON null to a poll with nothing claimable, after waiting block_ms', async () => {
    const key = await mintKey(otherEnvId)
    const worker = clientWith(key.key!)
    const started = Date.now()
    expect(await worker.beta.environments.work.poll(otherEnvId, { block_ms: 200 })).toBeNull()
    expect(Date.now() - started).toBeGreaterThanOrEqual(150)
    const raw = await fetch(`${t.url}/v1/environments/${otherEnvId}/work/poll`, { headers: { authorization: `Bearer ${key.key}` } })
    expect(raw.headers.get('content-type')).toContain('application/json')
    expect(await raw.text()).toBe('null')
  })

  it('wakes a blocked poll when a session is queued meanwhile', async () => {
    const key = await mintKey(otherEnvId)
    const worker = clientWith(key.key!)
    const waiting = worker.beta.environments.work.poll(otherEnvId, { block_ms: 999 })
    await new Promise((r) => setTimeout(r, 50))
    const sessionId = await newSession(otherEnvId)
    const got = await waiting
    expect(got?.data.id).toBe(sessionId)
    await api.beta.environments.work.stop(got!.id, { environment_id: otherEnvId, force: true })
  })

  it('refuses block_ms outside 1–999 and a poll on a cloud environment, naming them', async () => {
    const key = await mintKey()
    const worker = clientWith(key.key!)
    const e = await errorOf(worker.beta.environments.work.poll(envId, { block_ms: 1000 }))
    expect(e.status).toBe(400)
    expect(e.message).toContain('block_ms')
    const zero = await errorOf(worker.beta.environments.work.poll(envId, { block_ms: 0 }))
    expect(zero.status).toBe(400)
  })

  it('re-delivers an item polled but never acked once reclaim_older_than_ms has passed, with a new token', async () => {
    // an environment of its own, so no other test's delivered item is ahead in the queue
    const env = (await api.beta.environments.create({ name: 'reclaim', config: { type: 'self_hosted' } })).id
    const key = await mintKey(env)
    const worker = clientWith(key.key!)
    const sessionId = await newSession(env)
    const first = await pollFor(worker, sessionId, env)
    // not reclaimable yet at the default (5 s)
    expect(await worker.beta.environments.work.poll(env)).toBeNull()
    await new Promise((r) => setTimeout(r, 30))
    const second = await worker.beta.environments.work.poll(env, { reclaim_older_than_ms: 10 })
    expect(second?.id).toBe(first.id)
    expect(secretOf(second!).sessions_token).not.toBe(secretOf(first).sessions_token)
  })
})

describe('what a self_hosted session takes', () => {
  it('refuses file and repository resources at creation, naming the resource, and keeps nothing', async () => {
    const before = (await api.beta.sessions.list({ limit: 100 })).data.length
    const e = await errorOf(
      api.beta.sessions.create({ agent: agentId, environment_id: envId, resources: [{ type: 'github_repository', url: 'https://github.com/octo/repo', mount_path: '/workspace/repo' }] } as never),
    )
    expect(e.status).toBe(400)
    expect(e.message).toContain('resources[0].type')
    expect(e.message).toContain('only memory_store resources')
    expect((await api.beta.sessions.list({ limit: 100 })).data.length).toBe(before)
  })

  it('refuses user.tool_result on a session that runs its own tools', async () => {
    const cloud = (await api.beta.environments.create({ name: 'own hands', config: { type: 'cloud' } })).id
    const s = (await api.beta.sessions.create({ agent: agentId, environment_id: cloud })).id
    const e = await errorOf(api.beta.sessions.events.send(s, { events: [{ type: 'user.tool_result', tool_use_id: 'sevt_x', content: [{ type: 'text', text: 'x' }] }] } as never))
    expect(e.status).toBe(400)
    expect(e.message).toContain('self_hosted')
  })

  it('queues the session again when new input arrives after its item stopped', async () => {
    const key = await mintKey()
    const worker = clientWith(key.key!)
    const sessionId = await newSession()
    const first = (await worker.beta.environments.work.list(envId, { limit: 1000 })).data.find((w) => w.data.id === sessionId)!
    await api.beta.environments.work.stop(first.id, { environment_id: envId, force: true })
    await api.beta.sessions.events.send(sessionId, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'more' }] }] })
    const items = (await worker.beta.environments.work.list(envId, { limit: 1000 })).data.filter((w) => w.data.id === sessionId)
    expect(items.map((w) => w.state).sort()).toEqual(['queued', 'stopped'])
    // and only once, however much input arrives while it is live
    await api.beta.sessions.events.send(sessionId, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'again' }] }] })
    expect((await worker.beta.environments.work.list(envId, { limit: 1000 })).data.filter((w) => w.data.id === sessionId)).toHaveLength(2)
  })
})

describe('the lease', () => {
  it('moves queued → starting → active → stopping → stopped through ack, heartbeats and stop', async () => {
    const key = await mintKey()
    const worker = clientWith(key.key!)
    const sessionId = await newSession()
    const item = await pollFor(worker, sessionId)
    const token = secretOf(item).sessions_token
    const runner = clientWith(token)

    const acked = await worker.beta.environments.work.ack(item.id, { environment_id: envId })
    expect(acked.state).toBe('starting')
    expect(acked.acknowledged_at).not.toBeNull()
    expect(acked.secret).toBeNull()

    const hb1 = await runner.beta.environments.work.heartbeat(item.id, { environment_id: envId, expected_last_heartbeat: 'NO_HEARTBEAT' })
    expect(hb1).toMatchObject({ type: 'work_heartbeat', lease_extended: true, state: 'active' })
    expect(hb1.ttl_seconds).toBe(120)
    expect(hb1.last_heartbeat).not.toBe('')
    const started = await api.beta.environments.work.retrieve(item.id, { environment_id: envId })
    expect(started.state).toBe('active')
    expect(started.started_at).not.toBeNull()

    const hb2 = await runner.beta.environments.work.heartbeat(item.id, { environment_id: envId, expected_last_heartbeat: hb1.last_heartbeat, desired_ttl_seconds: 5 })
    expect(hb2).toMatchObject({ lease_extended: true, state: 'active', ttl_seconds: 30 })

    // a stale echo is a 412 with the lease as the server holds it
    const stale = await errorOf(runner.beta.environments.work.heartbeat(item.id, { environment_id: envId, expected_last_heartbeat: hb1.last_heartbeat }))
    expect(stale.status).toBe(412)
    expect(stale.type).toBe('invalid_request_error')
    expect(stale.message).toContain('Heartbeat precondition failed')
    expect(stale.details).toEqual({ error_code: 'heartbeat_precondition_failed', current_state: { state: 'active', last_heartbeat: hb2.last_heartbeat, lease_extended: false, ttl_seconds: 30 } })
    expect(await runner.beta.environments.work.heartbeat(item.id, { environment_id: envId, expected_last_heartbeat: hb1.last_heartbeat }).catch((e: unknown) => e)).toBeInstanceOf(Anthropic.PreconditionFailedError)

    // graceful stop by the operator: the worker sees `stopping` at its next beat, whatever it echoes
    const stopping = await api.beta.environments.work.stop(item.id, { environment_id: envId })
    expect(stopping.state).toBe('stopping')
    expect(stopping.stop_requested_at).not.toBeNull()
    const hb3 = await runner.beta.environments.work.heartbeat(item.id, { environment_id: envId, expected_last_heartbeat: 'anything' })
    expect(hb3.state).toBe('stopping')
    // the worker confirms with force
    const stopped = await runner.beta.environments.work.stop(item.id, { environment_id: envId, force: true })
    expect(stopped.state).toBe('stopped')
    expect(stopped.stopped_at).not.toBeNull()
    // a stopped item: a 409 that the SDK is told not to retry; its sessions token is dead
    const again = await errorOf(api.beta.environments.work.stop(item.id, { environment_id: envId, force: true }))
    expect(again.status).toBe(409)
    expect(again.type).toBe('invalid_request_error')
    expect(again.headers?.get('x-should-retry')).toBe('false')
    // the worker's next beat hears of the stop (its token outlives the item by a grace period for its teardown)
    const after = await runner.beta.environments.work.heartbeat(item.id, { environment_id: envId, expected_last_heartbeat: hb2.last_heartbeat })
    expect(after).toMatchObject({ state: 'stopped', lease_extended: false })
  })

  it('force-stops a running item at once, and stops a queued one', async () => {
    const key = await mintKey()
    const worker = clientWith(key.key!)
    const a = await pollFor(worker, await newSession())
    await worker.beta.environments.work.ack(a.id, { environment_id: envId })
    expect((await api.beta.environments.work.stop(a.id, { environment_id: envId, force: true })).state).toBe('stopped')
    const sessionId = await newSession()
    const queued = (await worker.beta.environments.work.list(envId, { limit: 1000 })).data.find((w) => w.data.id === sessionId)!
    expect((await api.beta.environments.work.stop(queued.id, { environment_id: envId })).state).toBe('stopped')
  })

  it('refuses an ack of an item that was never polled or is already acked (409, not retried)', async () => {
    const key = await mintKey()
    const worker = clientWith(key.key!)
    const sessionId = await newSession()
    const queued = (await worker.beta.environments.work.list(envId, { limit: 1000 })).data.find((w) => w.data.id === sessionId)!
    const never = await errorOf(worker.beta.environments.work.ack(queued.id, { environment_id: envId }))
    expect(never.status).toBe(409)
    expect(never.headers?.get('x-should-retry')).toBe('false')
    const item = await pollFor(worker, sessionId)
    await worker.beta.environments.work.ack(item.id, { environment_id: envId })
    const twice = await errorOf(worker.beta.environments.work.ack(item.id, { environment_id: envId }))
    expect(twice.status).toBe(409)
    expect(twice.message).toContain('starting')
  })

  it('updates metadata with merge semantics (string upserts, null deletes) and refuses a bad patch', async () => {
    const sessionId = await newSession()
    const key = await mintKey()
    const item = (await clientWith(key.key!).beta.environments.work.list(envId, { limit: 1000 })).data.find((w) => w.data.id === sessionId)!
    await api.beta.environments.work.update(item.id, { environment_id: envId, metadata: { a: '1', b: '2' } })
    const merged = await api.beta.environments.work.update(item.id, { environment_id: envId, metadata: { a: null, c: '3' } })
    expect(merged.metadata).toEqual({ b: '2', c: '3' })
    const bad = await errorOf(api.beta.environments.work.update(item.id, { environment_id: envId, metadata: { x: 5 as unknown as string } }))
    expect(bad.status).toBe(400)
    expect(bad.message).toContain('metadata')
  })

  it('ends the item when its session is archived', async () => {
    const sessionId = await newSession()
    await api.beta.sessions.archive(sessionId)
    const key = await mintKey()
    const item = (await clientWith(key.key!).beta.environments.work.list(envId, { limit: 1000 })).data.find((w) => w.data.id === sessionId)!
    expect(item.state).toBe('stopped')
  })

  it('pages the list newest first', async () => {
    const key = await mintKey(otherEnvId)
    const worker = clientWith(key.key!)
    for (let i = 0; i < 3; i++) await newSession(otherEnvId)
    const first = await worker.beta.environments.work.list(otherEnvId, { limit: 2 })
    expect(first.data).toHaveLength(2)
    expect(first.data[0].created_at >= first.data[1].created_at).toBe(true)
    const seen = new Set<string>()
    for await (const w of worker.beta.environments.work.list(otherEnvId, { limit: 2 })) seen.add(w.id)
    expect(seen.size).toBeGreaterThanOrEqual(3)
  })
})

describe('the authorization matrix (spec §3.2)', () => {
  let key: Key
  let otherKey: Key
  let worker: Anthropic
  let sessionId: string
  let workId: string
  let token: string
  let foreignSession: string

  beforeAll(async () => {
    key = await mintKey()
    otherKey = await mintKey(otherEnvId)
    worker = clientWith(key.key!)
    sessionId = await newSession()
    const item = await pollFor(worker, sessionId)
    workId = item.id
    token = secretOf(item).sessions_token
    foreignSession = (await api.beta.sessions.create({ agent: agentId, environment_id: (await api.beta.environments.create({ name: 'c2', config: { type: 'cloud' } })).id })).id
  })

  const status = async (p: Promise<unknown>) => {
    const r = await p.then(
      () => 200,
      (e: unknown) => (e as { status?: number }).status ?? -1,
    )
    return r
  }

  it('poll: environment key of its environment only; the API token and a sessions token are refused', async () => {
    expect(await status(worker.beta.environments.work.poll(envId))).toBe(200)
    expect(await status(clientWith(otherKey.key!).beta.environments.work.poll(envId))).toBe(403)
    const refused = await errorOf(api.beta.environments.work.poll(envId))
    expect(refused.status).toBe(403)
    expect(refused.type).toBe('permission_error')
    expect(refused.message).toContain('environment key')
    expect(await status(clientWith(token).beta.environments.work.poll(envId))).toBe(403)
  })

  it('work list: environment key only (the API token is refused, as documented)', async () => {
    expect(await status(worker.beta.environments.work.list(envId))).toBe(200)
    expect(await status(api.beta.environments.work.list(envId))).toBe(403)
    expect(await status(clientWith(token).beta.environments.work.list(envId))).toBe(403)
  })

  it('work retrieve and update: the API token only', async () => {
    expect(await status(api.beta.environments.work.retrieve(workId, { environment_id: envId }))).toBe(200)
    expect(await status(worker.beta.environments.work.retrieve(workId, { environment_id: envId }))).toBe(403)
    expect(await status(clientWith(token).beta.environments.work.retrieve(workId, { environment_id: envId }))).toBe(403)
    expect(await status(worker.beta.environments.work.update(workId, { environment_id: envId, metadata: { a: 'b' } }))).toBe(403)
    expect(await status(clientWith(token).beta.environments.work.update(workId, { environment_id: envId, metadata: { a: 'b' } }))).toBe(403)
  })

  it('stats: the API token and the environment key; a sessions token is refused', async () => {
    expect(await status(api.beta.environments.work.stats(envId))).toBe(200)
    expect(await status(worker.beta.environments.work.stats(envId))).toBe(200)
    expect(await status(clientWith(otherKey.key!).beta.environments.work.stats(envId))).toBe(403)
    expect(await status(clientWith(token).beta.environments.work.stats(envId))).toBe(403)
  })

  it('heartbeat: the sessions token of its item and the environment key; the API token is refused', async () => {
    await worker.beta.environments.work.ack(workId, { environment_id: envId })
    expect(await status(api.beta.environments.work.heartbeat(workId, { environment_id: envId, expected_last_heartbeat: 'NO_HEARTBEAT' }))).toBe(403)
    const other = await pollFor(worker, await newSession())
    // a sessions token of another item
    expect(await status(clientWith(secretOf(other).sessions_token).beta.environments.work.heartbeat(workId, { environment_id: envId, expected_last_heartbeat: 'NO_HEARTBEAT' }))).toBe(403)
    expect(await status(clientWith(token).beta.environments.work.heartbeat(workId, { environment_id: envId, expected_last_heartbeat: 'NO_HEARTBEAT' }))).toBe(200)
    expect(await status(clientWith(otherKey.key!).beta.environments.work.heartbeat(workId, { environment_id: envId, expected_last_heartbeat: 'x' }))).toBe(403)
    await api.beta.environments.work.stop(other.id, { environment_id: envId, force: true })
  })

  it('sessions: a sessions token reaches its session (retrieve, events, send) and no other; an environment key the sessions of its queue', async () => {
    const runner = clientWith(token)
    expect(await status(runner.beta.sessions.retrieve(sessionId))).toBe(200)
    expect(await status(runner.beta.sessions.events.list(sessionId))).toBe(200)
    expect(await status(runner.beta.sessions.events.send(sessionId, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'from the worker' }] }] }))).toBe(200)
    expect(await status(runner.beta.sessions.retrieve(foreignSession))).toBe(403)
    expect(await status(worker.beta.sessions.retrieve(sessionId))).toBe(200)
    expect(await status(worker.beta.sessions.retrieve(foreignSession))).toBe(403)
    expect(await status(clientWith(otherKey.key!).beta.sessions.retrieve(sessionId))).toBe(403)
  })

  it('everything else is the API token\'s: agents, sessions.create, vaults, environments, files, memory stores refuse a key or a token with 403', async () => {
    for (const c of [worker, clientWith(token)]) {
      expect(await status(c.beta.agents.list())).toBe(403)
      expect(await status(c.beta.sessions.create({ agent: agentId, environment_id: envId }))).toBe(403)
      expect(await status(c.beta.sessions.list())).toBe(403)
      expect(await status(c.beta.vaults.list())).toBe(403)
      expect(await status(c.beta.environments.list())).toBe(403)
      expect(await status(c.beta.environments.retrieve(envId))).toBe(403)
      expect(await status(c.beta.files.list())).toBe(403)
      expect(await status(c.beta.memoryStores.list())).toBe(403)
      expect(await status(c.beta.sessions.archive(sessionId))).toBe(403)
    }
    const e = await errorOf(worker.beta.agents.list())
    expect(e.type).toBe('permission_error')
    expect(e.message).toContain('takes the API token')
    // minting keys is the user's
    const r = await fetch(`${t.url}/v1/corral/environments/${envId}/keys`, { method: 'POST', headers: { authorization: `Bearer ${key.key}` } })
    expect(r.status).toBe(403)
  })

  it('an unknown credential is 401; a revoked key is 401 on its next request, and so are the sessions tokens it fetched', async () => {
    expect(await status(clientWith('corral_envkey_not-a-key').beta.environments.work.poll(envId))).toBe(401)
    expect(await status(clientWith('corral_sesstok_not-a-token').beta.sessions.retrieve(sessionId))).toBe(401)
    const k = await mintKey()
    const w = clientWith(k.key!)
    const item = await pollFor(w, await newSession())
    const tok = secretOf(item).sessions_token
    expect(await status(clientWith(tok).beta.sessions.retrieve(item.data.id))).toBe(200)
    const r = await t.fetch(`/v1/corral/environments/${envId}/keys/${k.id}/revoke`, { method: 'POST' })
    expect(r.status).toBe(200)
    expect(((await r.json()) as Key).revoked_at).not.toBeNull()
    const e = await errorOf(w.beta.environments.work.poll(envId))
    expect(e.status).toBe(401)
    expect(e.type).toBe('authentication_error')
    expect(await status(clientWith(tok).beta.sessions.retrieve(item.data.id))).toBe(401)
    // the other keys of the environment keep working
    expect(await status(worker.beta.environments.work.stats(envId))).toBe(200)
  })

  it('skills: a sessions token and an environment key read the skills of the sessions they serve, and no other', async () => {
    const upload = async (name: string) =>
      api.beta.skills.create({ files: [await toFile(Buffer.from(`---\nname: ${name}\ndescription: a test skill\n---\n\nDo it.\n`), `${name}/SKILL.md`)] })
    const used = await upload('used-skill')
    const other = await upload('other-skill')
    const skilled = await api.beta.agents.create({ name: 'skilled', model: 'claude-sonnet-4-6', tools: [{ type: 'agent_toolset_20260401' }], skills: [{ type: 'custom', skill_id: used.id }] } as never)
    const k = await mintKey()
    const w = clientWith(k.key!)
    const sid = (await api.beta.sessions.create({ agent: skilled.id, environment_id: envId })).id
    const item = await pollFor(w, sid)
    const runner = clientWith(secretOf(item).sessions_token)
    expect(await status(runner.beta.skills.versions.retrieve('latest', { skill_id: used.id }))).toBe(200)
    expect(await status(runner.beta.skills.retrieve(used.id))).toBe(200)
    expect(await status(runner.beta.skills.versions.retrieve('latest', { skill_id: other.id }))).toBe(403)
    expect(await status(w.beta.skills.versions.retrieve('latest', { skill_id: used.id }))).toBe(200)
    expect(await status(w.beta.skills.versions.retrieve('latest', { skill_id: other.id }))).toBe(403)
    expect(await status(clientWith(otherKey.key!).beta.skills.versions.retrieve('latest', { skill_id: used.id }))).toBe(403)
    // listing or creating skills is the API token's
    expect(await status(runner.beta.skills.list())).toBe(403)
    expect(await status(w.beta.skills.list())).toBe(403)
    await api.beta.environments.work.stop(item.id, { environment_id: envId, force: true })
  })

  it('memory stores refuse an environment key, even for a store its session has attached', async () => {
    const store = await api.beta.memoryStores.create({ name: 'notes' })
    const sid = (await api.beta.sessions.create({ agent: agentId, environment_id: envId, resources: [{ type: 'memory_store', memory_store_id: store.id }] } as never)).id
    const item = await pollFor(worker, sid)
    const e = await errorOf(worker.beta.memoryStores.retrieve(store.id))
    expect(e.status).toBe(403)
    expect(e.message).toContain('sessions token')
    expect(await status(clientWith(secretOf(item).sessions_token).beta.memoryStores.retrieve(store.id))).toBe(200)
    await api.beta.environments.work.stop(item.id, { environment_id: envId, force: true })
  })

  it('ack and stop: the API token and the item\'s credentials; another environment\'s key is refused', async () => {
    const k = await mintKey()
    const w = clientWith(k.key!)
    const a = await pollFor(w, await newSession())
    expect(await status(clientWith(otherKey.key!).beta.environments.work.ack(a.id, { environment_id: envId }))).toBe(403)
    expect(await status(api.beta.environments.work.ack(a.id, { environment_id: envId }))).toBe(200)
    expect(await status(clientWith(otherKey.key!).beta.environments.work.stop(a.id, { environment_id: envId }))).toBe(403)
    expect(await status(w.beta.environments.work.stop(a.id, { environment_id: envId, force: true }))).toBe(200)
    const b = await pollFor(w, await newSession())
    expect(await status(clientWith(secretOf(b).sessions_token).beta.environments.work.ack(b.id, { environment_id: envId }))).toBe(200)
    expect(await status(clientWith(secretOf(b).sessions_token).beta.environments.work.stop(b.id, { environment_id: envId }))).toBe(200)
  })
})

