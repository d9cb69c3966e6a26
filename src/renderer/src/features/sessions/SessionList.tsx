import { forwardRef, useMemo, useState } from 'react'
import { Button, Icon, Spinner, StatusBadge } from '../../ui/components'
import { relativeTime } from '../../ui/format'
import { useConfirmations } from '../confirmations/ConfirmationsProvider'
import { sessionTitle, useSessions } from './SessionsProvider'
import { byLastActivity } from './order'

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
        {loaded && shown.length === 0 && <li className="session-empty">{sessions.length === 0 ? (error ? 'Could not load sessions.' : 'No sessions yet.') : 'No session matches.'}</li>}
        {shown.map((s) => {
          const pending = countFor(s.id)
          const agentName = (s.agent as { name?: string }).name ?? 'agent'
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
                  <span className="session-agent">{agentName}</span>
                  <time dateTime={s.updated_at}>{relativeTime(s.updated_at)}</time>
                </span>
              </button>
            </li>
          )
        })}
        {truncated && <li className="session-empty">The {sessions.length} most recent sessions are shown; search finds among them.</li>}
      </ul>
      <label className="sidebar-foot">
        <input type="checkbox" checked={includeArchived} onChange={(e) => setIncludeArchived(e.target.checked)} /> Show archived
      </label>
    </aside>
  )
})
