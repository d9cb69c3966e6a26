import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import { startApiServer, type TestApiServer } from '../support/api-server'
import { ScriptedModelServer, say, toolCall, toolResultsOf, type RecordedRequest, type ScriptStep } from '../support/model-server'
import { RecordingToolRouter } from '../support/harness-tool-router'
import { all, until as waitUntil } from '../support/polling'

// Workflow runs at their edges (issue #12, spec multiagent §6.4, §6.6, §6.8), through the official
// SDK: a lifetime that passes, agents that fail (caught by the program, or not), the 1,000 agents
// of a run, the 10 open runs of a session, and an interrupt while runs are open. The scripted
// model (as the lead) calls ant__workflow_run_start as offered; the run's agents are answered by
// the same scripted model.

const LEAD = 'You are the lead.'
const REVIEWER = 'You review one file.'
const systemOf = (req: RecordedRequest) => req.body.system?.[0]?.text ?? ''
const textOf = (req: RecordedRequest) => JSON.stringify(req.body.messages)
const firstUserText = (req: RecordedRequest) => {
  const c = req.body.messages[0]?.content
  return typeof c === 'string' ? c : ((c as { type: string; text?: string }[] | undefined) ?? []).map((b) => b.text ?? '').join('')
}
const startedRuns = (req: RecordedRequest) => toolResultsOf(req).filter((r) => r.text.includes('workflow_run_id') || r.text.includes('open workflow runs')).length

/** The first start of a case, and what the lead says otherwise. */
const startOnce = (input: Record<string, unknown>) => (req: RecordedRequest) => {
  if (req.body.messages.length === 1) return toolCall(req, 'ant__workflow_run_start', input)
  return say(textOf(req).includes('<workflow_run') ? 'Read the run.' : 'Started.')
}

const leadScript: Record<string, (req: RecordedRequest) => ScriptStep> = {
  'a lifetime': startOnce({ name: 'short-lived', phases: [{ name: 'wait' }], timeout_seconds: 1, program: `return await phase('wait', () => agent('reviewer', 'Review slowly'))` }),
  'a refusal caught': startOnce({
    name: 'catcher',
    program: `try { await agent('reviewer', 'Refuse this') } catch (e) { return { caught: e.message, name: e.name } }
      return 'not caught'`,
  }),
  'a refusal uncaught': startOnce({ name: 'letter', phases: [{ name: 'review' }], program: `return await phase('review', () => agent('reviewer', 'Refuse this'))` }),
  'a thousand agents': startOnce({
    name: 'thousand',
    program: `const out = await Promise.all(Array.from({ length: 1000 }, (_, i) => agent('reviewer', 'Review f' + i)))
      let extra = 'none'
      try { await agent('reviewer', 'Review one too many') } catch (e) { extra = 'caught' }
      return { n: out.length, extra }`,
  }),
  'ten runs': (req) => {
    const n = startedRuns(req)
    if (n < 11 && (req.body.messages.length === 1 || req.body.messages.at(-1)?.role === 'user') && !textOf(req).includes('<workflow_run'))
      return toolCall(req, 'ant__workflow_run_start', { name: `run ${n + 1}`, program: `return await agent('reviewer', 'Review slowly ${n + 1}')` })
    return say('Waiting for the runs.')
  },
  'an interrupt': startOnce({ name: 'unstoppable', program: `return await agent('reviewer', 'Review slowly after the interrupt')` }),
}

let t: TestApiServer
let model: ScriptedModelServer
let client: Anthropic
let dir: string

