import { afterAll, describe, expect, it } from 'vitest'
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Engine } from '../../../src/main/engine'
import type { LoggedEvent } from '../../../src/main/session/event-log'
import { CrashChildren } from '../../support/crash-children'
import { ScriptedModelServer, type RecordedRequest } from '../../support/model-server'
import { mulberry32 } from '../../support/random'
import { createRunSession, donePrompts, eventsOf, expectedOutput, field, runFinished, runResponder } from '../../support/workflow-crash-fixture'

// A workflow run survives kill -9 of its engine at many instants (issue #12, docs/workflows.md
// "Durability"): each engine life is a child process (test/support/workflow-crash-child.ts) over
// one data directory, SIGKILLed at a seeded random instant and started again. The seed is
// printed; CORRAL_WF_CRASH_SEED=<seed> draws the same instants (the engine's own timing still
// varies from one machine to the next).

const N = 100 // agents per phase: 2 phases → 200 agents
const KILLS = Number(process.env.CORRAL_WF_CRASH_KILLS ?? 22)
const SEED = Number(process.env.CORRAL_WF_CRASH_SEED ?? Math.floor(Math.random() * 2 ** 31))

const dir = mkdtempSync(join(tmpdir(), 'corral-wf-crash-'))
const children = new CrashChildren({ dir, script: join(__dirname, '../../support/workflow-crash-child.ts') })
afterAll(() => {
  children.dispose()
  if (process.env.CORRAL_KEEP) console.log('KEPT', dir)
  else rmSync(dir, { recursive: true, force: true })
})

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('a workflow run of 200 agents across kill -9 of its engine', () => {
  it(`completes after ${KILLS} kills at seeded random instants with the uncrashed output: no completed agent is asked again, no phase event is written twice, every run thread is archived once`, async () => {
    console.log(`[workflow crash test] seed ${SEED} (CORRAL_WF_CRASH_SEED=${SEED} draws the same instants)`)
    const rand = mulberry32(SEED)
    const expected = expectedOutput(N)

    // the uncrashed run: one engine life from the start to the end of the work
    const cleanDir = join(dir, 'clean')
    mkdirSync(cleanDir)
    const cleanAsks = new Map<string, number>()
    const cleanModel = await ScriptedModelServer.start(runResponder({ n: N, delayMs: () => 5, onWorker: (p) => cleanAsks.set(p, (cleanAsks.get(p) ?? 0) + 1) }))
    cleanModel.keepRequests = 0
    const cleanParent = Engine.open({ dataDir: cleanDir, token: 'crash-test', env: {}, harness: { enabled: false }, defaultHands: false })
    let cleanOutput: unknown
    const cleanStarted = Date.now()
    try {
      const sid = await createRunSession(cleanParent)
      const child = await children.start([cleanDir, cleanModel.url])
      const deadline = Date.now() + 60_000
      while (!runFinished(eventsOf(cleanParent, sid))) {
        if (Date.now() > deadline) throw new Error('the uncrashed run did not finish in 60 s')
        await sleep(50)
      }
      await children.kill(child)
      cleanOutput = field(eventsOf(cleanParent, sid).find((e) => e.type === 'workflow_run.status_ended')!, 'output')
    } finally {
      await cleanParent.close()
      await cleanModel.close()
    }
    const cleanSeconds = (Date.now() - cleanStarted) / 1000
    expect(cleanOutput).toEqual(expected)
    expect(cleanAsks.size).toBe(2 * N)
    expect([...cleanAsks.values()].every((n) => n === 1)).toBe(true)

    // the crashed run
    const crashDir = join(dir, 'crash')
    mkdirSync(crashDir)
    /**
     * Which engine life asked each worker prompt, in order (each life's requests carry its own
     * API key): a request the killed life sent may reach the server after the kill returned, so
     * the instants of asks and kills cannot tell lives apart, but the key can.
     */
    const asks = new Map<string, number[]>()
    const delays = mulberry32(SEED ^ 0x5bd1e995)
    const lifeOf = (req: RecordedRequest) => Number(/life-(\d+)/.exec(String(req.headers.authorization ?? ''))?.[1] ?? NaN)
    const model = await ScriptedModelServer.start(runResponder({ n: N, delayMs: () => 5 + Math.floor(delays() * 400), onWorker: (p, req) => asks.set(p, [...(asks.get(p) ?? []), lifeOf(req)]) }))
    model.keepRequests = 0
    const parent = Engine.open({ dataDir: crashDir, token: 'crash-test', env: {}, harness: { enabled: false }, defaultHands: false })
    const crashStarted = Date.now()
    try {
      const sid = await createRunSession(parent)
      const lastSeq = () => parent.services.log.lastSeq(sid)
      let life = 0
      /** At each kill, the asks of every prompt whose agent was done in the log then: no later ask may come. */
      const doneAtKill = new Map<string, number>()
      let kills = 0
      let killsMidRun = 0
      /** How many of the run's agents are done in the log (their thread idled with end_turn), read on from where it last stopped. */
      let doneCursor = 0
      let doneCount = 0
      const agentsDone = () => {
        for (const s of parent.services.log.read(sid, { after: doneCursor, limit: 1000 })) {
          doneCursor = s.seq
          const e = s.event as LoggedEvent & { stop_reason?: { type: string } }
          if (e.type === 'session.thread_status_idle' && e.session_thread_id && e.stop_reason?.type === 'end_turn') doneCount++
        }
        return doneCount
      }
      let doneAtKills = 0
      while (kills < KILLS && !runFinished(eventsOf(parent, sid))) {
        const before = lastSeq()
        const child = await children.start([crashDir, model.url, '64', '10000', `life-${++life}`])
        if (rand() < 0.15) {
          // a kill during the replay itself, before this life wrote anything
          await sleep(rand() * 300)
        } else {
          const deadline = Date.now() + 20_000
          while (lastSeq() === before && Date.now() < deadline) await sleep(5)
          // then after a few more agents are done (counting agents, not events or time, spreads the
          // kills over the whole run: a life's first commits restart up to 64 threads at once, far
          // more events than any small count). The count is drawn so that the kills left cannot
          // finish the run, whatever a loaded machine commits at once: the last life does that.
          const done = agentsDone()
          const mean = Math.max(1, (2 * N - done - 40) / (KILLS - kills + 1))
          const target = done + 1 + Math.floor(rand() * 2 * mean)
          const until = Date.now() + 200 + rand() * 1500
          while (agentsDone() < target && Date.now() < until) await sleep(2)
        }
        await children.kill(child)
        kills++
        const evs = eventsOf(parent, sid)
        if (evs.some((e) => e.type === 'workflow_run.status_running') && !evs.some((e) => e.type === 'workflow_run.status_ended')) killsMidRun++
        for (const p of donePrompts(evs)) if (!doneAtKill.has(p)) doneAtKill.set(p, asks.get(p)?.length ?? 0)
        if (doneAtKill.size > 0 && doneAtKill.size < 2 * N) doneAtKills++
        if (process.env.CORRAL_CRASH_DEBUG) console.log('KILL', kills, lastSeq(), doneAtKill.size)
      }
      const last = await children.start([crashDir, model.url, '64', '10000', `life-${++life}`])
      const deadline = Date.now() + 60_000
      while (!runFinished(eventsOf(parent, sid))) {
        if (Date.now() > deadline) throw new Error(`the run did not finish after the last restart (seed ${SEED}):\n${eventsOf(parent, sid).slice(-40).map((e) => `${e.type} ${e.session_thread_id ?? ''}`).join('\n')}`)
        await sleep(50)
      }
      await children.kill(last)
      const crashSeconds = (Date.now() - crashStarted) / 1000

      expect(kills).toBeGreaterThanOrEqual(20)
      expect(killsMidRun).toBeGreaterThanOrEqual(15)
      // most kills fell between completions: some agents done in the journal, others not yet
      expect(doneAtKills).toBeGreaterThanOrEqual(10)
      const evs = eventsOf(parent, sid)
      expect(new Set(evs.map((e) => e.id)).size).toBe(evs.length)

      // the run completed with the uncrashed output
      const ended = evs.filter((e) => e.type === 'workflow_run.status_ended')
      expect(ended).toHaveLength(1)
      expect(field(ended[0], 'result')).toEqual({ type: 'completed' })
      expect(field(ended[0], 'output')).toEqual(cleanOutput)

      // every agent was asked; a done agent never again; an agent asked twice was asked by two lives (a kill between)
      expect(asks.size).toBe(2 * N)
      for (const [p, n] of doneAtKill) expect({ prompt: p, asks: asks.get(p)!.length }).toEqual({ prompt: p, asks: n })
      expect([...asks.values()].flat().every((l) => Number.isInteger(l) && l >= 1)).toBe(true)
      const repeated = [...asks.values()].reduce((n, lives) => n + lives.length - 1, 0)
      expect([...asks].filter(([, lives]) => lives.some((l, i) => i > 0 && l <= lives[i - 1])).map(([prompt, lives]) => ({ prompt, lives }))).toEqual([])

      // no phase event written twice: three phases, each started and ended once
      const started = evs.filter((e) => e.type === 'workflow_run.phase_started')
      const phaseEnded = evs.filter((e) => e.type === 'workflow_run.phase_ended')
      expect(started).toHaveLength(3)
      expect(phaseEnded).toHaveLength(3)
      expect(new Set(started.map((e) => field(e, 'workflow_run_phase_id'))).size).toBe(3)
      expect(new Set(phaseEnded.map((e) => field(e, 'workflow_run_phase_id'))).size).toBe(3)

      // one thread per agent call, each archived once
      const created = evs.filter((e) => e.type === 'session.thread_created' && field(e, 'workflow_run_id'))
      expect(created).toHaveLength(2 * N)
      expect(new Set(created.map((e) => field(e, 'workflow_call_index'))).size).toBe(2 * N)
      const archived = new Map<string, number>()
      for (const e of evs) if (e.type === 'session.thread_status_terminated' && field(e, 'archived') === true) archived.set(e.session_thread_id!, (archived.get(e.session_thread_id!) ?? 0) + 1)
      for (const c of created) expect({ thread: c.session_thread_id, archives: archived.get(c.session_thread_id!) ?? 0 }).toEqual({ thread: c.session_thread_id, archives: 1 })

      console.log(
        `[workflow crash test] seed ${SEED}: ${kills} kills (${killsMidRun} while the run was open, ${doneAtKills} with some agents done), ${doneAtKill.size} agents done before the last life, ${repeated} asks repeated after a kill cut a turn, ${evs.length} events; uncrashed run ${cleanSeconds.toFixed(1)} s, crashed run ${crashSeconds.toFixed(1)} s`,
      )
    } finally {
      await parent.close()
      await model.close()
    }
  }, 240_000)
})
