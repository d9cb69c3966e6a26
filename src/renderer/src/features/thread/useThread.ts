import { useCallback, useEffect, useRef, useState } from 'react'
import { useClient } from '../../api/context'
import { followSession } from '../../api/follow'
import type { StreamMessage } from '../../api'
import type { Page, SessionEvent } from '../../api/types'
import { sessionStatusOf, type SessionStatus } from '../../../../shared/api/events'
import { TimelineBuilder, type TimelineEvent, type TimelineItem, type ThreadFilter } from './timeline'

/** Newest events read when a thread opens; older ones load as the reader scrolls up. */
export const FIRST_PAGE = 400
export const OLDER_PAGE = 1000

export interface ThreadData {
  items: TimelineItem[]
  /** Stored events folded so far (for counts and the header). */
  eventCount: number
  loading: boolean
  error: Error | undefined
  /** True while older events exist that are not loaded yet. */
  hasOlder: boolean
  loadingOlder: boolean
  loadOlder: () => void
  /** Bumped each time older items were put in front (the view keeps its scroll position). */
  prependMark: number
  connection: 'connecting' | 'open' | 'reconnecting'
  /** Model requests in flight (span start without end): the "thinking" indicator. */
  modelBusy: boolean
  /** The last event's type, for the view to react to (e.g. refresh the queue). */
  lastEventType: string | undefined
  /** The session's status as its latest status event says (fresher than a polled resource). */
  liveStatus: SessionStatus | undefined
}

/**
 * A thread's timeline: opens the live stream first (with previews), reads the newest page,
 * folds both with de-duplication by id, then keeps folding live messages. Older pages are read
 * on demand. Re-renders are batched to one per animation frame however fast events arrive.
 */
