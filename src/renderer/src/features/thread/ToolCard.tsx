import { memo, useState } from 'react'
import { Button, Icon, Spinner } from '../../ui/components'
import { CodeBlock, DiffView, Terminal } from '../../ui/Code'
import { duration } from '../../ui/format'
import type { ToolItem } from './timeline'

const TOOL_ICON: Record<string, string> = {
  bash: 'terminal',
  read: 'file',
  write: 'edit',
  edit: 'edit',
  glob: 'folder',
  grep: 'search',
  web_fetch: 'globe',
  web_search: 'globe',
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined
}

/** One line that says what the call does: the command, the file, the pattern. */
export function toolSummary(t: ToolItem): string {
  const i = t.input
  switch (t.name) {
    case 'bash':
      return str(i.command) ?? (i.restart ? 'restart the shell' : '')
    case 'read':
    case 'write':
    case 'edit':
      return str(i.file_path) ?? ''
    case 'glob':
    case 'grep':
      return `${str(i.pattern) ?? ''}${i.path ? `  in ${str(i.path)}` : ''}`
    case 'web_fetch':
      return str(i.url) ?? ''
    case 'web_search':
      return str(i.query) ?? ''
    default: {
      const s = JSON.stringify(i)
      return s.length > 120 ? `${s.slice(0, 117)}…` : s
    }
  }
}

type ToolState = 'awaiting' | 'denied' | 'running' | 'error' | 'done' | 'interrupted'

export function toolState(t: ToolItem, sessionIdle: boolean): ToolState {
  if (t.confirmation?.result === 'deny') return 'denied'
  if (t.result) return t.result.isError ? 'error' : 'done'
  if ((t.permission === 'ask' && !t.confirmation) || t.source === 'custom') return 'awaiting'
  return sessionIdle ? 'interrupted' : 'running'
}

const STATE_LABEL: Record<ToolState, string> = {
  awaiting: 'Waiting for you',
  denied: 'Denied',
  running: 'Running',
  error: 'Error',
  done: 'Done',
  interrupted: 'No result',
}

interface ToolCardProps {
  tool: ToolItem
  sessionIdle: boolean
  /** Present when this call is in the confirmation queue. */
  onAnswer?: (result: 'allow' | 'deny', message?: string) => Promise<void>
}

/** A tool call as a card: what it does, its state, input and output; write/edit as a diff, bash as a terminal. */
export const ToolCard = memo(function ToolCard({ tool, sessionIdle, onAnswer }: ToolCardProps) {
  const state = toolState(tool, sessionIdle)
  const rich = tool.name === 'bash' || tool.name === 'edit' || tool.name === 'write'
  const [open, setOpen] = useState(rich || state === 'awaiting' || state === 'error')
  const summary = toolSummary(tool)
  const r = tool.result
  const exitCode = r?.exitCode
  return (
    <article className={`tool-card tool-${state}`} aria-label={`Tool call ${tool.name}: ${STATE_LABEL[state]}`}>
      <header className="tool-head">
        <button type="button" className="tool-toggle" aria-expanded={open} onClick={() => setOpen((o) => !o)}>
          <Icon name="chevron" size={14} />
          <span className="tool-icon">
            <Icon name={tool.source === 'mcp' ? 'plug' : (TOOL_ICON[tool.name] ?? 'tool')} />
          </span>
          <span className="tool-name">{tool.source === 'mcp' && tool.mcpServer ? `${tool.mcpServer} · ${tool.name}` : tool.name}</span>
          <span className="tool-summary" title={summary}>
            {summary}
          </span>
        </button>
        <span className="tool-meta">
          {exitCode !== undefined && <span className={`pill ${exitCode === 0 ? 'pill-good' : 'pill-bad'}`}>exit {exitCode}</span>}
          {r?.durationMs !== undefined && <span className="tool-duration">{duration(r.durationMs)}</span>}
          <span className={`pill pill-${state}`}>
            {state === 'running' && <Spinner label="Running" />}
            {STATE_LABEL[state]}
          </span>
        </span>
      </header>
      {open && (
        <div className="tool-body">
          <ToolInput tool={tool} />
          {tool.confirmation?.result === 'deny' && (
            <div className="tool-denied-note">
              <Icon name="x" size={14} /> Denied{tool.confirmation.denyMessage ? `: ${tool.confirmation.denyMessage}` : ''}
            </div>
          )}
          {r && tool.confirmation?.result !== 'deny' && <ToolOutput tool={tool} />}
        </div>
      )}
      {state === 'awaiting' && onAnswer && <ConfirmBar tool={tool} onAnswer={onAnswer} />}
    </article>
  )
})

