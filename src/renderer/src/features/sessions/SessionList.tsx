import { forwardRef, useEffect, useMemo, useRef, useState } from 'react'
import { useClient } from '../../api/context'
import { Button, Icon, Spinner, StatusBadge } from '../../ui/components'
import { relativeTime } from '../../ui/format'
import { useConfirmations } from '../confirmations/ConfirmationsProvider'
import { sessionTitle, useSessions } from './SessionsProvider'
import { byLastActivity } from './order'
import { modelErrorBadge } from './model-error'
import { runProgressLabel, useRunProgress } from '../workflows/useRunProgress'

interface SessionListProps {
  selectedId: string | undefined
  onSelect: (id: string) => void
  onNew: () => void
}

/** The sessions sidebar: search, status, agent, last activity and what waits for you. */
export const SessionList = forwardRef<HTMLInputElement, SessionListProps>(function SessionList({ selectedId, onSelect, onNew }, searchRef) {
  const { sessions, loaded, truncated, includeArchived, setIncludeArchived, error } = useSessions()
  const { countFor } = useConfirmations()
  const [query, setQuery] = useState('')
  const [status, setStatus] = useState<'all' | 'running' | 'waiting' | 'idle'>('all')
  const found = useMessageSearch(query)
  // A running session (or one waiting for the person) may have a workflow run in progress.
  const runs = useRunProgress(sessions, (s) => s.status === 'running' || s.status === 'rescheduling' || countFor(s.id) > 0)
  const shown = useMemo(() => {
    const q = query.trim().toLowerCase()
    return byLastActivity(sessions).filter((s) => {
      const agentName = (s.agent as { name?: string }).name ?? ''
      if (q && !`${sessionTitle(s)} ${agentName} ${s.id}`.toLowerCase().includes(q)) return false
      if (status === 'waiting') return countFor(s.id) > 0
      if (status === 'running') return s.status === 'running' || s.status === 'rescheduling'
      if (status === 'idle') return s.status === 'idle' && countFor(s.id) === 0
      return true
    })
  }, [sessions, query, status, countFor])

  return (
    <aside className="sidebar" aria-label="Sessions">
      <div className="sidebar-head">
        <div className="search">
          <Icon name="search" size={14} />
          <label htmlFor="session-search" className="sr-only">
            Search sessions
          </label>
          <input id="session-search" ref={searchRef} type="search" placeholder="Search sessions  /" value={query} onChange={(e) => setQuery(e.target.value)} />
        </div>
        <Button variant="primary" icon="plus" onClick={onNew} title="New session (N)" aria-label="New session" />
      </div>
      <div className="filters" role="group" aria-label="Filter by status">
        {(['all', 'waiting', 'running', 'idle'] as const).map((f) => (
          <button key={f} type="button" className={`chip${status === f ? ' active' : ''}`} aria-pressed={status === f} onClick={() => setStatus(f)}>
            {f === 'waiting' ? 'Needs you' : f[0].toUpperCase() + f.slice(1)}
          </button>
        ))}
      </div>
      <ul className="session-list">
        {!loaded && (
          <li className="center">
            <Spinner />
          </li>
        )}
        {loaded && shown.length === 0 && found.hits.length === 0 && <li className="session-empty">{sessions.length === 0 ? (error ? 'Could not load sessions.' : 'No sessions yet.') : 'No session matches.'}</li>}
        {shown.map((s) => {
          const pending = countFor(s.id)
          const agentName = (s.agent as { name?: string }).name ?? 'agent'
          const failing = modelErrorBadge(s)
          const run = runs.get(s.id)
          return (
            <li key={s.id}>
              <button type="button" className={`session-item${s.id === selectedId ? ' selected' : ''}`} aria-current={s.id === selectedId ? 'page' : undefined} onClick={() => onSelect(s.id)}>
                <span className="session-item-top">
                  <span className="session-title">{sessionTitle(s)}</span>
                  {pending > 0 && (
                    <span className="count-badge" aria-label={`${pending} waiting for you`}>
                      {pending}
                    </span>
                  )}
                </span>
                <span className="session-item-bottom">
                  <StatusBadge status={s.archived_at ? 'archived' : s.status} pending={pending} />
                  {failing && (
                    <span className={`pill pill-error session-model-error model-${failing.state}`} title={failing.detail || failing.label}>
                      <Icon name="warn" size={11} />
                      <span aria-hidden="true"> {failing.text}</span>
                      <span className="sr-only">{failing.label}</span>
                    </span>
                  )}
                  {run && (
                    <span className="pill session-run" title="A workflow run in progress: its agents done of those started">
                      {runProgressLabel(run)}
                    </span>
                  )}
                  <span className="session-agent">{agentName}</span>
                  <time dateTime={s.updated_at}>{relativeTime(s.updated_at)}</time>
                </span>
              </button>
            </li>
          )
        })}
        {found.hits.length > 0 && (
          <li className="session-search-head" aria-live="polite">
            In messages
          </li>
        )}
        {found.hits.map((h) => {
          const s = sessions.find((x) => x.id === h.session_id)
          return (
            <li key={h.event_id}>
              <button type="button" className={`session-item session-hit${h.session_id === selectedId ? ' selected' : ''}`} onClick={() => onSelect(h.session_id)}>
                <span className="session-item-top">
                  <span className="session-title">{s ? sessionTitle(s) : h.session_id}</span>
                  <time dateTime={h.processed_at}>{relativeTime(h.processed_at)}</time>
                </span>
                <span className="session-hit-text">
                  {h.type === 'user.message' ? 'You: ' : 'Claude: '}
                  {h.snippet}
                </span>
              </button>
            </li>
          )
        })}
        {found.more && (
          <li>
            <button type="button" className="link-btn session-more" onClick={found.loadMore}>
              More messages
            </button>
          </li>
        )}
        {truncated && <li className="session-empty">The {sessions.length} most recent sessions are shown; search finds among them.</li>}
      </ul>
      <label className="sidebar-foot">
        <input type="checkbox" checked={includeArchived} onChange={(e) => setIncludeArchived(e.target.checked)} /> Show archived
      </label>
    </aside>
  )
})

