import { afterEach, describe, expect, it, vi } from 'vitest'
import { WalSync } from '../../../src/main/session/log/wal-sync'
import type { ModelClient } from '../../../src/main/harness/model-client'
import { LEAD, openHarnessFixture, team, type HarnessFixture } from '../../support/harness-fixture'
import { say, systemOf, toolCall, toolCalls, type RecordedRequest, type ScriptStep } from '../../support/model-server'

// What a tool turn waits for on the disk: the response's events and the journal record of its
// first call share one commit and one fsync, and only then do the hands get the call. And what
// threads ending together wait for: nothing of each other's (each computes the session's status
// inside its own commit), and never an fsync.

/** From `hold()` on, every WAL fsync waits until `open()` (then the real one runs); before it, fsyncs run as ever. */
function fsyncGate() {
  const sync = WalSync.prototype.sync
  let gate: Promise<void> | undefined
  let release: (() => void) | undefined
  vi.spyOn(WalSync.prototype, 'sync').mockImplementation(function (this: WalSync, done) {
    if (!gate) return sync.call(this, done)
    void gate.then(() => sync.call(this, done))
  })
  return {
    hold: () => void (gate ??= new Promise<void>((r) => (release = r))),
    held: () => gate !== undefined,
    open: () => release?.(),
  }
}

let f: HarnessFixture | undefined
afterEach(async () => {
  vi.restoreAllMocks()
  await f?.close()
  f = undefined
})

