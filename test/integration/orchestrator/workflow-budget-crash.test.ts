import { afterAll, describe, expect, it } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Engine } from '../../../src/main/engine'
import type { LoggedEvent } from '../../../src/main/session/event-log'
import { CrashChildren } from '../../support/crash-children'
import { say, systemOf, toolCall, ScriptedModelServer, type RecordedRequest, type ScriptStep } from '../../support/model-server'
import { eventsOf, field, promptOf, runFinished } from '../../support/workflow-crash-fixture'

// A workflow run paused at its session's budget (spec multiagent §9) across kill -9 of its engine
// (docs/workflows.md "Durability" and "Budgets"): the first engine life runs the run's first agent,
// whose answer costs more than the budget, and pauses the run; it is killed while paused. The next
// life (an engine in this process, over the same data directory, once the dead life's lease ran
// out) replays the run and keeps it paused: no model request for the agent waiting at the
// budget, no run or phase event written again. A raise then resumes the run to its end, and no
// agent is asked twice.

const LEAD = 'You are the lead.'
const WORKER = 'You review one file.'
/** 200k output tokens at Sonnet's list price: $3.00, over the $2.50 budget. */
const BIG = { input_tokens: 10, output_tokens: 200_000 }
const SMALL = { input_tokens: 10, output_tokens: 10 }
/**
 * The slow agent's request is in flight when the expensive answer spends the budget; the next
 * agent waits at the budget (its thread idles with budget_reached, the run pauses), and the call
 * the program makes once the slow agent answered (the run paused) is held back, not started.
 */
const PROGRAM = `return await phase('review', async () => {
  const slow = agent('worker', 'Review slowly')
  const first = await agent('worker', 'Review expensively')
  const later = slow.then((s) => agent('worker', 'Review last').then((l) => [s, l]))
  const second = await agent('worker', 'Review after the budget')
  return { first, second, later: await later }
})`
const LEASE_TTL_MS = 1_000

