import { afterEach, describe, expect, it } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Engine } from '../../../src/main/engine'
import { SqliteLeaseStore } from '../../../src/main/session/lease-store'
import type { EventInput } from '../../../src/main/session/event-log'
import { newId } from '../../../src/shared/api/ids'
import { RecordingToolRouter } from '../../support/harness-tool-router'
import { ScriptedModelServer, say, toolResultsOf } from '../../support/model-server'

const cleanups: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

/** A data dir with one session whose log is `events` (written with no brain running). */
async function prepare(events: (ids: { toolUseId: string }) => EventInput[], journalStarted = false) {
  const dir = mkdtempSync(join(tmpdir(), 'corral-wake-'))
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
  const engine = Engine.open({ dataDir: dir, token: 't', env: {}, harness: { enabled: false }, defaultHands: false })
  const agent = engine.services.agents.create({ name: 'a', model: 'claude-sonnet-5-5', tools: [{ type: 'agent_toolset_20260401' }] } as never)
  const env = engine.services.environments.create({ name: 'e', config: { type: 'cloud' } })
  const session = await engine.services.sessions.create({ agent: agent.id, environment_id: env.id } as never)
  const toolUseId = newId('event')
  await engine.services.log.append(session.id, events({ toolUseId }))
  if (journalStarted) await engine.stores.toolJournal.markStarted(session.id, toolUseId)
  await engine.close()
  return { dir, sessionId: session.id, toolUseId }
}

