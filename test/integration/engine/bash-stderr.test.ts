import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import Docker from 'dockerode'
import { afterAll, describe, expect, it } from 'vitest'
import { Engine } from '../../../src/main/engine'
import type { LoggedEvent } from '../../../src/main/session/event-log'
import { say, ScriptedModelServer, toolCall, toolResultsOf } from '../../support/model-server'
import { bwrapReq, dockerReq, removeScopeContainers } from '../hands/support'
import { isStatusDelta } from '../../support/start-notes'

/*
 * stderr told apart (issue #16 §4): a bash call's stderr chunks are marked in the stream's
 * never-stored previews (Corral's `stream: 'stderr'` on the delta), and the stored
 * agent.tool_result names the stderr parts of its text (`stderr_ranges`), while the text the model
 * gets is both streams as plain text, as before. Real engine, real sandbox, the official SDK as the
 * client, the scripted model calling bash with the offered schema.
 */

const COMMAND = 'echo building; sleep 0.2; echo "warning: low disk" >&2; sleep 0.2; echo done'

async function idleEndTurn(engine: Engine, sessionId: string): Promise<LoggedEvent[]> {
  const deadline = Date.now() + 90_000
  for (;;) {
    const events = engine.services.log.read(sessionId, { after: 0, limit: 1000 }).map((r) => r.event)
    if (events.some((e) => e.type === 'session.status_idle' && (e as unknown as { stop_reason: { type: string } }).stop_reason.type === 'end_turn')) return events
    if (Date.now() > deadline) throw new Error(`the session did not finish: ${events.map((e) => e.type).join(', ')}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

for (const [backend, req] of [
  ['docker', dockerReq()],
  ['bubblewrap', bwrapReq()],
] as const) {
  describe.skipIf(!req.ok)(`bash stderr on ${backend}`, () => {
    const dataDir = mkdtempSync(join(tmpdir(), `corral-stderr-${backend}-`))
    let engine: Engine | undefined
    let model: ScriptedModelServer | undefined
    afterAll(async () => {
      await engine?.close()
      await model?.close()
      if (backend === 'docker') await removeScopeContainers(new Docker(), dataDir)
      rmSync(dataDir, { recursive: true, force: true })
    })

    it('marks the stderr chunks of a running bash call in its previews, and its stored result names the stderr part of the text the model reads', async () => {
      model = await ScriptedModelServer.start((r) => (toolResultsOf(r).length === 0 ? toolCall(r, 'bash', { command: COMMAND }, 'Building.') : say('Built.')))
      writeFileSync(join(dataDir, 'settings.json'), JSON.stringify({ sandboxBackend: backend }))
      engine = Engine.open({ dataDir, token: 'test-token', env: { PATH: process.env.PATH, ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k' }, harness: { backoffBaseMs: 5, backoffMaxMs: 40 }, log: () => {} })
      const client = new Anthropic({ baseURL: (await engine.listen(0)).url, apiKey: 'test-token', maxRetries: 0 })
      const agent = await client.beta.agents.create({ name: 'builder', model: 'claude-sonnet-5-5', tools: [{ type: 'agent_toolset_20260401' }] })
      const environment = await client.beta.environments.create({ name: 'stderr', config: { type: 'cloud', corral: { backend, pool_size: 0 } } as unknown as Anthropic.Beta.BetaCloudConfigParams })
      const session = await client.beta.sessions.create({ agent: agent.id, environment_id: environment.id })
      const previews: { type: string; event_id?: string; delta?: { content: { text: string }; stream?: string } }[] = []
      const unsubscribe = engine.services.previews.subscribe(session.id, (p) => previews.push(p as (typeof previews)[number]))
      await client.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'build it' }] }] })
      await idleEndTurn(engine, session.id)
      unsubscribe()

      const listed: unknown[] = []
      for await (const e of client.beta.sessions.events.list(session.id)) listed.push(e)
      const result = listed.find((e) => (e as { type: string }).type === 'agent.tool_result') as { id: string; content: { text: string }[]; stderr_ranges?: [number, number][] }
      const text = result.content.map((c) => c.text).join('')
      expect(text).toBe('building\nwarning: low disk\ndone')
      expect(result.stderr_ranges).toEqual([[9, 27]])
      expect(text.slice(9, 27)).toBe('warning: low disk\n')

      const deltas = previews.filter((p) => p.type === 'event_delta' && p.event_id === result.id && !isStatusDelta(p.delta))
      expect(deltas.map((d) => [d.delta?.content.text, d.delta?.stream ?? 'stdout'])).toEqual([
        ['building\n', 'stdout'],
        ['warning: low disk\n', 'stderr'],
        ['done\n', 'stdout'],
      ])
      // the model reads plain text, no stream marks
      expect(toolResultsOf(model.requests[1])).toEqual([{ tool_use_id: expect.any(String), text: 'building\nwarning: low disk\ndone', is_error: false }])
    })
  })
}
