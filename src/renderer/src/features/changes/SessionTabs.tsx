import type { Session } from '../../api/types'

/** Whether a session mounts a folder of this machine (a `host_folder` resource, Corral's addition). */
export function hasHostFolder(session: Session | undefined): boolean {
  return !!session?.resources?.some((r) => (r as { type: string }).type === 'host_folder')
}

/** Thread / Changes / Files, for a session that mounts a host folder. */
export function SessionTabs({ sessionId, current }: { sessionId: string; current: 'thread' | 'changes' | 'files' }) {
  const tabs = [
    { id: 'thread', label: 'Thread', href: `#/sessions/${sessionId}` },
    { id: 'changes', label: 'Changes', href: `#/sessions/${sessionId}/changes` },
    { id: 'files', label: 'Files', href: `#/sessions/${sessionId}/files` },
  ] as const
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