interface SearchHit {
  session_id: string
  event_id: string
  type: 'user.message' | 'agent.message'
  processed_at: string
  snippet: string
}

/**
 * Messages that contain `query` (2+ characters), found by the engine over the whole log
 * (`messages.search`, a page at a time), asked for 250 ms after the typing stops.
 */
function useMessageSearch(query: string): { hits: SearchHit[]; more: boolean; loadMore: () => void } {
  const client = useClient()
  const [hits, setHits] = useState<SearchHit[]>([])
  const [next, setNext] = useState<string | null>(null)
  const q = query.trim()
  // the query a page of "more" was asked for is still the one shown, and one page is asked at a time
  const shown = useRef(q)
  const asking = useRef(false)
  useEffect(() => {
    shown.current = q
    setHits([])
    setNext(null)
    asking.current = false
    if (q.length < 2) return
    let live = true
    const t = setTimeout(() => {
      client
        .request<{ data: SearchHit[]; next_page: string | null }>('messages.search', {}, { q, limit: 20 })
        .then((r) => {
          if (!live) return
          setHits(r.data)
          setNext(r.next_page)
        })
        .catch(() => {})
    }, 250)
    return () => {
      live = false
      clearTimeout(t)
    }
  }, [client, q])
  const loadMore = () => {
    if (!next || asking.current) return
    asking.current = true
    const asked = q
    const done = () => {
      if (shown.current === asked) asking.current = false
    }
    client
      .request<{ data: SearchHit[]; next_page: string | null }>('messages.search', {}, { q, limit: 20, page: next })
      .then((r) => {
        // typed on meanwhile: the page belongs to a query no longer shown
        if (shown.current !== asked) return
        setHits((h) => [...h, ...r.data])
        setNext(r.next_page)
      })
      .catch(() => {})
      .finally(done)
  }
  return { hits, more: next !== null, loadMore }
}
