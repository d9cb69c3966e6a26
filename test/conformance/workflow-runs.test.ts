import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import { startApiServer, type TestApiServer } from '../support/api-server'
import { ScriptedModelServer, say, toolCall, toolResultsOf, type RecordedRequest, type ScriptStep } from '../support/model-server'
import { RecordingToolRouter } from '../support/harness-tool-router'
import { primaryThreadId } from '../../src/shared/api/ids'
import { all, until } from '../support/polling'

// Workflow runs end to end (issue #12, spec multiagent §6): the scripted model (as the lead)
// calls ant__workflow_run_start as offered; Corral runs the program, its agents are answered by
// the same scripted model, and the client sees the run only through the official SDK.

const LEAD = 'You are the lead.'
const REVIEWER = 'You review one file.'
const WRITER = 'You summarise reviews.'
const systemOf = (req: RecordedRequest) => req.body.system?.[0]?.text ?? ''
const textOf = (req: RecordedRequest) => JSON.stringify(req.body.messages)
const firstUserText = (req: RecordedRequest) => {
  const c = req.body.messages[0]?.content
  return typeof c === 'string' ? c : ((c as { type: string; text?: string }[] | undefined) ?? []).map((b) => b.text ?? '').join('')
}

const FAN_OUT = `
  const reviews = await phase('review', () => Promise.all(args.files.map((f) => agent('reviewer', 'Review ' + f, { label: f }))))
  log('reviewed', reviews.length, 'files')
  const summary = await phase('summarise', () => agent({ name: 'writer', system: ${JSON.stringify(WRITER)} }, 'Summarise: ' + reviews.join(' / ')))
  return { summary, reviews }
`

/** What the lead does per test: the first user message names the case. */
const leadScript: Record<string, (req: RecordedRequest) => ScriptStep> = {
  'fan out': (req) => {
    if (req.body.messages.length === 1)
      return toolCall(req, 'ant__workflow_run_start', { name: 'review files', description: 'reviews three files', phases: [{ name: 'review' }, { name: 'summarise', description: 'one summary' }], args: { files: ['a.ts', 'b.ts', 'c.ts'] }, program: FAN_OUT })
    if (textOf(req).includes('<workflow_run')) return say('The run is done.')
    return say('Started a workflow run.')
  },
  'a program that throws': (req) => {
    if (req.body.messages.length === 1) return toolCall(req, 'ant__workflow_run_start', { name: 'thrower', program: `await phase('only', async () => { throw new Error('nothing to review') })` })
    if (textOf(req).includes('<workflow_run')) return say('It failed.')
    return say('Started.')
  },
  'stop it': (req) => {
    if (req.body.messages.length === 1) return toolCall(req, 'ant__workflow_run_start', { name: 'slow', phases: [{ name: 'wait' }], program: `return await phase('wait', () => agent('reviewer', 'Review slowly'))` })
    const started = toolResultsOf(req).find((r) => r.text.includes('workflow_run_id') && !r.text.includes('stopped'))
    if (started && req.body.messages.length === 3) return toolCall(req, 'ant__workflow_run_stop', { workflow_run_id: JSON.parse(started.text).workflow_run_id })
    return say(textOf(req).includes('<workflow_run') ? 'It was stopped.' : 'Stopping.')
  },
  'logs and routes': (req) => {
    if (req.body.messages.length === 1)
      return toolCall(req, 'ant__workflow_run_start', {
        name: 'logger',
        phases: [{ name: 'count' }, { name: 'never' }],
        program: `await phase('count', async () => { for (let i = 1; i <= 150; i++) log('line', i, { i }) })
          let failed = null
          try { await agent('nobody', 'Review nothing') } catch (e) { failed = String(e.message) }
          const a = await agent('reviewer', 'Review x.ts', { label: 'x.ts' })
          return { a, failed }`,
      })
    return say(textOf(req).includes('<workflow_run') ? 'Logged.' : 'Started.')
  },
  'a syntax error': (req) => {
    if (req.body.messages.length === 1) return toolCall(req, 'ant__workflow_run_start', { name: 'broken', program: 'const a = 1\nconst b = (2 +;\n' })
    return say('The program did not parse.')
  },
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
    if (system === REVIEWER && firstUserText(req) === 'Review slowly') return say('too late', { delayMs: 4000 })
    if (system === REVIEWER) return say(`${firstUserText(req).replace('Review ', '')} looks fine`)
    if (system === WRITER) return say(`summary of ${firstUserText(req).length} characters`)
    throw new Error(`unexpected request: ${system}`)
  })
  dir = mkdtempSync(join(tmpdir(), 'corral-wrun-'))
  t = await startApiServer({
    env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'test-key' },
    toolRouter: new RecordingToolRouter(join(dir, 'effects.log')),
    harness: { backoffBaseMs: 5, backoffMaxMs: 40, stallTimeoutMs: 2000, leaseTtlMs: 3000 },
  })
  client = t.client
})
afterAll(async () => {
  await t?.close()
  await model?.close()
  rmSync(dir, { recursive: true, force: true })
})

