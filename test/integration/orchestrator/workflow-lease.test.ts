import { afterAll, describe, expect, it } from 'vitest'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Engine } from '../../../src/main/engine'
import { CrashChildren } from '../../support/crash-children'
import { ScriptedModelServer } from '../../support/model-server'
import { createRunSession, donePrompts, eventsOf, expectedOutput, field, runFinished, runResponder } from '../../support/workflow-crash-fixture'

// Workflow runs are driven under the session's lease (docs/workflows.md "Durability"): two
// engines on one data directory, each a process of its own with a model server of its own (so
// the asks at each server say which engine drove an agent). The first holds the lease and drives
// the run; the second waits; when the first is killed the second takes the lease over and
// replays the run to its end.

const N = 16 // agents per phase
const CONCURRENT = 4

const dir = mkdtempSync(join(tmpdir(), 'corral-wf-lease-'))
const children = new CrashChildren({ dir, script: join(__dirname, '../../support/workflow-crash-child.ts') })
afterAll(() => {
  children.dispose()
  rmSync(dir, { recursive: true, force: true })
})

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
async function until(what: string, ok: () => boolean, ms = 60_000, state?: () => string): Promise<void> {
  const deadline = Date.now() + ms
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${state ? `:\n${state()}` : ''}`)
    await sleep(20)
  }
}

describe('workflow runs under the session lease', () => {
  it("is driven only by the engine holding the session's lease; a second engine on the same data takes the run over when the first dies, and no agent done before is asked again", async () => {
    const asksA = new Map<string, number>()
    const asksB = new Map<string, number>()
    const count = (m: Map<string, number>) => (p: string) => m.set(p, (m.get(p) ?? 0) + 1)
    const modelA = await ScriptedModelServer.start(runResponder({ n: N, delayMs: () => 400, onWorker: count(asksA) }))
    const modelB = await ScriptedModelServer.start(runResponder({ n: N, delayMs: () => 400, onWorker: count(asksB) }))
    const parent = Engine.open({ dataDir: dir, token: 'lease-test', env: {}, harness: { enabled: false }, defaultHands: false })
    try {
      const sid = await createRunSession(parent)
      const a = await children.start([dir, modelA.url, String(CONCURRENT)])
      await until('four agents done under the first engine', () => donePrompts(eventsOf(parent, sid)).size >= 4)

      // the second engine starts while the first drives: it drives nothing, while the first goes on
      const b = await children.start([dir, modelB.url, String(CONCURRENT)])
      const doneWhenBStarted = donePrompts(eventsOf(parent, sid)).size
      await until('the first engine to finish more agents', () => donePrompts(eventsOf(parent, sid)).size >= doneWhenBStarted + CONCURRENT, 30_000, () => eventsOf(parent, sid).slice(-30).map((e) => `${e.type} ${e.session_thread_id ?? ''}`).join('\n'))
      const evsBefore = eventsOf(parent, sid)
      expect(runFinished(evsBefore)).toBe(false)
      expect(asksB.size).toBe(0)

      // the first dies: the second replays the run and drives it to its end
      const doneAtKill = donePrompts(eventsOf(parent, sid))
      await children.kill(a)
      await until('the run to finish under the second engine', () => runFinished(eventsOf(parent, sid)), 60_000)
      await children.kill(b)

      const evs = eventsOf(parent, sid)
      const ended = evs.find((e) => e.type === 'workflow_run.status_ended')!
      expect(field(ended, 'result')).toEqual({ type: 'completed' })
      expect(field(ended, 'output')).toEqual(expectedOutput(N))
      expect(asksB.size).toBeGreaterThan(0)
      // an agent done under the first engine is never asked of the second
      for (const p of doneAtKill) expect({ prompt: p, asksOfB: asksB.get(p) ?? 0 }).toEqual({ prompt: p, asksOfB: 0 })
      // every agent asked once in all, but the ones whose turn the kill cut (asked again by the second)
      for (const [p, n] of asksA) expect({ prompt: p, asks: n }).toEqual({ prompt: p, asks: 1 })
      for (const [p, n] of asksB) expect({ prompt: p, asks: n }).toEqual({ prompt: p, asks: 1 })
      expect(new Set([...asksA.keys(), ...asksB.keys()]).size).toBe(2 * N)
      const created = evs.filter((e) => e.type === 'session.thread_created' && field(e, 'workflow_run_id'))
      expect(created).toHaveLength(2 * N)
      expect(evs.filter((e) => e.type === 'workflow_run.phase_started')).toHaveLength(3)
      for (const c of created) expect(evs.filter((e) => e.type === 'session.thread_status_terminated' && e.session_thread_id === c.session_thread_id && field(e, 'archived') === true)).toHaveLength(1)
    } finally {
      await parent.close()
      await modelA.close()
      await modelB.close()
    }
  }, 120_000)

  it('lets an engine that was paused past its lease write nothing more of the run once it resumes: the engine that took the lease over drives it to its end', async () => {
    const paused = join(dir, 'paused')
    mkdirSync(paused)
    const asksA = new Map<string, number>()
    const asksB = new Map<string, number>()
    const count = (m: Map<string, number>) => (p: string) => m.set(p, (m.get(p) ?? 0) + 1)
    const modelA = await ScriptedModelServer.start(runResponder({ n: N, delayMs: () => 400, onWorker: count(asksA) }))
    const modelB = await ScriptedModelServer.start(runResponder({ n: N, delayMs: () => 400, onWorker: count(asksB) }))
    const parent = Engine.open({ dataDir: paused, token: 'lease-test', env: {}, harness: { enabled: false }, defaultHands: false })
    try {
      const sid = await createRunSession(parent)
      // a short lease (2 s), so the second engine may take it while the first is stopped (not shorter: under heavy load a renewal can lag a second)
      const a = await children.start([paused, modelA.url, String(CONCURRENT), '2000'])
      await until('four agents done under the first engine', () => donePrompts(eventsOf(parent, sid)).size >= 4)
      const b = await children.start([paused, modelB.url, String(CONCURRENT), '2000'])
      await sleep(300)
      expect(asksB.size).toBe(0)
      // the first engine stops (SIGSTOP: a laptop asleep, a process swapped out) past its lease
      process.kill(a.pid!, 'SIGSTOP')
      const doneAtStop = donePrompts(eventsOf(parent, sid))
      await until('the second engine to take the run over', () => asksB.size > 0)
      process.kill(a.pid!, 'SIGCONT')
      await until('the run to finish', () => runFinished(eventsOf(parent, sid)), 60_000)
      await sleep(500)
      await children.kill(a)
      await children.kill(b)

      const evs = eventsOf(parent, sid)
      const ended = evs.filter((e) => e.type === 'workflow_run.status_ended')
      expect(ended).toHaveLength(1)
      expect(field(ended[0], 'output')).toEqual(expectedOutput(N))
      for (const p of doneAtStop) expect({ prompt: p, asksOfB: asksB.get(p) ?? 0 }).toEqual({ prompt: p, asksOfB: 0 })
      // the run's own events once each: one thread per call, three phases, one archive per thread
      const created = evs.filter((e) => e.type === 'session.thread_created' && field(e, 'workflow_run_id'))
      expect(created).toHaveLength(2 * N)
      expect(new Set(created.map((e) => field(e, 'workflow_call_index'))).size).toBe(2 * N)
      expect(evs.filter((e) => e.type === 'workflow_run.phase_started')).toHaveLength(3)
      expect(evs.filter((e) => e.type === 'workflow_run.phase_ended')).toHaveLength(3)
      for (const c of created) expect(evs.filter((e) => e.type === 'session.thread_status_terminated' && e.session_thread_id === c.session_thread_id && field(e, 'archived') === true)).toHaveLength(1)
    } finally {
      await parent.close()
      await modelA.close()
      await modelB.close()
    }
  }, 120_000)
})
