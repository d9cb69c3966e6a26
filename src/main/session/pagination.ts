import { invalid } from '../../shared/errors'
import type { Db } from './database'

/** A page as the API returns it (PageCursor / BidirectionalPageCursor). */
export interface Page<T> {
  data: T[]
  next_page: string | null
  prev_page?: string | null
}

interface CursorBody {
  /** created_at of the boundary row */
  c: string
  /** id of the boundary row */
  i: string
  /** direction: 'n' = the page after the boundary in list order, 'p' = the page before it */
  d: 'n' | 'p'
}

export function encodeCursor(body: CursorBody): string {
  return Buffer.from(JSON.stringify(body)).toString('base64url')
}

export function decodeCursor(page: string): CursorBody {
  try {
    const body = JSON.parse(Buffer.from(page, 'base64url').toString('utf8')) as CursorBody
    if (typeof body.c !== 'string' || typeof body.i !== 'string' || (body.d !== 'n' && body.d !== 'p')) throw new Error('bad cursor')
    return body
  } catch {
    throw invalid('page: not a cursor this server issued')
  }
}

export interface KeysetListParams {
  /** SQL table (a constant, never user input). */
  table: string
  /** Extra WHERE clauses with their args. */
  where: string[]
  args: unknown[]
  order: 'asc' | 'desc'
  limit: number
  page?: string
}

/**
 * Keyset pagination over (created_at, id): stable under concurrent inserts, O(log n) per page.
 * Returns the rows' `data` JSON parsed, plus next/prev cursors.
 */
export function keysetList<T, R extends { id: string; created_at: string } = { id: string; created_at: string; data: string }>(
  db: Db,
  params: KeysetListParams,
  map: (row: R) => T = (row) => JSON.parse((row as unknown as { data: string }).data) as T,
): Page<T> {
  const where = [...params.where]
  const args = [...params.args]
  let order = params.order
  let backwards = false
  if (params.page) {
    const cur = decodeCursor(params.page)
    backwards = cur.d === 'p'
    // Going backwards = reading in the opposite order from the boundary, then reversing.
    const forwardAsc = params.order === 'asc'
    const cmpAsc = backwards ? !forwardAsc : forwardAsc
    where.push(cmpAsc ? '(created_at > ? OR (created_at = ? AND id > ?))' : '(created_at < ? OR (created_at = ? AND id < ?))')
    args.push(cur.c, cur.c, cur.i)
    if (backwards) order = forwardAsc ? 'desc' : 'asc'
  }
  const dir = order === 'asc' ? 'ASC' : 'DESC'
  const sql = `SELECT * FROM ${params.table}${where.length ? ' WHERE ' + where.join(' AND ') : ''} ORDER BY created_at ${dir}, id ${dir} LIMIT ?`
  const rows = db.prepare(sql).all(...args, params.limit + 1) as R[]
  const more = rows.length > params.limit
  if (more) rows.pop()
  if (backwards) rows.reverse()
  const first = rows[0]
  const last = rows[rows.length - 1]
  const next = backwards ? (last ? encodeCursor({ c: last.created_at, i: last.id, d: 'n' }) : null) : more && last ? encodeCursor({ c: last.created_at, i: last.id, d: 'n' }) : null
  const prev = backwards
    ? more && first
      ? encodeCursor({ c: first.created_at, i: first.id, d: 'p' })
      : null
    : params.page && first
      ? encodeCursor({ c: first.created_at, i: first.id, d: 'p' })
      : null
  return { data: rows.map(map), next_page: next, prev_page: prev }
}

/** Adds created_at range filters from a list query. */
export function createdAtFilters(q: Record<string, unknown>, where: string[], args: unknown[]): void {
  const ops: [string, string][] = [
    ['created_at[gt]', '>'],
    ['created_at[gte]', '>='],
    ['created_at[lt]', '<'],
    ['created_at[lte]', '<='],
  ]
  for (const [key, op] of ops) {
    const v = q[key]
    if (typeof v === 'string') {
      where.push(`created_at ${op} ?`)
      args.push(new Date(v).toISOString())
    }
  }
}
