import { memo, useMemo } from 'react'
import { DiffTable } from '../../ui/Code'
import type { DiffRow as Row } from '../../ui/diff-rows'

/** Rows of a unified diff (as the changes API sends it), numbered from its hunk headers. */
export function unifiedRows(diff: string): Row[] {
  const rows: Row[] = []
  let o = 0
  let n = 0
  for (const line of diff.split('\n')) {
    const hunk = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(line)
    if (hunk) {
      if (rows.length) rows.push({ kind: 'gap', text: '' })
      o = Number(hunk[1])
      n = Number(hunk[2])
      continue
    }
    if (line.startsWith('---') || line.startsWith('+++') || line.startsWith('Index:') || line.startsWith('====') || line.startsWith('\\')) continue
    if (line.startsWith('+')) rows.push({ kind: 'add', newNo: n++, text: line.slice(1) })
    else if (line.startsWith('-')) rows.push({ kind: 'del', oldNo: o++, text: line.slice(1) })
    else if (line.startsWith(' ')) rows.push({ kind: 'ctx', oldNo: o++, newNo: n++, text: line.slice(1) })
  }
  return rows
}

/** A unified diff with line numbers, in the same look as the tool cards' diffs. */
export const UnifiedDiff = memo(function UnifiedDiff({ diff, path }: { diff: string; path: string }) {
  const rows = useMemo(() => unifiedRows(diff), [diff])
  return <DiffTable rows={rows} path={path} />
})
