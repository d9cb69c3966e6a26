import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import { startApiServer, type TestApiServer } from '../support/api-server'
import { ScriptedModelServer, say, toolCall, type RecordedRequest, type ScriptStep } from '../support/model-server'
import { RecordingToolRouter } from '../support/harness-tool-router'
import { primaryThreadId } from '../../src/shared/api/ids'
import { all, until } from '../support/polling'

// What an open workflow run blocks (spec multiagent §6.9) and how the session budget pauses and
// resumes runs (§9), through the official SDK with the scripted model as the lead and as the
// run's agents. Costs: a response of 200k output tokens is $3.00 at Sonnet's list price.

const LEAD = 'You are the lead.'
const REVIEWER = 'You review one file.'
const BIG = { input_tokens: 10, output_tokens: 200_000 } // 300 cents
const SMALL = { input_tokens: 10, output_tokens: 10 }
const systemOf = (req: RecordedRequest) => req.body.system?.[0]?.text ?? ''
const textOf = (req: RecordedRequest) => JSON.stringify(req.body.messages)
const firstUserText = (req: RecordedRequest) => {
  const c = req.body.messages[0]?.content
  return typeof c === 'string' ? c : ((c as { type: string; text?: string }[] | undefined) ?? []).map((b) => b.text ?? '').join('')
}

/** The lead starts one run with this program on its first request, then says something small. */
const PROGRAMS: Record<string, string> = {
  'a slow run': `return await phase('wait', () => agent('reviewer', 'Review slowly', { label: 'slow' }))`,
  'a run at the budget': `const first = await phase('expensive', () => agent('reviewer', 'Review expensively'))
    const second = await phase('after', () => agent('reviewer', 'Review after the budget'))
    return { first, second }`,
}

let t: TestApiServer
let model: ScriptedModelServer
let client: Anthropic
let dir: string
let leadId: string
let envId: string

beforeAll(async () => {
  model = await ScriptedModelServer.start(async (req): Promise<ScriptStep> => {
    const system = systemOf(req)
    if (system === LEAD) {
      const name = Object.keys(PROGRAMS).find((k) => firstUserText(req).startsWith(k))
      if (!name) throw new Error(`no lead script for ${firstUserText(req)}`)
      const lifetime = firstUserText(req).includes('(lifetime)') ? { timeout_seconds: 2 } : {}
      if (req.body.messages.length === 1) return { ...toolCall(req, 'ant__workflow_run_start', { name, phases: [{ name: 'wait' }], program: PROGRAMS[name], ...lifetime }), usage: SMALL } as ScriptStep
      return { ...say(textOf(req).includes('<workflow_run') ? 'Read the run.' : 'Started.'), usage: SMALL } as ScriptStep
    }
    const task = firstUserText(req)
    if (system === REVIEWER && task === 'Review slowly') return say('slowly done', { delayMs: 1500 })
    if (system === REVIEWER && task === 'Review expensively') return { ...say('expensive answer', { delayMs: 300 }), usage: BIG } as ScriptStep
    if (system === REVIEWER) return { ...say(`${task}: ok`), usage: SMALL } as ScriptStep
    throw new Error(`unexpected request: ${system}`)
  })
  dir = mkdtempSync(join(tmpdir(), 'corral-wrun-open-'))
  t = await startApiServer({
    env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'test-key' },
    toolRouter: new RecordingToolRouter(join(dir, 'effects.log')),
    harness: { backoffBaseMs: 5, backoffMaxMs: 40, stallTimeoutMs: 5000, leaseTtlMs: 3000 },
  })
  client = t.client
  const reviewer = await client.beta.agents.create({ name: 'reviewer', model: 'claude-sonnet-4-6', system: REVIEWER })
  leadId = (
    await client.beta.agents.create({
      name: 'lead',
      model: 'claude-sonnet-4-6',
      system: LEAD,
      multiagent: { type: 'multiagent_20261001', workflows: { type: 'enabled', predefined_agents: [reviewer.id] } },
    } as Parameters<typeof client.beta.agents.create>[0])
  ).id
  envId = (await client.beta.environments.create({ name: 'wrun open' })).id
})
afterAll(async () => {
  await t?.close()
  await model?.close()
  rmSync(dir, { recursive: true, force: true })
})

type Ev = { id: string; type: string; session_thread_id?: string | null; [k: string]: unknown }


const events = async (sid: string) => (await all(client.beta.sessions.events.list(sid, { limit: 1000 }))) as Ev[]
const budget = (amount: string) => ({ type: 'limit' as const, max_list_cost: { amount, currency: 'USD' as const } })

