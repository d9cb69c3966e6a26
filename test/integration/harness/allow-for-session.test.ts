import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Engine } from '../../../src/main/engine'
import type { LoggedEvent } from '../../../src/main/session/event-log'
import { callTool, say, ScriptedModelServer, toolResultsOf, type RecordedRequest } from '../../support/model-server'
import { bwrapReq } from '../hands/support'

/*
 * "Allow this command for this session" (Corral's `corral_allow_for_session` on a
 * `user.tool_confirmation`): later bash calls with exactly the same command run without asking,
 * also after the engine restarts (the confirmation in the log is the fact); a different command,
 * even one that starts with the allowed one, still asks; a client that never sends the field sees
 * the API's behaviour. Official SDK as the client, real engine, bubblewrap, scripted model.
 */

const SAME = 'echo same'

const PLANS: Record<string, string[]> = { go: [SAME, SAME, `${SAME}; echo more`, `${SAME} `], again: [SAME] }

/** The k-th call of the plan the user's latest text names, k = tool results since that text. */
function respond(req: RecordedRequest) {
  const msgs = req.body.messages
  let at = msgs.length - 1
  const textOf = (m: (typeof msgs)[number]) => (typeof m.content === 'string' ? m.content : (m.content as { type: string; text?: string }[]).filter((b) => b.type === 'text').map((b) => b.text ?? '').join(''))
  while (at > 0 && !(msgs[at].role === 'user' && textOf(msgs[at]))) at--
  const plan = PLANS[textOf(msgs[at]).trim()] ?? []
  const k = toolResultsOf({ ...req, body: { ...req.body, messages: msgs.slice(at) } }).length
  return k < plan.length ? callTool('bash', { command: plan[k] }) : say('Done.')
}

type Ev = LoggedEvent & { id: string; name?: string; input?: { command?: string }; evaluated_permission?: string; corral_allowed_by?: string; stop_reason?: { type: string; event_ids?: string[] } }

