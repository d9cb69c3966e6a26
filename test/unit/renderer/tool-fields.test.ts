import { describe, expect, it } from 'vitest'
import type { ToolItem } from '../../../src/renderer/src/features/thread/timeline'
import { toolSummary } from '../../../src/renderer/src/features/thread/tool-view'
import { toolsetFields } from '../../../src/shared/tools/toolset'

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
})