async function leadSession(message: string, extra: { budget?: ReturnType<typeof budget> } = {}): Promise<string> {
  const session = await client.beta.sessions.create({ agent: leadId, environment_id: envId, ...extra })
  await client.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: message }] }] })
  return session.id
}

/** The run's first agent thread once it exists (the run is then open and running). */
async function runThread(sid: string): Promise<{ runId: string; tid: string }> {
  const created = await until('a run thread', async () => (await events(sid)).find((e) => e.type === 'session.thread_created' && e.workflow_run_id))
  return { runId: created.workflow_run_id as string, tid: created.session_thread_id as string }
}

async function rejection(p: Promise<unknown>): Promise<InstanceType<typeof Anthropic.APIError>> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(Anthropic.APIError)
  return err as InstanceType<typeof Anthropic.APIError>
}
const errorOf = (err: InstanceType<typeof Anthropic.APIError>) => (err.error as { error: { type: string; message: string; details?: { error_code?: string } } }).error

/** A session paused at its budget with its run idle: the run's events up to the session's budget idle. */
async function pausedAtBudget(message: string): Promise<{ sid: string; runId: string }> {
  const sid = await leadSession(message, { budget: budget('250') })
  const runId = (await until('the run to pause', async () => {
    const evs = await events(sid)
    const idle = evs.find((e) => e.type === 'workflow_run.status_idle')
    return idle && evs.at(-1)?.type === 'session.status_idle' && (evs.at(-1)!.stop_reason as { type: string }).type === 'budget_reached' ? idle : undefined
  })).workflow_run_id as string
  return { sid, runId }
}

