import { afterAll, describe, expect, it } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Engine } from '../../../src/main/engine'
import type { LoggedEvent } from '../../../src/main/session/event-log'
import { CrashChildren } from '../../support/crash-children'
import { ScriptedModelServer, say, toolCall, toolResultsOf, type RecordedRequest, type ScriptStep } from '../../support/model-server'

// A kill -9 of the engine while the advisor's request is in flight (DESIGN invariant 2): the
// restarted engine terminates the consultation thread the dead one left running, consults again,
// and the advice reaches the primary exactly once, as the call's one result.

const dir = mkdtempSync(join(tmpdir(), 'corral-advisor-crash-'))
const children = new CrashChildren({ dir })
afterAll(() => {
  children.dispose()
  rmSync(dir, { recursive: true, force: true })
})

const ADVISOR_MODEL = 'claude-opus-5'
const ADVICE = 'Check the lock file first.'

describe('the advisor across a crash', () => {
  it('consults again after a kill -9 mid-consultation, terminates the orphaned thread, and delivers the advice once', async () => {
    let advisorCalls = 0
    let firstArrived!: () => void
    const arrived = new Promise<void>((r) => (firstArrived = r))
    const model = await ScriptedModelServer.start((req: RecordedRequest): ScriptStep => {
      if (req.body.model === ADVISOR_MODEL) {
        advisorCalls++
        if (advisorCalls === 1) {
          firstArrived()
          return say('never delivered', { delayMs: 60_000 })
        }
        return say(ADVICE)
      }
      const results = toolResultsOf(req)
      if (results.length === 0) return toolCall(req, 'ant__advisor', { question: 'What first?' })
      return say(`Done: ${results[0].text}`)
    })
    const parent = Engine.open({ dataDir: dir, token: 'crash-test', env: {}, harness: { enabled: false }, defaultHands: false })
    try {
      const agent = parent.services.agents.create({
        name: 'lead',
        model: 'claude-sonnet-5-5',
        multiagent: { type: 'multiagent_20261001', subagents: { type: 'disabled' }, workflows: { type: 'disabled' }, advisor: { type: 'enabled', model: ADVISOR_MODEL } },
      } as never)
      const env = parent.services.environments.create({ name: 'crash', config: { type: 'cloud' } })
      const sid = (await parent.services.sessions.create({ agent: agent.id, environment_id: env.id, initial_events: [{ type: 'user.message', content: [{ type: 'text', text: 'Fix the build.' }] }] } as never)).id
      const events = (): LoggedEvent[] => parent.services.log.read(sid, { limit: 1000 }).map((r) => r.event)

      const first = await children.start([dir, model.url, join(dir, 'effects.log')])
      await arrived
      first.kill('SIGKILL')
      await new Promise<void>((r) => (first.exitCode !== null || first.signalCode !== null ? r() : first.once('exit', () => r())))
      const second = await children.start([dir, model.url, join(dir, 'effects.log')])
      const deadline = Date.now() + 40_000
      while (events().at(-1)?.type !== 'session.status_idle') {
        if (Date.now() > deadline) throw new Error(`no idle: ${events().map((e) => e.type).join(', ')}`)
        await new Promise((r) => setTimeout(r, 50))
      }
      second.kill('SIGKILL')

      const evs = events()
      expect(model.violations).toEqual([])
      const created = evs.filter((e) => e.type === 'session.thread_created').map((e) => e.session_thread_id!)
      expect(created).toHaveLength(2)
      const [orphan, rerun] = created
      const terminatedAt = (tid: string) => evs.findIndex((e) => e.type === 'session.thread_status_terminated' && e.session_thread_id === tid)
      // the orphan is terminated before the re-run's thread is created, with no advice of its own
      expect(terminatedAt(orphan)).toBeGreaterThan(-1)
      expect(terminatedAt(orphan)).toBeLessThan(evs.findIndex((e) => e.type === 'session.thread_created' && e.session_thread_id === rerun))
      expect(evs.filter((e) => e.type === 'session.thread_status_terminated' && e.session_thread_id === orphan)).toHaveLength(1)
      const received = evs.filter((e) => e.type === 'agent.thread_message_received')
      expect(received).toHaveLength(1)
      expect(received[0]).toMatchObject({ from_session_thread_id: rerun, content: [{ type: 'text', text: ADVICE }] })
      const use = evs.find((e) => e.type === 'agent.tool_use')!
      const results = evs.filter((e) => e.type === 'agent.tool_result' && (e as { tool_use_id?: string }).tool_use_id === use.id)
      expect(results).toHaveLength(1)
      expect(results[0]).toMatchObject({ is_error: false, content: [{ type: 'text', text: ADVICE }] })
      expect(advisorCalls).toBe(2)
    } finally {
      await parent.close()
      await model.close()
    }
  }, 90_000)
})

describe('the advisor across a shutdown', () => {
  it('records the shutdown notice as the call\'s result, and the restarted engine lets the primary go on with it', async () => {
    const shutdownDir = mkdtempSync(join(tmpdir(), 'corral-advisor-shutdown-'))
    let firstArrived!: () => void
    const arrived = new Promise<void>((r) => (firstArrived = r))
    const model = await ScriptedModelServer.start((req: RecordedRequest): ScriptStep => {
      if (req.body.model === ADVISOR_MODEL) {
        firstArrived()
        return say('never delivered', { delayMs: 60_000 })
      }
      const results = toolResultsOf(req)
      if (results.length === 0) return toolCall(req, 'ant__advisor', {})
      return say(`Went on after: ${results[0].text}`)
    })
    const open = () =>
      Engine.open({ dataDir: shutdownDir, token: 't', env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k' }, defaultHands: false, harness: { stallTimeoutMs: 60_000, backoffBaseMs: 5, backoffMaxMs: 20 } })
    try {
      let engine = open()
      const agent = engine.services.agents.create({
        name: 'lead',
        model: 'claude-sonnet-5-5',
        multiagent: { type: 'multiagent_20261001', subagents: { type: 'disabled' }, workflows: { type: 'disabled' }, advisor: { type: 'enabled', model: ADVISOR_MODEL } },
      } as never)
      const env = engine.services.environments.create({ name: 'e', config: { type: 'cloud' } })
      const sid = (await engine.services.sessions.create({ agent: agent.id, environment_id: env.id, initial_events: [{ type: 'user.message', content: [{ type: 'text', text: 'Go.' }] }] } as never)).id
      await arrived
      await engine.close()
      engine = open()
      const events = () => engine.services.log.read(sid, { limit: 1000 }).map((r) => r.event)
      const deadline = Date.now() + 20_000
      while (!events().some((e) => e.type === 'agent.message' && JSON.stringify(e).includes('Went on after'))) {
        if (Date.now() > deadline) throw new Error(`the primary did not go on: ${events().map((e) => e.type).join(', ')}`)
        await new Promise((r) => setTimeout(r, 50))
      }
      const evs = events()
      await engine.close()
      const result = evs.find((e) => e.type === 'agent.tool_result')
      expect(result).toMatchObject({ is_error: true, content: [{ type: 'text', text: 'No advice: Corral shut down during the consultation. Carry on without the advisor.' }] })
      expect(evs.filter((e) => e.type === 'agent.tool_result')).toHaveLength(1)
      const tid = evs.find((e) => e.type === 'session.thread_created')!.session_thread_id
      expect(evs.filter((e) => e.session_thread_id === tid).at(-1)?.type).toBe('session.thread_status_terminated')
    } finally {
      await model.close()
      rmSync(shutdownDir, { recursive: true, force: true })
    }
  }, 60_000)
})
