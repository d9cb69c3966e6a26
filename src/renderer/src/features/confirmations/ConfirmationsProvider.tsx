import { createContext, useCallback, useContext, useEffect, useMemo, useRef, useState, type ReactNode } from 'react'
import { useClient } from '../../api/context'
import type { Page, Session, SessionEvent } from '../../api/types'
import { PENDING_EVENT_TYPES } from '../../../../shared/api/events'
import { TimelineBuilder, type TimelineEvent } from '../thread/timeline'
import { answerEvent, pendingThreadOf, type PendingItem } from './queue'
import { useSessions, sessionTitle } from '../sessions/SessionsProvider'

export type { PendingItem } from './queue'

interface ConfirmationsState {
  /** Every pending item across sessions and threads, oldest first. */
  queue: PendingItem[]
  countFor: (sessionId: string) => number
  /**
   * Answers a confirmation (allow / deny with an optional message), or a custom tool call (the
   * message is its result; deny marks it an error). Resolves when the engine stored the answer.
   */
  answer: (item: PendingItem, result: 'allow' | 'deny', denyMessage?: string, scope?: 'session') => Promise<void>
  /** Re-reads one session's pending items now (the thread view calls it on a relevant event). */
  refreshSession: (sessionId: string) => void
}

const Ctx = createContext<ConfirmationsState | null>(null)


function notify(item: PendingItem): void {
  if (typeof Notification === 'undefined' || Notification.permission !== 'granted') return
  if (document.visibilityState === 'visible' && document.hasFocus()) return
  const what = item.tool.source === 'custom' ? `answer the custom tool ${item.tool.name}` : `approve ${item.tool.name}`
  const who = item.thread ? ` (${item.thread.agentName})` : ''
  const n = new Notification('Corral needs you', { body: `${item.sessionTitle}${who}: ${what}`, tag: item.tool.id })
  n.onclick = () => {
    window.focus()
    window.location.hash = item.thread ? `/sessions/${item.sessionId}/threads/${item.thread.id}` : `/sessions/${item.sessionId}`
    n.close()
  }
}

/**
 * The confirmation queue across every session and thread. For each session whose `updated_at`
 * moved since the last look, it folds the session's recent request/answer events (the same fold
 * the thread view uses) into its pending items. A desktop notification announces a new one while
 * the window is in the background.
 */
export function ConfirmationsProvider({ children }: { children: ReactNode }) {
  const client = useClient()
  const { sessions } = useSessions()
  const [bySession, setBySession] = useState<Record<string, PendingItem[]>>({})
  const checked = useRef(new Map<string, string>())
  const known = useRef(new Set<string>())
  const primed = useRef(false)

  const load = useCallback(
    async (s: Session) => {
      // The session's list carries a child's calls that wait on the person (cross-posted with
      // their thread's id) and its requires_action idle; thread_created names the thread's agent.
      const page = await client.request<Page<SessionEvent>>('events.list', { id: s.id }, { order: 'desc', limit: 500, types: [...PENDING_EVENT_TYPES, 'session.thread_created'] })
      const events = [...page.data].reverse() as unknown as TimelineEvent[]
      const b = TimelineBuilder.from(events, '*')
      const items: PendingItem[] = b.pending().map((tool) => ({ sessionId: s.id, sessionTitle: sessionTitle(s), tool, thread: pendingThreadOf(tool, (t) => b.agentOf(t)) }))
      setBySession((prev) => ({ ...prev, [s.id]: items }))
      return items
    },
    [client],
  )

  useEffect(() => {
    let live = true
    const stale = sessions.filter((s) => !s.archived_at && s.status !== 'terminated' && checked.current.get(s.id) !== s.updated_at)
    const gone = Object.keys(bySession).filter((id) => !sessions.some((s) => s.id === id && !s.archived_at))
    if (gone.length) setBySession((prev) => Object.fromEntries(Object.entries(prev).filter(([id]) => !gone.includes(id))))
    if (stale.length === 0) return
    void (async () => {
      for (const s of stale) {
        if (!live) return
        try {
          const items = await load(s)
          checked.current.set(s.id, s.updated_at)
          for (const it of items) {
            if (!known.current.has(it.tool.id)) {
              known.current.add(it.tool.id)
              if (primed.current) notify(it)
            }
          }
        } catch {
          // A session deleted between list and read: the next poll drops it.
        }
      }
      primed.current = true
    })()
    return () => {
      live = false
    }
    // bySession is read only to drop sessions that left the list, so it is not a dependency.
  }, [sessions, load])

  const refreshSession = useCallback(
    (sessionId: string) => {
      const s = sessions.find((x) => x.id === sessionId)
      if (s)
        load(s)
          .then((items) => {
            for (const it of items) {
              if (!known.current.has(it.tool.id)) {
                known.current.add(it.tool.id)
                notify(it)
              }
            }
          })
          // a read that fails leaves the queue as it was: the next poll reads the session again
          .catch(() => {})
    },
    [sessions, load],
  )

  const answer = useCallback(
    async (item: PendingItem, result: 'allow' | 'deny', denyMessage?: string, scope?: 'session') => {
      await client.request('events.send', { id: item.sessionId }, { events: [answerEvent(item, result, denyMessage, scope)] })
      setBySession((prev) => ({ ...prev, [item.sessionId]: (prev[item.sessionId] ?? []).filter((p) => p.tool.id !== item.tool.id) }))
    },
    [client],
  )

  const value = useMemo(() => {
    const queue = Object.values(bySession)
      .flat()
      .sort((a, b) => (a.tool.at ?? '').localeCompare(b.tool.at ?? ''))
    return { queue, countFor: (id: string) => bySession[id]?.length ?? 0, answer, refreshSession }
  }, [bySession, answer, refreshSession])
  return <Ctx.Provider value={value}>{children}</Ctx.Provider>
}

export function useConfirmations(): ConfirmationsState {
  const c = useContext(Ctx)
  if (!c) throw new Error('useConfirmations outside ConfirmationsProvider')
  return c
}
