import type { Db } from './database'
import { invalid } from '../../shared/errors'

/** One message that matched a search: where it is and the text around the match. */
export interface MessageSearchHit {
  session_id: string
  event_id: string
  type: 'user.message' | 'agent.message'
  processed_at: string
  /** Up to ~160 characters of the message around the first match. */
  snippet: string
}

export interface MessageSearchParams {
  /** Text to find, case-insensitive (ASCII case folding, as SQLite's lower()). */
  query: string
  limit: number
  /** The cursor a previous page returned. */
  page?: string
}

const SNIPPET = 160

function textOf(data: string): string {
  try {
    const content = (JSON.parse(data) as { content?: { type?: string; text?: string }[] }).content
    return Array.isArray(content) ? content.filter((b) => b?.type === 'text' && typeof b.text === 'string').map((b) => b.text).join('\n') : ''
  } catch {
    return ''
  }
}

function snippetOf(text: string, query: string): string {
  const at = text.toLowerCase().indexOf(query.toLowerCase())
  const start = Math.max(0, (at === -1 ? 0 : at) - 50)
  const part = text.slice(start, start + SNIPPET).replace(/\s+/g, ' ').trim()
  return `${start > 0 ? '…' : ''}${part}${start + SNIPPET < text.length ? '…' : ''}`
}

/**
 * Finds user and agent messages whose text contains `query`, newest first, across every session
 * that is not being deleted; a page at a time (cursor: the last event id returned). A query over
 * the log in SQLite, so nothing is loaded but the matching page. Throws `invalid` for a cursor
 * this server did not issue.
 */
export function searchMessages(db: Db, p: MessageSearchParams): { data: MessageSearchHit[]; next_page: string | null } {
  let before = '\uffff'
  if (p.page !== undefined) {
    const raw = Buffer.from(p.page, 'base64url').toString()
    if (!raw.startsWith('m:sevt_')) throw invalid('page: not a cursor this server issued')
    before = raw.slice(2)
  }
  // The stored data is JSON: look for the query as it is written there (quotes, newlines escaped),
  // then keep the rows whose message text has it (not a field name or another block's field).
  const needle = JSON.stringify(p.query.toLowerCase()).slice(1, -1)
  const wanted = p.query.toLowerCase()
  const stmt = db.prepare(
    `SELECT s.id AS session_id, e.id AS event_id, e.type AS type, e.processed_at AS processed_at, e.data AS data
       FROM events e INDEXED BY events_id JOIN sessions s ON s.rid = e.session_rid
      WHERE e.id < ? AND e.type IN ('user.message', 'agent.message') AND s.deleting = 0 AND instr(lower(e.data), ?) > 0
      ORDER BY e.id DESC LIMIT 200`,
  )
  const hits: MessageSearchHit[] = []
  for (;;) {
    const rows = stmt.all(before, needle) as { session_id: string; event_id: string; type: MessageSearchHit['type']; processed_at: string; data: string }[]
    for (const r of rows) {
      const text = textOf(r.data)
      if (text.toLowerCase().includes(wanted)) hits.push({ session_id: r.session_id, event_id: r.event_id, type: r.type, processed_at: r.processed_at, snippet: snippetOf(text, p.query) })
      if (hits.length > p.limit) break
    }
    if (hits.length > p.limit || rows.length < 200) break
    before = rows[rows.length - 1].event_id
  }
  const more = hits.length > p.limit
  const data = hits.slice(0, p.limit)
  return { data, next_page: more ? Buffer.from(`m:${data[data.length - 1].event_id}`).toString('base64url') : null }
}