describe('a tool turn', () => {
  it('hands the first call of a response to the hands after one fsync, with its journal record and the response in the same commit', async () => {
    const syncs = vi.spyOn(WalSync.prototype, 'sync')
    let syncsAtResponse = -1
    const atExecute: { syncs: number; journaled: boolean; toolUseLogged: boolean }[] = []
    let calls = 0
    f = await openHarnessFixture({
      // (a response comes 40 ms after its request: the appends before it are on disk by then)
      script: (req: RecordedRequest) => ({ ...(++calls <= 2 ? toolCall(req, 'bash', { command: `echo ${calls}` }) : say('done')), delayMs: 40 }) as ScriptStep,
      wrapModel: (inner): ModelClient => ({
        stream: async (request, handlers) => {
          const r = await inner.stream(request, handlers)
          syncsAtResponse = syncs.mock.calls.length
          return r
        },
      }),
    })
    const fixture = f
    const db = fixture.engine.stores.db
    fixture.router.beforeRun = (call) => {
      const journaled = db.prepare('SELECT 1 FROM harness_tool_calls WHERE tool_use_id = ?').get(call.toolUseId) !== undefined
      const toolUseLogged = fixture.events(call.sessionId).some((e) => e.type === 'agent.tool_use' && e.id === call.toolUseId)
      atExecute.push({ syncs: syncs.mock.calls.length - syncsAtResponse, journaled, toolUseLogged })
    }
    const sid = await fixture.createSession('run two commands')
    await fixture.waitFor(sid, (e) => e.some((x) => x.type === 'agent.message'))
    expect(atExecute).toHaveLength(2)
    // each call: its tool_use is readable (on disk), its journal row is written, and exactly one
    // fsync ran between the response and the hand-off (two before: the response, then the journal)
    for (const a of atExecute) expect(a).toEqual({ syncs: 1, journaled: true, toolUseLogged: true })
    expect(fixture.router.calls.map((c) => c.input.command)).toEqual(['echo 1', 'echo 2'])
  })

  it('journals the second call of a response on its own, just before it runs (a crash during the first never reports the second as unknown)', async () => {
    f = await openHarnessFixture({
      script: (req: RecordedRequest) => {
        if (req.body.messages.length > 1) return say('done')
        return toolCalls(req, [
          ['bash', { command: 'echo a' }],
          ['bash', { command: 'echo b' }],
        ])
      },
    })
    const fixture = f
    const db = fixture.engine.stores.db
    const journaledAtFirst: boolean[] = []
    let secondId: string | undefined
    fixture.router.beforeRun = (call) => {
      if (call.input.command !== 'echo a') return
      secondId = fixture.events(call.sessionId).filter((e) => e.type === 'agent.tool_use').at(-1)?.id
      journaledAtFirst.push(db.prepare('SELECT 1 FROM harness_tool_calls WHERE tool_use_id = ?').get(secondId) !== undefined)
    }
    const sid = await fixture.createSession('two at once')
    await fixture.waitFor(sid, (e) => e.some((x) => x.type === 'agent.message'))
    expect(fixture.router.calls.map((c) => c.input.command)).toEqual(['echo a', 'echo b'])
    expect(journaledAtFirst).toEqual([false])
    expect(db.prepare('SELECT 1 FROM harness_tool_calls WHERE tool_use_id = ?').get(secondId)).toBeDefined()
  })

  it("lets threads that end together commit their final batches while the first one's fsync is still out (each computes the session's status inside its commit, waiting for no disk)", async () => {
    const fsyncs = fsyncGate()
    let arrived = 0
    let bothArrived!: () => void
    const both = new Promise<void>((r) => (bothArrived = r))
    f = await openHarnessFixture({
      script: async (req) => {
        if (systemOf(req) === LEAD) {
          if (req.index > 0) return say('Reports read.')
          return toolCalls(req, [
            ['send_to_agent', { agent: 'researcher', message: 'Find the facts.' }],
            ['send_to_agent', { agent: 'writer', message: 'Draft the text.' }],
          ])
        }
        // both children answer at once, and from then on every fsync is held
        if (++arrived === 2) {
          fsyncs.hold()
          bothArrived()
        }
        await both
        return say('Done.')
      },
    })
    const fixture = f
    const t = team(fixture, ['researcher', 'writer'])
    const sid = await fixture.createSession('Research and write.', { agent: t.lead })
    const log = fixture.engine.services.log
    const primaryId = 'sthr_' + sid.slice('sesn_'.length)
    const childIdles = (includeUnsynced: boolean) => log.read(sid, { types: ['session.thread_status_idle'], limit: 100, includeUnsynced }).filter((s) => s.event.session_thread_id && s.event.session_thread_id !== primaryId)
    const until = Date.now() + 5000
    while (childIdles(true).length < 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 5))
    if (childIdles(true).length < 2) fsyncs.open() // (the fixture's close would wait for the held fsyncs)
    // both children's final batches are committed, and none of it is on disk yet
    expect(childIdles(true)).toHaveLength(2)
    expect(childIdles(false)).toHaveLength(0)
    fsyncs.open()
    const evs = await fixture.waitFor(sid, (e) => e.at(-1)?.type === 'session.status_idle' && e.filter((x) => x.type === 'agent.thread_message_received' && !x.session_thread_id).length === 2)
    expect(evs.filter((e) => e.type === 'session.thread_status_idle' && e.session_thread_id && e.session_thread_id !== primaryId)).toHaveLength(2)
  })

  it("runs a workflow's agents one after another while every fsync is held: its driver, its program and the brains they wake go on at each commit", async () => {
    const fsyncs = fsyncGate()
    const WORKER = 'You answer.'
    const PROGRAM = `const a = await agent('worker', 'one'); const b = await agent('worker', 'two after ' + a); return { a, b }`
    f = await openHarnessFixture({
      script: (req) => {
        if (systemOf(req) === LEAD) {
          if (req.body.messages.length === 1) return toolCall(req, 'ant__workflow_run_start', { name: 'chain', program: PROGRAM })
          return say('Noted.')
        }
        const prompt = JSON.stringify(req.body.messages[0].content)
        // from the first agent's request on, nothing more reaches the disk until the test says so
        if (prompt.includes('one')) fsyncs.hold()
        return say(prompt.includes('two') ? 'second' : 'first')
      },
    })
    const fixture = f
    try {
      const worker = fixture.engine.services.agents.create({ name: 'worker', model: 'claude-sonnet-5-5', system: WORKER } as never).id
      const lead = fixture.engine.services.agents.create({
        name: 'lead',
        model: 'claude-sonnet-5-5',
        system: LEAD,
        multiagent: { type: 'multiagent_20261001', workflows: { type: 'enabled', predefined_agents: [worker] } },
      } as never).id
      const sid = await fixture.createSession('Run the chain.', { agent: lead })
      const workerPrompts = () => fixture.model.requests.filter((r) => systemOf(r) === WORKER).map((r) => JSON.stringify(r.body.messages[0].content))
      const until = Date.now() + 5000
      while (workerPrompts().length < 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 5))
      // the second agent was asked, with the first one's answer, though nothing since the first
      // agent's request is on disk: the run's events are committed only
      expect(fsyncs.held()).toBe(true)
      expect(workerPrompts()).toEqual([expect.stringContaining('one'), expect.stringContaining('two after first')])
      expect(fixture.events(sid).some((e) => e.type === 'workflow_run.status_ended')).toBe(false)
      fsyncs.open()
      const evs = await fixture.waitFor(sid, (e) => e.some((x) => x.type === 'workflow_run.status_ended') && e.at(-1)?.type === 'session.status_idle')
      expect(evs.find((e) => e.type === 'workflow_run.status_ended')).toMatchObject({ result: { type: 'completed' }, output: { a: 'first', b: 'second' } })
    } finally {
      fsyncs.open()
    }
  })
})
