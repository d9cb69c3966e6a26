import type { Hono } from 'hono'
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response'
import type { ServerResponse } from 'node:http'
import { z } from 'zod'
import { eventListQuerySchema, eventSendSchema, sessionCreateSchema, sessionListQuerySchema, sessionUpdateSchema } from '../../../shared/api/schemas'
import { invalid } from '../../../shared/errors'
import { isOnThreadStream, threadKeyOf, type ThreadKey } from '../../../shared/api/events'
import type { ApiServices, PreviewEvent } from '../services'
import type { StoredEvent } from '../../session/event-log'
import type { Session } from '../../../shared/api/types'
import { validate } from '../validate'
import { noQuery, readJson, query } from './common'

const streamQuerySchema = z.strictObject({
  /**
   * The API's preview types, plus Corral's `agent.tool_result`: a running tool call's output as
   * it is written (never stored; the stored result with the same id concludes it).
   */
  event_deltas: z.array(z.enum(['agent.message', 'agent.thinking', 'agent.tool_result'])).optional(),
  /** Corral addition: resume after this seq (the SSE `id`); also taken from Last-Event-ID. */
  after: z.coerce.number().int().min(0).optional(),
})

/** Events per page when a stream replays history. */
const REPLAY_PAGE = 500

/** Event-list cursors carry the seq of the last event returned and the direction. */
function encodeSeqCursor(seq: number): string {
  return Buffer.from(`s${seq}`).toString('base64url')
}
function decodeSeqCursor(page: string): number {
  const raw = Buffer.from(page, 'base64url').toString()
  const n = Number(raw.slice(1))
  if (raw[0] !== 's' || !Number.isInteger(n) || n < 0) throw invalid('page: not a cursor this server issued')
  return n
}

export function sessionRoutes(app: Hono, s: ApiServices): void {
  const shown = (session: Session) => withActivity(s, session)
  app.post('/v1/sessions', async (c) => c.json(shown(await s.sessions.create(validate(sessionCreateSchema, await readJson(c))))))
  app.get('/v1/sessions', (c) => {
    const page = s.sessions.list(validate(sessionListQuerySchema, query(c, ['statuses']), 'query'))
    return c.json({ ...page, data: page.data.map(shown) })
  })
  app.get('/v1/sessions/:id', (c) => (noQuery(c), c.json(shown(s.sessions.retrieve(c.req.param('id'))))))
  app.post('/v1/sessions/:id', async (c) => c.json(shown(await s.sessions.update(c.req.param('id'), validate(sessionUpdateSchema, await readJson(c))))))
  app.delete('/v1/sessions/:id', (c) => (noQuery(c), c.json(s.sessions.delete(c.req.param('id')))))
  app.post('/v1/sessions/:id/archive', async (c) => (noQuery(c), c.json(shown(await s.sessions.archive(c.req.param('id'))))))

  // The session's list and stream are its primary thread's: the primary's own events and the
  // primary-visible ones of its children (isPrimaryVisible), each once, with the child's id.
  app.get('/v1/sessions/:id/events', (c) => c.json(listEvents(s, c.req.param('id'), query(c, ['types']), null)))
  app.post('/v1/sessions/:id/events', async (c) => {
    const body = validate(eventSendSchema, await readJson(c))
    const stored = await s.sessions.sendEvents(c.req.param('id'), body.events)
    return c.json({ data: stored.map((e) => e.event) })
  })
  app.get('/v1/sessions/:id/events/stream', (c) => openStream(c, s, c.req.param('id'), null))

  // A thread's events: the primary thread's are the session's; a child's are its full activity.
  app.get('/v1/sessions/:id/threads/:threadId/events', (c) => {
    const q = query(c, ['types'])
    return c.json(listEvents(s, c.req.param('id'), q, s.threads.logKey(c.req.param('id'), c.req.param('threadId'))))
  })
  app.get('/v1/sessions/:id/threads/:threadId/stream', (c) => openStream(c, s, c.req.param('id'), s.threads.logKey(c.req.param('id'), c.req.param('threadId'))))
}

/**
 * A session as the API shows it, with its active time from its threads (spec §3.1):
 * `usage.active_seconds` counts wall time with at least one thread running once,
 * `stats.active_seconds` sums each thread's own; `stats.duration_seconds` runs from creation,
 * frozen at the last update once the session is terminated.
 */
function withActivity(s: ApiServices, session: Session): Session {
  const activity = s.threads.activity(session.id)
  const end = session.status === 'terminated' ? Date.parse(session.updated_at) : s.threads.now()
  const duration = Math.max(0, end - Date.parse(session.created_at)) / 1000
  return {
    ...session,
    outcome_evaluations: s.sessions.outcomeEvaluations(session.id),
    stats: { ...session.stats, active_seconds: activity.sum_seconds, duration_seconds: duration },
    usage: { ...session.usage, active_seconds: activity.union_seconds },
  }
}

