import { memo, useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from 'react'
import { useVirtualizer } from '@tanstack/react-virtual'
import { Icon, Spinner } from '../../ui/components'
import { Markdown } from '../../ui/Markdown'
import { clock } from '../../ui/format'
import type { DelegationItem, ReportItem, TimelineItem, ToolItem } from './timeline'
import { threadCardView, threadMessageView } from './thread-cards'
import { ADVISOR_AGENT_NAME } from './thread-tree'
import { ToolCard } from './ToolCard'
import { findRows, toolTurns } from './tool-view'
import { ErrorBoundary } from '../../ui/ErrorBoundary'
import { WorkflowRunCard } from '../workflows/WorkflowRunCard'

export interface TimelineProps {
  items: TimelineItem[]
  sessionIdle: boolean
  modelBusy: boolean
  hasOlder: boolean
  loadingOlder: boolean
  loadOlder: () => void
  prependMark: number
  pendingIds: ReadonlySet<string>
  onAnswer: (tool: ToolItem, result: 'allow' | 'deny', message?: string, scope?: 'session') => Promise<void>
  onOpenThread: (threadId: string) => void
  /** Bumped when the person sent a message: the view goes to the bottom, where their message is. */
  sentMark?: number
}

/** How a subagent's lifecycle row reads ("Subagent x started"); other states read as their status word. */
const THREAD_STATE_WORD: Partial<Record<Extract<TimelineItem, { kind: 'thread' }>['state'], string>> = { created: 'started', rescheduling: 'rescheduled' }

const STOP_LABEL: Record<string, string> = {
  end_turn: 'Turn complete',
  requires_action: 'Paused for your answer',
  retries_exhausted: 'Stopped: retries exhausted',
  budget_reached: 'Paused at its budget — raise it to continue',
  refusal: 'Stopped: refusal',
}

/**
 * The thread's timeline, virtualized: only the rows in view (plus a few) are in the DOM, each
 * measured as it renders, so a session of 100,000 events opens and scrolls like a short one.
 * Sticks to the bottom while the reader is there; keeps its place when older rows load above.
 */
export function Timeline(props: TimelineProps) {
  const { items, prependMark, hasOlder, loadingOlder, loadOlder, sentMark } = props
  const scrollRef = useRef<HTMLDivElement>(null)
  const atBottom = useRef(true)
  const [showJump, setShowJump] = useState(false)
  const count = items.length + 1 // the last row is the activity indicator / end spacer
  const virtualizer = useVirtualizer({
    count,
    getScrollElement: () => scrollRef.current,
    estimateSize: (i) => estimate(items[i]),
    getItemKey: (i) => items[i]?.id ?? '__end',
    overscan: 8,
  })

  // Keep the reader's place when older rows are put in front: after every commit remember the
  // total height and scroll offset; when a prepend lands, move down by exactly what was added.
  const snap = useRef({ total: 0, top: 0 })
  const lastMark = useRef(prependMark)
  useLayoutEffect(() => {
    const el = scrollRef.current
    if (prependMark !== lastMark.current) {
      lastMark.current = prependMark
      if (el) el.scrollTop = snap.current.top + (virtualizer.getTotalSize() - snap.current.total)
    }
    snap.current = { total: virtualizer.getTotalSize(), top: el?.scrollTop ?? 0 }
  })

  // Follow new content while at the bottom.
  const first = useRef(true)
  useLayoutEffect(() => {
    if (items.length === 0) return
    if (first.current || atBottom.current) {
      first.current = false
      virtualizer.scrollToIndex(count - 1, { align: 'end' })
    }
  }, [items, count, virtualizer])

  // The person just sent a message: show it, wherever they had scrolled to.
  const lastSent = useRef(sentMark)
  useLayoutEffect(() => {
    if (sentMark === lastSent.current) return
    lastSent.current = sentMark
    atBottom.current = true
    virtualizer.scrollToIndex(count - 1, { align: 'end' })
  }, [sentMark, count, virtualizer])

  // A turn's tool calls open and close together from the first one's "expand all".
  const turns = useMemo(() => toolTurns(items), [items])
  const [expandedTurns, setExpandedTurns] = useState<ReadonlyMap<string, boolean>>(new Map())
  const toggleTurn = useCallback((turn: string, open: boolean) => setExpandedTurns((m) => new Map(m).set(turn, open)), [])

  // Find in session: over the rows loaded (the view pages older ones in on request), stepping
  // the virtualized list to each match, since the browser's own find sees only rendered rows.
  const [finding, setFinding] = useState(false)
  const [findQuery, setFindQuery] = useState('')
  const [findAt, setFindAt] = useState(0)
  const matches = useMemo(() => (finding ? findRows(items, findQuery) : []), [finding, items, findQuery])
  const currentMatch = matches.length ? matches[Math.min(findAt, matches.length - 1)] : -1
  const findInput = useRef<HTMLInputElement>(null)
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if ((e.ctrlKey || e.metaKey) && !e.altKey && e.key.toLowerCase() === 'f') {
        e.preventDefault()
        setFinding(true)
        requestAnimationFrame(() => findInput.current?.select())
      }
    }
    window.addEventListener('keydown', onKey)
    return () => window.removeEventListener('keydown', onKey)
  }, [])
  useEffect(() => {
    if (currentMatch < 0) return
    atBottom.current = false
    virtualizer.scrollToIndex(currentMatch, { align: 'center' })
  }, [currentMatch, virtualizer])
  const step = (d: number) => matches.length && setFindAt((i) => (Math.min(i, matches.length - 1) + d + matches.length) % matches.length)

  const onScroll = useCallback(() => {
    const el = scrollRef.current
    if (!el) return
    snap.current = { total: virtualizer.getTotalSize(), top: el.scrollTop }
    const distance = el.scrollHeight - el.scrollTop - el.clientHeight
    atBottom.current = distance < 80
    setShowJump(distance > 600)
    if (el.scrollTop < 1500 && hasOlder && !loadingOlder) loadOlder()
  }, [hasOlder, loadingOlder, loadOlder, virtualizer])

  useEffect(() => {
    // A short first page that does not fill the view: fetch older at once.
    const el = scrollRef.current
    if (el && hasOlder && !loadingOlder && el.scrollHeight <= el.clientHeight + 10) loadOlder()
  }, [items, hasOlder, loadingOlder, loadOlder])

  const virtualItems = virtualizer.getVirtualItems()
  return (
    <div className="timeline-wrap">
      {finding && (
        <form
          className="find-bar"
          role="search"
          aria-label="Find in session"
          onSubmit={(e) => {
            e.preventDefault()
            step(1)
          }}
        >
          <label htmlFor="find-input" className="sr-only">
            Find in session
          </label>
          <input
            id="find-input"
            ref={findInput}
            autoFocus
            placeholder="Find in session"
            value={findQuery}
            onChange={(e) => {
              setFindQuery(e.target.value)
              setFindAt(0)
            }}
            onKeyDown={(e) => {
              if (e.key === 'Escape') setFinding(false)
              else if (e.key === 'Enter' && e.shiftKey) {
                e.preventDefault()
                step(-1)
              }
            }}
          />
          <span className="find-count" role="status">
            {findQuery.trim() ? (matches.length ? `${Math.min(findAt, matches.length - 1) + 1} of ${matches.length}` : 'No match') : ''}
            {findQuery.trim() && hasOlder ? ' in the loaded events' : ''}
          </span>
          <button type="button" className="icon-btn" aria-label="Previous match" disabled={!matches.length} onClick={() => step(-1)}>
            ↑
          </button>
          <button type="button" className="icon-btn" aria-label="Next match" disabled={!matches.length} onClick={() => step(1)}>
            ↓
          </button>
          {hasOlder && (
            <button type="button" className="link-btn" disabled={loadingOlder} onClick={loadOlder}>
              Load older
            </button>
          )}
          <button type="button" className="icon-btn" aria-label="Close find" onClick={() => setFinding(false)}>
            ×
          </button>
        </form>
      )}
      <div className="timeline" ref={scrollRef} onScroll={onScroll} role="log" aria-label="Thread timeline" aria-live="off" tabIndex={0}>
        <div className="timeline-inner" style={{ height: virtualizer.getTotalSize() }}>
          {virtualItems.map((v) => {
            const item = items[v.index]
            return (
              <div key={v.key} data-index={v.index} ref={virtualizer.measureElement} className={v.index === currentMatch ? 'timeline-row find-current' : 'timeline-row'} style={{ transform: `translateY(${v.start}px)` }}>
                {item ? (
                  <ErrorBoundary what={`this ${item.kind} event`} compact>
                    <Row
                      item={item}
                      sessionIdle={props.sessionIdle}
                      pendingIds={props.pendingIds}
                      onAnswer={props.onAnswer}
                      onOpenThread={props.onOpenThread}
                      turnKey={turns.get(item.id)?.turn}
                      turnCount={turns.get(item.id)?.first ? turns.get(item.id)?.count : 0}
                      turnExpanded={expandedTurns.get(turns.get(item.id)?.turn ?? '')}
                      onToggleTurn={toggleTurn}
                    />
                  </ErrorBoundary>
                ) : (
                  <EndRow busy={props.modelBusy} loadingOlder={loadingOlder} />
                )}
              </div>
            )
          })}
        </div>
      </div>
      {showJump && (
        <button
          type="button"
          className="jump-latest"
          onClick={() => {
            atBottom.current = true
            virtualizer.scrollToIndex(count - 1, { align: 'end' })
          }}
        >
          Jump to latest ↓
        </button>
      )}
    </div>
  )
}

