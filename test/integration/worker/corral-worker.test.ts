import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Engine } from '../../../src/main/engine'
import type { LoggedEvent } from '../../../src/main/session/event-log'
import { say, ScriptedModelServer, toolCall, toolResultsOf, type RecordedRequest, type ScriptStep } from '../../support/model-server'
import { waitForIdle } from '../engine/support'
import { bwrapReq, vmReq } from '../hands/support'

/*
 * `corral worker` as a user runs it on another machine (here: another process on loopback):
 * it serves a self_hosted environment's queue with the official SDK's worker and runs each
 * call in a bubblewrap sandbox of its own (uid 1000, /workspace, no network). SIGTERM stops it
 * cleanly. A revoked key stops it at its next request.
 */

function responder(req: RecordedRequest): ScriptStep {
  const results = toolResultsOf(req)
  if (results.length === 0) return toolCall(req, 'bash', { command: 'echo "uid=$(id -u) pwd=$(pwd)"; echo note > note.txt; (getent hosts example.com || echo no-dns)' })
  if (results.length === 1) return toolCall(req, 'read', { file_path: '/workspace/note.txt' })
  return say('finished')
}

const bwrap = bwrapReq()
const vm = vmReq()
describe.skipIf(!bwrap.ok)('corral worker', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-cw-'))
  const workerDir = mkdtempSync(join(tmpdir(), 'corral-cw-worker-'))
  let model: ScriptedModelServer
  let engine: Engine
  let api: Anthropic
  let url: string
  const children: ChildProcess[] = []
  beforeAll(async () => {
    model = await ScriptedModelServer.start(responder)
    engine = Engine.open({ dataDir, token: 'test-token', env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k' }, harness: { backoffBaseMs: 5, backoffMaxMs: 40 }, defaultHands: false, log: () => {} })
    url = (await engine.listen(0)).url
    api = new Anthropic({ baseURL: url, apiKey: 'test-token', maxRetries: 0 })
  })
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL')
    await engine.close()
    await model.close()
    rmSync(dataDir, { recursive: true, force: true })
    rmSync(workerDir, { recursive: true, force: true })
  })

  async function setUp() {
    const env = await api.beta.environments.create({ name: `remote-${Math.random()}`, config: { type: 'self_hosted' } })
    const key = (await (await fetch(`${url}/v1/corral/environments/${env.id}/keys`, { method: 'POST', headers: { authorization: 'Bearer test-token' } })).json()) as { id: string; key: string }
    const keyFile = join(workerDir, `${env.id}.key`)
    writeFileSync(keyFile, key.key + '\n', { mode: 0o600 })
    return { env, key, keyFile }
  }

  function startWorker(args: string[]): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main/cli/main.ts', 'worker', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ANTHROPIC_API_KEY: '' } })
    children.push(child)
    let out = ''
    child.stdout!.on('data', (b: Buffer) => (out += b.toString()))
    child.stderr!.on('data', (b: Buffer) => (out += b.toString()))
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)))
    return { child, output: () => out, exited }
  }

  /**
   * A worker on `backend` serves one session of a new environment: its bash call runs as uid 1000
   * in /workspace with no DNS, and its read finds the file the bash call wrote.
   */
  async function serveOneSession(backend: string, dataDir: string, timeoutMs: number) {
    const { env, keyFile } = await setUp()
    const agent = await api.beta.agents.create({ name: `remote-${backend}`, model: 'claude-sonnet-4-6', tools: [{ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_allow' } } }] })
    const session = await api.beta.sessions.create({ agent: agent.id, environment_id: env.id })
    await api.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'go' }] }] })
    const w = startWorker(['--url', url, '--environment', env.id, '--key-file', keyFile, '--backend', backend, '--data-dir', join(workerDir, dataDir), '--max-idle', '300'])
    let events: LoggedEvent[]
    try {
      events = await waitForIdle(engine, session.id, timeoutMs)
    } catch (err) {
      throw new Error(`${(err as Error).message}\nworker output:\n${w.output()}`)
    }
    const results = events.filter((e) => e.type === 'user.tool_result') as unknown as { content: { text: string }[]; is_error?: boolean }[]
    expect(results).toHaveLength(2)
    const bashText = results[0].content.map((c) => c.text).join('')
    expect(bashText).toContain('uid=1000 pwd=/workspace')
    expect(bashText).toContain('no-dns')
    expect(results[1].content.map((c) => c.text).join('')).toContain('note')
    return { env, session, w }
  }

  it('runs a session\'s calls in a bubblewrap sandbox of its own and stops cleanly on SIGTERM', async () => {
    const { env, session, w } = await serveOneSession('bubblewrap', 'd1', 60_000)
    expect(w.output()).toContain(`${session.id}: claimed`)
    const stats = await api.beta.environments.work.stats(env.id)
    expect(stats.workers_polling).toBe(1)
    w.child.kill('SIGTERM')
    expect(await w.exited).toBe(0)
    expect(w.output()).toContain('stopped')
  }, 90_000)

  it('two workers on one environment serve 40 sessions: all complete, each item claimed once, each call answered once', async () => {
    const { env, keyFile } = await setUp()
    const agent = await api.beta.agents.create({ name: 'many', model: 'claude-sonnet-4-6', tools: [{ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_allow' } } }] })
    const sessions: string[] = []
    for (let i = 0; i < 40; i++) {
      const s = await api.beta.sessions.create({ agent: agent.id, environment_id: env.id })
      await api.beta.sessions.events.send(s.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: `task ${i}` }] }] })
      sessions.push(s.id)
    }
    const workers = ['w1', 'w2'].map((name) => startWorker(['--url', url, '--environment', env.id, '--key-file', keyFile, '--backend', 'bubblewrap', '--data-dir', join(workerDir, name), '--max-idle', '200']))
    for (let i = 0; i < 200 && (await api.beta.environments.work.stats(env.id)).workers_polling !== 2; i++) await new Promise((r) => setTimeout(r, 100))
    expect((await api.beta.environments.work.stats(env.id)).workers_polling).toBe(2)
    try {
      for (const id of sessions) {
        const events = await waitForIdle(engine, id)
        const uses = events.filter((e) => e.type === 'agent.tool_use').map((e) => (e as unknown as { id: string }).id)
        const answers = events.filter((e) => e.type === 'user.tool_result').map((e) => (e as unknown as { tool_use_id: string }).tool_use_id)
        expect(answers.sort()).toEqual(uses.sort())
        expect(uses).toHaveLength(2)
      }
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${workers.map((w) => w.output().slice(-3000)).join('\n---\n')}`)
    }
    const claims = workers.flatMap((w) => [...w.output().matchAll(/claimed work .*?"work_id":"(work_[A-Za-z0-9]+)"/g)].map((m) => m[1]))
    expect(new Set(claims).size).toBe(claims.length)
    expect(claims.length).toBe(40)
    // both took a share
    for (const w of workers) expect(w.output()).toMatch(/claimed work/)
    for (const w of workers) w.child.kill('SIGTERM')
    for (const w of workers) expect(await w.exited).toBe(0)
  }, 240_000)

  it('exits with the 401 once its key is revoked', async () => {
    const { env, key, keyFile } = await setUp()
    const w = startWorker(['--url', url, '--environment', env.id, '--key-file', keyFile, '--backend', 'bubblewrap', '--data-dir', join(workerDir, 'd2')])
    for (let i = 0; i < 200 && !(await api.beta.environments.work.stats(env.id)).workers_polling; i++) await new Promise((r) => setTimeout(r, 100))
    await fetch(`${url}/v1/corral/environments/${env.id}/keys/${key.id}/revoke`, { method: 'POST', headers: { authorization: 'Bearer test-token' } })
    expect(await w.exited).toBe(1)
    expect(w.output()).toMatch(/401|invalid API token/)
  }, 90_000)

  it.skipIf(!vm.ok)("runs a session's calls in a QEMU VM of its own (--backend vm)", async () => {
    // the worker's first session boots its VM template (≈ 15–20 s under TCG)
    const { session, w } = await serveOneSession('vm', 'vm', 150_000)
    expect(w.output()).toContain(`${session.id}: claimed; starting its vm sandbox`)
    // it stops at once: its VM released, nothing of the template's boot left pending
    const killedAt = Date.now()
    w.child.kill('SIGTERM')
    expect(await w.exited).toBe(0)
    expect(Date.now() - killedAt).toBeLessThan(10_000)
    expect(w.output()).toContain('stopped')
  }, 240_000)

  it('names what is wrong with its arguments', async () => {
    const b = startWorker(['--url', url, '--environment', 'env_x', '--key-file', '/nonexistent', '--backend', 'firecracker'])
    expect(await b.exited).toBe(1)
    expect(b.output()).toContain('--backend must be docker, bubblewrap or vm, got "firecracker"')
    const w = startWorker(['--url', url, '--environment', 'nope', '--key-file', '/nonexistent'])
    expect(await w.exited).toBe(1)
    expect(w.output()).toContain('--environment must be an environment id')
    const k = startWorker(['--url', url, '--environment', 'env_x', '--key-file', '/nonexistent/key'])
    expect(await k.exited).toBe(1)
    expect(k.output()).toContain('--key-file /nonexistent/key: no such file')
  }, 60_000)
})

describe.skipIf(!bwrap.ok)('corral worker faults', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-cwf-'))
  const workerDir = mkdtempSync(join(tmpdir(), 'corral-cwf-worker-'))
  let model: ScriptedModelServer
  let engine: Engine
  let api: Anthropic
  let url: string
  const children: ChildProcess[] = []
  beforeAll(async () => {
    model = await ScriptedModelServer.start((req) => (toolResultsOf(req).length === 0 ? toolCall(req, 'bash', { command: 'sleep 4; echo slow-done' }) : say('finished')))
    // a 3 s lease, so a dead worker's item comes back within the test
    engine = Engine.open({ dataDir, token: 'test-token', env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k' }, harness: { backoffBaseMs: 5, backoffMaxMs: 40 }, workQueue: { leaseTtlSeconds: 3 }, defaultHands: false, log: () => {} })
    url = (await engine.listen(0)).url
    api = new Anthropic({ baseURL: url, apiKey: 'test-token', maxRetries: 0 })
  })
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL')
    await engine.close()
    await model.close()
    rmSync(dataDir, { recursive: true, force: true })
    rmSync(workerDir, { recursive: true, force: true })
  })

  function startWorker(args: string[]): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main/cli/main.ts', 'worker', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ANTHROPIC_API_KEY: '' } })
    children.push(child)
    let out = ''
    child.stdout!.on('data', (b: Buffer) => (out += b.toString()))
    child.stderr!.on('data', (b: Buffer) => (out += b.toString()))
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)))
    return { child, output: () => out, exited }
  }

  it('re-delivers the item of a worker killed -9 mid-call once its lease runs out; the new worker answers the call once', async () => {
    const env = await api.beta.environments.create({ name: 'faults', config: { type: 'self_hosted' } })
    const key = (await (await fetch(`${url}/v1/corral/environments/${env.id}/keys`, { method: 'POST', headers: { authorization: 'Bearer test-token' } })).json()) as { key: string }
    const keyFile = join(workerDir, 'key')
    writeFileSync(keyFile, key.key, { mode: 0o600 })
    const agent = await api.beta.agents.create({ name: 'slow', model: 'claude-sonnet-4-6', tools: [{ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_allow' } } }] })
    const session = await api.beta.sessions.create({ agent: agent.id, environment_id: env.id })
    await api.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'go' }] }] })
    const a = startWorker(['--url', url, '--environment', env.id, '--key-file', keyFile, '--backend', 'bubblewrap', '--data-dir', join(workerDir, 'a'), '--max-idle', '300'])
    for (let i = 0; i < 600 && !a.output().includes('executing tool'); i++) await new Promise((r) => setTimeout(r, 50))
    expect(a.output()).toContain('executing tool')
    a.child.kill('SIGKILL')
    await a.exited
    const workId = /"work_id":"(work_[A-Za-z0-9]+)"/.exec(a.output())![1]
    const b = startWorker(['--url', url, '--environment', env.id, '--key-file', keyFile, '--backend', 'bubblewrap', '--data-dir', join(workerDir, 'b'), '--max-idle', '300'])
    let events: LoggedEvent[]
    try {
      events = await waitForIdle(engine, session.id)
    } catch (err) {
      throw new Error(`${(err as Error).message}\nworker b:\n${b.output()}`)
    }
    const use = events.find((e) => e.type === 'agent.tool_use') as unknown as { id: string }
    const answers = events.filter((e) => e.type === 'user.tool_result' || e.type === 'agent.tool_result') as unknown as { tool_use_id: string; content: { text: string }[] }[]
    expect(answers.map((r) => r.tool_use_id)).toEqual([use.id])
    expect(answers[0].content.map((c) => c.text).join('')).toContain('slow-done')
    // the same item came back to the second worker
    expect(b.output()).toContain(workId)
    b.child.kill('SIGTERM')
    expect(await b.exited).toBe(0)
  }, 120_000)
})

