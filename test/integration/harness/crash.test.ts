import { afterAll, describe, expect, it } from 'vitest'
import { mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Engine } from '../../../src/main/engine'
import type { LoggedEvent } from '../../../src/main/session/event-log'
import { CrashChildren } from '../../support/crash-children'
import { ScriptedModelServer, say, type RecordedRequest, type ScriptStep } from '../../support/model-server'

const SESSIONS = 4
const STEPS_PER_TURN = 8
const KILLS = Number(process.env.CORRAL_CRASH_KILLS ?? 100)

const dir = mkdtempSync(join(tmpdir(), 'corral-crash-'))
const children = new CrashChildren({ dir })
afterAll(() => {
  children.dispose()
  rmSync(dir, { recursive: true, force: true })
})

/** The scripted model: each turn is STEPS_PER_TURN tool results long (sometimes two calls at once), then "done". */
function responder(req: RecordedRequest): ScriptStep {
  let results = 0
  for (let i = req.body.messages.length - 1; i >= 0; i--) {
    const m = req.body.messages[i]
    if (m.role !== 'user' || typeof m.content === 'string') continue
    results += m.content.filter((b) => b.type === 'tool_result').length
    if (m.content.some((b) => b.type === 'text')) break
  }
  if (results >= STEPS_PER_TURN) return say('done', { chunkSize: 2 })
  const blocks: Extract<ScriptStep, { kind: 'message' }>['blocks'] = [{ type: 'text', text: `step ${results + 1}` }]
  blocks.push({ type: 'tool_use', name: 'bash', input: { command: `echo step-${results + 1}` } })
  if (results % 3 === 1 && results + 1 < STEPS_PER_TURN) blocks.push({ type: 'tool_use', name: 'bash', input: { command: `echo step-${results + 2}` } })
  return { kind: 'message', blocks, delayMs: Math.floor(Math.random() * 4) }
}

describe('crash safety', () => {
  it(`survives kill -9 at ${KILLS} random instants: every session ends its turns, no event or side effect twice, one result per tool call`, async () => {
    const model = await ScriptedModelServer.start(responder)
    const effects = join(dir, 'effects.log')
    const parent = Engine.open({ dataDir: dir, token: 'crash-test', env: {}, harness: { enabled: false }, defaultHands: false })
    try {
      const agent = parent.services.agents.create({ name: 'crash', model: 'claude-sonnet-5-5', tools: [{ type: 'agent_toolset_20260401' }] } as never)
      const env = parent.services.environments.create({ name: 'crash', config: { type: 'cloud' } })
      const sessions: string[] = []
      for (let i = 0; i < SESSIONS; i++) {
        const s = await parent.services.sessions.create({ agent: agent.id, environment_id: env.id, initial_events: [{ type: 'user.message', content: [{ type: 'text', text: `task ${i}` }] }] } as never)
        sessions.push(s.id)
      }
      const eventsOf = (id: string): LoggedEvent[] => {
        const out: LoggedEvent[] = []
        for (;;) {
          const page = parent.services.log.read(id, { after: out.length, limit: 1000 })
          out.push(...page.map((p) => p.event))
          if (page.length < 1000) return out
        }
      }
      const finished = (id: string) => {
        const last = eventsOf(id).at(-1) as (LoggedEvent & { stop_reason?: { type: string } }) | undefined
        return last?.type === 'session.status_idle' && last.stop_reason?.type === 'end_turn'
      }

      let kills = 0
      let turns = 1
      while (kills < KILLS) {
        const child = await children.start([dir, model.url, effects])
        await new Promise((r) => setTimeout(r, Math.random() * 150))
        await children.kill(child)
        kills++
        if (sessions.every(finished)) {
          for (const id of sessions) await parent.services.sessions.sendEvents(id, [{ type: 'user.message', content: [{ type: 'text', text: `task again ${turns}` }] }] as never)
          turns++
        }
      }
      // a last, undisturbed run finishes whatever is left
      const last = await children.start([dir, model.url, effects])
      const deadline = Date.now() + 60_000
      while (!sessions.every(finished)) {
        if (Date.now() > deadline) throw new Error('sessions did not finish after the last restart')
        await new Promise((r) => setTimeout(r, 50))
      }
      await children.kill(last)

      const effectLines = existsSync(effects) ? readFileSync(effects, 'utf8').split('\n').filter((l) => l.startsWith('effect ')) : []
      const effectIds = effectLines.map((l) => l.split(' ')[1])
      expect(new Set(effectIds).size).toBe(effectIds.length) // no side effect happened twice

      let toolUses = 0
      let unknownOutcomes = 0
      for (const id of sessions) {
        const evs = eventsOf(id)
        expect(new Set(evs.map((e) => e.id)).size).toBe(evs.length)
        const uses = evs.filter((e) => e.type === 'agent.tool_use')
        const results = evs.filter((e) => e.type === 'agent.tool_result') as unknown as { tool_use_id: string; is_error: boolean; content: { text: string }[] }[]
        toolUses += uses.length
        for (const u of uses) expect(results.filter((r) => r.tool_use_id === u.id)).toHaveLength(1)
        expect(results).toHaveLength(uses.length)
        unknownOutcomes += results.filter((r) => r.is_error && /unknown/.test(r.content[0].text)).length
        // a side effect only for calls of this log, and every successful result is backed by one
        for (const r of results) if (!r.is_error) expect(effectIds).toContain(r.tool_use_id)
        // every turn ended with exactly one "done" and an end_turn idle after it
        const userTurns = evs.filter((e) => e.type === 'user.message').length
        const dones = evs.filter((e) => e.type === 'agent.message' && (e as unknown as { content: { text: string }[] }).content[0].text === 'done')
        expect(dones).toHaveLength(userTurns)
        // each model request has one end, and no answer was stored twice for one request
        const starts = evs.filter((e) => e.type === 'span.model_request_start').map((e) => e.id)
        const ends = evs.filter((e) => e.type === 'span.model_request_end') as unknown as { model_request_start_id: string }[]
        expect(ends.map((e) => e.model_request_start_id).sort()).toEqual([...starts].sort())
        expect(finished(id)).toBe(true)
      }
      console.log(`[crash test] ${kills} kills, ${turns} turns x ${SESSIONS} sessions, ${toolUses} tool calls, ${effectIds.length} side effects, ${unknownOutcomes} reported as unknown after a restart`)
      expect(toolUses).toBeGreaterThanOrEqual(SESSIONS * STEPS_PER_TURN)
    } finally {
      await parent.close()
      await model.close()
    }
  }, 420_000)
})
