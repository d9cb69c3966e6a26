import type { EventLog } from '../session/event-log'

export interface SessionHistoryInput {
  after?: number
  before?: number
  event_id?: string
  types?: string[]
  limit?: number
}

/** Checks the model's input to `session_history`; a bad field gets a message naming it and the rule. */
export function parseSessionHistoryInput(input: Record<string, unknown>): SessionHistoryInput | { error: string } {
  const out: SessionHistoryInput = {}
  for (const k of ['after', 'before', 'limit'] as const) {
    const v = input[k]
    if (v === undefined || v === null) continue
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) return { error: `${k}: must be a non-negative integer` }
    out[k] = v
  }
  if (input.event_id !== undefined && input.event_id !== null) {
    if (typeof input.event_id !== 'string' || !input.event_id) return { error: 'event_id: must be an event id string' }
    out.event_id = input.event_id
  }
  if (input.types !== undefined && input.types !== null) {
    if (!Array.isArray(input.types) || input.types.some((t) => typeof t !== 'string')) return { error: 'types: must be an array of event type strings' }
    out.types = input.types as string[]
  }
  if (out.after !== undefined && out.before !== undefined) return { error: 'after, before: give one of them, not both' }
  return out
}

/**
 * The `session_history` tool: reads a session's own log by position. Positions are the log's
 * seq numbers; the answer says where to continue. Read-only, so safe to run again after a crash.
 */
export function readSessionHistory(log: EventLog, sessionId: string, raw: Record<string, unknown>): { content: string; isError: boolean } {
  const input = parseSessionHistoryInput(raw)
  if ('error' in input) return { content: `session_history: ${input.error}`, isError: true }
  const limit = Math.min(Math.max(input.limit ?? 20, 1), 100)
  let rows
  if (input.event_id !== undefined) {
    const anchor = log.get(input.event_id)
    if (!anchor || anchor.sessionId !== sessionId) return { content: `session_history: event_id: no event ${input.event_id} in this session`, isError: true }
    const rest = log.read(sessionId, { after: anchor.seq, limit: limit - 1 > 0 ? limit - 1 : 1, types: input.types })
    rows = [anchor, ...rest].slice(0, limit)
  } else if (input.before !== undefined) {
    rows = log.read(sessionId, { before: input.before, limit, order: 'desc', types: input.types }).reverse()
  } else {
    rows = log.read(sessionId, { after: input.after ?? 0, limit, types: input.types })
  }
  const last = log.lastSeq(sessionId)
  const lines = rows.map((r) => JSON.stringify({ position: r.seq, ...compact(r.event as unknown as Record<string, unknown>) }))
  const end = rows.length ? rows[rows.length - 1].seq : (input.after ?? 0)
  lines.push(
    rows.length === 0
      ? `(no events; the log has ${last} events)`
      : `(positions ${rows[0].seq}..${end} of ${last}; continue with {"after":${end}}, or earlier with {"before":${rows[0].seq}})`,
  )
  return { content: lines.join('\n'), isError: false }
}

function compact(e: Record<string, unknown>): Record<string, unknown> {
  const { processed_at: _p, ...rest } = e
  return rest
}
