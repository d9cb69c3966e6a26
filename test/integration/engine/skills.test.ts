import Anthropic, { toFile } from '@anthropic-ai/sdk'
import { describe, expect, it } from 'vitest'
import { say, ScriptedModelServer, toolCall, toolResultsOf, type RecordedRequest } from '../../support/model-server'
import { bwrapReq, dockerReq } from '../hands/support'
import { engineOnBackend, toolResultTexts, waitForIdle } from './support'

/*
 * A skill uploaded with the SDK and listed on an agent is found and read by the agent: the model
 * is told the skill's name, description and SKILL.md path in its system context, and the scripted
 * model reads exactly the path it was told, with the offered `read` tool's schema, then runs the
 * script the SKILL.md names with bash; the folder is read-only. Docker and bubblewrap.
 */

const SKILL_MD = `---
name: greeting-maker
description: Writes greetings in the house style. Use whenever the user asks for a greeting.
---

# Greetings

Run scripts/greet.sh with the person's name; it prints the greeting to send.
`
const GREET = '#!/bin/sh\necho "Hello, $1, from the house style"\n'

/** The SKILL.md path the system context announces for `name`, as the model would read it off the prompt. */
function announcedPath(req: RecordedRequest, name: string): string | undefined {
  const system = (req.body.system ?? []).map((b) => b.text).join('\n')
  return new RegExp(`<skill name="${name}" path="([^"]+)">`).exec(system)?.[1]
}

function script(): Promise<ScriptedModelServer> {
  return ScriptedModelServer.start((req) => {
    const results = toolResultsOf(req)
    if (results.length === 0) {
      const path = announcedPath(req, 'greeting-maker')
      if (!path) return say('No skill was announced.')
      return toolCall(req, 'read', { file_path: path }, 'Reading the skill first.')
    }
    if (results.length === 1) {
      const folder = announcedPath(req, 'greeting-maker')!.replace(/\/SKILL\.md$/, '')
      return toolCall(req, 'bash', { command: `sh ${folder}/scripts/greet.sh Ada; (echo x > ${folder}/new.txt) 2>/dev/null && echo WRITTEN || echo WRITE_REFUSED; ls ${folder}` })
    }
    return say('Done.')
  })
}



for (const [backend, req] of [
  ['docker', dockerReq()],
  ['bubblewrap', bwrapReq()],
] as const) {
  describe.skipIf(!req.ok)(`skills on ${backend}`, () => {
    const fixture = engineOnBackend(backend, 'corral-skills')

    it('announces an uploaded skill to the model, which reads its SKILL.md at the announced path and runs its script; the folder is read-only', async () => {
      const model = await script()
      const { engine, client } = await fixture.open(model)
      const skill = await client.beta.skills.create({ files: [await toFile(Buffer.from(SKILL_MD), 'greeting-maker/SKILL.md'), await toFile(Buffer.from(GREET), 'greeting-maker/scripts/greet.sh')] })
      const agent = await client.beta.agents.create({ name: 'greeter', model: 'claude-sonnet-5-5', tools: [{ type: 'agent_toolset_20260401' }], skills: [{ type: 'custom', skill_id: skill.id }] })
      const environment = await client.beta.environments.create({ name: 'skills', config: { type: 'cloud', corral: { backend, pool_size: 0 } } as unknown as Anthropic.Beta.BetaCloudConfigParams })
      const session = await client.beta.sessions.create({ agent: agent.id, environment_id: environment.id })
      expect(session.agent.skills).toEqual([{ type: 'custom', skill_id: skill.id, version: skill.latest_version_id }])
      await client.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'greet Ada' }] }] })
      const out = toolResultTexts(await waitForIdle(engine, session.id, 90_000))
      const first = model.requests[0]
      const system = (first.body.system ?? []).map((b) => b.text).join('\n')
      expect(system).toContain('<skill name="greeting-maker" path="/mnt/skills/greeting-maker/SKILL.md">')
      expect(system).toContain('Writes greetings in the house style. Use whenever the user asks for a greeting.')
      expect(out).toHaveLength(2)
      expect(out[0]).toContain('Run scripts/greet.sh with the person')
      expect(out[0]).toContain('name: greeting-maker')
      expect(out[1]).toMatch(/^Hello, Ada, from the house style\nWRITE_REFUSED\nSKILL\.md\s+scripts\s*$/)
    })
  })
}
