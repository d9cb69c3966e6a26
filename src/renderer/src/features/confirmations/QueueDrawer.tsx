import { useEffect, useRef, useState } from 'react'
import { Button, Empty, Icon } from '../../ui/components'
import { CodeBlock, DiffView } from '../../ui/Code'
import { relativeTime } from '../../ui/format'
import { isTypingTarget } from '../../ui/hooks'
import { toolSummary } from '../thread/tool-view'
import { useConfirmations, type PendingItem } from './ConfirmationsProvider'
import { queueThreadLabel } from './queue'

/**
 * One queue for everything that waits for you, across sessions and threads.
 * Each item says which session it waits in and, for a subagent's call, which thread and agent.
 * Keys: j / k (or ↓ / ↑) move, a approves, d denies (type a message, Enter sends), o opens the
 * session (the thread, for a subagent's call), Esc closes.
 */
export function QueueDrawer({ onClose, onOpenSession }: { onClose: () => void; onOpenSession: (id: string, threadId?: string) => void }) {
  const { queue, answer } = useConfirmations()
  const [index, setIndex] = useState(0)
  const [denying, setDenying] = useState(false)
  const [message, setMessage] = useState('')
  const [busy, setBusy] = useState(false)
  const [err, setErr] = useState<string>()
  const current: PendingItem | undefined = queue[Math.min(index, queue.length - 1)]
  const panel = useRef<HTMLElement>(null)

  useEffect(() => {
    if (index >= queue.length && queue.length > 0) setIndex(queue.length - 1)
  }, [queue.length, index])
  useEffect(() => panel.current?.focus(), [])

  const run = async (result: 'allow' | 'deny', scope?: 'session') => {
    if (!current || busy) return
    setBusy(true)
    setErr(undefined)
    try {
      await answer(current, result, result === 'deny' || current.tool.source === 'custom' ? message.trim() || undefined : undefined, scope)
      setDenying(false)
      setMessage('')
    } catch (e) {
      setErr((e as Error).message)
    } finally {
      setBusy(false)
    }
  }

  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape') {
        e.preventDefault()
        if (denying) setDenying(false)
        else onClose()
        return
      }
      if (isTypingTarget(e.target) || e.metaKey || e.ctrlKey || e.altKey) return
      if (e.key === 'j' || e.key === 'ArrowDown') setIndex((i) => Math.min(queue.length - 1, i + 1))
      else if (e.key === 'k' || e.key === 'ArrowUp') setIndex((i) => Math.max(0, i - 1))
      else if (e.key === 'a' && current && current.tool.source !== 'custom') void run('allow')
      else if (e.key === 'd' && current) setDenying(true)
      else if (e.key === 'o' && current) onOpenSession(current.sessionId, current.thread?.id)
      else return
      e.preventDefault()
    }
    window.addEventListener('keydown', onKey)
    return () => window.removeEventListener('keydown', onKey)
  })

  return (
    <aside className="drawer" aria-label="Confirmation queue" ref={panel} tabIndex={-1}>
      <header className="drawer-head">
        <h2>
          <Icon name="bell" /> Waiting for you <span className="count-badge">{queue.length}</span>
        </h2>
        <button type="button" className="icon-btn" onClick={onClose} aria-label="Close the queue">
          <Icon name="x" />
        </button>
      </header>
      {queue.length === 0 ? (
        <Empty icon="check" title="All clear">
          Nothing waits for you. Tool calls that need your approval show up here from every session.
        </Empty>
      ) : (
        <>
          <ol className="queue-list">
            {queue.map((p, i) => (
              <li key={p.tool.id}>
                <button type="button" className={`queue-item${p === current ? ' selected' : ''}`} aria-current={p === current ? 'true' : undefined} onClick={() => setIndex(i)}>
                  <span className="queue-tool">{p.tool.name}</span>
                  <span className="queue-summary">{toolSummary(p.tool)}</span>
                  <span className="queue-session">
                    {p.sessionTitle} · {relativeTime(p.tool.at)}
                  </span>
                  {p.thread && (
                    <span className="queue-thread">
                      <Icon name="branch" size={12} /> {queueThreadLabel(p)}
                    </span>
                  )}
                </button>
              </li>
            ))}
          </ol>
          {current && (
            <div className="queue-detail">
              <div className="queue-detail-head">
                <strong>{current.tool.source === 'custom' ? `Custom tool ${current.tool.name}` : `${current.tool.name}`}</strong>
                <button type="button" className="link-btn" onClick={() => onOpenSession(current.sessionId, current.thread?.id)}>
                  {current.thread ? 'Open thread' : 'Open session'} <kbd>o</kbd>
                </button>
              </div>
              {current.thread && (
                <p className="queue-from">
                  Asked by <strong>{current.thread.agentName}</strong> in thread <span className="mono">{current.thread.id}</span> of {current.sessionTitle}
                </p>
              )}
              <QueuePreview item={current} />
              {denying || current.tool.source === 'custom' ? (
                <form
                  className="confirm-deny"
                  onSubmit={(e) => {
                    e.preventDefault()
                    void run(current.tool.source === 'custom' ? 'allow' : 'deny')
                  }}
                >
                  <label className="sr-only" htmlFor="queue-message">
                    {current.tool.source === 'custom' ? 'Result for the custom tool' : 'Message to the agent'}
                  </label>
                  <input id="queue-message" autoFocus={denying} value={message} onChange={(e) => setMessage(e.target.value)} placeholder={current.tool.source === 'custom' ? 'Result to return to the agent' : 'Why not? (optional; the agent sees it)'} />
                  <Button type="submit" variant={current.tool.source === 'custom' ? 'good' : 'danger'} disabled={busy}>
                    {current.tool.source === 'custom' ? 'Send result' : 'Deny'}
                  </Button>
                </form>
              ) : (
                <div className="queue-actions">
                  <Button variant="good" icon="check" kbd="A" disabled={busy} onClick={() => void run('allow')}>
                    Approve
                  </Button>
                  {current.tool.name === 'bash' && typeof current.tool.input.command === 'string' && (
                    <Button variant="ghost" disabled={busy} onClick={() => void run('allow', 'session')} title="Later calls with exactly this command run without asking, for the rest of this session">
                      Allow this command for this session
                    </Button>
                  )}
                  <Button variant="danger" icon="x" kbd="D" disabled={busy} onClick={() => setDenying(true)}>
                    Deny
                  </Button>
                </div>
              )}
              {err && <div className="confirm-err">{err}</div>}
              <p className="muted keys">
                <kbd>j</kbd>/<kbd>k</kbd> move · <kbd>a</kbd> approve · <kbd>d</kbd> deny · <kbd>Esc</kbd> close
              </p>
            </div>
          )}
        </>
      )}
    </aside>
  )
}

function QueuePreview({ item }: { item: PendingItem }) {
  const i = item.tool.input
  if (item.tool.name === 'edit' && typeof i.old_string === 'string' && typeof i.new_string === 'string') return <DiffView before={i.old_string} after={i.new_string} path={String(i.file_path ?? '')} />
  if (item.tool.name === 'write' && typeof i.content === 'string') return <DiffView before="" after={i.content} path={String(i.file_path ?? '')} />
  if (item.tool.name === 'bash' && typeof i.command === 'string') return <CodeBlock code={i.command} language="bash" maxHeight={240} />
  return <CodeBlock code={JSON.stringify(i, null, 2)} language="json" maxHeight={240} />
}
