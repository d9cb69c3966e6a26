import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Engine } from '../../src/main/engine'
import type { BrainsOptions } from '../../src/main/orchestrator/brains'
import type { LoggedEvent } from '../../src/main/session/event-log'
import type { ToolRouter } from '../../src/main/hands/tool-router'
import { AnthropicModelClient, type ModelClient } from '../../src/main/harness/model-client'
import { RecordingToolRouter } from './harness-tool-router'
import { ScriptedModelServer, type Responder, type ScriptStep } from './model-server'

export interface HarnessFixture {
  dir: string
  engine: Engine
  model: ScriptedModelServer
  router: RecordingToolRouter
  agentId: string
  environmentId: string
  /** Creates a session whose first user message is `text` (no message when undefined). */
  createSession(text?: string, extra?: Record<string, unknown>): Promise<string>
  send(sessionId: string, events: Record<string, unknown>[]): Promise<void>
  events(sessionId: string): LoggedEvent[]
  /** Resolves with the session's events once `done(events)` is true (polls the log). */
  waitFor(sessionId: string, done: (events: LoggedEvent[]) => boolean, timeoutMs?: number): Promise<LoggedEvent[]>
  /**
   * Waits for the next `session.status_idle` after the last one seen now, or after the first
   * `seen` (idleCount taken before the action that starts the turn: a quick turn may be idle
   * again before this is called).
   */
  waitForIdle(sessionId: string, timeoutMs?: number, seen?: number): Promise<LoggedEvent & { stop_reason: { type: string; event_ids?: string[] } }>
  /** How many `session.status_idle` the session's log has now. */
  idleCount(sessionId: string): number
  /** Resolves at the session's next streamed `event_delta` preview (subscribe before sending). */
  nextDelta(sessionId: string): Promise<void>
  close(): Promise<void>
}

export interface HarnessFixtureParams {
  script?: ScriptStep[] | Responder
  toolDelayMs?: number
  harness?: BrainsOptions
  agent?: Record<string, unknown>
  router?: ToolRouter
  /**
   * Wraps the engine's real model client (the SDK's, against the scripted server), e.g. to do
   * something at an exact point of a request's life (after its response arrived, before the
   * harness records it).
   */
  wrapModel?: (inner: ModelClient) => ModelClient
}

/** An engine with brains against a scripted model server and a recording tool router, in a temp dir. */
export async function openHarnessFixture(p: HarnessFixtureParams = {}): Promise<HarnessFixture> {
  const dir = mkdtempSync(join(tmpdir(), 'corral-harness-'))
  const model = await ScriptedModelServer.start(p.script ?? [])
  const router = new RecordingToolRouter(join(dir, 'effects.log'), { delayMs: p.toolDelayMs ?? 0 })
  const engine = Engine.open({
    dataDir: dir,
    token: 'test-token',
    env: { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'test-key' },
    toolRouter: p.router ?? router,
    ...(p.wrapModel ? { modelClient: p.wrapModel(new AnthropicModelClient({ apiKey: 'test-key', baseURL: model.url, stallTimeoutMs: p.harness?.stallTimeoutMs ?? 1000 })) } : {}),
    harness: { backoffBaseMs: 5, backoffMaxMs: 40, stallTimeoutMs: 1000, leaseTtlMs: 3000, ...p.harness },
    log: (m) => console.error(m),
  })
  const agent = engine.services.agents.create({
    name: 'test agent',
    model: 'claude-sonnet-5-5',
    system: 'You are a test agent.',
    tools: [{ type: 'agent_toolset_20260401' }],
    ...p.agent,
  } as Parameters<typeof engine.services.agents.create>[0])
  const env = engine.services.environments.create({ name: 'test env', config: { type: 'cloud' } })
  const log = engine.services.log
  const events = (sessionId: string): LoggedEvent[] => {
    const out: LoggedEvent[] = []
    for (;;) {
      const page = log.read(sessionId, { after: out.length, limit: 1000 })
      out.push(...page.map((r) => r.event))
      if (page.length < 1000) return out
    }
  }
  const waitFor = async (sessionId: string, done: (e: LoggedEvent[]) => boolean, timeoutMs = 10_000) => {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const evs = events(sessionId)
      if (done(evs)) return evs
      if (Date.now() > deadline) throw new Error(`timed out; events so far:\n${evs.map((e) => `${e.type} ${JSON.stringify(e).slice(0, 200)}`).join('\n')}`)
      await new Promise((r) => setTimeout(r, 5))
    }
  }
  return {
    dir,
    engine,
    model,
    router,
    agentId: agent.id,
    environmentId: env.id,
    async createSession(text, extra = {}) {
      const s = await engine.services.sessions.create({
        agent: agent.id,
        environment_id: env.id,
        ...(text !== undefined ? { initial_events: [{ type: 'user.message', content: [{ type: 'text', text }] }] } : {}),
        ...extra,
      } as Parameters<typeof engine.services.sessions.create>[0])
      return s.id
    },
    async send(sessionId, evs) {
      await engine.services.sessions.sendEvents(sessionId, evs as Parameters<typeof engine.services.sessions.sendEvents>[1])
    },
    events,
    waitFor,
    nextDelta(sessionId) {
      return new Promise<void>((resolve) => {
        const stop = engine.services.previews.subscribe(sessionId, (p) => {
          if (p.type !== 'event_delta') return
          stop()
          resolve()
        })
      })
    },
    idleCount: (sessionId) => idles(events(sessionId)).length,
    async waitForIdle(sessionId, timeoutMs, seen) {
      const before = seen ?? idles(events(sessionId)).length
      const evs = await waitFor(sessionId, (e) => idles(e).length > before, timeoutMs)
      return idles(evs)[before] as LoggedEvent & { stop_reason: { type: string; event_ids?: string[] } }
    },
    async close() {
      await engine.close()
      await model.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** The system prompt of `team`'s lead. */
export const LEAD = 'You are the lead.'

export interface Team {
  lead: string
  agents: Record<string, string>
}

/** A lead agent (system LEAD) whose roster lists agents with these names (each with its own system prompt, `You are the <name>.`). */
export function team(f: HarnessFixture, names: string[], subagents: Record<string, unknown> = {}, agentExtra: Record<string, unknown> = {}): Team {
  const agents: Record<string, string> = {}
  for (const name of names) {
    agents[name] = f.engine.services.agents.create({ name, model: 'claude-sonnet-5-5', system: `You are the ${name}.`, tools: [{ type: 'agent_toolset_20260401' }], ...agentExtra } as never).id
  }
  const lead = f.engine.services.agents.create({
    name: 'lead',
    model: 'claude-sonnet-5-5',
    system: LEAD,
    tools: [{ type: 'agent_toolset_20260401' }],
    multiagent: { type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: Object.values(agents), ...subagents } },
  } as never).id
  return { lead, agents }
}

/** Event types in order, for compact assertions. */
export const typesOf = (events: readonly LoggedEvent[]): string[] => events.map((e) => e.type)

/** The session's `session.status_idle` events, in order. */
function idles(events: readonly LoggedEvent[]): LoggedEvent[] {
  return events.filter((e) => e.type === 'session.status_idle')
}
