import { afterEach, describe, expect, it } from 'vitest'
import { openHarnessFixture, type HarnessFixture } from '../../support/harness-fixture'
import { say } from '../../support/model-server'

let fx: HarnessFixture | undefined
afterEach(async () => {
  await fx?.close()
  fx = undefined
})

describe('memory stores in the model system context', () => {
  it('tells the model each attached store name, description, access, mount path and instructions, after the agent system prompt', async () => {
    fx = await openHarnessFixture({ script: [say('noted')] })
    const memory = fx.engine.services.memory
    const prefs = memory.createStore({ name: 'User Preferences', description: 'What the user likes.' })
    const team = memory.createStore({ name: 'team notes' })
    const id = await fx.createSession('hi', {
      resources: [
        { type: 'memory_store', memory_store_id: prefs.id, instructions: 'Read preferences.md first.' },
        { type: 'memory_store', memory_store_id: team.id, access: 'read_only' },
      ],
    })
    await fx.waitForIdle(id)
    const system = fx.model.requests[0].body.system ?? []
    expect(system[0]).toMatchObject({ text: 'You are a test agent.' })
    const text = system.map((b) => b.text).join('\n')
    expect(text).toContain('<memory_store name="User Preferences" access="read_write" path="/mnt/memory/user-preferences">')
    expect(text).toContain('Description: What the user likes.')
    expect(text).toContain('Instructions: Read preferences.md first.')
    expect(text).toContain('<memory_store name="team notes" access="read_only" path="/mnt/memory/team-notes">')
    expect(text).toMatch(/team-notes">\nYou can read these files but not change them\./)
    // the cache breakpoint stays on the last system block
    expect(system.at(-1)?.cache_control).toEqual({ type: 'ephemeral' })
  })

  it('adds nothing to the system prompt of a session without memory stores', async () => {
    fx = await openHarnessFixture({ script: [say('ok')] })
    const id = await fx.createSession('hi')
    await fx.waitForIdle(id)
    const system = fx.model.requests[0].body.system ?? []
    expect(system[0]).toMatchObject({ type: 'text', text: 'You are a test agent.' })
    expect(JSON.stringify(system)).not.toMatch(/memory/i)
  })
})