function ToolInput({ tool }: { tool: ToolItem }) {
  const i = tool.input
  if (tool.name === 'bash' && typeof i.command === 'string') return tool.result ? null : <Terminal text="" command={i.command} />
  if (tool.name === 'edit' && typeof i.old_string === 'string' && typeof i.new_string === 'string') {
    return <DiffView before={i.old_string} after={i.new_string} path={str(i.file_path)} />
  }
  if (tool.name === 'write' && typeof i.content === 'string') return <DiffView before="" after={i.content} path={str(i.file_path)} />
  return (
    <div className="tool-section">
      <div className="tool-section-label">Input</div>
      <CodeBlock code={JSON.stringify(i, null, 2)} language="json" maxHeight={280} />
    </div>
  )
}

function ToolOutput({ tool }: { tool: ToolItem }) {
  const r = tool.result!
  if (tool.name === 'bash') return <Terminal text={r.text} command={str(tool.input.command)} exitCode={r.exitCode} />
  if ((tool.name === 'edit' || tool.name === 'write') && !r.isError) return r.text ? <div className="tool-result-line">{r.text}</div> : null
  return (
    <div className={`tool-section${r.isError ? ' tool-section-error' : ''}`}>
      <div className="tool-section-label">{r.isError ? 'Error' : 'Output'}</div>
      {r.text ? <CodeBlock code={r.text} language={tool.name === 'read' ? str(tool.input.file_path) : undefined} maxHeight={360} /> : <div className="muted">(no output)</div>}
      {r.images > 0 && <div className="muted">{r.images} image(s)</div>}
    </div>
  )
}

function ConfirmBar({ tool, onAnswer }: { tool: ToolItem; onAnswer: NonNullable<ToolCardProps['onAnswer']> }) {
  const [denying, setDenying] = useState(false)
  const [message, setMessage] = useState('')
  const [busy, setBusy] = useState(false)
  const [err, setErr] = useState<string>()
  const run = (result: 'allow' | 'deny') => {
    setBusy(true)
    setErr(undefined)
    onAnswer(result, message.trim() || undefined)
      .catch((e: Error) => setErr(e.message))
      .finally(() => setBusy(false))
  }
  const custom = tool.source === 'custom'
  return (
    <div className="confirm-bar">
      {!denying && !custom ? (
        <>
          <span className="confirm-q">Allow this {tool.name} call?</span>
          <Button variant="good" icon="check" disabled={busy} onClick={() => run('allow')}>
            Approve
          </Button>
          <Button variant="danger" icon="x" disabled={busy} onClick={() => setDenying(true)}>
            Deny…
          </Button>
        </>
      ) : (
        <form
          className="confirm-deny"
          onSubmit={(e) => {
            e.preventDefault()
            run(custom ? 'allow' : 'deny')
          }}
        >
          <label className="sr-only" htmlFor={`deny-${tool.id}`}>
            {custom ? 'Result for the custom tool' : 'Why not? (sent to the agent)'}
          </label>
          <input
            id={`deny-${tool.id}`}
            autoFocus={denying}
            placeholder={custom ? 'Result to return to the agent' : 'Why not? The agent sees this message (optional)'}
            value={message}
            onChange={(e) => setMessage(e.target.value)}
          />
          <Button type="submit" variant={custom ? 'good' : 'danger'} disabled={busy}>
            {custom ? 'Send result' : 'Deny'}
          </Button>
          {custom ? (
            <Button variant="ghost" disabled={busy} onClick={() => run('deny')}>
              Send as error
            </Button>
          ) : (
            <Button variant="ghost" onClick={() => setDenying(false)}>
              Cancel
            </Button>
          )}
        </form>
      )}
      {err && <span className="confirm-err">{err}</span>}
    </div>
  )
}
