import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic, { NotFoundError } from '@anthropic-ai/sdk'
import Docker from 'dockerode'
import { afterAll, describe, expect, it } from 'vitest'
import { Engine } from '../../../src/main/engine'
import { dockerScopeFor } from '../../../src/main/engine-hands'
import type { LoggedEvent } from '../../../src/main/session/event-log'
import { say, ScriptedModelServer, toolCall, toolResultsOf, type RecordedRequest } from '../../support/model-server'
import { bwrapReq, dockerReq } from '../hands/support'

/*
 * Files the agent writes with bash under /mnt/session/outputs become session-scoped files:
 * listed by files.list({scope_id}), downloadable with the SDK, byte for byte; a rewritten output
 * replaces the file kept for its path (a new id; the old one is gone); a symlink there is never
 * followed. The model is told about the folder in its system context.
 */

const WRITE = [
  'mkdir -p /mnt/session/outputs/charts',
  "printf 'total: 42\\n' > /mnt/session/outputs/report.txt",
  "printf '\\x00\\x01\\xfe\\xff' > /mnt/session/outputs/charts/raw.bin",
  'ln -s /etc/passwd /mnt/session/outputs/passwd-link',
  'echo WROTE',
].join(' && ')
const REWRITE = "printf 'total: 43\\n' > /mnt/session/outputs/report.txt && echo REWROTE"

const systems: string[] = []
function script(): Promise<ScriptedModelServer> {
  return ScriptedModelServer.start((req: RecordedRequest) => {
    systems.push(JSON.stringify(req.body.system ?? ''))
    const results = toolResultsOf(req).length
    const again = JSON.stringify(req.body.messages).includes('rewrite it')
    if (results === 0) return toolCall(req, 'bash', { command: WRITE }, 'Writing the report.')
    if (results === 1 && again) return toolCall(req, 'bash', { command: REWRITE }, 'Rewriting the report.')
    return say('Done.')
  })
}

async function turnsEnded(engine: Engine, sessionId: string, n: number): Promise<LoggedEvent[]> {
  const deadline = Date.now() + 90_000
  for (;;) {
    const events = engine.services.log.read(sessionId, { after: 0, limit: 1000 }).map((r) => r.event)
    const ended = events.filter((e) => e.type === 'session.status_idle' && (e as unknown as { stop_reason: { type: string } }).stop_reason.type === 'end_turn').length
    if (ended >= n) return events
    if (Date.now() > deadline) throw new Error(`the session did not finish: ${events.map((e) => e.type).join(', ')}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

const results = (events: LoggedEvent[]) =>
  events.filter((e) => e.type === 'agent.tool_result').map((e) => (e as unknown as { content: { text: string }[] }).content.map((c) => c.text).join(''))

for (const [backend, req] of [
  ['docker', dockerReq()],
  ['bubblewrap', bwrapReq()],
] as const) {
  describe.skipIf(!req.ok)(`session outputs on ${backend}`, () => {
    const dataDir = mkdtempSync(join(tmpdir(), `corral-outputs-${backend}-`))
    let engine: Engine | undefined
    let model: ScriptedModelServer | undefined
    afterAll(async () => {
      await engine?.close()
      await model?.close()
      if (backend === 'docker') {
        const docker = new Docker()
        for (const c of await docker.listContainers({ all: true, filters: { label: [`corral.managed=${dockerScopeFor(dataDir)}`] } })) await docker.getContainer(c.Id).remove({ force: true }).catch(() => {})
      }
      rmSync(dataDir, { recursive: true, force: true })
    })

    it('keeps a file written with bash under /mnt/session/outputs as a session file the SDK lists and downloads, and a rewrite replaces it', async () => {
      model = await script()
      writeFileSync(join(dataDir, 'settings.json'), JSON.stringify({ sandboxBackend: backend }))
      engine = Engine.open({ dataDir, token: 'test-token', env: { PATH: process.env.PATH, ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k' }, harness: { backoffBaseMs: 5, backoffMaxMs: 40 }, log: () => {} })
      const client = new Anthropic({ baseURL: (await engine.listen(0)).url, apiKey: 'test-token', maxRetries: 0 })
      const agent = await client.beta.agents.create({ name: 'writer', model: 'claude-sonnet-5-5', tools: [{ type: 'agent_toolset_20260401' }] })
      const environment = await client.beta.environments.create({ name: 'outputs', config: { type: 'cloud', corral: { backend, pool_size: 0 } } as unknown as Anthropic.Beta.BetaCloudConfigParams })
      const session = await client.beta.sessions.create({ agent: agent.id, environment_id: environment.id })
      await client.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'write the report' }] }] })
      const first = results(await turnsEnded(engine, session.id, 1))
      expect(first[0]).toMatch(/^WROTE\n\[corral: outputs not kept: \/mnt\/session\/outputs\/passwd-link \(a symlink\)\]$/)
      expect(systems[0]).toContain('/mnt/session/outputs/')

      const listed = (await client.beta.files.list({ scope_id: session.id })).data
      expect(listed.map((f) => f.filename).sort()).toEqual(['raw.bin', 'report.txt'])
      for (const f of listed) expect(f.scope).toEqual({ type: 'session', id: session.id })
      const report = listed.find((f) => f.filename === 'report.txt')!
      const raw = listed.find((f) => f.filename === 'raw.bin')!
      expect(report.mime_type).toBe('text/plain')
      expect(await (await client.beta.files.download(report.id)).text()).toBe('total: 42\n')
      expect(Buffer.from(await (await client.beta.files.download(raw.id)).arrayBuffer())).toEqual(Buffer.from([0, 1, 0xfe, 0xff]))
      // Not another session's, nor an upload's list by scope.
      expect((await client.beta.files.list({ scope_id: 'sesn_other' })).data).toEqual([])

      await client.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'rewrite it' }] }] })
      const second = results(await turnsEnded(engine, session.id, 2))
      expect(second[1]).toBe('REWROTE')
      const after = (await client.beta.files.list({ scope_id: session.id })).data
      expect(after.map((f) => f.filename).sort()).toEqual(['raw.bin', 'report.txt'])
      const rewritten = after.find((f) => f.filename === 'report.txt')!
      expect(rewritten.id).not.toBe(report.id)
      expect(await (await client.beta.files.download(rewritten.id)).text()).toBe('total: 43\n')
      expect(after.find((f) => f.filename === 'raw.bin')!.id).toBe(raw.id)
      await expect(client.beta.files.retrieveMetadata(report.id)).rejects.toBeInstanceOf(NotFoundError)
    })
  })
}