export function useThread(sessionId: string, thread: ThreadFilter): ThreadData {
  const client = useClient()
  const builder = useRef(new TimelineBuilder(thread))
  const events = useRef<TimelineEvent[]>([])
  const cursor = useRef<string | null>(null)
  const [items, setItems] = useState<TimelineItem[]>([])
  const [loading, setLoading] = useState(true)
  const [error, setError] = useState<Error>()
  const [hasOlder, setHasOlder] = useState(false)
  const [loadingOlder, setLoadingOlder] = useState(false)
  const [prependMark, setPrependMark] = useState(0)
  const [connection, setConnection] = useState<ThreadData['connection']>('connecting')
  const [modelBusy, setModelBusy] = useState(false)
  const [lastEventType, setLastEventType] = useState<string>()
  const [liveStatus, setLiveStatus] = useState<ThreadData['liveStatus']>()
  const openSpans = useRef(new Set<string>())
  const frame = useRef(0)

  const flush = useCallback(() => {
    if (frame.current) return
    frame.current = requestAnimationFrame(() => {
      frame.current = 0
      setItems(builder.current.items.slice())
    })
  }, [])

  useEffect(() => {
    const b = new TimelineBuilder(thread)
    builder.current = b
    events.current = []
    cursor.current = null
    openSpans.current = new Set()
    setItems([])
    setLoading(true)
    setError(undefined)
    setHasOlder(false)
    setModelBusy(false)
    setLiveStatus(undefined)
    setConnection('connecting')

    const trackSpan = (e: TimelineEvent) => {
      const status = sessionStatusOf(e)
      if (status) setLiveStatus(status)
      if (e.type === 'span.model_request_start') openSpans.current.add(e.id)
      else if (e.type === 'span.model_request_end') openSpans.current.delete(String(e.model_request_start_id ?? ''))
      else if (e.type === 'session.status_idle' || e.type === 'session.status_terminated') openSpans.current.clear()
      else return
      setModelBusy(openSpans.current.size > 0)
    }

    const apply = (msg: StreamMessage) => {
      // builder.current, not b: loading older pages replaces the builder.
      const cur = builder.current
      if (msg.kind === 'preview') {
        if (cur.preview(msg.preview as Parameters<TimelineBuilder['preview']>[0])) flush()
        return
      }
      const e = msg.event as unknown as TimelineEvent
      if (cur.has(e.id)) return
      events.current.push(e)
      trackSpan(e)
      setLastEventType(e.type)
      const settled = e.type === 'user.interrupt' || e.type === 'session.status_idle' ? cur.settleStreaming() : false
      if (cur.append(e) || settled) flush()
    }

    let ready = false
    const readNewest = async (): Promise<TimelineEvent[]> => {
      const page =
        thread === null || thread === '*'
          ? await client.request<Page<SessionEvent>>('events.list', { id: sessionId }, { order: 'desc', limit: FIRST_PAGE })
          : await client.request<Page<SessionEvent>>('threads.events', { id: sessionId, threadId: thread }, { order: 'desc', limit: FIRST_PAGE })
      if (!ready) {
        cursor.current = page.next_page
        setHasOlder(page.next_page !== null)
      }
      return [...page.data].reverse() as unknown as TimelineEvent[]
    }

    // the newest page is read once the stream is open (followSession): nothing falls between the two
    const stop = followSession(
      client,
      sessionId,
      { previews: true, thread: thread === null || thread === '*' ? undefined : thread },
      {
        history: readNewest,
        onHistory: (history) => {
          for (const e of history) {
            events.current.push(e)
            b.append(e)
            trackSpan(e)
          }
          ready = true
          setItems(b.items.slice())
          setLoading(false)
        },
        onHistoryError: (err) => {
          setError(err as Error)
          setLoading(false)
        },
        onMessage: (msg) => {
          if (ready) apply(msg)
        },
        onState: (s) => {
          setConnection(s)
          // a preview cut by the drop is settled; the stream resumes where it was
          if (s === 'reconnecting' && builder.current.settleStreaming()) flush()
        },
        // back after a drop the stream could not resume: the newest page again, de-duplicated by id
        onResync: (page) => {
          if (ready) for (const e of page) apply({ kind: 'event', seq: NaN, event: e as unknown as SessionEvent })
        },
      },
    )

    return () => {
      // (nothing of this stream or its reads reaches apply after this: followSession)
      stop()
      if (frame.current) cancelAnimationFrame(frame.current)
      frame.current = 0
    }
  }, [client, sessionId, thread, flush])

  const loadOlder = useCallback(() => {
    if (loadingOlder || !cursor.current) return
    setLoadingOlder(true)
    const page = cursor.current
    const req =
      thread === null || thread === '*'
        ? client.request<Page<SessionEvent>>('events.list', { id: sessionId }, { order: 'desc', limit: OLDER_PAGE, page })
        : client.request<Page<SessionEvent>>('threads.events', { id: sessionId, threadId: thread }, { order: 'desc', limit: OLDER_PAGE, page })
    void req
      .then((res) => {
        if (cursor.current !== page) return
        const older = [...res.data].reverse() as unknown as TimelineEvent[]
        const prev = builder.current
        const streaming = prev.items.filter((i) => (i.kind === 'agent' || i.kind === 'thinking') && i.streaming)
        events.current = [...older, ...events.current]
        const b = TimelineBuilder.from(events.current, thread)
        for (const s of streaming) {
          if (b.has(s.id) || (s.kind !== 'agent' && s.kind !== 'thinking')) continue
          b.preview({ type: 'event_start', event: { id: s.id, type: s.kind === 'agent' ? 'agent.message' : 'agent.thinking' } })
          b.preview({ type: 'event_delta', event_id: s.id, delta: { content: { text: s.text } } })
        }
        b.carryLive(prev)
        // Rows that did not change keep their objects, so React re-renders none of them.
        b.items = reuseUnchanged(prev.items, b.items)
        builder.current = b
        cursor.current = res.next_page
        setHasOlder(res.next_page !== null)
        setItems(b.items.slice())
        setPrependMark((m) => m + 1)
      })
      .catch((err: Error) => setError(err))
      .finally(() => setLoadingOlder(false))
  }, [client, sessionId, thread, loadingOlder])

  return { items, eventCount: events.current.length, loading, error, hasOlder, loadingOlder, loadOlder, prependMark, connection, modelBusy, lastEventType, liveStatus }
}

/**
 * `next` with every row that equals its namesake in `prev` replaced by that same object. Rows are
 * folds of immutable events, so equal ids mean equal rows except where an answer (a result, a
 * confirmation) or streaming text arrived; those few fields are compared.
 */
export function reuseUnchanged(prev: readonly TimelineItem[], next: TimelineItem[]): TimelineItem[] {
  const byId = new Map<string, TimelineItem>()
  for (const it of prev) byId.set(it.id, it)
  return next.map((it) => {
    const old = byId.get(it.id)
    if (!old || old.kind !== it.kind) return it
    if (it.kind === 'tool') {
      const o = old as typeof it
      return o.result?.text === it.result?.text && o.result?.isError === it.result?.isError && o.confirmation?.result === it.confirmation?.result && o.live === it.live ? old : it
    }
    if (it.kind === 'delegation') return (old as typeof it).task === it.task ? old : it
    if (it.kind === 'agent' || it.kind === 'thinking') {
      const o = old as typeof it
      return o.text === it.text && o.streaming === it.streaming ? old : it
    }
    return old
  })
}
