import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import { startApiServer, type TestApiServer } from '../../support/api-server'
import { ScriptedModelServer, say, systemOf, toolCall, type RecordedRequest } from '../../support/model-server'
import { RecordingToolRouter } from '../../support/harness-tool-router'
import { all, until as waitUntil } from '../../support/polling'

// A workflow run survives a restart of the engine (issue #12, docs/workflows.md): the second
// engine replays the program from its journal in the same SQLite file; agents that had finished
// are not asked again, the run completes with the output an uninterrupted run gives, and no
// phase event is written twice.

const LEAD = 'You are the lead.'
const WORKER = 'You square numbers.'
const PROGRAM = `
  const squares = await phase('square', () => Promise.all(args.n.map((i) => agent('worker', 'square ' + i))))
  const total = await phase('sum', async () => squares.map(Number).reduce((a, b) => a + b, 0))
  return { squares, total }
`
const firstUserText = (req: RecordedRequest) => {
  const c = req.body.messages[0]?.content
  return typeof c === 'string' ? c : ((c as { text?: string }[] | undefined) ?? []).map((b) => b.text ?? '').join('')
}

const dirs: string[] = []
let model: ScriptedModelServer | undefined
afterAll(async () => {
  await model?.close()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

type Ev = { id: string; type: string; [k: string]: unknown }
/** This file's waits: up to 30 s by default. */
const until = <T>(what: string, find: () => Promise<T | undefined>, ms = 30_000) => waitUntil(what, find, ms, 25)

describe('a workflow run across a restart of the engine', () => {
  it('replays the program from its journal: finished agents are not asked again, the output is the uninterrupted one, no phase event twice', async () => {
    model = await ScriptedModelServer.start(async (req) => {
      if (systemOf(req) === LEAD) {
        if (req.body.messages.length === 1) return toolCall(req, 'ant__workflow_run_start', { name: 'squares', phases: [{ name: 'square' }, { name: 'sum' }], args: { n: [1, 2, 3, 4, 5, 6] }, program: PROGRAM })
        return say(JSON.stringify(req.body.messages).includes('<workflow_run') ? 'Read the result.' : 'Started.')
      }
      const n = Number(firstUserText(req).replace('square ', ''))
      // later agents are slow, so the engine stops while they work
      return say(String(n * n), { delayMs: n <= 2 ? 0 : 1500 })
    })
    const dataDir = mkdtempSync(join(tmpdir(), 'corral-wrun-replay-'))
    dirs.push(dataDir)
    const token = 'test_wrun_replay'
    const config = {
      dataDir,
      token,
      env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'test-key' },
      toolRouter: new RecordingToolRouter(join(dataDir, 'effects.log')),
      harness: { backoffBaseMs: 5, backoffMaxMs: 40, stallTimeoutMs: 5000, leaseTtlMs: 1000, workflows: { maxConcurrentAgents: 3 } },
    }
    let t: TestApiServer = await startApiServer(config)
    // the engine takes our token (startApiServer's client has one of its own)
    const clientOf = (server: TestApiServer) => new Anthropic({ baseURL: server.url, apiKey: token, maxRetries: 0, timeout: 20_000 })
    let client: Anthropic = clientOf(t)
    const worker = await client.beta.agents.create({ name: 'worker', model: 'claude-sonnet-4-6', system: WORKER })
    const lead = await client.beta.agents.create({
      name: 'lead',
      model: 'claude-sonnet-4-6',
      system: LEAD,
      multiagent: { type: 'multiagent_20261001', workflows: { type: 'enabled', predefined_agents: [worker.id] } },
    } as Parameters<typeof client.beta.agents.create>[0])
    const env = await client.beta.environments.create({ name: 'replay' })
    const session = await client.beta.sessions.create({ agent: lead.id, environment_id: env.id })
    const sid = session.id
    await client.beta.sessions.events.send(sid, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'Square them.' }] }] })

    // two agents done (archived), slower ones still working: stop the engine
    await until('two finished agents', async () => {
      const evs = (await all(client.beta.sessions.events.list(sid))) as Ev[]
      return evs.filter((e) => e.type === 'session.thread_status_terminated' && e.archived === true).length >= 2 ? true : undefined
    })
    const doneBefore = model.requests.filter((r) => systemOf(r) === WORKER && ['square 1', 'square 2'].includes(firstUserText(r))).length
    expect(doneBefore).toBe(2)
    await t.engine.close()

    t = await startApiServer(config)
    client = clientOf(t)
    const evs = await until('the work to be done', async () => {
      const list = (await all(client.beta.sessions.events.list(sid))) as Ev[]
      const last = list.at(-1)
      return list.some((e) => e.type === 'workflow_run.status_ended') && last?.type === 'session.status_idle' ? list : undefined
    })
    await t.close()

    const run = evs.filter((e) => e.type.startsWith('workflow_run.')).map((e) => e.type)
    expect(run).toEqual(['workflow_run.created', 'workflow_run.status_running', 'workflow_run.phase_started', 'workflow_run.phase_ended', 'workflow_run.phase_started', 'workflow_run.phase_ended', 'workflow_run.status_ended'])
    const ended = evs.find((e) => e.type === 'workflow_run.status_ended') as Ev & { result: unknown; output: unknown }
    expect(ended.result).toEqual({ type: 'completed' })
    expect(ended.output).toEqual({ squares: ['1', '4', '9', '16', '25', '36'], total: 91 })
    // the agents that had finished were asked once; every agent has one thread, archived once
    for (const p of ['square 1', 'square 2']) expect(model.requests.filter((r) => systemOf(r) === WORKER && firstUserText(r) === p)).toHaveLength(1)
    const created = evs.filter((e) => e.type === 'session.thread_created' && e.workflow_run_id)
    expect(created).toHaveLength(6)
    for (const c of created) expect(evs.filter((e) => e.type === 'session.thread_status_terminated' && e.session_thread_id === c.session_thread_id)).toHaveLength(1)
  }, 90_000)
})
