import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic, { toFile } from '@anthropic-ai/sdk'
import { startApiServer, type TestApiServer } from '../support/api-server'
import { forcedToolCall, forcedToolName, messageTextOf, say, toolCall, type RecordedRequest, type ScriptStep, ScriptedModelServer } from '../support/model-server'
import { bwrapReq } from '../integration/hands/support'

// Outcomes through the official SDK (spec multiagent §8, issue #18): a real engine, its brains and
// a bubblewrap sandbox against the scripted model server, which plays both the agent (writes
// /workspace/report.md, names it with ant__name_deliverables, ends its turn) and the grader
// (answers the forced tool of the request, built from the `tools` array it is sent). What each
// test's grader answers is keyed by a word of the outcome's description.

const MODEL = 'claude-sonnet-4-6'
const GRADER_USAGE = { input_tokens: 1000, output_tokens: 50 }
const AGENT_USAGE = { input_tokens: 100, output_tokens: 20 }

type Verdict = { result: 'satisfied' | 'needs_revision' | 'failed'; explanation: string; gaps: { criterion: string; gap: string }[] }
/** Per scenario word: the grader's answers in order (the last repeats), or a step of its own. */
const GRADER: Record<string, (Verdict | ScriptStep)[]> = {
  revise: [
    { result: 'needs_revision', explanation: 'The report has no summary section.', gaps: [{ criterion: 'Has a summary', gap: 'No "## Summary" heading' }] },
    { result: 'satisfied', explanation: 'Every criterion is met.', gaps: [] },
  ],
  stubborn: [{ result: 'needs_revision', explanation: 'Still no summary.', gaps: [{ criterion: 'Has a summary', gap: 'missing' }] }],
  mismatch: [{ result: 'failed', explanation: 'The rubric asks for a poem; the task asks for a report.', gaps: [] }],
  garbled: [say('Looks fine to me.')],
  slow: [{ kind: 'message', delayMs: 4000, blocks: [{ type: 'text', text: 'too late' }] }],
}

/** The blocks of the request's last user turn. */
function lastUserBlocks(req: RecordedRequest): Record<string, unknown>[] {
  const last = req.body.messages[req.body.messages.length - 1]
  return typeof last.content === 'string' ? [{ type: 'text', text: last.content }] : last.content
}

/** Grader requests answered so far, per outcome description (each test's outcome has its own). */
const graderCalls = new Map<string, number>()
let outcomeCount = 0
function respond(req: RecordedRequest): ScriptStep {
  const text = messageTextOf(req)
  if (forcedToolName(req)) {
    const description = /<task_description>\n([\s\S]*?)\n<\/task_description>/.exec(text)?.[1] ?? ''
    const scenario = Object.keys(GRADER).find((k) => description.includes(`scenario:${k}`)) ?? 'revise'
    const n = graderCalls.get(description) ?? 0
    graderCalls.set(description, n + 1)
    const answers = GRADER[scenario]
    const a = answers[Math.min(n, answers.length - 1)]
    const step = 'kind' in a ? a : forcedToolCall(req, a)
    return { ...step, usage: GRADER_USAGE } as ScriptStep
  }
  // the agent: write the report (a new version after each evaluation), name it, end the turn
  const blocks = lastUserBlocks(req)
  const result = blocks.find((b) => b.type === 'tool_result')
  const version = (text.match(/<outcome_evaluation /g) ?? []).length + 1
  let step: ScriptStep
  if (!result && JSON.stringify(blocks).includes('No further evaluation will run')) step = say('Acknowledged: the summary is still missing.')
  else if (!result) step = toolCall(req, 'write', { file_path: '/workspace/report.md', content: `# Report v${version}\n${version > 1 ? '## Summary\nAll good.\n' : ''}` })
  else if (!JSON.stringify(result.content).includes('The grader will read')) step = toolCall(req, 'ant__name_deliverables', { paths: ['/workspace/report.md'] })
  else step = say(`Report v${version} is ready.`)
  return { ...step, usage: AGENT_USAGE } as ScriptStep
}

let t: TestApiServer
let client: Anthropic
let model: ScriptedModelServer
let agentId: string
let envId: string

const bwrap = bwrapReq()

type Ev = { id: string; type: string; [k: string]: unknown }

async function all<T>(pages: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const x of pages) out.push(x)
  return out
}

