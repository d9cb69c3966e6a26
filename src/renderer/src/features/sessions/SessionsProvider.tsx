import { createContext, useCallback, useContext, useEffect, useMemo, useRef, useState, type ReactNode } from 'react'
import { useClient } from '../../api/context'
import { ApiError } from '../../api'
import type { Agent, Environment, Page, Session } from '../../api/types'

interface SessionsState {
  sessions: Session[]
  agents: Agent[]
  environments: Environment[]
  loaded: boolean
  /** True when there are more sessions than the list holds (the 200 most recent are shown). */
  truncated: boolean
  error: ApiError | Error | undefined
  includeArchived: boolean
  setIncludeArchived: (v: boolean) => void
  /** Re-reads sessions (and agents/environments) now instead of at the next poll. */
  refresh: () => void
  /** Puts a fresh copy of one session in the list (after an action on it). */
  upsert: (s: Session) => void
}

const SessionsContext = createContext<SessionsState | null>(null)

const POLL_MS = 2500

/** Every list the app shows, polled while the page is visible (status, last activity, counts). */
export function SessionsProvider({ children }: { children: ReactNode }) {
  const client = useClient()
  const [sessions, setSessions] = useState<Session[]>([])
  const [agents, setAgents] = useState<Agent[]>([])
  const [environments, setEnvironments] = useState<Environment[]>([])
  const [loaded, setLoaded] = useState(false)
  const [truncated, setTruncated] = useState(false)
  const [error, setError] = useState<Error>()
  const [includeArchived, setIncludeArchived] = useState(false)
  const [tick, setTick] = useState(0)
  const inflight = useRef(false)

  useEffect(() => {
    let live = true
    const load = async () => {
      if (inflight.current) return
      inflight.current = true
      try {
        const [s, a, e] = await Promise.all([
          client.request<Page<Session>>('sessions.list', {}, { limit: 200, include_archived: includeArchived }),
          client.request<Page<Agent>>('agents.list', {}, { limit: 200 }),
          client.request<Page<Environment>>('environments.list', {}, { limit: 200 }),
        ])
        if (!live) return
        setSessions(s.data)
        setTruncated(s.next_page !== null)
        setAgents(a.data)
        setEnvironments(e.data)
        setError(undefined)
      } catch (err) {
        if (live) setError(err as Error)
      } finally {
        inflight.current = false
        if (live) setLoaded(true)
      }
    }
    void load()
    const t = setInterval(() => document.visibilityState === 'visible' && void load(), POLL_MS)
    const onFocus = () => void load()
    window.addEventListener('focus', onFocus)
    return () => {
      live = false
      clearInterval(t)
      window.removeEventListener('focus', onFocus)
    }
  }, [client, includeArchived, tick])

  const refresh = useCallback(() => setTick((t) => t + 1), [])
  const upsert = useCallback((s: Session) => setSessions((list) => (list.some((x) => x.id === s.id) ? list.map((x) => (x.id === s.id ? s : x)) : [s, ...list])), [])
  const value = useMemo(
    () => ({ sessions, agents, environments, loaded, truncated, error, includeArchived, setIncludeArchived, refresh, upsert }),
    [sessions, agents, environments, loaded, truncated, error, includeArchived, refresh, upsert],
  )
  return <SessionsContext.Provider value={value}>{children}</SessionsContext.Provider>
}

export function useSessions(): SessionsState {
  const c = useContext(SessionsContext)
  if (!c) throw new Error('useSessions outside SessionsProvider')
  return c
}

/** A session's display title: its title, else its first words, else the agent's name. */
export function sessionTitle(s: Session): string {
  if (s.title) return s.title
  const name = (s.agent as { name?: string })?.name
  return name ? `${name} session` : 'Untitled session'
}