function estimate(item: TimelineItem | undefined): number {
  if (!item) return 48
  switch (item.kind) {
    case 'tool':
      return item.result ? 44 : item.name === 'bash' || item.name === 'edit' || item.name === 'write' ? 220 : 56
    case 'agent':
      return 40 + Math.min(800, Math.ceil(item.text.length / 90) * 22)
    case 'user':
      return 56 + Math.min(400, Math.ceil(item.text.length / 90) * 22)
    case 'turn':
    case 'thread':
    case 'interrupt':
      return 36
    case 'delegation':
      return 60 + Math.min(4, Math.ceil((item.task ?? '').length / 90)) * 22
    case 'report':
      return 60 + Math.min(6, Math.ceil(item.text.length / 90)) * 22
    case 'workflow_run':
      return 480
    default:
      return 52
  }
}

function EndRow({ busy, loadingOlder }: { busy: boolean; loadingOlder: boolean }) {
  return (
    <div className="end-row">
      {busy ? (
        <span className="thinking-indicator" role="status">
          <span className="dots" aria-hidden="true">
            <i />
            <i />
            <i />
          </span>
          Claude is working…
        </span>
      ) : loadingOlder ? (
        <Spinner label="Loading older events" />
      ) : null}
    </div>
  )
}

type RowProps = {
  item: TimelineItem
  /** The turn a tool call belongs to, and on the first call of a turn with several, their count. */
  turnKey?: string
  turnCount?: number
  turnExpanded?: boolean
  onToggleTurn: (turn: string, open: boolean) => void
} & Pick<TimelineProps, 'sessionIdle' | 'pendingIds' | 'onAnswer' | 'onOpenThread'>

