import { describe, expect, it } from 'vitest'
import { toolsetOf } from '../../../src/renderer/src/features/agents/toolset'
import type { Agent } from '../../../src/renderer/src/api/types'

const agentWith = (tools: unknown[]): Agent => ({ id: 'agent_1', name: 'a', tools } as unknown as Agent)

describe('toolsetOf', () => {
  it('lets a new agent read, glob and grep without asking, and asks before bash, write, edit and the web tools', () => {
    const t = toolsetOf(undefined)
    const policies = Object.fromEntries(Object.entries(t.tools).map(([k, v]) => [k, v.policy]))
    expect(policies).toEqual({
      read: 'always_allow',
      glob: 'always_allow',
      grep: 'always_allow',
      bash: 'always_ask',
      write: 'always_ask',
      edit: 'always_ask',
      web_fetch: 'always_ask',
      web_search: 'always_ask',
    })
  })

  it("shows an existing agent's toolset without a default as the API applies it: always allow", () => {
    const t = toolsetOf(agentWith([{ type: 'agent_toolset_20260401' }]))
    expect(t.enabled).toBe(true)
    expect(new Set(Object.values(t.tools).map((v) => v.policy))).toEqual(new Set(['always_allow']))
  })

  it("keeps an existing agent's own default and per-tool policies", () => {
    const t = toolsetOf(agentWith([{ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_ask' } }, configs: [{ name: 'read', permission_policy: { type: 'always_allow' } }] }]))
    expect(t.tools.read.policy).toBe('always_allow')
    expect(t.tools.bash.policy).toBe('always_ask')
  })
})
