import Anthropic, { toFile } from '@anthropic-ai/sdk'
import { describe, expect, it } from 'vitest'
import { say, ScriptedModelServer, toolCall, toolResultsOf } from '../../support/model-server'
import { bwrapReq, dockerReq } from '../hands/support'
import { engineOnBackend, toolResultTexts, waitForIdle } from './support'

/*
 * A file uploaded with the SDK and attached to a session is read by the agent (bash through the
 * scripted model, which checks each call against the offered tools) at /mnt/session/uploads, is
 * read-only there, and a file added to the running session appears in the same sandbox.
 */

const FIRST = `cat /mnt/session/uploads/data.csv; (echo x >> /mnt/session/uploads/data.csv) 2>/dev/null && echo WRITTEN || echo WRITE_REFUSED; ls /mnt/session/uploads`
const SECOND = 'cat /mnt/session/uploads/later/notes.txt'

function script(): Promise<ScriptedModelServer> {
  return ScriptedModelServer.start((req) => {
    const results = toolResultsOf(req).length
    const second = JSON.stringify(req.body.messages).includes('now the second')
    if (results === 0) return toolCall(req, 'bash', { command: FIRST }, 'Reading the upload.')
    if (results === 1 && second) return toolCall(req, 'bash', { command: SECOND }, 'Reading the added file.')
    return say('Done.')
  })
}



for (const [backend, req] of [
  ['docker', dockerReq()],
  ['bubblewrap', bwrapReq()],
] as const) {
  describe.skipIf(!req.ok)(`file resources on ${backend}`, () => {
    const fixture = engineOnBackend(backend, 'corral-files')

    it('mounts an uploaded file read-only at its mount_path, and a file added to the running session appears in its sandbox', async () => {
      const model = await script()
      const { engine, client } = await fixture.open(model)
      const upload = await client.beta.files.upload({ file: await toFile(Buffer.from('city,people\nOslo,709000\n'), 'data.csv', { type: 'text/csv' }) })
      const agent = await client.beta.agents.create({ name: 'reader', model: 'claude-sonnet-5-5', tools: [{ type: 'agent_toolset_20260401' }] })
      const environment = await client.beta.environments.create({ name: 'files', config: { type: 'cloud', corral: { backend, pool_size: 0 } } as unknown as Anthropic.Beta.BetaCloudConfigParams })
      const session = await client.beta.sessions.create({ agent: agent.id, environment_id: environment.id, resources: [{ type: 'file', file_id: upload.id, mount_path: '/data.csv' }] })
      await client.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'read it' }] }] })
      const first = toolResultTexts(await waitForIdle(engine, session.id, 90_000, 1))
      expect(first[0]).toMatch(/^city,people\nOslo,709000\nWRITE_REFUSED\ndata\.csv\s*$/)
      // the stored bytes are untouched
      expect(await (await client.beta.files.download(upload.id)).text()).toBe('city,people\nOslo,709000\n')

      const later = await client.beta.files.upload({ file: await toFile(Buffer.from('added while running\n'), 'notes.txt') })
      const added = await client.beta.sessions.resources.add(session.id, { type: 'file', file_id: later.id, mount_path: 'later/notes.txt' })
      expect(added.mount_path).toBe('/mnt/session/uploads/later/notes.txt')
      await engine.handsSettled()
      await client.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'now the second' }] }] })
      const second = toolResultTexts(await waitForIdle(engine, session.id, 90_000, 2))
      expect(second[1]).toBe('added while running')
    })
  })
}
