import { describe, expect, it } from 'vitest'
import type { ToolItem } from '../../../src/renderer/src/features/thread/timeline'
import { toolSummary } from '../../../src/renderer/src/features/thread/tool-view'
import { TOOLS, READ_ONLY_TOOLS, toolsetOf } from '../../../src/renderer/src/features/agents/toolset'
import { TOOLSET, TOOLSET_DEFINITIONS, TOOLSET_ENTRIES, toolsetFields } from '../../../src/shared/tools/toolset'

const call = (name: string, input: Record<string, unknown>) => ({ kind: 'tool', id: 'sevt_1', name, input }) as unknown as ToolItem

describe('tool cards and the toolset table', () => {
  it('summarise each toolset call by a field the table declares for it', () => {
    const cases: [string, string, string][] = [
      ['bash', 'command', 'npm test'],
      ['read', 'file_path', '/workspace/src/a.ts'],
      ['write', 'file_path', 'notes.md'],
      ['edit', 'file_path', 'src/b.ts'],
      ['glob', 'pattern', '**/*.ts'],
      ['grep', 'pattern', 'TODO'],
      ['web_fetch', 'url', 'https://example.com/'],
    ]
    for (const [name, field, value] of cases) {
      expect({ name, declared: toolsetFields(name).includes(field) }).toEqual({ name, declared: true })
      expect(toolSummary(call(name, { [field]: value }))).toBe(value)
    }
    expect(toolsetFields('grep')).toContain('path')
    expect(toolSummary(call('grep', { pattern: 'TODO', path: 'src' }))).toBe('TODO  in src')
  })

  it('give every tool of the table an editor row and a card summary, and list no tool the table lacks', () => {
    expect(TOOLS).toEqual(TOOLSET_ENTRIES.map((t) => t.name))
    // the toolset the model is offered is the one the editor lists (web_search is the endpoint's own server tool)
    expect(TOOLS).toEqual([...Object.keys(TOOLSET_DEFINITIONS), 'web_search'])
    for (const tool of TOOLSET) {
      const field = toolsetFields(tool.name)[0]!
      const summary = toolSummary(call(tool.name, { [field]: `${tool.name}-value` }))
      expect({ tool: tool.name, summary }).toEqual({ tool: tool.name, summary: `${tool.name}-value` })
    }
    expect(toolSummary(call('web_search', { query: 'corral sandboxes' }))).toBe('corral sandboxes')
    expect(toolSummary(call('bash', { restart: true }))).toBe('restart the shell')
    expect(Object.keys(toolsetOf(undefined).tools)).toEqual(TOOLS)
  })

  it('let a new agent run only the read-only tools of the table without asking', () => {
    expect([...READ_ONLY_TOOLS].sort()).toEqual(['glob', 'grep', 'read'])
    const fresh = toolsetOf(undefined).tools
    for (const t of TOOLSET_ENTRIES) expect({ tool: t.name, policy: fresh[t.name]!.policy }).toEqual({ tool: t.name, policy: t.readOnly ? 'always_allow' : 'always_ask' })
  })
})
