import { afterEach, describe, expect, it, vi } from 'vitest'
import type { ModelClient } from '../../../src/main/harness/model-client'
import { SqliteLeaseStore } from '../../../src/main/session/lease-store'
import { openHarnessFixture, type HarnessFixture } from '../../support/harness-fixture'
import { say, toolCall, toolCalls, type RecordedRequest, type ScriptStep } from '../../support/model-server'

// A brain writes only while its engine holds the session's lease (orchestrator/lease-fence.ts):
// an engine that was paused past its lease (SIGSTOP, a laptop asleep) resumes with brains whose
// model answers arrive before its next renewal finds the lease gone; the engine that took the
// lease over runs the same threads meanwhile. Here "another engine" is a lease store of another
// owner on the same database that takes the expired lease at a chosen instant.

let f: HarnessFixture | undefined
afterEach(async () => {
  vi.restoreAllMocks()
  await f?.close()
  f = undefined
})

/** Takes the session's lease for another owner, as an engine would once the holder's lease expired (its clock is 10 min ahead). */
function takeOver(fixture: HarnessFixture, sessionId: string): SqliteLeaseStore {
  const other = new SqliteLeaseStore(fixture.engine.stores.db, { owner: 'elsewhere:1:feedfacecafe', ttlMs: 60_000, clock: () => Date.now() + 600_000 })
  expect(other.acquire(sessionId)).toBe(true)
  return other
}

/**
 * A session whose first model answer (a bash call) arrives just after another engine took its
 * lease: the request's start was written under the lease, the answer is in, not yet recorded.
 * Resolves once the session's brain stopped, with the other engine's lease store.
 */
async function cutOffAtAnswer(command: string): Promise<{ fixture: HarnessFixture; sessionId: string; other: SqliteLeaseStore }> {
  let sessionId = ''
  let other: SqliteLeaseStore | undefined
  f = await openHarnessFixture({
    script: (req: RecordedRequest) => (req.body.messages.length === 1 ? toolCall(req, 'bash', { command }) : say('done')) as ScriptStep,
    wrapModel: (inner): ModelClient => ({
      stream: async (request, handlers) => {
        const r = await inner.stream(request, handlers)
        other ??= takeOver(f!, sessionId)
        return r
      },
    }),
  })
  const fixture = f
  sessionId = (await fixture.engine.services.sessions.create({ agent: fixture.agentId, environment_id: fixture.environmentId } as Parameters<typeof fixture.engine.services.sessions.create>[0])).id
  await fixture.send(sessionId, [{ type: 'user.message', content: [{ type: 'text', text: 'run it' }] }])
  await fixture.waitFor(sessionId, (e) => e.some((x) => x.type === 'span.model_request_start'))
  await brainsStopped(fixture)
  return { fixture, sessionId, other: other! }
}

async function brainsStopped(fixture: HarnessFixture): Promise<void> {
  const deadline = Date.now() + 10_000
  while (fixture.engine.brains.scheduler.running().length > 0) {
    if (Date.now() > deadline) throw new Error('the brain never stopped')
    await new Promise((r) => setTimeout(r, 10))
  }
}

describe("a brain whose session's lease another engine took", () => {
  it('writes nothing of a model answer that arrives after the take-over, hands its tool call to no one, and stops without reporting a failure', async () => {
    const errors = vi.spyOn(console, 'error')
    const { fixture, sessionId } = await cutOffAtAnswer('echo fenced')
    await new Promise((r) => setTimeout(r, 200))

    const types = fixture.events(sessionId).map((e) => e.type)
    // the request's start was written under the lease; nothing after the take-over
    expect(types.at(-1)).toBe('span.model_request_start')
    expect(types).not.toContain('agent.tool_use')
    expect(types).not.toContain('span.model_request_end')
    expect(fixture.router.calls).toEqual([])
    expect(fixture.engine.stores.db.prepare('SELECT COUNT(*) AS n FROM harness_tool_calls').get()).toEqual({ n: 0 })
    expect(fixture.model.requests).toHaveLength(1)
    // a lost lease is not a brain's failure
    expect(errors.mock.calls.map((c) => String(c[0])).filter((m) => m.includes('failed'))).toEqual([])
    expect(fixture.engine.brains.scheduler.holds(sessionId)).toBe(false)
  })

  it('takes the session back once the other engine gives the lease up, and finishes the turn it was cut out of', async () => {
    const { fixture, sessionId, other } = await cutOffAtAnswer('echo once')
    expect(fixture.router.calls).toEqual([])
    // the other engine is done with the session (it gives the lease back, or dies): this one resumes it
    other.release(sessionId)
    const idle = await fixture.waitForIdle(sessionId, 15_000)
    expect(idle.stop_reason.type).toBe('end_turn')
    // the answer that was cut off is asked for again; its call runs once, under the lease
    expect(fixture.router.calls.map((c) => c.input.command)).toEqual(['echo once'])
    expect(fixture.events(sessionId).filter((e) => e.type === 'agent.tool_use')).toHaveLength(1)
    expect(fixture.model.requests).toHaveLength(3)
    expect(fixture.engine.brains.leases.owns(sessionId)).toBe(true)
  })

  it("does not record the result of a call that was running when the lease went, and never runs the response's next call", async () => {
    f = await openHarnessFixture({
      script: (req: RecordedRequest) =>
        req.body.messages.length > 1
          ? say('done')
          : toolCalls(req, [
              ['bash', { command: 'echo a' }],
              ['bash', { command: 'echo b' }],
            ]),
    })
    const fixture = f
    fixture.router.beforeRun = (call) => {
      if (call.input.command === 'echo a') takeOver(fixture, call.sessionId)
    }
    const sid = await fixture.createSession('two at once')
    await fixture.waitFor(sid, (e) => e.some((x) => x.type === 'agent.tool_use'))
    await brainsStopped(fixture)
    await new Promise((r) => setTimeout(r, 200))

    expect(fixture.router.calls.map((c) => c.input.command)).toEqual(['echo a'])
    const evs = fixture.events(sid)
    expect(evs.filter((e) => e.type === 'agent.tool_use')).toHaveLength(2)
    expect(evs.filter((e) => e.type === 'agent.tool_result')).toHaveLength(0)
    // the second call's journal record was refused with the rest: a later brain sees it as never started
    expect(fixture.engine.stores.db.prepare('SELECT COUNT(*) AS n FROM harness_tool_calls').get()).toEqual({ n: 1 })
    expect(fixture.model.requests).toHaveLength(1)
  })
})