const bwrap = bwrapReq()
describe.skipIf(!bwrap.ok)('allowing a bash command for the rest of a session', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-allow-session-'))
  let model: ScriptedModelServer
  let engine: Engine
  let client: Anthropic
  let agentId: string
  let envId: string

  const open = async () => {
    engine = Engine.open({ dataDir, token: 'test-token', env: { PATH: process.env.PATH, ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k' }, log: () => {} })
    client = new Anthropic({ baseURL: (await engine.listen(0)).url, apiKey: 'test-token', maxRetries: 0 })
  }
  const events = (sessionId: string): Ev[] => engine.services.log.read(sessionId, { after: 0, limit: 1000 }).map((r) => r.event as Ev)
  /** Waits until the session is idle with the given stop reason after `after` events. */
  const waitIdle = async (sessionId: string, after: number): Promise<Ev> => {
    const deadline = Date.now() + 30_000
    for (;;) {
      const idle = events(sessionId)
        .slice(after)
        .find((e) => e.type === 'session.status_idle')
      if (idle) return idle
      if (Date.now() > deadline) throw new Error(`no idle: ${events(sessionId).map((e) => e.type).join(', ')}`)
      await new Promise((r) => setTimeout(r, 25))
    }
  }
  const confirm = (sessionId: string, toolUseId: string, extra: Record<string, unknown> = {}) =>
    client.beta.sessions.events.send(sessionId, { events: [{ type: 'user.tool_confirmation', tool_use_id: toolUseId, result: 'allow', ...extra } as never] })

  beforeAll(async () => {
    model = await ScriptedModelServer.start(respond)
    await open()
    agentId = (
      await client.beta.agents.create({
        name: 'asker',
        model: 'claude-sonnet-4-6',
        tools: [{ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_ask' } } }],
      })
    ).id
    envId = (await client.beta.environments.create({ name: 'local', config: { type: 'cloud', corral: { backend: 'bubblewrap' } } as never })).id
  })
  afterAll(async () => {
    await engine?.close()
    await model?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  it('runs the exact command again without asking, asks for any other, and still honours it after a restart', async () => {
    const session = await client.beta.sessions.create({ agent: agentId, environment_id: envId })
    await client.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'go' }] }] })
    let idle = await waitIdle(session.id, 0)
    expect(idle.stop_reason?.type).toBe('requires_action')
    const first = events(session.id).find((e) => e.type === 'agent.tool_use')!
    expect(first.evaluated_permission).toBe('ask')
    await confirm(session.id, first.id, { corral_allow_for_session: true })
    const confirmation = events(session.id).find((e) => e.type === 'user.tool_confirmation')!

    // The second `echo same` runs without asking; `echo same; echo more` (same start) asks.
    let seen = events(session.id).length
    idle = await waitIdle(session.id, seen)
    const uses = events(session.id).filter((e) => e.type === 'agent.tool_use')
    expect(uses.map((u) => [u.input?.command, u.evaluated_permission])).toEqual([
      [SAME, 'ask'],
      [SAME, 'allow'],
      [`${SAME}; echo more`, 'ask'],
    ])
    expect(uses[1].corral_allowed_by).toBe(confirmation.id)
    expect(idle.stop_reason).toEqual({ type: 'requires_action', event_ids: [uses[2].id] })
    await confirm(session.id, uses[2].id)
    seen = events(session.id).length
    idle = await waitIdle(session.id, seen)
    // A trailing space is another command.
    const trailing = events(session.id).filter((e) => e.type === 'agent.tool_use')[3]
    expect([trailing.input?.command, trailing.evaluated_permission]).toEqual([`${SAME} `, 'ask'])
    await confirm(session.id, trailing.id)
    seen = events(session.id).length
    await waitIdle(session.id, seen)

    // A restarted engine (a fresh brain) reads the allowance back from the log.
    await engine.close()
    await open()
    seen = events(session.id).length
    await client.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'again' }] }] })
    idle = await waitIdle(session.id, seen)
    const again = events(session.id).slice(seen).find((e) => e.type === 'agent.tool_use')!
    expect([again.input?.command, again.evaluated_permission, again.corral_allowed_by]).toEqual([SAME, 'allow', confirmation.id])
    expect(idle.stop_reason?.type).toBe('end_turn')
  })

  it('keeps asking in a session whose client confirms without the Corral field (the API behaviour)', async () => {
    const session = await client.beta.sessions.create({ agent: agentId, environment_id: envId })
    await client.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'go' }] }] })
    await waitIdle(session.id, 0)
    const first = events(session.id).find((e) => e.type === 'agent.tool_use')!
    await client.beta.sessions.events.send(session.id, { events: [{ type: 'user.tool_confirmation', tool_use_id: first.id, result: 'allow' }] })
    const idle = await waitIdle(session.id, events(session.id).length)
    const uses = events(session.id).filter((e) => e.type === 'agent.tool_use')
    expect(uses.map((u) => u.evaluated_permission)).toEqual(['ask', 'ask'])
    expect(idle.stop_reason).toEqual({ type: 'requires_action', event_ids: [uses[1].id] })
  })

  it('refuses corral_allow_for_session on a deny with a 400 naming the field, and stores nothing', async () => {
    const session = await client.beta.sessions.create({ agent: agentId, environment_id: envId })
    await client.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'go' }] }] })
    await waitIdle(session.id, 0)
    const first = events(session.id).find((e) => e.type === 'agent.tool_use')!
    const before = events(session.id).length
    const err = await client.beta.sessions.events
      .send(session.id, { events: [{ type: 'user.tool_confirmation', tool_use_id: first.id, result: 'deny', corral_allow_for_session: true } as never] })
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(Anthropic.BadRequestError)
    expect((err as Error).message).toMatch(/events\[0\]\.corral_allow_for_session: only an allow/)
    expect(events(session.id)).toHaveLength(before)
  })
})