beforeAll(async () => {
  model = await ScriptedModelServer.start(async (req) => {
    const system = systemOf(req)
    if (system === LEAD) {
      const name = Object.keys(leadScript).find((k) => firstUserText(req).includes(k))
      if (!name) throw new Error(`no lead script for ${firstUserText(req)}`)
      return leadScript[name](req)
    }
    const task = firstUserText(req)
    if (system === REVIEWER && task.startsWith('Review slowly')) return say(`${task}: done`, { delayMs: 2500 })
    if (system === REVIEWER && task === 'Refuse this') return { kind: 'message', blocks: [{ type: 'text', text: 'I will not.' }], stopReason: 'refusal' }
    if (system === REVIEWER) return say(`${task.replace('Review ', '')} ok`)
    throw new Error(`unexpected request: ${system}`)
  })
  dir = mkdtempSync(join(tmpdir(), 'corral-wrun-limits-'))
  t = await startApiServer({
    env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'test-key' },
    toolRouter: new RecordingToolRouter(join(dir, 'effects.log')),
    harness: { backoffBaseMs: 5, backoffMaxMs: 40, stallTimeoutMs: 5000, leaseTtlMs: 3000 },
  })
  client = t.client
})
afterAll(async () => {
  await t?.close()
  await model?.close()
  rmSync(dir, { recursive: true, force: true })
})

type Ev = { id: string; type: string; session_thread_id?: string | null; [k: string]: unknown }

/** This file's waits: up to 30 s by default. */
const until = <T>(what: string, find: () => Promise<T | undefined>, ms = 30_000) => waitUntil(what, find, ms, 50)

const events = async (sid: string) => (await all(client.beta.sessions.events.list(sid, { limit: 1000 }))) as Ev[]

async function leadSession(message: string): Promise<{ sid: string }> {
  const reviewer = await client.beta.agents.create({ name: 'reviewer', model: 'claude-sonnet-4-6', system: REVIEWER })
  const lead = await client.beta.agents.create({
    name: 'lead',
    model: 'claude-sonnet-4-6',
    system: LEAD,
    multiagent: { type: 'multiagent_20261001', workflows: { type: 'enabled', predefined_agents: [reviewer.id] } },
  } as Parameters<typeof client.beta.agents.create>[0])
  const env = await client.beta.environments.create({ name: `wrun ${message}` })
  const session = await client.beta.sessions.create({ agent: lead.id, environment_id: env.id })
  await client.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: message }] }] })
  return { sid: session.id }
}

/**
 * The session's events once it idles with end_turn after every run it saw has ended (spec §6.7).
 * Polls cheaply (the runs' created/ended events and the last event), then lists everything once.
 */
async function whenWorkIsDone(sid: string, ms?: number): Promise<Ev[]> {
  await until(
    'the work to be done',
    async () => {
      const runs = (await all(client.beta.sessions.events.list(sid, { types: ['workflow_run.created', 'workflow_run.status_ended'] }))) as Ev[]
      const created = runs.filter((e) => e.type === 'workflow_run.created').length
      const ended = runs.length - created
      const last = (await client.beta.sessions.events.list(sid, { order: 'desc', limit: 1 })).data[0] as unknown as Ev | undefined
      return created > 0 && created === ended && last?.type === 'session.status_idle' && (last.stop_reason as { type: string }).type === 'end_turn' ? true : undefined
    },
    ms,
  )
  return events(sid)
}

const runEvents = (evs: Ev[], runId?: string) => evs.filter((e) => e.type.startsWith('workflow_run.') && (runId === undefined || e.workflow_run_id === runId))
const readingTurn = (name: string) => model.requests.find((r) => systemOf(r) === LEAD && firstUserText(r) === name && textOf(r).includes('<workflow_run'))

