import type { Session } from '../../api/types'

/** The views of a session: its thread, its files (inputs and outputs) and, on a host folder, the Changes and the folder's Files. */
export type SessionView = 'thread' | 'changes' | 'files' | 'session-files'

/** Whether a session mounts a folder of this machine (a `host_folder` resource, Corral's addition). */
export function hasHostFolder(session: Session | undefined): boolean {
  return !!session?.resources?.some((r) => (r as { type: string }).type === 'host_folder')
}

/** Thread / Files, and for a session that mounts a host folder Thread / Changes / Files / Uploads & outputs. */
export function SessionTabs({ sessionId, current, folder }: { sessionId: string; current: SessionView; folder: boolean }) {
  const tabs: { id: SessionView; label: string; href: string }[] = folder
    ? [
        { id: 'thread', label: 'Thread', href: `#/sessions/${sessionId}` },
        { id: 'changes', label: 'Changes', href: `#/sessions/${sessionId}/changes` },
        { id: 'files', label: 'Files', href: `#/sessions/${sessionId}/files` },
        { id: 'session-files', label: 'Uploads & outputs', href: `#/sessions/${sessionId}/session-files` },
      ]
    : [
        { id: 'thread', label: 'Thread', href: `#/sessions/${sessionId}` },
        { id: 'session-files', label: 'Files', href: `#/sessions/${sessionId}/session-files` },
      ]
  return (
    <nav className="session-tabs" aria-label="Session views">
      {tabs.map((t) => (
        <a key={t.id} href={t.href} className={`session-tab${current === t.id ? ' active' : ''}`} aria-current={current === t.id ? 'page' : undefined}>
          {t.label}
        </a>
      ))}
    </nav>
  )
}
