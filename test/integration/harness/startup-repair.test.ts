import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Engine } from '../../../src/main/engine'
import { primaryThreadId } from '../../../src/shared/api/ids'
import { say, ScriptedModelServer } from '../../support/model-server'

// A crash between the archive of a child that waited on the client (its
// session.thread_status_terminated, written by the archive route) and the session's re-written
// idle (written by the primary's brain, which the archive wakes) leaves the session idle with
// requires_action naming the archived child's call. The next start must re-derive the idle.

let dir: string | undefined
let model: ScriptedModelServer | undefined
let engine: Engine | undefined
afterEach(async () => {
  await engine?.close()
  await model?.close()
  if (dir) rmSync(dir, { recursive: true, force: true })
  engine = model = dir = undefined
})

describe('start-up repair of the aggregate idle', () => {
  it("re-writes the session's idle without an archived child's pending call when the engine starts after a crash left it unwritten, and starts no model turn", async () => {
    dir = mkdtempSync(join(tmpdir(), 'corral-startup-repair-'))
    model = await ScriptedModelServer.start(() => say('no request is expected'))
    const env = { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'test-key' }
    // the log as the crashed process left it, written through the real stores (no brain runs)
    const before = Engine.open({ dataDir: dir, token: 't', env, harness: { enabled: false }, log: () => {} })
    const worker = before.services.agents.create({ name: 'worker', model: 'claude-sonnet-4-6', tools: [{ type: 'custom', name: 'lookup', description: 'look up', input_schema: { type: 'object', properties: {} } }] } as never)
    const lead = before.services.agents.create({ name: 'lead', model: 'claude-sonnet-4-6', multiagent: { type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: [worker.id] } } } as never)
    const environment = before.services.environments.create({ name: 'e', config: { type: 'cloud' } })
    const sid = (await before.services.sessions.create({ agent: lead.id, environment_id: environment.id } as never)).id
    const primary = primaryThreadId(sid)
    const child = 'sthr_01CHILDTHREADFORREPAIRTEST0'
    const use = 'sevt_01CUSTOMTOOLUSEOFTHECHILD0'
    const log = before.services.log
    await log.append(sid, [
      { type: 'user.message', content: [{ type: 'text', text: 'Delegate.' }] },
      { type: 'session.thread_status_running', session_thread_id: primary, agent_name: 'lead' },
      { type: 'session.status_running' },
      { type: 'session.thread_created', session_thread_id: child, agent_name: 'worker', workflow_run_id: null, parent_thread_id: primary },
      { type: 'session.thread_status_running', session_thread_id: child, agent_name: 'worker' },
      { type: 'agent.thread_message_received', session_thread_id: child, from_session_thread_id: primary, from_agent_name: null, content: [{ type: 'text', text: 'Look it up.' }] },
      { type: 'session.thread_status_idle', session_thread_id: primary, agent_name: 'lead', stop_reason: { type: 'end_turn' }, stop_details: null },
      { id: use, type: 'agent.custom_tool_use', session_thread_id: child, name: 'lookup', input: {} },
      { type: 'session.thread_status_idle', session_thread_id: child, agent_name: 'worker', stop_reason: { type: 'requires_action', event_ids: [use] }, stop_details: null },
      { type: 'session.status_idle', stop_reason: { type: 'requires_action', event_ids: [use] }, stop_details: null },
    ] as never)
    // the archive, then the crash: the primary's brain never re-wrote the idle
    await before.services.threads.archive(sid, child)
    await before.close()

    engine = Engine.open({ dataDir: dir, token: 't', env, harness: { leaseTtlMs: 3000 }, log: () => {} })
    const deadline = Date.now() + 10_000
    let last: Record<string, unknown> | undefined
    for (;;) {
      const idles = engine.services.log.read(sid, { types: ['session.status_idle'], limit: 1000 })
      last = idles.at(-1)?.event as unknown as Record<string, unknown>
      if ((last?.stop_reason as { type?: string } | undefined)?.type === 'end_turn') break
      if (Date.now() > deadline) throw new Error(`the idle was not re-written: ${JSON.stringify(last)}`)
      await new Promise((r) => setTimeout(r, 20))
    }
    await engine.brains.scheduler.settled()
    const events = engine.services.log.read(sid, { limit: 1000 }).map((r) => r.event)
    const types = events.map((e) => e.type)
    expect(types.slice(-2)).toEqual(['session.usage', 'session.status_idle'])
    expect(last).toMatchObject({ stop_reason: { type: 'end_turn' } })
    expect(engine.services.sessions.retrieve(sid).status).toBe('idle')
    expect(model.requests).toHaveLength(0)
  })
})