/** One row; memoized so a streaming delta re-renders only the row it changes. */
const Row = memo(function Row({ item, sessionIdle, pendingIds, onAnswer, onOpenThread, turnKey, turnCount, turnExpanded, onToggleTurn }: RowProps) {
  switch (item.kind) {
    case 'user':
      // As typed: line breaks kept, no Markdown (a `__name__` is a name, not emphasis).
      return (
        <div className="msg msg-user">
          <div className="msg-meta">
            <span className="msg-who">You</span>
            <time>{clock(item.at)}</time>
          </div>
          <div className="msg-bubble">
            <div className="msg-text">{item.text}</div>
            {item.attachments > 0 && <div className="muted">📎 {item.attachments} attachment(s)</div>}
          </div>
        </div>
      )
    case 'agent':
      return (
        <div className={`msg msg-agent${item.streaming ? ' streaming' : ''}`}>
          <div className="msg-meta">
            <span className="msg-who">Claude</span>
            <time>{item.streaming ? 'streaming…' : clock(item.at)}</time>
          </div>
          <Markdown text={item.text || (item.streaming ? '…' : '')} />
        </div>
      )
    case 'thinking':
      return <Thinking text={item.text} streaming={item.streaming} />
    case 'tool': {
      const card = (
        <ToolCard
          tool={item}
          sessionIdle={sessionIdle}
          expanded={turnExpanded}
          onAnswer={pendingIds.has(item.id) ? (result, message, scope) => onAnswer(item, result, message, scope) : undefined}
        />
      )
      if (!turnKey || !turnCount || turnCount < 2) return card
      return (
        <>
          <div className="turn-tools">
            <button type="button" className="link-btn" aria-expanded={turnExpanded === true} onClick={() => onToggleTurn(turnKey, turnExpanded !== true)}>
              {turnExpanded ? `Collapse this turn's ${turnCount} tool calls` : `Expand this turn's ${turnCount} tool calls`}
            </button>
          </div>
          {card}
        </>
      )
    }
    case 'turn':
      return (
        <div className={`divider divider-${item.stopReason}`}>
          <span>
            {STOP_LABEL[item.stopReason] ?? item.stopReason}
            {item.detail ? ` — ${item.detail}` : ''} · {clock(item.at)}
          </span>
        </div>
      )
    case 'interrupt':
      return (
        <div className="divider divider-interrupt">
          <span>
            <Icon name="stop" size={12} /> Interrupted · {clock(item.at)}
          </span>
        </div>
      )
    case 'error':
      return <ErrorRow item={item} />
    case 'thread':
      return (
        <div className="thread-event">
          <Icon name="branch" size={14} />
          <span>
            {item.agentName === ADVISOR_AGENT_NAME ? 'Advisor consultation' : (
              <>
                Subagent <strong>{item.agentName}</strong>
              </>
            )}{' '}
            {item.archived ? 'archived' : (THREAD_STATE_WORD[item.state] ?? item.state)}
            {item.stopReason && item.stopReason !== 'end_turn' ? ` (${item.stopReason.replace(/_/g, ' ')})` : ''}
          </span>
          <button type="button" className="link-btn" onClick={() => onOpenThread(item.threadId)}>
            Open thread
          </button>
        </div>
      )
    case 'thread_message':
      return (
        <div className="msg msg-thread">
          <div className="msg-meta">
            <span className="msg-who">{threadMessageView(item).title}</span>
            <button type="button" className="link-btn" title={threadMessageView(item).linkLabel} onClick={() => onOpenThread(item.otherThreadId)}>
              Open thread
            </button>
          </div>
          <Markdown text={item.text} />
        </div>
      )
    case 'delegation':
    case 'report':
      return <ThreadCard item={item} onOpenThread={onOpenThread} />
    case 'workflow_run':
      return <WorkflowRunCard runId={item.runId} name={item.name} />
    case 'note':
      return (
        <div className={`note note-${item.tone}`}>
          <strong>{item.label}</strong>
          {item.text && <span> {item.text}</span>}
        </div>
      )
  }
})