type Ev = { id: string; type: string; session_thread_id?: string | null; [k: string]: unknown }


async function leadSession(message: string): Promise<{ sid: string; reviewerId: string }> {
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
  return { sid: session.id, reviewerId: reviewer.id }
}

/** The lead's request that read a run's end, in the session whose first message names the case. */
const readingTurn = (name: string) => model.requests.find((r) => systemOf(r) === LEAD && firstUserText(r) === name && textOf(r).includes('<workflow_run'))!

/** The session's events once it idles with end_turn after every run it saw has ended (spec §6.7). */
async function whenWorkIsDone(sid: string): Promise<Ev[]> {
  return until('the work to be done', async () => {
    const evs = (await all(client.beta.sessions.events.list(sid))) as Ev[]
    const created = evs.filter((e) => e.type === 'workflow_run.created').length
    const ended = evs.filter((e) => e.type === 'workflow_run.status_ended').length
    const last = evs.at(-1)
    return created === ended && last?.type === 'session.status_idle' && (last.stop_reason as { type: string }).type === 'end_turn' ? evs : undefined
  })
}

describe('workflow runs through the official SDK', () => {
  it('runs a program that fans out to agents in phases: the events of spec §6.4 in order on the session stream, the run\'s threads archived, the lead reading the output', async () => {
    const { sid, reviewerId } = await leadSession('fan out')
    const evs = await whenWorkIsDone(sid)
    const primary = primaryThreadId(sid)
    const run = evs.filter((e) => e.type.startsWith('workflow_run.'))
    const runId = run[0].workflow_run_id as string
    expect(runId).toMatch(/^wrun_/)
    expect(run.map((e) => e.type)).toEqual([
      'workflow_run.created',
      'workflow_run.status_running',
      'workflow_run.phase_started',
      'workflow_run.phase_ended',
      'workflow_run.phase_started',
      'workflow_run.phase_ended',
      'workflow_run.status_ended',
    ])
    const created = run[0] as Ev & { phases: { id: string; name: string; description: string | null }[] }
    expect(created).toMatchObject({ name: 'review files', description: 'reviews three files', phases: [{ name: 'review', description: null }, { name: 'summarise', description: 'one summary' }] })
    expect(created.phases.map((p) => p.id)).toEqual([expect.stringMatching(/^wrph_/), expect.stringMatching(/^wrph_/)])
    expect(run[2]).toMatchObject({ workflow_run_id: runId, workflow_run_phase_id: created.phases[0].id })
    expect(run[3]).toMatchObject({ workflow_run_phase_id: created.phases[0].id, phase_started_id: run[2].id })
    expect(run[4]).toMatchObject({ workflow_run_phase_id: created.phases[1].id })
    expect(run[6]).toMatchObject({ workflow_run_id: runId, result: { type: 'completed' } })
    for (const e of run) expect(e.workflow_run_id).toBe(runId)

    // per agent on the session stream: created (with the run id) → running → idle → terminated; never its prompt or its answer
    const runThreads = evs.filter((e) => e.type === 'session.thread_created' && e.workflow_run_id === runId)
    expect(runThreads.map((e) => e.agent_name)).toEqual(['reviewer', 'reviewer', 'reviewer', 'writer'])
    for (const th of runThreads) {
      const own = evs.filter((e) => e.session_thread_id === th.session_thread_id).map((e) => e.type)
      expect(own).toEqual(['session.thread_created', 'session.thread_status_running', 'session.thread_status_idle', 'session.thread_status_terminated'])
    }
    expect(evs.some((e) => e.type === 'agent.thread_message_received' && e.session_thread_id)).toBe(false)
    expect(evs.some((e) => e.type === 'agent.message' && e.session_thread_id)).toBe(false)
    // the agents' phases are in order: the writer starts after the review phase ended
    const at = (pred: (e: Ev) => boolean) => evs.findIndex(pred)
    expect(at((e) => e === runThreads[3])).toBeGreaterThan(at((e) => e === run[3]))

    // the lead read the result in a turn of its own, after the run ended, then the session idled
    const endAt = at((e) => e === run[6])
    const after = evs.slice(endAt + 1).map((e) => e.type)
    expect(after).toEqual(expect.arrayContaining(['agent.message', 'session.usage', 'session.status_idle']))
    expect(evs.slice(0, endAt).some((e) => e.type === 'session.status_idle' && (e.stop_reason as { type: string }).type === 'end_turn')).toBe(false)
    const reading = readingTurn('fan out')
    expect(textOf(reading)).toContain(runId)
    expect(textOf(reading)).toContain('a.ts looks fine')
    expect(textOf(reading)).toContain('Result: completed')

    // the threads list: the run's threads, archived by Corral, with the run's id and their agents
    const threads = await all(client.beta.sessions.threads.list(sid))
    const mine = threads.filter((x) => x.workflow_run_id === runId)
    expect(mine).toHaveLength(4)
    for (const x of mine) expect(x).toMatchObject({ status: 'terminated', parent_thread_id: primary, archived_at: expect.any(String) })
    expect(mine.filter((x) => x.agent.type === 'agent').map((x) => (x.agent as { id: string }).id)).toEqual([reviewerId, reviewerId, reviewerId])
    expect(mine.find((x) => x.agent.type === 'inline')?.agent).toMatchObject({ type: 'inline', name: 'writer', system: WRITER })
    // each agent was asked once
    for (const f of ['a.ts', 'b.ts', 'c.ts']) expect(model.requests.filter((r) => systemOf(r) === REVIEWER && firstUserText(r) === `Review ${f}`)).toHaveLength(1)
    // the output reached the lead exactly as the program returned it
    const ended = run[6] as Ev & { output?: { reviews: string[] } }
    expect(ended.output?.reviews).toEqual(['a.ts looks fine', 'b.ts looks fine', 'c.ts looks fine'])
  }, 60_000)

  it('ends a run whose program throws with workflow_run.error then status_ended carrying the same program_error, closing its phase first', async () => {
    const { sid } = await leadSession('a program that throws')
    const evs = await whenWorkIsDone(sid)
    const run = evs.filter((e) => e.type.startsWith('workflow_run.'))
    expect(run.map((e) => e.type)).toEqual(['workflow_run.created', 'workflow_run.status_running', 'workflow_run.phase_started', 'workflow_run.phase_ended', 'workflow_run.error', 'workflow_run.status_ended'])
    const error = { type: 'program_error', message: 'Error: nothing to review' }
    expect(run[4]).toMatchObject({ error })
    expect(run[5]).toMatchObject({ result: { type: 'error', error } })
    const reading = readingTurn('a program that throws')
    expect(textOf(reading)).toContain('program_error: Error: nothing to review')
  }, 30_000)

  it('stops a run on ant__workflow_run_stop: its open phase ends, status_ended says stopped, its working agent is stopped and archived', async () => {
    const { sid } = await leadSession('stop it')
    const evs = await whenWorkIsDone(sid)
    const run = evs.filter((e) => e.type.startsWith('workflow_run.'))
    expect(run.map((e) => e.type)).toEqual(['workflow_run.created', 'workflow_run.status_running', 'workflow_run.phase_started', 'workflow_run.phase_ended', 'workflow_run.status_ended'])
    expect(run[3]).toMatchObject({ phase_started_id: run[2].id })
    expect(run[4]).toMatchObject({ result: { type: 'stopped' } })
    const [thread] = (await all(client.beta.sessions.threads.list(sid))).filter((x) => x.workflow_run_id === run[0].workflow_run_id)
    expect(thread).toMatchObject({ status: 'terminated', archived_at: expect.any(String) })
    // its answer came too late to be the run's: the run's output stays empty
    expect(run[4].output).toBeUndefined()
    expect(textOf(readingTurn('stop it'))).toContain('Result: stopped')
  }, 30_000)

  it('serves a run\'s status, phases, agents, output and log lines on Corral\'s own routes, paginated, with 404s naming the run', async () => {
    const { sid } = await leadSession('logs and routes')
    const evs = await whenWorkIsDone(sid)
    const created = evs.find((e) => e.type === 'workflow_run.created') as Ev & { phases: { id: string }[] }
    const runId = created.workflow_run_id as string
    const get = async (path: string) => {
      const res = await t.fetch(path)
      return { status: res.status, body: (await res.json()) as Record<string, unknown> & { data: unknown[]; next_page: string | null } }
    }

    const list = await get(`/v1/corral/sessions/${sid}/workflow_runs`)
    expect(list.status).toBe(200)
    expect(list.body.next_page).toBeNull()
    expect(list.body.data).toHaveLength(1)
    const view = list.body.data[0] as Record<string, unknown>
    expect(view).toMatchObject({
      type: 'workflow_run',
      id: runId,
      session_id: sid,
      name: 'logger',
      description: null,
      status: 'ended',
      result: { type: 'completed' },
      output: { a: 'x.ts looks fine', failed: expect.stringContaining('"nobody" is not one of this session\'s predefined workflow agents') },
      agents: { started: 1, working: 0, waiting: 0, done: 1, failed: 0 },
      log_lines: 150,
      created_at: created.processed_at,
      ended_at: evs.find((e) => e.type === 'workflow_run.status_ended')!.processed_at,
    })
    expect(view.phases).toEqual([
      { id: created.phases[0].id, name: 'count', description: null, declared: true, status: 'ended', started_at: expect.any(String), ended_at: expect.any(String) },
      { id: created.phases[1].id, name: 'never', description: null, declared: true, status: 'pending', started_at: null, ended_at: null },
    ])

    const one = await get(`/v1/corral/sessions/${sid}/workflow_runs/${runId}`)
    expect(one.status).toBe(200)
    const thread = evs.find((e) => e.type === 'session.thread_created' && e.workflow_run_id === runId)!
    expect(one.body).toMatchObject({ ...view, agents_list: [{ session_thread_id: thread.session_thread_id, agent_name: 'reviewer', label: 'x.ts', call_index: expect.any(Number), state: 'done', thread_status: 'terminated', error: null, archived_at: expect.any(String) }] })

    // the log, a page at a time: lines as the program wrote them (values after the first as JSON)
    const first = await get(`/v1/corral/sessions/${sid}/workflow_runs/${runId}/logs?limit=100`)
    expect(first.body.data).toHaveLength(100)
    expect(first.body.data[0]).toEqual({ line: 1, text: 'line 1 {"i":1}' })
    expect(first.body.next_page).toEqual(expect.any(String))
    const second = await get(`/v1/corral/sessions/${sid}/workflow_runs/${runId}/logs?limit=100&page=${first.body.next_page}`)
    expect(second.body.data.map((l) => (l as { line: number }).line)).toEqual(Array.from({ length: 50 }, (_, i) => 101 + i))
    expect(second.body.next_page).toBeNull()
    // a live tail reads after the last line it has
    const tail = await get(`/v1/corral/sessions/${sid}/workflow_runs/${runId}/logs?after_line=148`)
    expect(tail.body.data).toEqual([{ line: 149, text: 'line 149 {"i":149}' }, { line: 150, text: 'line 150 {"i":150}' }])
    // no log line ever reached the session's events
    expect(JSON.stringify(evs)).not.toContain('line 149')

    const missing = await get(`/v1/corral/sessions/${sid}/workflow_runs/wrun_nope/logs`)
    expect(missing.status).toBe(404)
    expect(missing.body).toMatchObject({ type: 'error', error: { type: 'not_found_error', message: expect.stringContaining('"wrun_nope"') } })
    expect((await get(`/v1/corral/sessions/${sid}/workflow_runs/wrun_nope`)).status).toBe(404)
    expect((await get('/v1/corral/sessions/sesn_nope/workflow_runs')).status).toBe(404)
    const badPage = await get(`/v1/corral/sessions/${sid}/workflow_runs/${runId}/logs?page=bogus`)
    expect(badPage.status).toBe(400)
    expect(badPage.body).toMatchObject({ error: { type: 'invalid_request_error', message: expect.stringContaining('page') } })
    const badLimit = await get(`/v1/corral/sessions/${sid}/workflow_runs?limit=0`)
    expect(badLimit.status).toBe(400)
    expect(badLimit.body).toMatchObject({ error: { message: expect.stringContaining('limit') } })
  }, 30_000)

  it('answers a start whose program does not parse with a tool error naming the line and column, and starts no run', async () => {
    const { sid } = await leadSession('a syntax error')
    const evs = await until('the lead\'s idle', async () => {
      const list = (await all(client.beta.sessions.events.list(sid))) as Ev[]
      return list.at(-1)?.type === 'session.status_idle' ? list : undefined
    })
    expect(evs.some((e) => e.type.startsWith('workflow_run.'))).toBe(false)
    const second = model.requests.find((r) => systemOf(r) === LEAD && firstUserText(r).includes('a syntax error') && r.body.messages.length > 1)!
    const [result] = toolResultsOf(second)
    expect(result.is_error).toBe(true)
    expect(result.text).toBe("ant__workflow_run_start: the program does not parse: SyntaxError: unexpected token in expression: ';' (line 2, column 15).")
  }, 30_000)
})
