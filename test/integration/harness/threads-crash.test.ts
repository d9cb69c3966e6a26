import { afterAll, describe, expect, it } from 'vitest'
import { mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Engine } from '../../../src/main/engine'
import type { LoggedEvent } from '../../../src/main/session/event-log'
import { primaryThreadId } from '../../../src/shared/api/ids'
import { CrashChildren } from '../../support/crash-children'
import { ScriptedModelServer, say, userTexts, type RecordedRequest, type ScriptStep } from '../../support/model-server'

const WORKERS = 3
const STEPS = 40
const KILLS = Number(process.env.CORRAL_THREAD_CRASH_KILLS ?? 24)
const LEAD = 'You are the lead.'
const CAREFUL = 'You are the careful one.'

const dir = mkdtempSync(join(tmpdir(), 'corral-threads-crash-'))
const children = new CrashChildren({ dir })
afterAll(() => {
  children.dispose()
  if (process.env.CORRAL_KEEP) console.log('KEPT', dir)
  else rmSync(dir, { recursive: true, force: true })
})

const resultsSinceText = (req: RecordedRequest) => {
  let results = 0
  for (let i = req.body.messages.length - 1; i >= 0; i--) {
    const m = req.body.messages[i]
    if (m.role !== 'user' || typeof m.content === 'string') continue
    results += m.content.filter((b) => b.type === 'tool_result').length
    if (m.content.some((b) => b.type === 'text')) break
  }
  return results
}
const delay = () => 4 + Math.floor(Math.random() * 10)

/** The lead fans out to WORKERS workers and the careful one, then waits for every report; workers run STEPS bash calls; the careful one asks first. */
function responder(req: RecordedRequest): ScriptStep {
  const sys = req.body.system?.[0]?.text ?? ''
  if (sys === LEAD) {
    const reports = userTexts(req).filter((t) => t.startsWith('<message from=')).length
    if (req.body.messages.length === 1) {
      const blocks: Extract<ScriptStep, { kind: 'message' }>['blocks'] = Array.from({ length: WORKERS }, (_, i) => ({ type: 'tool_use' as const, name: 'send_to_agent', input: { agent: 'worker', message: `part ${i}` } }))
      blocks.push({ type: 'tool_use', name: 'send_to_agent', input: { agent: 'careful', message: 'remove x' } })
      return { kind: 'message', blocks, delayMs: delay() }
    }
    return say(reports >= WORKERS + 1 ? 'all done' : `waiting (${reports})`, { delayMs: delay() })
  }
  const results = resultsSinceText(req)
  if (sys === CAREFUL) return results === 0 ? { kind: 'message', blocks: [{ type: 'tool_use', name: 'bash', input: { command: 'rm x' } }], delayMs: delay() } : say('removed', { delayMs: delay() })
  if (results >= STEPS) return say('finished', { chunkSize: 2, delayMs: delay() })
  return { kind: 'message', blocks: [{ type: 'text', text: `step ${results + 1}` }, { type: 'tool_use', name: 'bash', input: { command: `echo step-${results + 1}` } }], delayMs: delay() }
}

const field = <T>(e: LoggedEvent, k: string) => (e as unknown as Record<string, T>)[k]