/** Longer than this (characters or lines), a card's text is clamped until "Show all". */
const CARD_CLAMP_CHARS = 320
const CARD_CLAMP_LINES = 5

/**
 * A delegation (the task the lead sent) or a report (what the thread sent back): a compact card
 * that links to the thread, its text clamped to a few lines until asked for.
 */
function ThreadCard({ item, onOpenThread }: { item: DelegationItem | ReportItem; onOpenThread: (threadId: string) => void }) {
  const v = threadCardView(item)
  const [open, setOpen] = useState(false)
  const long = v.body.length > CARD_CLAMP_CHARS || v.body.split('\n').length > CARD_CLAMP_LINES
  return (
    <article className={`thread-card thread-card-${v.tone}`} aria-label={v.title} data-thread={v.threadId}>
      <header className="thread-card-head">
        <Icon name={v.tone === 'report' ? 'chat' : 'branch'} size={14} />
        <strong className="thread-card-title">{v.title}</strong>
        <time>{clock(item.at)}</time>
        <button type="button" className="link-btn thread-card-open" title={v.linkLabel} onClick={() => onOpenThread(v.threadId)}>
          Open thread
        </button>
      </header>
      {v.body ? (
        <div className={`thread-card-body${long && !open ? ' clamped' : ''}`}>{v.tone === 'report' ? <Markdown text={v.body} /> : <div className="msg-text">{v.body}</div>}</div>
      ) : null}
      {long && (
        <button type="button" className="link-btn" aria-expanded={open} onClick={() => setOpen((o) => !o)}>
          {open ? 'Show less' : 'Show all'}
        </button>
      )}
    </article>
  )
}

