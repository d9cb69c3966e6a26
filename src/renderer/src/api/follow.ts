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
  /**
   * The history read again once the stream is back after a drop: what the stream could not resume
   * (a drop before any event told it where it was) is in it; the caller drops what it has by id.
   * Without it nothing is read again. A resync read that fails is left: the stream goes on.
   */
  onResync?: (history: H) => void
}

/**
 * A live view of a session: its stream, and a read of its past that leaves no gap between the two.
 * A stream without `after` starts at the events appended once the engine answered it, so a history
 * read sent beside it (the engine may answer that one first) could miss what was appended between
 * the two answers: a thread's end, a run's status, gone from the view until it is reopened. The
 * history is read only once the stream is open; every event is then in one or the other, or in both
 * (the caller drops duplicates by id). Messages the stream brings before the history is in are held
 * and delivered after it, in order. A stream that cannot open ('reconnecting' first) does not hold
 * the history back. Back after a drop, the history is read again for `onResync`. Nothing reaches a
 * handler once the disposer has run (a read still in flight then delivers nothing). Returns the
 * stream's disposer.
 */
export function followSession<H>(client: CorralClient, sessionId: string, options: Omit<StreamOptions, 'onState'>, h: FollowHandlers<H>): () => void {
  let live = true
  let started = false
  let ready = false
  const held: StreamMessage[] = []
  /** A resync read that came back before the first history was in: delivered after it. */
  let resynced: { history: H } | undefined
  const release = () => {
    ready = true
    for (const m of held.splice(0)) if (live) h.onMessage(m)
    if (resynced && live) h.onResync?.(resynced.history)
    resynced = undefined
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
  let dropped = false
  const resync = () => {
    h.history().then(
      (history) => {
        if (!live) return
        if (ready) h.onResync?.(history)
        else resynced = { history }
      },
      () => {},
    )
  }
  const stop = client.stream(
    sessionId,
    {
      ...options,
      onState: (state) => {
        if (!live) return
        h.onState?.(state)
        if (state === 'reconnecting') dropped = true
        else if (dropped) {
          dropped = false
          if (h.onResync) resync()
        }
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