async function boot(dir: string, script: Parameters<typeof ScriptedModelServer.start>[0], router?: RecordingToolRouter) {
  const model = await ScriptedModelServer.start(script)
  const r = router ?? new RecordingToolRouter(join(dir, 'effects.log'))
  const engine = Engine.open({ dataDir: dir, token: 't', env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k' }, toolRouter: r, harness: { leaseTtlMs: 2000 } })
  cleanups.push(async () => {
    await engine.close()
    await model.close()
  })
  const waitIdle = async (sessionId: string) => {
    for (let i = 0; i < 1000; i++) {
      const last = engine.services.log.read(sessionId, { order: 'desc', limit: 1 })[0]?.event
      if (last?.type === 'session.status_idle') return engine.services.log.read(sessionId, { limit: 1000 }).map((e) => e.event)
      await new Promise((res) => setTimeout(res, 10))
    }
    throw new Error('session never went idle')
  }
  return { engine, model, router: r, waitIdle }
}

const user = (text: string): EventInput => ({ type: 'user.message', content: [{ type: 'text', text }] })

describe('wake on a fresh process', () => {
  it('answers a user message that no brain saw before the restart', async () => {
    const { dir, sessionId } = await prepare(() => [user('are you there?')])
    const b = await boot(dir, [say('yes')])
    const evs = await b.waitIdle(sessionId)
    expect(evs.map((e) => e.type)).toEqual(['user.message', 'session.status_running', 'span.model_request_start', 'agent.message', 'span.model_request_end', 'session.usage', 'session.status_idle'])
  })

  it('closes a model request the dead process left open and issues it again', async () => {
    const startId = newId('event')
    const { dir, sessionId } = await prepare(() => [user('q'), { type: 'session.status_running' }, { id: startId, type: 'span.model_request_start' }])
    const b = await boot(dir, [say('answer')])
    const evs = await b.waitIdle(sessionId)
    expect(evs.map((e) => e.type)).toEqual([
      'user.message',
      'session.status_running',
      'span.model_request_start',
      'span.model_request_end',
      'span.model_request_start',
      'agent.message',
      'span.model_request_end',
      'session.usage',
      'session.status_idle',
    ])
    expect(evs[3]).toMatchObject({ model_request_start_id: startId, is_error: true })
    expect(evs.filter((e) => e.type === 'session.status_running')).toHaveLength(1)
  })

  const withToolUse = (ids: { toolUseId: string }): EventInput[] => [
    user('do it'),
    { type: 'session.status_running' },
    { id: newId('event'), type: 'span.model_request_start' },
    { id: ids.toolUseId, type: 'agent.tool_use', name: 'bash', input: { command: 'make' }, evaluated_permission: 'allow' },
    { type: 'span.model_request_end', model_request_start_id: 'x', is_error: false, model_usage: { input_tokens: 1, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }, stop_reason: 'tool_use' },
  ]

  it('runs a tool call that was recorded but never handed to the hands', async () => {
    const { dir, sessionId, toolUseId } = await prepare(withToolUse)
    const b = await boot(dir, [say('built')])
    const evs = await b.waitIdle(sessionId)
    expect(b.router.effects()).toEqual([toolUseId])
    expect(evs.find((e) => e.type === 'agent.tool_result')).toMatchObject({ tool_use_id: toolUseId, is_error: false })
  })

  it('collects the result of a call that finished before the crash from the hands instead of running it again', async () => {
    const { dir, sessionId, toolUseId } = await prepare(withToolUse, true)
    const router = new RecordingToolRouter(join(dir, 'effects.log'))
    // the earlier process ran it: its side effect is on disk, its result never reached the log
    const { appendFileSync } = await import('node:fs')
    appendFileSync(router.file, `start ${toolUseId}\neffect ${toolUseId} ${JSON.stringify({ name: 'bash', input: { command: 'make' }, output: 'ran bash: make' })}\n`)
    const b = await boot(dir, [say('built')], router)
    const evs = await b.waitIdle(sessionId)
    expect(router.effects()).toEqual([toolUseId])
    expect(router.calls).toHaveLength(0)
    expect(evs.filter((e) => e.type === 'agent.tool_result')).toEqual([expect.objectContaining({ tool_use_id: toolUseId, is_error: false, content: [{ type: 'text', text: 'ran bash: make' }] })])
  })

  it('tells the model the outcome is unknown when the hands cannot say what happened to a started call', async () => {
    const { dir, sessionId, toolUseId } = await prepare(withToolUse, true)
    const router = new RecordingToolRouter(join(dir, 'effects.log'))
    const { appendFileSync } = await import('node:fs')
    appendFileSync(router.file, `start ${toolUseId}\n`)
    const b = await boot(dir, [say('I will check')], router)
    await b.waitIdle(sessionId)
    expect(router.calls).toHaveLength(0)
    const [result] = toolResultsOf(b.model.requests[0])
    expect(result.is_error).toBe(true)
    expect(result.text).toMatch(/outcome of this call is unknown.*restarted/)
  })
})

describe('leases', () => {
  it('keeps a second brain off a session while the first holds its lease, and lets it in once the holder is gone', async () => {
    const { dir } = await prepare(() => [])
    const engine = Engine.open({ dataDir: dir, token: 't', env: {}, harness: { enabled: false }, defaultHands: false })
    cleanups.push(() => engine.close())
    let now = 1_000
    const a = new SqliteLeaseStore(engine.stores.db, { ttlMs: 100, clock: () => now })
    const b = new SqliteLeaseStore(engine.stores.db, { ttlMs: 100, clock: () => now })
    expect(a.acquire('sesn_1')).toBe(true)
    expect(b.acquire('sesn_1')).toBe(false)
    expect(a.acquire('sesn_1')).toBe(true)
    now += 150
    expect(b.acquire('sesn_1')).toBe(true)
    expect(a.renew('sesn_1')).toBe(false)
    b.release('sesn_1')
    expect(a.acquire('sesn_1')).toBe(true)
  })

  it('takes over at once from an owner process on this host that no longer exists', async () => {
    const { dir } = await prepare(() => [])
    const engine = Engine.open({ dataDir: dir, token: 't', env: {}, harness: { enabled: false }, defaultHands: false })
    cleanups.push(() => engine.close())
    const { hostname } = await import('node:os')
    const { spawnSync } = await import('node:child_process')
    const deadPid = Number(spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString())
    const dead = new SqliteLeaseStore(engine.stores.db, { ttlMs: 60_000, owner: `${hostname()}:${deadPid}:abc` })
    const alive = new SqliteLeaseStore(engine.stores.db, { ttlMs: 60_000, owner: `${hostname()}:${process.ppid}:def` })
    expect(dead.acquire('sesn_2')).toBe(true)
    expect(new SqliteLeaseStore(engine.stores.db).acquire('sesn_2')).toBe(true)
    expect(alive.acquire('sesn_3')).toBe(true)
    expect(new SqliteLeaseStore(engine.stores.db).acquire('sesn_3')).toBe(false)
  })
})

describe('two engines on one database', () => {
  it('answers a pending message once when two processes start on the same data at the same time', async () => {
    const { dir, sessionId } = await prepare(() => [user('who answers?')])
    const model = await ScriptedModelServer.start(() => say('only one of us', { delayMs: 50 }))
    const open = () => Engine.open({ dataDir: dir, token: 't', env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k' }, harness: { leaseTtlMs: 5000 }, defaultHands: false })
    const a = open()
    const b = open()
    cleanups.push(async () => {
      await a.close()
      await b.close()
      await model.close()
    })
    await a.brains.scheduler.settled()
    await b.brains.scheduler.settled()
    for (let i = 0; i < 100 && a.services.log.read(sessionId, { order: 'desc', limit: 1 })[0].event.type !== 'session.status_idle'; i++) await new Promise((r) => setTimeout(r, 10))
    const types = a.services.log.read(sessionId, { limit: 100 }).map((e) => e.event.type)
    expect(types).toEqual(['user.message', 'session.status_running', 'span.model_request_start', 'agent.message', 'span.model_request_end', 'session.usage', 'session.status_idle'])
    expect(model.requests).toHaveLength(1)
    expect([a.brains.scheduler.running(), b.brains.scheduler.running()]).toEqual([[], []])
  })
})

describe('graceful shutdown', () => {
  it('records a tool call cancelled by engine.close() and continues the turn in the next process', async () => {
    const { dir, sessionId } = await prepare(() => [user('build it')])
    const model = await ScriptedModelServer.start((req) => (toolResultsOf(req).length ? say('I will retry later.') : { kind: 'message', blocks: [{ type: 'tool_use', name: 'bash', input: { command: 'make' } }] }))
    cleanups.push(() => model.close())
    const router = new RecordingToolRouter(join(dir, 'effects.log'), { delayMs: 30_000 })
    let running!: () => void
    const started = new Promise<void>((r) => (running = r))
    router.beforeRun = () => running()
    const first = Engine.open({ dataDir: dir, token: 't', env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k' }, toolRouter: router })
    await started
    await first.close()
    const afterClose = new RecordingToolRouter(join(dir, 'effects.log'))
    const second = Engine.open({ dataDir: dir, token: 't', env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k' }, toolRouter: afterClose })
    cleanups.push(() => second.close())
    for (let i = 0; i < 500 && second.services.log.read(sessionId, { order: 'desc', limit: 1 })[0].event.type !== 'session.status_idle'; i++) await new Promise((r) => setTimeout(r, 10))
    const [result] = toolResultsOf(model.requests[1])
    expect(result.is_error).toBe(true)
    expect(result.text).toMatch(/^Corral shut down while this call was running/)
    expect(afterClose.calls).toHaveLength(0)
    expect(router.effects()).toEqual([])
    expect(second.services.log.read(sessionId, { order: 'desc', limit: 1 })[0].event).toMatchObject({ type: 'session.status_idle', stop_reason: { type: 'end_turn' } })
  })
})
