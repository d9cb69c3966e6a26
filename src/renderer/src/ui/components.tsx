import { useEffect, useRef, type ButtonHTMLAttributes, type ReactNode } from 'react'

const ICONS: Record<string, string> = {
  plus: 'M12 5v14M5 12h14',
  search: 'M11 4a7 7 0 1 0 0 14a7 7 0 0 0 0-14zM20 20l-3.5-3.5',
  stop: 'M7 7h10v10H7z',
  archive: 'M4 7h16M5 7l1 12h12l1-12M9 11h6M3 4h18v3H3z',
  check: 'M5 12l5 5L19 7',
  x: 'M6 6l12 12M18 6L6 18',
  terminal: 'M4 5h16v14H4zM7 9l3 3-3 3M12 15h5',
  file: 'M6 3h8l4 4v14H6zM14 3v4h4',
  edit: 'M4 20h4L19 9l-4-4L4 16zM13 7l4 4',
  folder: 'M3 6h6l2 2h10v11H3z',
  globe: 'M12 3a9 9 0 1 0 0 18a9 9 0 0 0 0-18zM3 12h18M12 3c3 3 3 15 0 18M12 3c-3 3-3 15 0 18',
  plug: 'M9 3v5M15 3v5M6 8h12v3a6 6 0 0 1-12 0zM12 17v4',
  tool: 'M14 6a4 4 0 0 0 5 5l-8 8a2 2 0 0 1-3-3l8-8a4 4 0 0 0-2-2z',
  sun: 'M12 8a4 4 0 1 0 0 8a4 4 0 0 0 0-8zM12 2v2M12 20v2M2 12h2M20 12h2M5 5l1.5 1.5M17.5 17.5L19 19M5 19l1.5-1.5M17.5 6.5L19 5',
  moon: 'M20 14A8 8 0 0 1 10 4a8 8 0 1 0 10 10z',
  bell: 'M6 16V11a6 6 0 0 1 12 0v5l2 2H4zM10 20a2 2 0 0 0 4 0',
  chat: 'M4 5h16v11H9l-5 4z',
  robot: 'M8 8h8a3 3 0 0 1 3 3v6H5v-6a3 3 0 0 1 3-3zM12 4v4M9 13h.01M15 13h.01',
  box: 'M12 3l8 4v10l-8 4-8-4V7zM4 7l8 4 8-4M12 11v10',
  gear: 'M12 9a3 3 0 1 0 0 6a3 3 0 0 0 0-6zM19 12l2-1-1-3-2 .3-1.5-1.5L17 5l-3-1-1 2h-2L10 4 7 5l.5 1.8L6 8.3 4 8l-1 3 2 1v0l-2 1 1 3 2-.3 1.5 1.5L7 19l3 1 1-2h2l1 2 3-1-.5-1.8 1.5-1.5 2 .3 1-3z',
  chevron: 'M9 6l6 6-6 6',
  brain: 'M9 4a3 3 0 0 0-3 3 3 3 0 0 0-2 5 3 3 0 0 0 2 5 3 3 0 0 0 6 1V5a3 3 0 0 0-3-1zM15 4a3 3 0 0 1 3 3 3 3 0 0 1 2 5 3 3 0 0 1-2 5 3 3 0 0 1-6 1',
  warn: 'M12 3l10 18H2zM12 10v4M12 17h.01',
  branch: 'M6 3v12M18 9a3 3 0 1 0 0-.01M6 21a3 3 0 1 0 0-6a3 3 0 0 0 0 6zM18 9c0 6-12 3-12 9',
  keyboard: 'M3 6h18v12H3zM7 10h.01M11 10h.01M15 10h.01M7 14h10',
  history: 'M3 12a9 9 0 1 0 3-6.7L3 8M3 3v5h5M12 7v5l3 2',
  dot: 'M12 10a2 2 0 1 0 0 4a2 2 0 0 0 0-4z',
  lock: 'M6 11h12v10H6zM8 11V8a4 4 0 0 1 8 0v3M12 15v2',
}

export function Icon({ name, size = 16, label }: { name: keyof typeof ICONS | string; size?: number; label?: string }) {
  return (
    <svg
      className="icon"
      width={size}
      height={size}
      viewBox="0 0 24 24"
      fill="none"
      stroke="currentColor"
      strokeWidth={1.8}
      strokeLinecap="round"
      strokeLinejoin="round"
      aria-hidden={label ? undefined : true}
      role={label ? 'img' : undefined}
      aria-label={label}
    >
      <path d={ICONS[name] ?? ICONS.dot} />
    </svg>
  )
}

