import { createTwoFilesPatch } from 'diff'
import { describe, expect, it } from 'vitest'
import { unifiedRows } from '../../../src/renderer/src/features/changes/UnifiedDiff'

describe('unifiedRows', () => {
  it('numbers the rows of a unified diff from its hunk headers and marks the gap between two hunks', () => {
    const before = Array.from({ length: 20 }, (_, i) => `line ${i + 1}`).join('\n') + '\n'
    const after = before.replace('line 2\n', 'line two\n').replace('line 18\n', '')
    const rows = unifiedRows(createTwoFilesPatch('a/f.txt', 'b/f.txt', before, after, undefined, undefined, { context: 1 }))
    expect(rows.filter((r) => r.kind !== 'ctx')).toEqual([
      { kind: 'del', oldNo: 2, text: 'line 2' },
      { kind: 'add', newNo: 2, text: 'line two' },
      { kind: 'gap', text: '' },
      { kind: 'del', oldNo: 18, text: 'line 18' },
    ])
    expect(rows.find((r) => r.text === 'line 19')).toEqual({ kind: 'ctx', oldNo: 19, newNo: 18, text: 'line 19' })
  })

  it('shows a created file as added lines only, without the file header lines', () => {
    const rows = unifiedRows(createTwoFilesPatch('/dev/null', 'b/new.txt', '', 'one\ntwo\n'))
    expect(rows).toEqual([
      { kind: 'add', newNo: 1, text: 'one' },
      { kind: 'add', newNo: 2, text: 'two' },
    ])
  })
})
