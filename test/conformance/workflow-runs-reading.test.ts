import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import { startApiServer, type TestApiServer } from '../support/api-server'
import { ScriptedModelServer, callToolOffSchema, say, toolCall, toolResultsOf, type RecordedRequest, type ScriptStep } from '../support/model-server'
import { RecordingToolRouter } from '../support/harness-tool-router'
import { all, until } from '../support/polling'

// The primary's reading turn (issue #12, spec multiagent §6.4, §6.7): when a run ends, the lead's
// next model request carries a user-turn text block naming the run, its result and its output
// (JSON, capped; the rest through ant__workflow_run_status), and the session idles with end_turn
// only after every run it saw has ended. Asserted on what the scripted model receives.

const LEAD = 'You are the lead.'
const REVIEWER = 'You review one file.'
const CAP = 8192
const systemOf = (req: RecordedRequest) => req.body.system?.[0]?.text ?? ''
const firstUserText = (req: RecordedRequest) => {
  const c = req.body.messages[0]?.content
  return typeof c === 'string' ? c : ((c as { type: string; text?: string }[] | undefined) ?? []).map((b) => b.text ?? '').join('')
}
const runIdsStarted = (req: RecordedRequest) => toolResultsOf(req).flatMap((r) => (r.text.startsWith('{"workflow_run_id"') ? [JSON.parse(r.text).workflow_run_id as string] : []))
/** The user-turn text blocks of a request that tell of a run's end. */
const readingBlocks = (req: RecordedRequest) =>
  req.body.messages.flatMap((m) => (m.role === 'user' && Array.isArray(m.content) ? (m.content as { type: string; text?: string }[]) : []).filter((b) => b.type === 'text' && b.text?.startsWith('<workflow_run ')).map((b) => b.text!))

const BIG_OUTPUT = `return { big: 'x'.repeat(20000), tail: 'the end' }`

/** The status calls the lead makes after reading a logging run's end, in order (input without the run id). */
const LOG_ASKS: Record<string, unknown>[] = [{}, { log_after: 0 }, { log_after: 50 }, { all: true }, { log_after: 3, all: true }, { log_after: -1 }]

const leadScript: Record<string, (req: RecordedRequest) => ScriptStep> = {
  'a logging run': (req) => {
    if (req.body.messages.length === 1) return toolCall(req, 'ant__workflow_run_start', { name: 'logger', program: `for (let i = 1; i <= 60; i++) log('step', i, { i }); return 'logged'` })
    const [runId] = runIdsStarted(req)
    if (!readingBlocks(req).length) return say('Started.')
    const asked = toolResultsOf(req).length - 1
    if (asked >= LOG_ASKS.length) return say('Read the log.')
    const { all, ...rest } = LOG_ASKS[asked] as { all?: boolean }
    const input = all ? rest : { workflow_run_id: runId, ...rest }
    // a log_after below 0 is off the offered schema (minimum 0): a model that does not keep to it (a local one) gets a clear tool error
    if ((input as { log_after?: number }).log_after === -1) return callToolOffSchema('ant__workflow_run_status', input, 'a log_after below the offered minimum of 0, as a model that does not keep to the schema sends')
    return toolCall(req, 'ant__workflow_run_status', input)
  },
  'two runs': (req) => {
    const started = runIdsStarted(req)
    if (started.length === 0) return toolCall(req, 'ant__workflow_run_start', { name: 'slow one', program: `return await agent('reviewer', 'Review slowly')` })
    if (started.length === 1) return toolCall(req, 'ant__workflow_run_start', { name: 'fast one', program: `return await agent('reviewer', 'Review quickly')` })
    return say(readingBlocks(req).length ? `Read ${readingBlocks(req).length}.` : 'Started both.')
  },
  'a run that ends mid-turn': (req) => {
    // the run's one agent answers 300 ms after its start, the lead's next request takes 800 ms:
    // the run ends while that request is in flight (its step, which ends the turn, never saw it)
    if (req.body.messages.length === 1) return toolCall(req, 'ant__workflow_run_start', { name: 'in a moment', program: `return await agent('reviewer', 'Review in a moment')` })
    if (!readingBlocks(req).length) return say('Started.', { delayMs: 800 })
    return say('Read it.')
  },
  'a big output': (req) => {
    if (req.body.messages.length === 1) return toolCall(req, 'ant__workflow_run_start', { name: 'big', program: BIG_OUTPUT })
    const [runId] = runIdsStarted(req)
    const statusAsked = toolResultsOf(req).some((r) => r.text.includes('"status":"ended"'))
    if (readingBlocks(req).length && !statusAsked) return toolCall(req, 'ant__workflow_run_status', { workflow_run_id: runId })
    return say(statusAsked ? 'Read the whole output.' : 'Started.')
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
    if (system === REVIEWER && firstUserText(req) === 'Review slowly') return say('slow answer', { delayMs: 2000 })
    if (system === REVIEWER && firstUserText(req) === 'Review in a moment') return say('at once', { delayMs: 300 })
    if (system === REVIEWER) return say('fast answer')
    throw new Error(`unexpected request: ${system}`)
  })
  dir = mkdtempSync(join(tmpdir(), 'corral-wrun-reading-'))
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