const dir = mkdtempSync(join(tmpdir(), 'corral-wf-budget-crash-'))
const children = new CrashChildren({ dir, script: join(__dirname, '../../support/workflow-crash-child.ts') })
afterAll(() => {
  children.dispose()
  rmSync(dir, { recursive: true, force: true })
})

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
async function until<T>(what: string, probe: () => T | undefined, state: () => string, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms
  for (;;) {
    const v = probe()
    if (v !== undefined) return v
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}:\n${state()}`)
    await sleep(20)
  }
}

const stopType = (e: LoggedEvent | undefined) => (e as { stop_reason?: { type: string } } | undefined)?.stop_reason?.type
const runEvents = (evs: readonly LoggedEvent[]) => evs.filter((e) => e.type.startsWith('workflow_run.')).map((e) => e.type)

describe('a workflow run paused at the budget across kill -9 of its engine', () => {
  it('stays paused after the restart (no model request, no run or phase event again) and a raise resumes it to completion with every agent asked once', async () => {
    /** Which engine life asked each worker prompt (each life's requests carry its own API key). */
    const asks = new Map<string, string[]>()
    const lifeOf = (req: RecordedRequest) => /life-\d+/.exec(String(req.headers['x-api-key'] ?? req.headers.authorization ?? ''))?.[0] ?? '?'
    const model = await ScriptedModelServer.start((req): ScriptStep => {
      if (systemOf(req) === LEAD) {
        if (req.body.messages.length === 1) return { ...toolCall(req, 'ant__workflow_run_start', { name: 'at the budget', phases: [{ name: 'review' }], program: PROGRAM }), usage: SMALL } as ScriptStep
        return { ...say(JSON.stringify(req.body.messages).includes('<workflow_run') ? 'Read the run.' : 'Started.'), usage: SMALL } as ScriptStep
      }
      const prompt = promptOf(req)
      asks.set(prompt, [...(asks.get(prompt) ?? []), lifeOf(req)])
      if (prompt === 'Review expensively') return { ...say('expensive answer', { delayMs: 100 }), usage: BIG } as ScriptStep
      if (prompt === 'Review slowly') return { ...say('slow answer', { delayMs: 1_500 }), usage: SMALL } as ScriptStep
      return { ...say(`${prompt}: ok`), usage: SMALL } as ScriptStep
    })
    model.keepRequests = 0
    const parent = Engine.open({ dataDir: dir, token: 'budget-crash', env: {}, harness: { enabled: false }, defaultHands: false })
    let second: Engine | undefined
    try {
      const s = parent.services
      const worker = s.agents.create({ name: 'worker', model: 'claude-sonnet-4-6', system: WORKER } as never)
      const lead = s.agents.create({
        name: 'lead',
        model: 'claude-sonnet-4-6',
        system: LEAD,
        multiagent: { type: 'multiagent_20261001', workflows: { type: 'enabled', predefined_agents: [worker.id] } },
      } as never)
      const env = s.environments.create({ name: 'budget-crash', config: { type: 'cloud' } })
      const sid = (
        await s.sessions.create({
          agent: lead.id,
          environment_id: env.id,
          budget: { type: 'limit', max_list_cost: { amount: '250', currency: 'USD' } },
          initial_events: [{ type: 'user.message', content: [{ type: 'text', text: 'go' }] }],
        } as never)
      ).id
      const events = () => eventsOf(parent, sid)
      const tail = () =>
        events()
          .slice(-25)
          .map((e) => `${e.type} ${e.session_thread_id ?? ''} ${stopType(e) ?? ''}`)
          .join('\n')

      // the first life runs the expensive agent and pauses the run at the budget; it dies paused
      const first = await children.start([dir, model.url, '64', String(LEASE_TTL_MS), 'life-1'])
      const slowDone = (evs: readonly LoggedEvent[]) => {
        const tid = evs.find((e) => e.type === 'agent.thread_message_received' && JSON.stringify(field(e, 'content')).includes('Review slowly'))?.session_thread_id
        return tid !== undefined && evs.some((e) => e.session_thread_id === tid && e.type === 'session.thread_status_idle' && stopType(e) === 'end_turn')
      }
      await until('the run to pause at the budget and the slow agent to answer', () => {
        const evs = events()
        return evs.some((e) => e.type === 'workflow_run.status_idle') && slowDone(evs) && evs.at(-1)?.type === 'session.status_idle' && stopType(evs.at(-1)) === 'budget_reached' ? true : undefined
      }, tail)
      await sleep(300)
      await children.kill(first)
      const paused = events()
      expect(runEvents(paused)).toEqual(['workflow_run.created', 'workflow_run.status_running', 'workflow_run.phase_started', 'workflow_run.status_idle'])
      expect(Object.fromEntries(asks)).toEqual({ 'Review slowly': ['life-1'], 'Review expensively': ['life-1'] })
      // the call made while paused was held back: no thread for it
      expect(paused.filter((e) => e.type === 'session.thread_created').length).toBe(3)

      // the next life replays the open run once the dead life's lease ran out, and keeps it paused
      second = Engine.open({
        dataDir: dir,
        token: 'budget-crash-2',
        env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'life-2' },
        harness: { leaseTtlMs: LEASE_TTL_MS, backoffBaseMs: 5, backoffMaxMs: 20, stallTimeoutMs: 5_000 },
        defaultHands: false,
      })
      await sleep(LEASE_TTL_MS * 3)
      const still = events()
      expect(runEvents(still)).toEqual(runEvents(paused))
      expect(still.slice(paused.length).filter((e) => e.type !== 'session.status_idle' || stopType(e) !== 'budget_reached')).toEqual([])
      expect(Object.fromEntries(asks)).toEqual({ 'Review slowly': ['life-1'], 'Review expensively': ['life-1'] })
      expect((await second.services.sessions.retrieve(sid)).status).toBe('idle')

      // a raise resumes the run: the waiting agent asks the model (once), the run completes, the lead reads it
      const raised = { type: 'limit', max_list_cost: { amount: '2000', currency: 'USD' } }
      await second.services.sessions.update(sid, { budget: raised } as never)
      const done = await until('the work to be done after the raise', () => (runFinished(events()) ? events() : undefined), tail)
      const updatedAt = done.findIndex((e) => e.type === 'session.updated')
      expect(done[updatedAt]).toMatchObject({ budget: raised })
      expect(done[updatedAt + 1]).toMatchObject({ type: 'workflow_run.status_running' })
      expect(runEvents(done)).toEqual([...runEvents(paused), 'workflow_run.status_running', 'workflow_run.phase_ended', 'workflow_run.status_ended'])
      expect(field(done.find((e) => e.type === 'workflow_run.status_ended')!, 'output')).toEqual({ first: 'expensive answer', second: 'Review after the budget: ok', later: ['slow answer', 'Review last: ok'] })
      expect(Object.fromEntries(asks)).toEqual({ 'Review slowly': ['life-1'], 'Review expensively': ['life-1'], 'Review after the budget': ['life-2'], 'Review last': ['life-2'] })
      expect(new Set(done.map((e) => e.id)).size).toBe(done.length)
    } finally {
      await second?.close()
      await parent.close()
      await model.close()
    }
  }, 90_000)
})
