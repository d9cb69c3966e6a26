import type { ReactNode } from 'react'
import { useSessions } from '../sessions/SessionsProvider'
import { FilesView } from '../files/FilesView'
import { ChangesView } from './ChangesView'
import { hasHostFolder, SessionTabs } from './SessionTabs'

/**
 * A session's pane: its thread (`children`), and for a session on a folder of this machine the
 * Changes and Files views, with tabs between them.
 */
export function SessionPane({ sessionId, view, children }: { sessionId: string; view: 'thread' | 'changes' | 'files'; children: ReactNode }) {
  const { sessions } = useSessions()
  const session = sessions.find((s) => s.id === sessionId)
  if (!hasHostFolder(session)) return <>{children}</>
  return (
    <div className="session-pane">
      <SessionTabs sessionId={sessionId} current={view} />
      {view === 'changes' ? <ChangesView sessionId={sessionId} /> : view === 'files' ? <FilesView sessionId={sessionId} /> : children}
    </div>
  )
}
