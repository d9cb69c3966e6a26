import { afterEach, describe, expect, it, vi } from 'vitest'
import { WalSync } from '../../../src/main/session/log/wal-sync'
import type { ModelClient } from '../../../src/main/harness/model-client'
import { openHarnessFixture, type HarnessFixture } from '../../support/harness-fixture'
import { say, toolCall, type RecordedRequest, type ScriptStep } from '../../support/model-server'

// What a tool turn waits for on the disk: the response's events and the journal record of its
// first call share one commit and one fsync, and only then do the hands get the call.

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
        const a = toolCall(req, 'bash', { command: 'echo a' })
        const b = toolCall(req, 'bash', { command: 'echo b' })
        return a.kind === 'message' && b.kind === 'message' ? { ...a, blocks: [...a.blocks, ...b.blocks] } : a
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
})
