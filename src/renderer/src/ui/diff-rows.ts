import { diffLines, type Change } from 'diff'

export interface DiffRow {
  kind: 'add' | 'del' | 'ctx' | 'gap'
  oldNo?: number
  newNo?: number
  text: string
}

/** Rows of a line diff with `context` unchanged lines around each change. */
export function diffRows(before: string, after: string, context = 3): DiffRow[] {
  const changes: Change[] = diffLines(before, after)
  const rows: DiffRow[] = []
  let o = 1
  let n = 1
  for (const c of changes) {
    const lines = c.value.replace(/\n$/, '').split('\n')
    if (c.value === '') continue
    for (const text of lines) {
      if (c.added) rows.push({ kind: 'add', newNo: n++, text })
      else if (c.removed) rows.push({ kind: 'del', oldNo: o++, text })
      else rows.push({ kind: 'ctx', oldNo: o++, newNo: n++, text })
    }
  }
  // Fold long unchanged stretches.
  const keep = rows.map((r) => r.kind !== 'ctx')
  const near = rows.map((_, i) => {
    for (let d = -context; d <= context; d++) if (keep[i + d]) return true
    return false
  })
  const out: DiffRow[] = []
  for (let i = 0; i < rows.length; i++) {
    if (near[i] || !rows.some((r) => r.kind !== 'ctx')) out.push(rows[i])
    else if (out[out.length - 1]?.kind !== 'gap') out.push({ kind: 'gap', text: '' })
  }
  return out
}

