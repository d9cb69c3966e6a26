import type { ReactNode } from 'react'
import { useSessions } from '../sessions/SessionsProvider'
import { FilesView } from '../files/FilesView'
import { SessionFilesView } from '../files/SessionFilesView'
import { ChangesView } from './ChangesView'
import { hasHostFolder, SessionTabs, type SessionView } from './SessionTabs'

/**
 * A session's pane: its thread (`children`), its files (inputs and outputs), and for a session on
 * a folder of this machine the Changes and folder Files views, with tabs between them.
 */
export function SessionPane({ sessionId, view, children }: { sessionId: string; view: SessionView; children: ReactNode }) {
  const { sessions } = useSessions()
  const session = sessions.find((s) => s.id === sessionId)
  const folder = hasHostFolder(session)
  const shown = !folder && (view === 'changes' || view === 'files') ? 'thread' : view
  return (
    <div className="session-pane">
      <SessionTabs sessionId={sessionId} current={shown} folder={folder} />
      {shown === 'changes' ? <ChangesView sessionId={sessionId} /> : shown === 'files' ? <FilesView sessionId={sessionId} /> : shown === 'session-files' ? <SessionFilesView sessionId={sessionId} /> : children}
    </div>
  )
}
