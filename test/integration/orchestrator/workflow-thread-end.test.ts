import { afterAll, describe, expect, it } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Engine } from '../../../src/main/engine'
import type { StoredEvent } from '../../../src/main/session/event-log'
import { ScriptedModelServer } from '../../support/model-server'
import { createRunSession, eventsOf, expectedOutput, field, runFinished, runResponder, workerAnswer } from '../../support/workflow-crash-fixture'
import { untilTrue } from '../../support/polling'

// How a workflow run's thread ends (docs/workflows.md "Durability"): its brain's last batch (the
// answer, the idle with end_turn) archives the thread too, and the run's driver records the
// call's result in that same transaction, so the answer, the archive and the journal row are one
// commit. A thread whose archive is in the log while its journal row has no result (an engine
// that died between the two writes of a re-attached thread) is done with its answer on replay,
// not failed as archived.

const dirs: string[] = []
const models: ScriptedModelServer[] = []
afterAll(async () => {
  for (const m of models) await m.close()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

const until = (what: string, ok: () => boolean, ms = 30_000) => untilTrue(what, ok, ms, 20)

function dataDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'corral-wf-end-'))
  dirs.push(d)
  return d
}

describe("a workflow run's thread at the end of its task", () => {
  it('is archived and its call recorded in the commit of the idle that ends its turn', async () => {
    const model = await ScriptedModelServer.start(runResponder({ n: 4, delayMs: () => 0 }))
    models.push(model)
    const dir = dataDir()
    const engine = Engine.open({ dataDir: dir, token: 't', env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k' }, defaultHands: false, harness: { workflows: { maxConcurrentAgents: 2 } } })
    const seen: { tid: string; idleSeq: number; archiveSeq: number | undefined; row: { outcome: unknown; resolvedSeq: number | null } | undefined }[] = []
    let runId = ''
    try {
      // told at each commit, before its fsync and before any later transaction: what the log and
      // the journal hold then is what that commit (or an earlier one) wrote
      const off = engine.services.log.subscribeCommitted((s: StoredEvent) => {
        const e = s.event
        if (e.type === 'workflow_run.created') runId = e.workflow_run_id
        if (e.type !== 'session.thread_status_idle' || !e.session_thread_id || field<{ type: string }>(e, 'stop_reason')?.type !== 'end_turn') return
        const tid = e.session_thread_id
        const created = engine.services.log.read(s.sessionId, { threadId: tid, types: ['session.thread_created'], limit: 1, includeUnsynced: true })[0]
        if (!created || !field<string | undefined>(created.event, 'workflow_run_id')) return
        const [archive] = engine.services.log.read(s.sessionId, { threadId: tid, types: ['session.thread_status_terminated'], limit: 1, includeUnsynced: true })
        const row = engine.stores.workflows.calls(runId).find((r) => r.threadId === tid)
        seen.push({ tid, idleSeq: s.seq, archiveSeq: archive?.seq, row: row && { outcome: row.outcome, resolvedSeq: row.resolvedSeq } })
      })
      const sid = await createRunSession(engine)
      await until('the run to finish', () => runFinished(eventsOf(engine, sid)))
      off()
      const evs = eventsOf(engine, sid)
      expect(field(evs.find((e) => e.type === 'workflow_run.status_ended')!, 'output')).toEqual(expectedOutput(4))
      expect(seen).toHaveLength(8)
      for (const s of seen) {
        // the archive right after the idle, in the same append; the journal row already resolved, at the idle's seq
        expect(s.archiveSeq).toBe(s.idleSeq + 1)
        expect(s.row).toEqual({ outcome: { ok: true, value: expect.any(String) }, resolvedSeq: s.idleSeq })
      }
      // archived once each
      for (const s of seen) expect(evs.filter((e) => e.type === 'session.thread_status_terminated' && e.session_thread_id === s.tid)).toHaveLength(1)
    } finally {
      await engine.close()
    }
  }, 60_000)

  it('is done with its answer on replay when its archive is in the log and its journal row has no result', async () => {
    const dir = dataDir()
    // the first engine's workers never answer in time: it dies with the map phase's threads working
    const slow = await ScriptedModelServer.start(runResponder({ n: 2, delayMs: () => 60_000 }))
    const fast = await ScriptedModelServer.start(runResponder({ n: 2, delayMs: () => 0 }))
    models.push(slow, fast)
    const parent = Engine.open({ dataDir: dir, token: 'p', env: {}, harness: { enabled: false }, defaultHands: false })
    try {
      const sid = await createRunSession(parent)
      const first = Engine.open({ dataDir: dir, token: 'a', env: { ANTHROPIC_BASE_URL: slow.url, ANTHROPIC_API_KEY: 'k' }, defaultHands: false })
      await until('both map agents to ask the model', () => slow.requests.filter((r) => r.body.messages.length === 1 && JSON.stringify(r.body.messages).includes('map ')).length >= 2)
      await first.close()

      // `map 0`'s brain ended its turn and archived its thread (one append), and the engine died
      // before the driver recorded the call (a re-attached thread's result is a write of its own)
      const evs = eventsOf(parent, sid)
      const created = evs.find((e) => e.type === 'agent.thread_message_received' && e.session_thread_id && JSON.stringify(field(e, 'content')).includes('"map 0"'))!
      const tid = created.session_thread_id!
      const runId = field<string>(evs.find((e) => e.type === 'workflow_run.created')!, 'workflow_run_id')
      expect(parent.stores.workflows.calls(runId).find((r) => r.threadId === tid)?.outcome).toBeNull()
      await parent.services.log.append(sid, [
        { type: 'agent.message', session_thread_id: tid, content: [{ type: 'text', text: workerAnswer('map 0') }] },
        { type: 'session.thread_status_idle', session_thread_id: tid, agent_name: 'worker', stop_reason: { type: 'end_turn' }, stop_details: null },
        { type: 'session.thread_status_terminated', session_thread_id: tid, agent_name: 'worker', archived: true },
      ] as never)

      const second = Engine.open({ dataDir: dir, token: 'b', env: { ANTHROPIC_BASE_URL: fast.url, ANTHROPIC_API_KEY: 'k' }, defaultHands: false })
      try {
        await until('the run to finish under the second engine', () => runFinished(eventsOf(parent, sid)))
      } finally {
        await second.close()
      }
      const after = eventsOf(parent, sid)
      const ended = after.find((e) => e.type === 'workflow_run.status_ended')!
      expect(field(ended, 'result')).toEqual({ type: 'completed' })
      expect(field(ended, 'output')).toEqual(expectedOutput(2))
      // `map 0` was not asked again, and its thread was not archived a second time
      expect(fast.requests.filter((r) => JSON.stringify(r.body.messages[0]).includes('map 0'))).toHaveLength(0)
      expect(after.filter((e) => e.type === 'session.thread_status_terminated' && e.session_thread_id === tid)).toHaveLength(1)
      expect(parent.stores.workflows.calls(runId).find((r) => r.threadId === tid)?.outcome).toEqual({ ok: true, value: workerAnswer('map 0') })
    } finally {
      await parent.close()
    }
  }, 90_000)
})
