import { useState, type ReactNode } from 'react'
import { Button } from './components'

/**
 * The left column of a resource editor (agents, environments): a title with a New button, the
 * resources as selectable rows, and a "Show archived" switch.
 */
export function ResourceSidebar<T extends { id: string; name: string; archived_at: string | null }>({
  title,
  items,
  selectedId,
  onSelect,
  emptyText,
  meta,
  detail,
}: {
  title: string
  items: readonly T[]
  selectedId?: string
  onSelect: (id: string) => void
  emptyText: string
  /** What a row shows beside its name (e.g. the version). */
  meta?: (item: T) => ReactNode
  /** The row's second line. */
  detail: (item: T) => ReactNode
}) {
  const [showArchived, setShowArchived] = useState(false)
  const shown = items.filter((i) => showArchived || !i.archived_at)
  return (
    <aside className="sidebar" aria-label={title}>
      <div className="sidebar-head">
        <h2 className="sidebar-title">{title}</h2>
        <Button variant="primary" icon="plus" onClick={() => onSelect('new')}>
          New
        </Button>
      </div>
      <ul className="session-list">
        {shown.length === 0 && <li className="session-empty">{emptyText}</li>}
        {shown.map((item) => (
          <li key={item.id}>
            <button type="button" className={`session-item${item.id === selectedId ? ' selected' : ''}`} aria-current={item.id === selectedId ? 'page' : undefined} onClick={() => onSelect(item.id)}>
              <span className="session-item-top">
                <span className="session-title">{item.name}</span>
                {meta?.(item)}
              </span>
              <span className="session-item-bottom">
                {detail(item)}
                {item.archived_at && <span className="pill">archived</span>}
              </span>
            </button>
          </li>
        ))}
      </ul>
      <label className="sidebar-foot">
        <input type="checkbox" checked={showArchived} onChange={(e) => setShowArchived(e.target.checked)} /> Show archived
      </label>
    </aside>
  )
}