async function waitFor(sid: string, until: (events: Ev[]) => boolean, what: string, ms = 30_000): Promise<Ev[]> {
  const deadline = Date.now() + ms
  for (;;) {
    const events = (await all(client.beta.sessions.events.list(sid))) as unknown as Ev[]
    if (until(events)) return events
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${events.map((e) => e.type).join(', ')}`)
    await new Promise((r) => setTimeout(r, 25))
  }
}
const idled = (events: Ev[]) => events.at(-1)?.type === 'session.status_idle'

async function runOutcome(scenario: string, extra: { max_iterations?: number; rubric?: Anthropic.Beta.Sessions.BetaManagedAgentsUserDefineOutcomeEventParams['rubric'] } = {}) {
  const sid = (await client.beta.sessions.create({ agent: agentId, environment_id: envId })).id
  const sent = await client.beta.sessions.events.send(sid, {
    events: [{ type: 'user.define_outcome', description: `Write /workspace/report.md (scenario:${scenario} #${++outcomeCount})`, rubric: extra.rubric ?? { type: 'text', content: 'RUBRIC-7: the report has a "## Summary" heading.' }, max_iterations: extra.max_iterations }],
  })
  return { sid, echo: sent.data![0] as unknown as Ev }
}

const ofType = (events: Ev[], type: string) => events.filter((e) => e.type === type)
const graderRequests = () => model.requests.filter((r) => forcedToolName(r) !== undefined)