async function leadSession(message: string): Promise<string> {
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
  return session.id
}

async function whenWorkIsDone(sid: string): Promise<Ev[]> {
  return until('the work to be done', async () => {
    const evs = (await all(client.beta.sessions.events.list(sid, { limit: 1000 }))) as Ev[]
    const created = evs.filter((e) => e.type === 'workflow_run.created').length
    const ended = evs.filter((e) => e.type === 'workflow_run.status_ended').length
    const last = evs.at(-1)
    return created > 0 && created === ended && last?.type === 'session.status_idle' && (last.stop_reason as { type: string }).type === 'end_turn' ? evs : undefined
  })
}

const leadRequests = (name: string) => model.requests.filter((r) => systemOf(r) === LEAD && firstUserText(r) === name)

describe("the primary's reading turn, through the official SDK", () => {
  it('gives the lead a turn per run that ends, each naming its run and result, and idles the session with end_turn only after every run it saw has ended', async () => {
    const sid = await leadSession('two runs')
    const evs = await whenWorkIsDone(sid)
    const created = evs.filter((e) => e.type === 'workflow_run.created')
    expect(created.map((e) => e.name)).toEqual(['slow one', 'fast one'])
    const [slow, fast] = created.map((e) => e.workflow_run_id as string)
    const endOf = (id: string) => evs.findIndex((e) => e.type === 'workflow_run.status_ended' && e.workflow_run_id === id)
    // the fast run ended first, while the slow one was open
    expect(endOf(fast)).toBeLessThan(endOf(slow))
    // no end_turn idle of the session until the last run it saw has ended (the lead read the first meanwhile)
    const endTurns = evs.map((e, i) => [e, i] as const).filter(([e]) => e.type === 'session.status_idle' && (e.stop_reason as { type: string }).type === 'end_turn')
    expect(endTurns.length).toBeGreaterThan(0)
    for (const [, i] of endTurns) expect(i).toBeGreaterThan(endOf(slow))
    expect((await client.beta.sessions.retrieve(sid)).status).toBe('idle')

    // what the model received: a reading turn for the fast run (the slow one not yet ended), then one with both
    const reads = leadRequests('two runs').filter((r) => readingBlocks(r).length > 0)
    expect(reads.length).toBeGreaterThanOrEqual(2)
    const first = readingBlocks(reads[0])
    expect(first).toEqual([`<workflow_run id="${fast}" name="fast one">\nThe workflow run ended. Result: completed.\nOutput:\n"fast answer"\n</workflow_run>`])
    const last = readingBlocks(reads.at(-1)!)
    expect(last).toHaveLength(2)
    expect(last[1]).toBe(`<workflow_run id="${slow}" name="slow one">\nThe workflow run ended. Result: completed.\nOutput:\n"slow answer"\n</workflow_run>`)
    // the lead's first reading request went out after the fast run's end and before the slow one's
    const leadReadAt = evs.findIndex((e, i) => i > endOf(fast) && e.type === 'span.model_request_start' && !e.session_thread_id)
    expect(leadReadAt).toBeGreaterThan(endOf(fast))
    expect(leadReadAt).toBeLessThan(endOf(slow))
  }, 30_000)

  it('does not idle the session with end_turn when the run ended during the turn that would have ended it: the lead reads the run first', async () => {
    const sid = await leadSession('a run that ends mid-turn')
    const evs = await whenWorkIsDone(sid)
    const endedAt = evs.findIndex((e) => e.type === 'workflow_run.status_ended')
    const started = leadRequests('a run that ends mid-turn').find((r) => r.body.messages.length === 3 && !readingBlocks(r).length)!
    expect(started).toBeDefined()
    const read = leadRequests('a run that ends mid-turn').find((r) => readingBlocks(r).length > 0)!
    expect(readingBlocks(read)).toEqual([expect.stringContaining('Output:\n"at once"')])
    // the run ended while the 'Started.' request was in flight (its answer came after the end)
    const answers = evs.filter((e) => e.type === 'agent.message' && !e.session_thread_id)
    expect(evs.indexOf(answers[0])).toBeGreaterThan(endedAt)
    // one end_turn idle of the session, the last event, after the lead's answer to the reading turn
    const endTurns = evs.filter((e) => e.type === 'session.status_idle' && (e.stop_reason as { type: string }).type === 'end_turn')
    expect(endTurns).toHaveLength(1)
    expect(endTurns[0]).toBe(evs.at(-1))
    expect(evs.indexOf(answers.at(-1)!)).toBeLessThan(evs.indexOf(endTurns[0]))
    expect((answers.at(-1)!.content as { text: string }[])[0].text).toBe('Read it.')
  }, 30_000)

  it("shows what a run's program logged through ant__workflow_run_status: the last 20 lines, pages after a line number, the count for every run, and a clear error for a bad log_after", async () => {
    const sid = await leadSession('a logging run')
    await whenWorkIsDone(sid)
    const last = leadRequests('a logging run').at(-1)!
    const results = toolResultsOf(last).slice(1)
    expect(results).toHaveLength(LOG_ASKS.length)
    const [tail, first, second, listed, noRun, negative] = results
    const line = (i: number) => ({ line: i, text: `step ${i} {"i":${i}}` })
    const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, k) => line(a + k))
    expect(JSON.parse(tail.text)).toMatchObject({ status: 'ended', output: 'logged', log: { total_lines: 60, lines: range(41, 60) } })
    expect(JSON.parse(tail.text).log).not.toHaveProperty('next_log_after')
    expect(JSON.parse(first.text).log).toEqual({ total_lines: 60, lines: range(1, 50), next_log_after: 50 })
    expect(JSON.parse(second.text).log).toEqual({ total_lines: 60, lines: range(51, 60) })
    expect(JSON.parse(listed.text).workflow_runs).toEqual([expect.objectContaining({ name: 'logger', log_lines: 60 })])
    expect(JSON.parse(listed.text).workflow_runs[0]).not.toHaveProperty('log')
    expect(noRun).toMatchObject({ is_error: true, text: 'ant__workflow_run_status: log_after needs workflow_run_id (a run\'s log is read one run at a time).' })
    expect(negative).toMatchObject({ is_error: true, text: 'ant__workflow_run_status: log_after must be a line number (an integer, 0 or more).' })
  }, 30_000)

  it("caps the output in the reading turn at 8,192 characters and says where the rest is; ant__workflow_run_status gives the whole output", async () => {
    const sid = await leadSession('a big output')
    const evs = await whenWorkIsDone(sid)
    const runId = evs.find((e) => e.type === 'workflow_run.created')!.workflow_run_id as string
    const whole = JSON.stringify({ big: 'x'.repeat(20000), tail: 'the end' })
    const reading = leadRequests('a big output').find((r) => readingBlocks(r).length > 0)!
    const [block] = readingBlocks(reading)
    const lines = block.split('\n')
    expect(lines.slice(0, 3)).toEqual([
      `<workflow_run id="${runId}" name="big">`,
      'The workflow run ended. Result: completed.',
      `Output (the first ${CAP} of ${whole.length} characters; the whole output is in ant__workflow_run_status):`,
    ])
    expect(lines[3]).toBe(whole.slice(0, CAP))
    expect(lines[4]).toBe('</workflow_run>')
    expect(block).not.toContain('the end')
    // the lead asked for the status: the tool result has the whole output
    const after = leadRequests('a big output').find((r) => toolResultsOf(r).some((x) => x.text.includes('"status":"ended"')))!
    const status = JSON.parse(toolResultsOf(after).find((x) => x.text.includes('"status":"ended"'))!.text) as { workflow_run_id: string; result: unknown; output: unknown }
    expect(status).toMatchObject({ workflow_run_id: runId, result: { type: 'completed' }, output: { tail: 'the end' } })
    expect(JSON.stringify(status.output)).toBe(whole)
  }, 30_000)
})
