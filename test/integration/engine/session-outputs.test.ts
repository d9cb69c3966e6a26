import Anthropic, { NotFoundError } from '@anthropic-ai/sdk'
import { describe, expect, it } from 'vitest'
import { say, ScriptedModelServer, toolCall, toolResultsOf, type RecordedRequest } from '../../support/model-server'
import { bwrapReq, dockerReq } from '../hands/support'
import { engineOnBackend, toolResultTexts, waitForIdle } from './support'

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



for (const [backend, req] of [
  ['docker', dockerReq()],
  ['bubblewrap', bwrapReq()],
] as const) {
  describe.skipIf(!req.ok)(`session outputs on ${backend}`, () => {
    const fixture = engineOnBackend(backend, 'corral-outputs')

    it('keeps a file written with bash under /mnt/session/outputs as a session file the SDK lists and downloads, and a rewrite replaces it', async () => {
      const model = await script()
      const { engine, client } = await fixture.open(model)
      const agent = await client.beta.agents.create({ name: 'writer', model: 'claude-sonnet-5-5', tools: [{ type: 'agent_toolset_20260401' }] })
      const environment = await client.beta.environments.create({ name: 'outputs', config: { type: 'cloud', corral: { backend, pool_size: 0 } } as unknown as Anthropic.Beta.BetaCloudConfigParams })
      const session = await client.beta.sessions.create({ agent: agent.id, environment_id: environment.id })
      await client.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'write the report' }] }] })
      const first = toolResultTexts(await waitForIdle(engine, session.id, 90_000, 1))
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
      const second = toolResultTexts(await waitForIdle(engine, session.id, 90_000, 2))
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
