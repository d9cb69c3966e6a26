import { useEffect, useMemo, useState } from 'react'
import { useClient } from '../../api/context'
import { followSession } from '../../api/follow'
import type { Page, SessionThread } from '../../api/types'
import { ThreadStatusBoard, threadTree, type ThreadNode } from './thread-tree'

/** Thread objects per page when the tree reads `GET /threads` (25 children + advisor consultations fit in one). */
const THREAD_PAGE = 100
/** At most this many pages: a 1,000-agent workflow run's threads, its session's subagents and consultations. */
const MAX_PAGES = 12
/** Between two reads of the thread objects at least this long: a big workflow run settles a thread every few ms. */
const READ_SPACING_MS = 1000

export interface ThreadTreeData {
  /** The tree in drawing order (threadTree); empty until the first read. */
  nodes: ThreadNode[]
  /** The thread objects as last read, by id. */
  threads: ReadonlyMap<string, SessionThread>
}

/**
 * The session's thread tree, kept live: the thread objects from `GET /threads` (read when
 * `enabled` first becomes true, again when a thread is created and when one goes idle or
 * terminates, which is when its cost moves), and each thread's status from the session stream's
 * `session.thread_status_*` events as they come. One stream of its own (no previews); disposed
 * with the view.
 */
export function useThreadTree(sessionId: string, enabled: boolean): ThreadTreeData {
  const client = useClient()
  const [threads, setThreads] = useState<SessionThread[]>([])
  const [live, setLive] = useState<ReadonlyMap<string, SessionThread['status']>>(new Map())

  useEffect(() => {
    if (!enabled) return
    let alive = true
    let inFlight = false
    let again = false
    const board = new ThreadStatusBoard()
    setThreads([])
    setLive(new Map())
    const read = async () => {
      if (inFlight) {
        again = true
        return
      }
      inFlight = true
      try {
        do {
          again = false
          const all: SessionThread[] = []
          let page: string | undefined
          for (let i = 0; i < MAX_PAGES; i++) {
            const res = await client.request<Page<SessionThread>>('threads.list', { id: sessionId }, { limit: THREAD_PAGE, page })
            all.push(...res.data)
            if (!res.next_page) break
            page = res.next_page
          }
          if (alive) setThreads(all)
          if (again && alive) await new Promise((r) => setTimeout(r, READ_SPACING_MS))
        } while (again && alive)
      } catch {
        // An engine without thread routes, or a session deleted meanwhile: the tree stays as it was.
      } finally {
        inFlight = false
      }
    }
    // the list is first read once the stream is open (followSession): a status that moves meanwhile is in one or the other
    const stop = followSession(client, sessionId, {}, {
      history: read,
      onHistory: () => {},
      // back after a drop: the list again (a status that moved meanwhile was in no message); the
      // read sets it itself, as it does for the first history, so there is nothing to do here
      onResync: () => {},
      onMessage: (msg) => {
        if (!alive || msg.kind !== 'event') return
        const e = msg.event as { type: string; session_thread_id?: string | null }
        const { changed, settled } = board.apply(e)
        if (changed) setLive(board.snapshot())
        // The primary's cost moves when the session goes idle (its status event may name no thread).
        if (settled || e.type === 'session.thread_created' || e.type === 'session.status_idle') void read()
      },
    })
    return () => {
      alive = false
      stop()
    }
  }, [client, sessionId, enabled])

  return useMemo(() => ({ nodes: threadTree(threads, live), threads: new Map(threads.map((t) => [t.id, t])) }), [threads, live])
}
