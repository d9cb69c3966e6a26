import { memo, useEffect, useState } from 'react'
import { Button, Icon, Spinner } from '../../ui/components'
import { CodeBlock, DiffView, Terminal } from '../../ui/Code'
import { duration } from '../../ui/format'
import type { ToolItem } from './timeline'
import { STATE_LABEL, terminalView, toolState, toolSummary } from './tool-view'


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

interface ToolCardProps {
  tool: ToolItem
  sessionIdle: boolean
  /** Present when this call is in the confirmation queue. */
  onAnswer?: (result: 'allow' | 'deny', message?: string, scope?: 'session') => Promise<void>
  /** The turn's "expand all": overrides the card's own default (a click on the card still wins). */
  expanded?: boolean
}

/** Seconds since `since`, re-rendered each second while mounted. */
function Elapsed({ since }: { since: string | undefined }) {
  const [now, setNow] = useState(() => Date.now())
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 1000)
    return () => clearInterval(t)
  }, [])
  if (!since) return null
  const ms = Math.max(0, now - Date.parse(since))
  return (
    <span className="tool-duration tool-elapsed" title="Running for">
      {ms < 60_000 ? `${Math.floor(ms / 1000)} s` : duration(Math.floor(ms / 1000) * 1000)}
    </span>
  )
}

/**
 * A tool call as a card: one line (what it does, exit, duration, state) that opens onto its
 * input and output; write/edit as a diff, bash as a terminal that shows its output live. Open by
 * default only while it runs or waits for the person.
 */
export const ToolCard = memo(function ToolCard({ tool, sessionIdle, onAnswer, expanded }: ToolCardProps) {
  const state = toolState(tool, sessionIdle)
  const [own, setOwn] = useState<boolean>()
  // A new "expand all" / "collapse all" of the turn resets the card's own choice.
  useEffect(() => setOwn(undefined), [expanded])
  const open = own ?? expanded ?? (state === 'awaiting' || state === 'running')
  const summary = toolSummary(tool)
  const r = tool.result
  const exitCode = state === 'interrupted' ? undefined : r?.exitCode
  const failedChange = (tool.name === 'edit' || tool.name === 'write') && state === 'error'
  // A denial's reason is the important part of a denied call: on its one line.
  const denyNote = state === 'denied' && tool.confirmation?.denyMessage ? `Denied: ${tool.confirmation.denyMessage}` : undefined
  return (
    <article className={`tool-card tool-${state}`} aria-label={`Tool call ${tool.name}: ${STATE_LABEL[state]}`}>
      <header className="tool-head">
        <button type="button" className="tool-toggle" aria-expanded={open} onClick={() => setOwn(!open)}>
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
          {exitCode !== undefined && exitCode !== null && <span className={`pill ${exitCode === 0 ? 'pill-good' : 'pill-bad'}`}>exit {exitCode}</span>}
          {failedChange && <span className="pill pill-bad">not applied</span>}
          {tool.allowedBy && (
            <span className="pill" title="You allowed this exact command for this session">
              allowed for session
            </span>
          )}
          {state === 'running' ? <Elapsed since={tool.confirmation?.at ?? tool.at} /> : r?.durationMs !== undefined && <span className="tool-duration">{duration(r.durationMs)}</span>}
          <span className={`pill pill-${state}`} title={denyNote}>
            {state === 'running' && <Spinner label="Running" />}
            {denyNote ?? STATE_LABEL[state]}
          </span>
        </span>
      </header>
      {open && (
        <div className="tool-body">
          {failedChange && r && (
            <div className="tool-section tool-section-error">
              <div className="tool-section-label">Not applied</div>
              <div className="tool-result-line">{r.text || 'The change failed.'}</div>
            </div>
          )}
          {state === 'running' && tool.liveStatus && (
            <div className="tool-status-note" role="status">
              {tool.liveStatus}
            </div>
          )}
          <ToolInput tool={tool} notApplied={failedChange} />
          {tool.confirmation?.result === 'deny' && (
            <div className="tool-denied-note">
              <Icon name="x" size={14} /> Denied{tool.confirmation.denyMessage ? `: ${tool.confirmation.denyMessage}` : ''}
            </div>
          )}
          {r && tool.confirmation?.result !== 'deny' && !failedChange && <ToolOutput tool={tool} />}
        </div>
      )}
      {state === 'awaiting' && onAnswer && <ConfirmBar tool={tool} onAnswer={onAnswer} />}
    </article>
  )
})

function ToolInput({ tool, notApplied }: { tool: ToolItem; notApplied: boolean }) {
  const i = tool.input
  if (tool.name === 'bash' && typeof i.command === 'string') return tool.result ? null : <Terminal text={tool.live ?? ''} stderr={tool.liveStderr} command={i.command} follow />
  const label = notApplied ? <div className="tool-section-label">Proposed change</div> : null
  if (tool.name === 'edit' && typeof i.old_string === 'string' && typeof i.new_string === 'string') {
    return (
      <div className={notApplied ? 'tool-section tool-not-applied' : 'tool-section'}>
        {label}
        <DiffView before={i.old_string} after={i.new_string} path={str(i.file_path)} />
      </div>
    )
  }
  if (tool.name === 'write' && typeof i.content === 'string') {
    return (
      <div className={notApplied ? 'tool-section tool-not-applied' : 'tool-section'}>
        {label}
        <DiffView before="" after={i.content} path={str(i.file_path)} />
      </div>
    )
  }
  return (
    <div className="tool-section">
      <div className="tool-section-label">Input</div>
      <CodeBlock code={JSON.stringify(i, null, 2)} language="json" maxHeight={280} />
    </div>
  )
}

function ToolOutput({ tool }: { tool: ToolItem }) {
  const r = tool.result!
  if (tool.name === 'bash') {
    const view = terminalView(r.text, r.stderr)
    return (
      <>
        <Terminal text={view.text} stderr={view.stderr} command={str(tool.input.command)} exitCode={r.interrupted ? undefined : r.exitCode} />
        {view.notes.length > 0 && <div className="tool-result-line">{view.notes.join('; ')}</div>}
      </>
    )
  }
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
  const run = (result: 'allow' | 'deny', scope?: 'session') => {
    setBusy(true)
    setErr(undefined)
    onAnswer(result, message.trim() || undefined, scope)
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
          {tool.name === 'bash' && typeof tool.input.command === 'string' && (
            <Button variant="ghost" disabled={busy} onClick={() => run('allow', 'session')} title="Later calls with exactly this command run without asking, for the rest of this session">
              Allow this command for this session
            </Button>
          )}
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