function Thinking({ text, streaming }: { text: string; streaming: boolean }) {
  const [open, setOpen] = useState(false)
  return (
    <div className={`thinking${streaming ? ' streaming' : ''}`}>
      <button type="button" className="thinking-toggle" aria-expanded={open} onClick={() => setOpen((o) => !o)} disabled={!text}>
        <Icon name="brain" size={14} />
        {streaming ? 'Thinking…' : 'Thought'}
        {text && <Icon name="chevron" size={12} />}
      </button>
      {open && text && <div className="thinking-text">{text}</div>}
    </div>
  )
}

/**
 * A failing episode (a model request retried until it answers or the retries run out): one row,
 * "retrying 3/5 — connection refused to http://…", with Retry (a new attempt now, by sending
 * the turn on) and Open settings when the model is at fault.
 */
function ErrorRow({ item }: { item: Extract<TimelineItem, { kind: 'error' }> }) {
  const model = item.errorType.startsWith('model_')
  const count = item.attempts !== undefined ? ` ${item.attempts}${item.maxAttempts ? `/${item.maxAttempts}` : ''}` : ''
  const state = item.retry === 'retrying' ? `retrying${count}` : item.retry === 'exhausted' ? `gave up after${count || ' retries'}` : item.retry
  return (
    <div className="event-error" role="alert" data-error-episode={item.id}>
      <Icon name="warn" />
      <div>
        <strong>{item.errorType.replace(/_/g, ' ')}</strong>
        {state && <span className={`pill pill-${item.retry === 'retrying' ? 'running' : 'error'}`}>{state}</span>}
        {item.statusCode !== undefined && <span className="pill">HTTP {item.statusCode}</span>}
        <div>
          {state ? `${state} — ` : ''}
          {item.message}
        </div>
        {item.errorType === 'mcp_authentication_failed_error' && (
          <div className="event-error-actions">
            <a className="link-btn" href="#/vaults">
              Open Vaults
            </a>
          </div>
        )}
        {model && (
          <div className="event-error-actions">
            {item.retry === 'exhausted' && (
              <button type="button" className="link-btn" data-action="retry-model" onClick={(e) => e.currentTarget.dispatchEvent(new CustomEvent('corral-retry', { bubbles: true }))}>
                Retry
              </button>
            )}
            <a className="link-btn" href="#/settings">
              Open settings
            </a>
          </div>
        )}
      </div>
    </div>
  )
}
