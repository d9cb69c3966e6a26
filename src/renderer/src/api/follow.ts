import type { CorralClient, StreamMessage, StreamOptions } from './client'

export interface FollowHandlers<H> {
  /** Reads what the view needs of the past (an events page, the thread list); called once the stream is open. */
  history: () => Promise<H>
  /** The history read; the stream's messages held meanwhile are delivered right after it. */
  onHistory: (history: H) => void
  /** The history could not be read; the held messages are delivered after it all the same. */
  onHistoryError?: (err: unknown) => void
  /** A stream message, never before `onHistory` (or `onHistoryError`) ran. */
  onMessage: (msg: StreamMessage) => void
  /** Every state the stream reports ('open' on each (re)connection, 'reconnecting' on a drop). */
  onState?: (state: 'open' | 'reconnecting') => void
}

/**
 * A live view of a session: its stream, and a read of its past that leaves no gap between the two.
 * A stream without `after` starts at the events appended once the engine answered it, so a history
 * read sent beside it (the engine may answer that one first) could miss what was appended between
 * the two answers: a thread's end, a run's status, gone from the view until it is reopened. The
 * history is read only once the stream is open; every event is then in one or the other, or in both
 * (the caller drops duplicates by id). Messages the stream brings before the history is in are held
 * and delivered after it, in order. A stream that cannot open ('reconnecting' first) does not hold
 * the history back. Returns the stream's disposer.
 */
export function followSession<H>(client: CorralClient, sessionId: string, options: Omit<StreamOptions, 'onState'>, h: FollowHandlers<H>): () => void {
  let live = true
  let started = false
  let ready = false
  const held: StreamMessage[] = []
  const release = () => {
    ready = true
    for (const m of held.splice(0)) if (live) h.onMessage(m)
  }
  const readHistory = () => {
    if (started) return
    started = true
    h.history().then(
      (history) => {
        if (!live) return
        h.onHistory(history)
        release()
      },
      (err: unknown) => {
        if (!live) return
        h.onHistoryError?.(err)
        release()
      },
    )
  }
  const stop = client.stream(
    sessionId,
    {
      ...options,
      onState: (state) => {
        if (!live) return
        h.onState?.(state)
        readHistory()
      },
    },
    (msg) => {
      if (!live) return
      if (ready) h.onMessage(msg)
      else held.push(msg)
    },
  )
  return () => {
    live = false
    held.length = 0
    stop()
  }
}