describe('what an open workflow run blocks (spec §6.9), through the official SDK', () => {
  it("refuses to update the session's agent while a run is open with 400 workflow_run_open, rejecting the whole request", async () => {
    const sid = await leadSession('a slow run (agent update)')
    const { runId } = await runThread(sid)
    const before = await client.beta.sessions.retrieve(sid)
    const err = await rejection(client.beta.sessions.update(sid, { title: 'renamed', agent: { tools: [] } } as Parameters<typeof client.beta.sessions.update>[1]))
    expect(err.status).toBe(400)
    expect(errorOf(err)).toMatchObject({ type: 'invalid_request_error', details: { error_code: 'workflow_run_open' }, message: expect.stringContaining(runId) })
    expect(errorOf(err).message).toMatch(/^agent: /)
    const after = await client.beta.sessions.retrieve(sid)
    expect(after.title).toBe(before.title)
    expect(after.agent).toEqual(before.agent)
    expect((await events(sid)).some((e) => e.type === 'session.updated')).toBe(false)
    // the title alone is fine, and the agent once every run has ended
    expect((await client.beta.sessions.update(sid, { title: 'renamed' })).title).toBe('renamed')
    await until('the run to end', async () => ((await events(sid)).some((e) => e.type === 'workflow_run.status_ended') ? true : undefined))
    const updated = await client.beta.sessions.update(sid, { agent: { tools: [] } } as Parameters<typeof client.beta.sessions.update>[1])
    expect(updated.agent.tools).toEqual([])
  }, 30_000)

  it("refuses to archive a run's thread while its run is open with 400 workflow_run_open; once Corral archived it, the archive answers the thread as it is", async () => {
    const sid = await leadSession('a slow run (thread archive)')
    const { runId, tid } = await runThread(sid)
    const err = await rejection(client.beta.sessions.threads.archive(tid, { session_id: sid }))
    expect(err.status).toBe(400)
    expect(errorOf(err)).toMatchObject({ type: 'invalid_request_error', details: { error_code: 'workflow_run_open' }, message: expect.stringContaining(runId) })
    expect((await client.beta.sessions.threads.retrieve(tid, { session_id: sid })).archived_at).toBeNull()
    await until('the run to end', async () => ((await events(sid)).some((e) => e.type === 'workflow_run.status_ended') ? true : undefined))
    const thread = await until('its archive', async () => {
      const x = await client.beta.sessions.threads.retrieve(tid, { session_id: sid })
      return x.archived_at ? x : undefined
    })
    expect(await client.beta.sessions.threads.archive(tid, { session_id: sid })).toMatchObject({ id: tid, status: 'terminated', archived_at: thread.archived_at })
  }, 30_000)

  it('refuses to archive or delete the session while a run is running with 400 workflow_run_open naming the run, and keeps the session as it was', async () => {
    const sid = await leadSession('a slow run (session archive)')
    const { runId } = await runThread(sid)
    for (const attempt of [client.beta.sessions.archive(sid), client.beta.sessions.delete(sid)]) {
      const err = await rejection(attempt)
      expect(err.status).toBe(400)
      expect(errorOf(err)).toMatchObject({ type: 'invalid_request_error', details: { error_code: 'workflow_run_open' } })
      expect(errorOf(err).message).toContain(`workflow run ${runId} is running`)
    }
    const s = await client.beta.sessions.retrieve(sid)
    expect(s.archived_at).toBeNull()
    // the run goes on and completes
    await until('the run to complete', async () => ((await events(sid)).find((e) => e.type === 'workflow_run.status_ended' && (e.result as { type: string }).type === 'completed') ? true : undefined))
  }, 30_000)

  it('archives a session whose runs are all idle (paused at the budget) and ends each with stopped: its end events are listed, not streamed', async () => {
    const { sid, runId } = await pausedAtBudget('a run at the budget (archive)')
    const controller = new AbortController()
    const streamed: Ev[] = []
    const stream = await client.beta.sessions.events.stream(sid, {}, { signal: controller.signal })
    const reading = (async () => {
      try {
        for await (const e of stream) streamed.push(e as unknown as Ev)
      } catch {
        // aborted
      }
    })()
    const archived = await client.beta.sessions.archive(sid)
    expect(archived.archived_at).toEqual(expect.any(String))
    const evs = await until('the run threads archived', async () => {
      const list = await events(sid)
      const ended = list.findIndex((e) => e.type === 'workflow_run.status_ended')
      return ended > 0 && list.slice(ended).some((e) => e.type === 'session.thread_status_terminated') ? list : undefined
    })
    const run = evs.filter((e) => e.workflow_run_id === runId && e.type.startsWith('workflow_run.'))
    expect(run.slice(-2).map((e) => e.type)).toEqual(['workflow_run.phase_ended', 'workflow_run.status_ended'])
    const phase = run.filter((e) => e.type === 'workflow_run.phase_started').at(-1)!
    expect(run.at(-2)).toMatchObject({ workflow_run_phase_id: phase.workflow_run_phase_id, phase_started_id: phase.id })
    expect(run.at(-1)).toMatchObject({ result: { type: 'stopped' } })
    // the stream carried what came after (the paused thread's archive) but not the run's end
    await until('the thread archive on the stream', async () => (streamed.some((e) => e.type === 'session.thread_status_terminated') ? true : undefined))
    expect(streamed.filter((e) => e.type.startsWith('workflow_run.'))).toEqual([])
    controller.abort()
    await reading
    // no reading turn: the lead is never asked again after the archive
    expect(model.requests.some((r) => systemOf(r) === LEAD && firstUserText(r).includes('(archive)') && textOf(r).includes('<workflow_run'))).toBe(false)
  }, 30_000)

  it('deletes a session whose runs are all idle: it is gone, and no run event of it remains', async () => {
    const { sid, runId } = await pausedAtBudget('a run at the budget (delete)')
    expect(t.engine.brains.workflowRuns?.activeRuns()).toContain(runId)
    expect(await client.beta.sessions.delete(sid)).toMatchObject({ id: sid, type: 'session_deleted' })
    expect((await rejection(client.beta.sessions.retrieve(sid))).status).toBe(404)
    expect((await rejection(client.beta.sessions.events.list(sid))).status).toBe(404)
    // its run is executed no more
    expect(t.engine.brains.workflowRuns?.activeRuns()).not.toContain(runId)
  }, 30_000)
})