type ButtonProps = ButtonHTMLAttributes<HTMLButtonElement> & { variant?: 'primary' | 'ghost' | 'danger' | 'default' | 'good'; icon?: string; small?: boolean; kbd?: string }

export function Button({ variant = 'default', icon, small, kbd, children, className, ...rest }: ButtonProps) {
  return (
    <button type="button" className={`btn btn-${variant}${small ? ' btn-small' : ''}${className ? ` ${className}` : ''}`} {...rest}>
      {icon && <Icon name={icon} size={small ? 14 : 16} />}
      {children && <span>{children}</span>}
      {kbd && <kbd>{kbd}</kbd>}
    </button>
  )
}

const STATUS_LABEL: Record<string, string> = { running: 'Running', idle: 'Idle', rescheduling: 'Rescheduling', terminated: 'Terminated', archived: 'Archived' }

export function StatusBadge({ status, pending = 0 }: { status: string; pending?: number }) {
  const s = pending > 0 ? 'waiting' : status
  return (
    <span className={`status status-${s}`}>
      <span className="status-dot" aria-hidden="true" />
      {pending > 0 ? 'Needs you' : (STATUS_LABEL[status] ?? status)}
    </span>
  )
}

export function Spinner({ label = 'Loading' }: { label?: string }) {
  return <span className="spinner" role="status" aria-label={label} />
}

export function Empty({ icon, title, children }: { icon: string; title: string; children?: ReactNode }) {
  return (
    <div className="empty">
      <div className="empty-icon">
        <Icon name={icon} size={28} />
      </div>
      <h2>{title}</h2>
      {children && <div className="empty-body">{children}</div>}
    </div>
  )
}

/** A modal dialog: focus moves in on open and returns on close; Escape closes. */
export function Dialog({ title, onClose, children, wide }: { title: string; onClose: () => void; children: ReactNode; wide?: boolean }) {
  const ref = useRef<HTMLDivElement>(null)
  useEffect(() => {
    const previous = document.activeElement as HTMLElement | null
    const first = ref.current?.querySelector<HTMLElement>('input, textarea, select, button:not(.dialog-close)')
    first?.focus()
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape') {
        e.stopPropagation()
        onClose()
      }
    }
    window.addEventListener('keydown', onKey, true)
    return () => {
      window.removeEventListener('keydown', onKey, true)
      previous?.focus?.()
    }
  }, [onClose])
  return (
    <div className="dialog-backdrop" onMouseDown={(e) => e.target === e.currentTarget && onClose()}>
      <div className={`dialog${wide ? ' dialog-wide' : ''}`} role="dialog" aria-modal="true" aria-labelledby="dialog-title" ref={ref}>
        <header className="dialog-header">
          <h2 id="dialog-title">{title}</h2>
          <button type="button" className="icon-btn dialog-close" onClick={onClose} aria-label="Close">
            <Icon name="x" />
          </button>
        </header>
        {children}
      </div>
    </div>
  )
}

export function Field({ label, hint, children, id }: { label: string; hint?: ReactNode; children: ReactNode; id: string }) {
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      {children}
      {hint && <div className="field-hint">{hint}</div>}
    </div>
  )
}

/**
 * A form's notice that what it edits was saved elsewhere after the edits began (useDraft's
 * `newer`): the edits are still on screen; `onLoad` takes the newer version instead, `onKeep`
 * keeps the edits to be saved over it.
 */
export function ChangedElsewhere({ text, loadLabel, onLoad, onKeep }: { text: string; loadLabel: string; onLoad: () => void; onKeep: () => void }) {
  return (
    <div className="note note-warn" role="status" aria-label="Changed elsewhere">
      <Icon name="warn" size={14} /> <span>{text}</span>{' '}
      <Button small onClick={onLoad}>
        {loadLabel}
      </Button>{' '}
      <Button small variant="ghost" onClick={onKeep}>
        Keep my edits
      </Button>
    </div>
  )
}

export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null
  const e = error as { type?: string; message?: string }
  return (
    <div className="error-note" role="alert">
      <Icon name="warn" />
      <span>
        {e.type && e.type !== 'api_error' ? <strong>{e.type.replace(/_/g, ' ')}: </strong> : null}
        {e.message ?? String(error)}
      </span>
    </div>
  )
}
