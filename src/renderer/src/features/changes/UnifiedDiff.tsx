import { memo, useMemo } from 'react'

interface Row {
  kind: 'add' | 'del' | 'ctx' | 'gap'
  oldNo?: number
  newNo?: number
  text: string
}

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
  const added = rows.filter((r) => r.kind === 'add').length
  const removed = rows.filter((r) => r.kind === 'del').length
  return (
    <div className="diff" role="table" aria-label={`Changes to ${path}`}>
      <div className="diff-head">
        <span className="diff-path">{path}</span>
        <span className="diff-stat">
          <span className="diff-add-n">+{added}</span> <span className="diff-del-n">−{removed}</span>
        </span>
      </div>
      <div className="diff-body">
        {rows.map((r, i) =>
          r.kind === 'gap' ? (
            <div key={i} className="diff-row diff-gap" role="row">
              <span role="cell">⋯</span>
            </div>
          ) : (
            <div key={i} className={`diff-row diff-${r.kind}`} role="row">
              <span className="diff-no" role="cell">
                {r.oldNo ?? ''}
              </span>
              <span className="diff-no" role="cell">
                {r.newNo ?? ''}
              </span>
              <span className="diff-sign" role="cell" aria-label={r.kind === 'add' ? 'added' : r.kind === 'del' ? 'removed' : undefined}>
                {r.kind === 'add' ? '+' : r.kind === 'del' ? '−' : ' '}
              </span>
              <span className="diff-text" role="cell">
                {r.text || ' '}
              </span>
            </div>
          ),
        )}
      </div>
    </div>
  )
})