describe.skipIf(!bwrap.ok)('outcomes through the SDK', () => {
  beforeAll(async () => {
    model = await ScriptedModelServer.start(respond)
    t = await startApiServer({
      env: { PATH: process.env.PATH, ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'test-key' },
      harness: { backoffBaseMs: 5, backoffMaxMs: 20, maxRetries: 1, leaseTtlMs: 3000, outcomeHeartbeatMs: 300 },
    })
    client = t.client
    agentId = (await client.beta.agents.create({ name: 'writer', model: MODEL, tools: [{ type: 'agent_toolset_20260401' }] })).id
    envId = (await client.beta.environments.create({ name: 'local', config: { type: 'cloud', corral: { backend: 'bubblewrap' } } as never })).id
  })
  afterAll(async () => {
    await t?.close()
    await model?.close()
  })

  it('echoes user.define_outcome with its outc_ id, processed_at and the default max_iterations, and the agent starts without a user.message', async () => {
    const { sid, echo } = await runOutcome('revise')
    expect(echo).toMatchObject({ type: 'user.define_outcome', max_iterations: 3, rubric: { type: 'text', content: expect.stringContaining('RUBRIC-7') } })
    expect(echo.outcome_id).toMatch(/^outc_/)
    expect(typeof echo.processed_at).toBe('string')
    await waitFor(sid, idled, 'the idle')
  })

  it('needs_revision feeds the gaps back as a user turn, then satisfied ends the outcome, with the SDK shapes of the span events and Session.outcome_evaluations', async () => {
    const { sid, echo } = await runOutcome('revise')
    const events = await waitFor(sid, idled, 'the idle')
    const starts = ofType(events, 'span.outcome_evaluation_start')
    const ends = ofType(events, 'span.outcome_evaluation_end')
    expect(starts.map((e) => e.iteration)).toEqual([0, 1])
    expect(ends.map((e) => [e.iteration, e.result])).toEqual([
      [0, 'needs_revision'],
      [1, 'satisfied'],
    ])
    for (const [i, s] of starts.entries()) {
      expect(Object.keys(s).sort()).toEqual(['id', 'iteration', 'outcome_id', 'processed_at', 'type'])
      expect(s.outcome_id).toBe(echo.outcome_id)
      expect(ends[i].outcome_evaluation_start_id).toBe(s.id)
    }
    expect(ends[0]).toMatchObject({ explanation: 'The report has no summary section.', usage: { input_tokens: 1000, output_tokens: 50, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 } })
    // the agent heard the gaps as a user turn and revised
    const revision = model.requests.find((r) => !forcedToolName(r) && messageTextOf(r).includes('<outcome_evaluation'))!
    expect(messageTextOf(revision)).toContain('Has a summary: No "## Summary" heading')
    // the turn ends only after the satisfied verdict
    expect(events.indexOf(ends[1])).toBeLessThan(events.indexOf(events.at(-1)!))
    expect(ofType(events, 'session.status_idle')).toHaveLength(1)
    const session = await client.beta.sessions.retrieve(sid)
    expect(session.outcome_evaluations).toEqual([
      { type: 'outcome_evaluation', outcome_id: echo.outcome_id, description: echo.description, iteration: 1, result: 'satisfied', explanation: 'Every criterion is met.', completed_at: ends[1].processed_at },
    ])
    expect(model.violations).toEqual([])
  })

  it('the grader sees the rubric, the named file as the agent wrote it and the final message, in a context of its own with one forced tool', async () => {
    const before = graderRequests().length
    const { sid } = await runOutcome('revise')
    await waitFor(sid, idled, 'the idle')
    const [first, second] = graderRequests().slice(before)
    expect(first.body.tools!.map((x) => x.name)).toEqual(['record_verdict'])
    expect(first.body.tool_choice).toEqual({ type: 'tool', name: 'record_verdict' })
    expect(first.body.messages).toHaveLength(1)
    const text = messageTextOf(first)
    expect(text).toContain('RUBRIC-7')
    expect(text).toContain('<file path="/workspace/report.md">')
    expect(text).toContain('# Report v1')
    expect(text).toContain('Report v1 is ready.')
    // its own context: not the agent's conversation (no tool calls, not the outcome brief)
    expect(text).not.toContain('ant__name_deliverables')
    expect(messageTextOf(second)).toContain('## Summary')
  })

  it("counts the grader's usage toward the session's usage", async () => {
    const { sid } = await runOutcome('mismatch')
    const events = await waitFor(sid, idled, 'the idle')
    const agentInput = ofType(events, 'span.model_request_end').reduce((n, e) => n + (e.model_usage as { input_tokens: number }).input_tokens, 0)
    const session = await client.beta.sessions.retrieve(sid)
    expect(session.usage.input_tokens).toBe(agentInput + GRADER_USAGE.input_tokens)
  })

  it('ends max_iterations_reached after the last allowed evaluation, then gives the agent one acknowledgement turn without another evaluation', async () => {
    const { sid } = await runOutcome('stubborn', { max_iterations: 2 })
    const events = await waitFor(sid, idled, 'the idle')
    const ends = ofType(events, 'span.outcome_evaluation_end')
    expect(ends.map((e) => [e.iteration, e.result])).toEqual([
      [0, 'needs_revision'],
      [1, 'max_iterations_reached'],
    ])
    expect(ofType(events, 'span.outcome_evaluation_start')).toHaveLength(2)
    // the acknowledgement: a model turn after the last verdict, then the idle
    const after = events.slice(events.indexOf(ends[1]))
    expect(ofType(after, 'agent.message').map((e) => (e.content as { text: string }[])[0].text)).toEqual(['Acknowledged: the summary is still missing.'])
    // the agent is no longer offered the deliverables tool once the outcome ended
    const ack = model.requests.filter((r) => !forcedToolName(r) && messageTextOf(r).includes('No further evaluation will run')).at(-1)!
    expect(ack.body.tools!.map((x) => x.name)).not.toContain('ant__name_deliverables')
    expect(after.at(-1)).toMatchObject({ type: 'session.status_idle', stop_reason: { type: 'end_turn' } })
    const [ev] = (await client.beta.sessions.retrieve(sid)).outcome_evaluations
    expect(ev).toMatchObject({ result: 'max_iterations_reached', iteration: 1, explanation: 'Still no summary.' })
    expect(ev.completed_at).not.toBeNull()
  })

  it('ends failed when the grader finds the rubric does not apply, and the session idles', async () => {
    const { sid } = await runOutcome('mismatch')
    const events = await waitFor(sid, idled, 'the idle')
    expect(ofType(events, 'span.outcome_evaluation_end').map((e) => e.result)).toEqual(['failed'])
    expect((await client.beta.sessions.retrieve(sid)).outcome_evaluations[0]).toMatchObject({ result: 'failed', explanation: 'The rubric asks for a poem; the task asks for a report.' })
  })

  it("retries an unreadable grader answer once, then ends failed with an explanation saying so", async () => {
    const before = graderRequests().length
    const { sid } = await runOutcome('garbled')
    const events = await waitFor(sid, idled, 'the idle')
    const [end] = ofType(events, 'span.outcome_evaluation_end')
    expect(end.result).toBe('failed')
    expect(end.explanation).toMatch(/^The grader's answer could not be read twice/)
    expect(graderRequests().length - before).toBe(2)
    expect((end.usage as { input_tokens: number }).input_tokens).toBe(2 * GRADER_USAGE.input_tokens)
  })

  it('ends interrupted when user.interrupt arrives while the grader works, with heartbeats before it', async () => {
    const { sid } = await runOutcome('slow')
    const during = await waitFor(sid, (evs) => evs.some((e) => e.type === 'span.outcome_evaluation_ongoing'), 'a heartbeat')
    const start = ofType(during, 'span.outcome_evaluation_start')[0]
    expect((await client.beta.sessions.retrieve(sid)).outcome_evaluations[0]).toMatchObject({ result: 'evaluating', completed_at: null })
    expect(ofType(during, 'span.outcome_evaluation_ongoing')[0]).toMatchObject({ outcome_id: start.outcome_id, iteration: 0 })
    await client.beta.sessions.events.send(sid, { events: [{ type: 'user.interrupt' }] })
    const events = await waitFor(sid, idled, 'the idle')
    const ends = ofType(events, 'span.outcome_evaluation_end')
    expect(ends).toHaveLength(1)
    expect(ends[0]).toMatchObject({ result: 'interrupted', outcome_evaluation_start_id: start.id, iteration: 0 })
    expect((await client.beta.sessions.retrieve(sid)).outcome_evaluations[0]).toMatchObject({ result: 'interrupted' })
  })

  it('refuses a second outcome while the first is active with a 400 naming it, and accepts the next once it ended', async () => {
    const { sid, echo } = await runOutcome('slow')
    const second = { type: 'user.define_outcome' as const, description: `Another (scenario:mismatch #${++outcomeCount})`, rubric: { type: 'text' as const, content: 'x' } }
    const err = await client.beta.sessions.events.send(sid, { events: [second] }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(Anthropic.BadRequestError)
    expect((err as Error).message).toContain(String(echo.outcome_id))
    await client.beta.sessions.events.send(sid, { events: [{ type: 'user.interrupt' }] })
    await waitFor(sid, (evs) => idled(evs) && evs.some((e) => e.type === 'span.outcome_evaluation_end'), 'the interrupted outcome')
    const next = await client.beta.sessions.events.send(sid, { events: [second] })
    expect(next.data![0]).toMatchObject({ type: 'user.define_outcome' })
    const events = await waitFor(sid, (evs) => idled(evs) && ofType(evs, 'span.outcome_evaluation_end').length === 2, 'the second outcome')
    expect(ofType(events, 'span.outcome_evaluation_end').map((e) => e.result)).toEqual(['interrupted', 'failed'])
    expect((await client.beta.sessions.retrieve(sid)).outcome_evaluations.map((o) => o.result)).toEqual(['interrupted', 'failed'])
  })

  it('takes an outcome in initial_events (at most one) and a rubric from the files API, echoed as its text', async () => {
    const file = await client.beta.files.upload({ file: await toFile(Buffer.from('FILE-RUBRIC: a summary heading'), 'rubric.md', { type: 'text/markdown' }) })
    const define = { type: 'user.define_outcome' as const, description: `From a file (scenario:mismatch #${++outcomeCount})`, rubric: { type: 'file' as const, file_id: file.id } }
    const two = await client.beta.sessions.create({ agent: agentId, environment_id: envId, initial_events: [define, define] }).catch((e: unknown) => e)
    expect(two).toBeInstanceOf(Anthropic.BadRequestError)
    expect((two as Error).message).toContain('initial_events[1]')
    const sid = (await client.beta.sessions.create({ agent: agentId, environment_id: envId, initial_events: [define] })).id
    const events = await waitFor(sid, idled, 'the idle')
    expect(ofType(events, 'user.define_outcome')[0]).toMatchObject({ rubric: { type: 'text', content: 'FILE-RUBRIC: a summary heading' }, max_iterations: 3 })
    const grader = graderRequests().at(-1)!
    expect(messageTextOf(grader)).toContain('FILE-RUBRIC')
  })

  it('refuses a bad outcome with a 400 naming the field: max_iterations above 20, an unknown rubric file', async () => {
    const sid = (await client.beta.sessions.create({ agent: agentId, environment_id: envId })).id
    const over = await client.beta.sessions.events
      .send(sid, { events: [{ type: 'user.define_outcome', description: 'd', rubric: { type: 'text', content: 'r' }, max_iterations: 21 }] })
      .catch((e: unknown) => e)
    expect(over).toBeInstanceOf(Anthropic.BadRequestError)
    expect((over as Error).message).toContain('max_iterations')
    const missing = await client.beta.sessions.events.send(sid, { events: [{ type: 'user.define_outcome', description: 'd', rubric: { type: 'file', file_id: 'file_nope' } }] }).catch((e: unknown) => e)
    expect(missing).toBeInstanceOf(Anthropic.NotFoundError)
    expect((missing as Error).message).toContain('events[0].rubric.file_id')
    expect((await all(client.beta.sessions.events.list(sid))).length).toBe(0)
  })
})