describe('the session budget and open workflow runs (spec §9), through the official SDK', () => {
  it('pauses a running run at the budget (its status_idle before session.usage and the budget idle), makes no model request for its agents while paused, and a raise resumes it to completion', async () => {
    const { sid, runId } = await pausedAtBudget('a run at the budget (raise)')
    const paused = await events(sid)
    const idleAt = paused.findIndex((e) => e.type === 'workflow_run.status_idle')
    // the run's second agent paused at the budget before asking the model; then the run, the usage, the session idle
    const second = paused.find((e) => e.type === 'session.thread_created' && e.workflow_run_id === runId && paused.some((x) => x.session_thread_id === e.session_thread_id && x.type === 'session.thread_status_idle' && (x.stop_reason as { type: string }).type === 'budget_reached'))!
    const secondIdle = paused.findIndex((e) => e.session_thread_id === second.session_thread_id && e.type === 'session.thread_status_idle')
    expect(paused.slice(secondIdle, secondIdle + 4).map((e) => e.type)).toEqual(['session.thread_status_idle', 'workflow_run.status_idle', 'session.usage', 'session.status_idle'])
    expect(idleAt).toBe(secondIdle + 1)
    expect(paused[idleAt]).toEqual({ id: expect.any(String), type: 'workflow_run.status_idle', workflow_run_id: runId, processed_at: expect.any(String) })
    expect(paused.at(-1)).toMatchObject({ type: 'session.status_idle', stop_reason: { type: 'budget_reached' } })
    expect((await client.beta.sessions.retrieve(sid)).status).toBe('idle')
    const asked = () => model.requests.filter((r) => systemOf(r) === REVIEWER && firstUserText(r) === 'Review after the budget').length
    expect(asked()).toBe(0)
    await new Promise((r) => setTimeout(r, 300))
    expect(asked()).toBe(0)

    // raise: session.updated with the budget, then the run's status_running; the run completes, the lead reads it, the work is done
    const raised = budget('2000')
    await client.beta.sessions.update(sid, { budget: raised })
    const evs = await until('the work to be done', async () => {
      const list = await events(sid)
      const last = list.at(-1)
      return list.some((e) => e.type === 'workflow_run.status_ended') && last?.type === 'session.status_idle' && (last.stop_reason as { type: string }).type === 'end_turn' ? list : undefined
    })
    const updatedAt = evs.findIndex((e) => e.type === 'session.updated')
    expect(evs[updatedAt]).toMatchObject({ budget: raised })
    expect(evs[updatedAt + 1]).toMatchObject({ type: 'workflow_run.status_running', workflow_run_id: runId })
    const run = evs.filter((e) => e.workflow_run_id === runId && e.type.startsWith('workflow_run.'))
    expect(run.map((e) => e.type)).toEqual([
      'workflow_run.created',
      'workflow_run.status_running',
      'workflow_run.phase_started',
      'workflow_run.phase_ended',
      'workflow_run.phase_started',
      'workflow_run.status_idle',
      'workflow_run.status_running',
      'workflow_run.phase_ended',
      'workflow_run.status_ended',
    ])
    expect(run.at(-1)).toMatchObject({ result: { type: 'completed' }, output: { first: 'expensive answer', second: 'Review after the budget: ok' } })
    expect(asked()).toBe(1)
  }, 40_000)

  it('lets the lifetime of a run paused at the budget run out: it ends with timeout_error from idle, with no status_running before its end', async () => {
    const { sid, runId } = await pausedAtBudget('a run at the budget (lifetime)')
    const asked = () => model.requests.filter((r) => systemOf(r) === REVIEWER && firstUserText(r) === 'Review after the budget').length
    const askedBefore = asked()
    const evs = await until('the run to end', async () => {
      const list = await events(sid)
      return list.some((e) => e.type === 'workflow_run.status_ended') ? list : undefined
    })
    const run = evs.filter((e) => e.workflow_run_id === runId && e.type.startsWith('workflow_run.'))
    const idleAt = run.findIndex((e) => e.type === 'workflow_run.status_idle')
    expect(run.slice(idleAt).map((e) => e.type)).toEqual(['workflow_run.status_idle', 'workflow_run.phase_ended', 'workflow_run.error', 'workflow_run.status_ended'])
    expect(run.at(-1)).toMatchObject({ result: { type: 'error', error: { type: 'timeout_error', message: 'the run reached its lifetime of 2 s' } } })
    // the paused agent never asked the model; the session stays paused at its budget
    expect(asked()).toBe(askedBefore)
    // the lead's reading turn waits at the budget too: the session stays idle at budget_reached
    await until('the lead to pause', async () => {
      const list = await events(sid)
      const endedAt = list.findIndex((x) => x.type === 'workflow_run.status_ended')
      return list.slice(endedAt).some((e) => e.type === 'session.thread_status_idle' && e.session_thread_id === primaryThreadId(sid) && (e.stop_reason as { type: string }).type === 'budget_reached') ? true : undefined
    })
    expect((await client.beta.sessions.retrieve(sid)).status).toBe('idle')
    const last = (await events(sid)).filter((e) => e.type === 'session.status_idle').at(-1)
    expect(last).toMatchObject({ stop_reason: { type: 'budget_reached' } })
  }, 30_000)
})
