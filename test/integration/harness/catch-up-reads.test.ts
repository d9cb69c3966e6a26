import { afterEach, describe, expect, it, vi } from 'vitest'
import { LEAD, openHarnessFixture, team, type HarnessFixture } from '../../support/harness-fixture'
import { say, systemOf, toolCall, userTexts, type ScriptStep } from '../../support/model-server'
import type { EventReadParams } from '../../../src/main/session/event-log'

// A brain's catch-up reads the log from where its previous read of the thread ended, not from
// its thread's last event: the primary, whose events are few among its children's (a workflow
// run of a thousand agents), would otherwise read further back each time it wakes, below the
// log's window of recent rows, and SQLite would walk every child's rows since.

let fx: HarnessFixture | undefined
afterEach(async () => {
  vi.restoreAllMocks()
  await fx?.close()
  fx = undefined
})


describe("a brain's catch-up", () => {
  it("starts each read of the primary's thread where its previous read ended, while children fill the log in between", async () => {
    fx = await openHarnessFixture({
      script: (req) => {
        if (systemOf(req) === LEAD) {
          if (req.index === 0) {
            const blocks = ['a', 'b', 'c'].flatMap((t) => (toolCall(req, 'send_to_agent', { agent: 'worker', message: `task ${t}` }) as Extract<ScriptStep, { kind: 'message' }>).blocks)
            return { kind: 'message', blocks }
          }
          return say(userTexts(req).filter((t) => t.startsWith('<message from=')).length >= 3 ? 'all in' : 'waiting')
        }
        // each worker runs a few bash calls first (its events fill the log between the primary's reads)
        const done = req.body.messages.filter((m) => m.role === 'user' && typeof m.content !== 'string' && m.content.some((b) => b.type === 'tool_result')).length
        const task = userTexts(req)[0] ?? ''
        const calls = task.endsWith('a') ? 1 : task.endsWith('b') ? 4 : 8
        return done < calls ? { ...toolCall(req, 'bash', { command: `echo ${done}` }), delayMs: 5 } : say(`finished ${task}`, { delayMs: 5 })
      },
    })
    const f = fx
    const { lead } = team(f, ['worker'])
    const log = f.engine.services.log
    // the primary's catch-up reads (a page of its thread), and the log's end (on disk) at each
    const reads: { after: number; end: number }[] = []
    const read = log.read.bind(log)
    vi.spyOn(log, 'read').mockImplementation((sessionId: string, params?: EventReadParams) => {
      if (params?.threadId === null && params.limit === 1000 && !params.types) reads.push({ after: params.after ?? 0, end: log.lastSeq(sessionId) })
      return read(sessionId, params)
    })
    const s = await f.engine.services.sessions.create({ agent: lead, environment_id: f.environmentId, initial_events: [{ type: 'user.message', content: [{ type: 'text', text: 'go' }] }] } as never)
    const evs = await f.waitFor(s.id, (e) => e.some((x) => x.type === 'agent.message' && (x as unknown as { content: { text: string }[] }).content[0].text === 'all in'), 20_000)
    expect(f.router.calls).toHaveLength(13)
    expect(reads.length).toBeGreaterThan(3)
    // every read starts at the log's end as the one before it saw it (or later): never back at
    // the primary's own last event while the children's events lie in between
    for (let i = 1; i < reads.length; i++) expect({ read: i, after: reads[i].after }).toEqual({ read: i, after: Math.max(reads[i].after, reads[i - 1].end) })
    // and nothing of the primary's was missed: every report reached its model
    expect(evs.filter((e) => e.type === 'agent.thread_message_received' && !e.session_thread_id)).toHaveLength(3)
  })
})