describe('workflow runs at their limits, through the official SDK', () => {
  it('ends a run whose lifetime passes with workflow_run.error then status_ended carrying timeout_error, closing its open phase and archiving its working agent', async () => {
    const { sid } = await leadSession('a lifetime')
    const evs = await whenWorkIsDone(sid)
    const run = runEvents(evs)
    expect(run.map((e) => e.type)).toEqual(['workflow_run.created', 'workflow_run.status_running', 'workflow_run.phase_started', 'workflow_run.phase_ended', 'workflow_run.error', 'workflow_run.status_ended'])
    const error = { type: 'timeout_error', message: 'the run reached its lifetime of 1 s' }
    expect(run[3]).toMatchObject({ workflow_run_phase_id: run[2].workflow_run_phase_id, phase_started_id: run[2].id })
    expect(run[4]).toMatchObject({ workflow_run_id: run[0].workflow_run_id, error })
    expect(run[5]).toMatchObject({ workflow_run_id: run[0].workflow_run_id, result: { type: 'error', error } })
    // (processed_at is wall-clock time to the ms; Node's timers run on a loop clock a ms coarse: a
    // lifetime of 1,000 ms can end 999 ms after the creation's stamp, never earlier)
    expect(Date.parse(run[5].processed_at as string) - Date.parse(run[0].processed_at as string)).toBeGreaterThanOrEqual(999)
    // the agent still working was stopped and archived; its late answer is nobody's output
    const [thread] = (await all(client.beta.sessions.threads.list(sid))).filter((x) => x.workflow_run_id === run[0].workflow_run_id)
    expect(thread).toMatchObject({ status: 'terminated', archived_at: expect.any(String) })
    expect(run[5].output).toBeUndefined()
    expect(textOf(readingTurn('a lifetime')!)).toContain('timeout_error')
  }, 30_000)

  it("rejects the program's agent() call when the agent's thread fails, and a program that catches it completes with what it made of the error", async () => {
    const { sid } = await leadSession('a refusal caught')
    const evs = await whenWorkIsDone(sid)
    const run = runEvents(evs)
    expect(run.map((e) => e.type)).toEqual(['workflow_run.created', 'workflow_run.status_running', 'workflow_run.status_ended'])
    expect(run[2]).toMatchObject({ result: { type: 'completed' } })
    const thread = evs.find((e) => e.type === 'session.thread_created' && e.workflow_run_id === run[0].workflow_run_id)!
    const tid = thread.session_thread_id as string
    expect(run[2].output).toEqual({ caught: `agent thread ${tid} (reviewer) failed: the model refused the task`, name: 'AgentError' })
    // the failed thread: refused, then archived by Corral
    const own = evs.filter((e) => e.session_thread_id === tid)
    expect(own.map((e) => e.type)).toEqual(['session.thread_created', 'session.thread_status_running', 'session.thread_status_idle', 'session.thread_status_terminated'])
    expect(own[2]).toMatchObject({ stop_reason: { type: 'refusal' } })
  }, 30_000)

  it('ends a run with program_error naming the failed agent thread when the program lets the failure end it', async () => {
    const { sid } = await leadSession('a refusal uncaught')
    const evs = await whenWorkIsDone(sid)
    const run = runEvents(evs)
    expect(run.map((e) => e.type)).toEqual(['workflow_run.created', 'workflow_run.status_running', 'workflow_run.phase_started', 'workflow_run.phase_ended', 'workflow_run.error', 'workflow_run.status_ended'])
    const tid = evs.find((e) => e.type === 'session.thread_created' && e.workflow_run_id === run[0].workflow_run_id)!.session_thread_id as string
    const error = { type: 'program_error', message: `AgentError: agent thread ${tid} (reviewer) failed: the model refused the task` }
    expect(run[4]).toMatchObject({ error })
    expect(run[5]).toMatchObject({ result: { type: 'error', error } })
    expect(textOf(readingTurn('a refusal uncaught')!)).toContain(`program_error: AgentError: agent thread ${tid}`)
  }, 30_000)

  it('refuses an 11th open run with a tool error and workflow_run.error max_workflow_runs_error with a null run id, and the ten open runs complete', async () => {
    const { sid } = await leadSession('ten runs')
    const evs = await whenWorkIsDone(sid, 60_000)
    const created = evs.filter((e) => e.type === 'workflow_run.created')
    expect(created).toHaveLength(10)
    const refused = evs.filter((e) => e.type === 'workflow_run.error' && e.workflow_run_id === null)
    expect(refused).toHaveLength(1)
    const message = 'This session already has 10 open workflow runs, the most it may have at once; wait for one to end or stop one.'
    expect(refused[0]).toMatchObject({ workflow_run_id: null, error: { type: 'max_workflow_runs_error', message } })
    // refused while the ten were open: after the 10th created and before any run ended
    const at = (e: Ev) => evs.indexOf(e)
    expect(at(refused[0])).toBeGreaterThan(at(created[9]))
    expect(at(refused[0])).toBeLessThan(evs.findIndex((e) => e.type === 'workflow_run.status_ended'))
    // the model saw the refusal as its tool's error
    const after = model.requests.find((r) => systemOf(r) === LEAD && firstUserText(r) === 'ten runs' && startedRuns(r) === 11)!
    const last = toolResultsOf(after).at(-1)!
    expect(last).toMatchObject({ is_error: true, text: `ant__workflow_run_start: ${message}` })
    for (const c of created) expect(runEvents(evs, c.workflow_run_id as string).at(-1)).toMatchObject({ type: 'workflow_run.status_ended', result: { type: 'completed' } })
  }, 90_000)

  it('ends no run on user.interrupt: its thread keeps working, is never interrupted, and the run completes after the interrupt', async () => {
    const { sid } = await leadSession('an interrupt')
    const runId = await until('the run to start', async () => (await events(sid)).find((e) => e.type === 'session.thread_created' && e.workflow_run_id)?.workflow_run_id as string | undefined)
    await until('the lead to idle', async () => ((await events(sid)).some((e) => e.type === 'agent.message' && !e.session_thread_id) ? true : undefined))
    await client.beta.sessions.events.send(sid, { events: [{ type: 'user.interrupt' }] })
    const evs = await until('the run to end', async () => {
      const list = await events(sid)
      return list.some((e) => e.type === 'workflow_run.status_ended') && list.at(-1)?.type === 'session.status_idle' ? list : undefined
    })
    const interruptAt = evs.findIndex((e) => e.type === 'user.interrupt')
    expect(interruptAt).toBeGreaterThan(0)
    const run = runEvents(evs, runId)
    expect(run.map((e) => e.type)).toEqual(['workflow_run.created', 'workflow_run.status_running', 'workflow_run.status_ended'])
    expect(run[2]).toMatchObject({ result: { type: 'completed' }, output: 'Review slowly after the interrupt: done' })
    expect(evs.indexOf(run[2])).toBeGreaterThan(interruptAt)
    // the run's thread was never interrupted: it answered and was archived
    const tid = evs.find((e) => e.type === 'session.thread_created' && e.workflow_run_id === runId)!.session_thread_id
    const own = evs.filter((e) => e.session_thread_id === tid)
    expect(own.map((e) => e.type)).toEqual(['session.thread_created', 'session.thread_status_running', 'session.thread_status_idle', 'session.thread_status_terminated'])
    expect(own[2]).toMatchObject({ stop_reason: { type: 'end_turn' } })
    const answered = model.requests.filter((r) => systemOf(r) === REVIEWER && firstUserText(r) === 'Review slowly after the interrupt')
    expect(answered).toHaveLength(1)
  }, 30_000)

  it('ends a run at its 1,001st agent() call with thread_limit_error the program cannot catch, after its thousand agents answered', async () => {
    const { sid } = await leadSession('a thousand agents')
    const evs = await whenWorkIsDone(sid, 240_000)
    const run = runEvents(evs)
    expect(run.map((e) => e.type)).toEqual(['workflow_run.created', 'workflow_run.status_running', 'workflow_run.error', 'workflow_run.status_ended'])
    const error = { type: 'thread_limit_error', message: expect.stringContaining('more than 1000 agents') }
    expect(run[2]).toMatchObject({ error })
    expect(run[3]).toMatchObject({ result: { type: 'error', error } })
    // not caught: the program returned nothing
    expect(run[3].output).toBeUndefined()
    const threads = evs.filter((e) => e.type === 'session.thread_created' && e.workflow_run_id === run[0].workflow_run_id)
    expect(threads).toHaveLength(1000)
    expect(model.requests.filter((r) => systemOf(r) === REVIEWER && firstUserText(r) === 'Review one too many')).toHaveLength(0)
  }, 300_000)
})