/** `thread`: whose stream the list is (null: the primary's, i.e. the session's; see isOnThreadStream). */
function listEvents(s: ApiServices, sessionId: string, q: Record<string, unknown>, thread: ThreadKey) {
  const params = validate(eventListQuerySchema, q, 'query')
  s.sessions.retrieve(sessionId)
  const order = params.order ?? 'asc'
  const limit = params.limit ?? 100
  const cursor = params.page !== undefined ? decodeSeqCursor(params.page) : undefined
  // Time filters go into the query itself, so a page is always full when more events match.
  const at = (k: 'gt' | 'gte' | 'lt' | 'lte') => params[`created_at[${k}]`]
  const filter = { order, types: params.types, streamOf: thread, processedAt: { gt: at('gt'), gte: at('gte'), lt: at('lt'), lte: at('lte') } }
  const from = (seq: number | undefined) => (order === 'asc' ? { after: seq } : { before: seq })
  const rows: StoredEvent[] = s.log.read(sessionId, { ...filter, ...from(cursor), limit })
  const last = rows[rows.length - 1]
  // One probe for "is there more" (a read is capped at 1000, so limit + 1 would not do at 1000).
  const more = rows.length === limit && s.log.read(sessionId, { ...filter, ...from(last.seq), limit: 1 }).length > 0
  return { data: rows.map((r) => r.event), next_page: more && last ? encodeSeqCursor(last.seq) : null }
}

/** A workflow run's end written by the session's archive: listed, never streamed (spec multiagent §6.9). */
const unstreamed = (stored: StoredEvent) => (stored.event as { session_archived?: boolean }).session_archived === true

/**
 * SSE: headers flushed at once; each event as `event: <type>`, `id: <seq>`, `data: <json>`.
 * Starts with events appended after the stream opened (the API's behaviour), or after a seq
 * given by `after` / Last-Event-ID (Corral's resume). Previews only when opted in.
 */
function openStream(c: import('hono').Context, s: ApiServices, sessionId: string, thread: ThreadKey) {
  const q = validate(streamQuerySchema, query(c, ['event_deltas']), 'query')
  s.sessions.retrieve(sessionId)
  const lastEventId = c.req.header('last-event-id')
  const after = q.after ?? (lastEventId && /^\d+$/.test(lastEventId) ? Number(lastEventId) : s.log.lastSeq(sessionId))
  const res = (c.env as { outgoing: ServerResponse }).outgoing
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  })
  res.flushHeaders()
  res.socket?.setNoDelay(true)
  const write = (type: string, data: unknown, id?: number) => {
    res.write(`event: ${type}\n${id !== undefined ? `id: ${id}\n` : ''}data: ${JSON.stringify(data)}\n\n`)
  }
  const view = { sessionId, thread }
  const disposers: (() => void)[] = []
  let closed = false
  const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), 15_000)
  keepAlive.unref()
  res.on('close', () => {
    closed = true
    clearInterval(keepAlive)
    for (const d of disposers) d()
  })
  const goLive = (from: number) => {
    if (closed) return
    disposers.push(
      s.log.tail(sessionId, from, (stored) => {
        if (!isOnThreadStream(stored.event, view) || unstreamed(stored)) return
        write(stored.event.type, stored.event, stored.seq)
      }),
    )
    if (q.event_deltas?.length) {
      const wanted = new Set(q.event_deltas)
      const open = new Set<string>()
      disposers.push(
        s.previews.subscribe(sessionId, (p: PreviewEvent) => {
          if (p.type === 'event_start') {
            const ev = p.event as { id: string; type: 'agent.message' | 'agent.thinking' | 'agent.tool_result'; session_thread_id?: string | null }
            // A preview is of its own thread's stream only: a child's never reach the primary's.
            if (!wanted.has(ev.type) || threadKeyOf(ev, sessionId) !== thread) return
            open.add(ev.id)
          } else if (!open.has(p.event_id as string)) return
          write(p.type, p)
        }),
      )
    }
  }
  // A resume far back (after=0 on a long session) is replayed a page at a time, waiting for the
  // socket to drain, instead of buffering the whole history in memory; then the live tail takes
  // over from the last replayed seq (its own catch-up closes the gap, exactly once).
  const replay = async () => {
    let from = after
    for (;;) {
      if (closed) return
      const page = s.log.read(sessionId, { after: from, limit: REPLAY_PAGE, streamOf: thread })
      for (const e of page) if (!unstreamed(e)) write(e.event.type, e.event, e.seq)
      if (page.length > 0) from = page[page.length - 1].seq
      if (page.length < REPLAY_PAGE) break
      if (res.writableNeedDrain) await new Promise<void>((r) => (res.once('drain', r), res.once('close', r)))
    }
    goLive(from)
  }
  replay().catch(() => res.end())
  return RESPONSE_ALREADY_SENT
}