describe('crash safety with threads', () => {
  it(`survives kill -9 at ${KILLS} random instants while several children are mid-turn: every child finishes, each report arrives once, no tool call runs twice, a child's pending confirmation stays answerable`, async () => {
    const model = await ScriptedModelServer.start(responder)
    const effects = join(dir, 'effects.log')
    const parent = Engine.open({ dataDir: dir, token: 'crash-test', env: {}, harness: { enabled: false }, defaultHands: false })
    try {
      const tools = [{ type: 'agent_toolset_20260401' }]
      const worker = parent.services.agents.create({ name: 'worker', model: 'claude-sonnet-5-5', system: 'You are a worker.', tools } as never)
      const careful = parent.services.agents.create({ name: 'careful', model: 'claude-sonnet-5-5', system: CAREFUL, tools: [{ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_ask' } } }] } as never)
      const lead = parent.services.agents.create({
        name: 'lead',
        model: 'claude-sonnet-5-5',
        system: LEAD,
        tools,
        multiagent: { type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: [worker.id, careful.id] } },
      } as never)
      const env = parent.services.environments.create({ name: 'crash', config: { type: 'cloud' } })
      const s = await parent.services.sessions.create({ agent: lead.id, environment_id: env.id, initial_events: [{ type: 'user.message', content: [{ type: 'text', text: 'go' }] }] } as never)
      const sid = s.id
      const eventsOf = (): LoggedEvent[] => {
        const out: LoggedEvent[] = []
        for (;;) {
          const page = parent.services.log.read(sid, { after: out.length, limit: 1000 })
          out.push(...page.map((p) => p.event))
          if (page.length < 1000) return out
        }
      }
      const finished = () => {
        const evs = eventsOf()
        const last = evs.at(-1) as (LoggedEvent & { stop_reason?: { type: string } }) | undefined
        return last?.type === 'session.status_idle' && last.stop_reason?.type === 'end_turn' && evs.some((e) => e.type === 'agent.message' && field<{ text: string }[]>(e, 'content')[0].text === 'all done')
      }

      const askOf = () => eventsOf().find((e) => e.type === 'agent.tool_use' && field(e, 'evaluated_permission') === 'ask')
      // answered between two processes (a brain hears of another process's events when it starts)
      const confirmIfAsked = async () => {
        const ask = askOf()
        if (confirmed || !ask) return
        await parent.services.sessions.sendEvents(sid, [{ type: 'user.tool_confirmation', tool_use_id: ask.id, result: 'allow' }] as never)
        confirmed = true
      }
      let kills = 0
      let confirmed = false
      let midTurnKills = 0
      while (kills < KILLS && !finished()) {
        const before = parent.services.log.lastSeq(sid)
        const child = await children.start([dir, model.url, effects])
        // kill at a random instant once this process is at work (its first event is in the log)
        const deadline = Date.now() + 20_000
        while (parent.services.log.lastSeq(sid) === before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5))
        // then at a random instant within its next few dozen events (or 400 ms, whichever comes first):
        // counting events, not time, keeps the kills spread over the whole session however fast the engine is
        const target = parent.services.log.lastSeq(sid) + 1 + Math.floor(Math.random() * 30)
        const until = Date.now() + Math.random() * 400
        while (parent.services.log.lastSeq(sid) < target && Date.now() < until) await new Promise((r) => setTimeout(r, 1))
        await children.kill(child)
        kills++
        const running = new Map<string, string>()
        for (const e of eventsOf()) if (e.type.startsWith('session.thread_status_') && e.session_thread_id && e.session_thread_id !== primaryThreadId(sid)) running.set(e.session_thread_id, e.type)
        if ([...running.values()].filter((t) => t === 'session.thread_status_running').length >= 2) midTurnKills++
        if (process.env.CORRAL_CRASH_DEBUG) console.log('KILL', kills, parent.services.log.lastSeq(sid), JSON.stringify([...running.values()]))
        if (kills >= KILLS / 2) await confirmIfAsked()
      }
      for (;;) {
        await confirmIfAsked()
        const last = await children.start([dir, model.url, effects])
        const deadline = Date.now() + 60_000
        while (!finished() && !(!confirmed && askOf())) {
          if (Date.now() > deadline) throw new Error(`the session did not finish after the last restart:\n${eventsOf().map((e) => `${e.type} ${e.session_thread_id ?? ''}`).join('\n')}`)
          await new Promise((r) => setTimeout(r, 50))
        }
        await children.kill(last)
        if (finished()) break
      }
      expect(kills).toBeGreaterThanOrEqual(Math.min(KILLS, 20))
      expect(midTurnKills).toBeGreaterThan(0)

      const effectIds = (existsSync(effects) ? readFileSync(effects, 'utf8').split('\n') : []).filter((l) => l.startsWith('effect ')).map((l) => l.split(' ')[1])
      expect(new Set(effectIds).size).toBe(effectIds.length) // no tool call ran twice

      const evs = eventsOf()
      expect(new Set(evs.map((e) => e.id)).size).toBe(evs.length)
      const created = evs.filter((e) => e.type === 'session.thread_created')
      expect(created).toHaveLength(WORKERS + 1)
      for (const c of created) {
        const tid = field<string>(c, 'session_thread_id')
        const own = evs.filter((e) => e.session_thread_id === tid)
        // every call of the child has exactly one result
        const uses = own.filter((e) => e.type === 'agent.tool_use')
        for (const u of uses) expect(own.filter((e) => e.type === 'agent.tool_result' && field(e, 'tool_use_id') === u.id)).toHaveLength(1)
        // one report sent, delivered to the primary exactly once
        expect(own.filter((e) => e.type === 'agent.thread_message_sent')).toHaveLength(1)
        expect(evs.filter((e) => e.type === 'agent.thread_message_received' && !e.session_thread_id && field(e, 'from_session_thread_id') === tid)).toHaveLength(1)
        expect(own.filter((e) => e.type === 'session.thread_status_idle').at(-1)).toMatchObject({ stop_reason: { type: 'end_turn' } })
        if (field(c, 'agent_name') === 'worker') expect(uses.length).toBe(STEPS)
      }
      // the careful child's confirmed call ran (once) after the restarts
      const ask = evs.find((e) => e.type === 'agent.tool_use' && field(e, 'evaluated_permission') === 'ask')!
      expect(evs.filter((e) => e.type === 'user.tool_confirmation' && field(e, 'tool_use_id') === ask.id)).toHaveLength(1)
      console.log(`[threads crash test] ${kills} kills (${midTurnKills} with two or more children running), ${effectIds.length} side effects, ${evs.length} events`)
      expect(finished()).toBe(true)
    } finally {
      await parent.close()
      await model.close()
    }
  }, 300_000)
})
