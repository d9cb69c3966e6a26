import { useCallback, useEffect, useMemo, useRef, useState } from 'react'
import { useClient } from '../../api/context'
import type { Page, Session } from '../../api/types'
import type { Vault } from '../../../../shared/api/types'
import { Button, Empty, ErrorNote, Icon, Spinner, StatusBadge } from '../../ui/components'
import { money, modelIdOf, relativeTime, sessionCost, tokens } from '../../ui/format'
import { useQuery } from '../../ui/hooks'
import { useConfirmations, type PendingItem } from '../confirmations/ConfirmationsProvider'
import { sessionTitle, useSessions } from '../sessions/SessionsProvider'
import { Timeline } from './Timeline'
import { asRunThreadRows, withoutRunThreadRows, type ToolItem } from './timeline'
import { useThread } from './useThread'
import { useThreadTree } from './useThreadTree'
import { ThreadTree } from './ThreadTree'
import { shortThreadId } from '../confirmations/queue'
import { primaryThreadId } from '../../../../shared/api/ids'
import { resourceChip } from './resource-label'
import { ModelNotice } from '../setup/SetupNotices'
import { useSetup } from '../setup/SetupProvider'
import { UploadList, useFileDrop, useUploads } from '../files/uploads'
import { WorkerStatus } from '../environments/WorkerStatus'
import { BudgetPause, BudgetSpend } from '../budgets/BudgetBar'
import type { BudgetLimit } from '../budgets/budget'
import { OutcomeCard } from '../outcomes/OutcomeCard'
import { WorkflowRunsContext, type WorkflowRunsView } from '../workflows/WorkflowRunCard'
import { useWorkflowRuns } from '../workflows/useWorkflowRuns'
import { RUN_AGENT_WORD } from '../workflows/run-board'

const QUEUE_EVENTS = new Set(['agent.tool_use', 'agent.mcp_tool_use', 'agent.custom_tool_use', 'session.status_idle', 'session.thread_status_idle', 'user.tool_confirmation'])

/** One session: header (status, usage, cost, actions), thread tabs, the timeline and the composer. */
export function ThreadView({ sessionId, threadId, onOpenThread }: { sessionId: string; threadId: string | null; onOpenThread: (t: string | null) => void }) {
  const client = useClient()
  const setup = useSetup()
  const { sessions, environments, upsert, refresh } = useSessions()
  const confirmations = useConfirmations()
  const listed = sessions.find((s) => s.id === sessionId)
  const fresh = useQuery(() => client.request<Session>('sessions.retrieve', { id: sessionId }), [sessionId, listed?.updated_at])
  // Whichever copy is newer: the one just read, or the list's (updated at once after an action).
  const own = fresh.data?.id === sessionId ? fresh.data : undefined
  const base = own && listed ? (listed.updated_at > own.updated_at ? listed : own) : (own ?? listed)
  const data = useThread(sessionId, threadId)
  // Usage and cost change when a model request ends: re-read the session then, not at the
  // list's next poll (seconds later).
  const { reload: reloadSession } = fresh
  const reloadRef = useRef(reloadSession)
  reloadRef.current = reloadSession
  useEffect(() => {
    if (data.lastEventType === 'span.model_request_end' || data.lastEventType === 'session.status_idle') reloadRef.current()
  }, [data.lastEventType, data.eventCount])
  // The thread list is derived from the whole log by the engine (slow on a very long session):
  // the tree reads it after the timeline has drawn, then when a thread is created or settles.
  const drawnOnce = useRef(false)
  if (!data.loading) drawnOnce.current = true
  const tree = useThreadTree(sessionId, drawnOnce.current)
  // The session's workflow runs (nothing is read for a session that never started one).
  const runRowSeen = useMemo(() => data.items.some((i) => i.kind === 'workflow_run' || (i.kind === 'note' && i.label === 'Workflow run refused')), [data.items])
  const workflows = useWorkflowRuns(sessionId, runRowSeen)
  // A run's threads' rows that a page starting after their creation folded as a subagent's: the run card has them.
  const selectedRunAgent = threadId ? workflows.board.agentOfThread(threadId) : undefined
  const selectedRunId = threadId ? workflows.board.runOfThread(threadId) : undefined
  const selectedRun = selectedRunId ? workflows.runs.get(selectedRunId) : undefined
  const items = useMemo(() => {
    const rows = withoutRunThreadRows(data.items, (tid) => workflows.board.runOfThread(tid) !== undefined || !!tree.threads.get(tid)?.workflow_run_id)
    return selectedRunId ? asRunThreadRows(rows) : rows
  }, [data.items, workflows, tree.threads, selectedRunId])
  const selectedThread = threadId ? tree.threads.get(threadId) : undefined
  const selectedNode = threadId ? tree.nodes.find((n) => n.id === threadId) : undefined
  // The stream's latest status event is fresher than the polled resource.
  const session = base && data.liveStatus && threadId === null ? { ...base, status: data.liveStatus } : base
  // ...and the sessions list (polled) shows it at once too, not at its next poll.
  useEffect(() => {
    if (listed && data.liveStatus && threadId === null && listed.status !== data.liveStatus) upsert({ ...listed, status: data.liveStatus })
  }, [data.liveStatus, listed, threadId, upsert])

  // A request or an answer went by on the stream: re-read this session's queue entries now
  // rather than at the next poll. (refreshSession changes with the session list; not a trigger.)
  const { refreshSession } = confirmations
  const refreshRef = useRef(refreshSession)
  refreshRef.current = refreshSession
  useEffect(() => {
    if (data.lastEventType && QUEUE_EVENTS.has(data.lastEventType)) refreshRef.current(sessionId)
  }, [data.lastEventType, data.eventCount, sessionId])

  const pending = useMemo(() => confirmations.queue.filter((p) => p.sessionId === sessionId), [confirmations.queue, sessionId])
  const pendingKey = pending.map((p) => p.tool.id).join(',')
  // Per thread ('' = the primary): how many calls wait for the person, for the tree's badges.
  const pendingByThread = useMemo(() => {
    const m = new Map<string, number>()
    for (const p of pending) m.set(p.thread?.id ?? '', (m.get(p.thread?.id ?? '') ?? 0) + 1)
    return m
  }, [pendingKey])
  // Keyed by the ids, so the set (and every row that gets it) is stable while they are.
  const pendingIds = useMemo(() => new Set(pending.map((p) => p.tool.id)), [pendingKey])
  const pendingRef = useRef(pending)
  pendingRef.current = pending
  const { answer } = confirmations
  const onAnswer = useCallback(
    async (tool: ToolItem, result: 'allow' | 'deny', message?: string, scope?: 'session') => {
      const item: PendingItem = pendingRef.current.find((p) => p.tool.id === tool.id) ?? { sessionId, sessionTitle: '', tool }
      await answer(item, result, message, scope)
    },
    [answer, sessionId],
  )

  // Stable across renders, so memoized timeline rows are not re-rendered for a new closure.
  const openThreadRef = useRef(onOpenThread)
  openThreadRef.current = onOpenThread
  // A link to the primary thread by its id (a child's task came from it) opens the session's view.
  const primaryId = primaryThreadId(sessionId)
  const openThread = useCallback((t: string) => openThreadRef.current(t === primaryId ? null : t), [primaryId])
  const [sentMark, setSentMark] = useState(0)
  const runsView = useMemo<WorkflowRunsView>(() => ({ sessionId, runs: workflows.runs, threads: tree.threads, openThread }), [sessionId, workflows.runs, tree.threads, openThread])

  // Retry on a failing episode's row: the turn goes on with a new message (the harness retries only within an episode).
  const retry = useCallback(() => {
    void client.request('events.send', { id: sessionId }, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'Please try again.' }] }] }).then(() => setSentMark((m) => m + 1))
  }, [client, sessionId])
  const viewRef = useRef<HTMLElement>(null)
  // A file dropped on the session is uploaded, then added to the running session as a `file`
  // resource: its sandbox sees it at once under /mnt/session/uploads.
  const uploads = useUploads(async (file, name) => {
    const r = await client.request<{ mount_path?: string }>('sessionResources.add', { id: sessionId }, { type: 'file', file_id: file.id, mount_path: name })
    fresh.reload()
    return `at ${r.mount_path ?? name}`
  })
  const drop = useFileDrop(uploads.add)
  useEffect(() => {
    const el = viewRef.current
    if (!el) return
    el.addEventListener('corral-retry', retry)
    return () => el.removeEventListener('corral-retry', retry)
  })

  if (!session && fresh.error) return <ErrorNote error={fresh.error} />
  if (!session) return <div className="center"><Spinner /></div>

  const env = environments.find((e) => e.id === session.environment_id)
  // The model is failing when the newest row of the timeline is a failing episode.
  const lastItem = data.items[data.items.length - 1]
  const failing = lastItem?.kind === 'error' ? lastItem : undefined
  const running = session.status === 'running' || session.status === 'rescheduling'
  const archived = !!session.archived_at
  const canSend = !archived && session.status !== 'terminated'
  // paused at the budget: the session idles and its last turn ended budget_reached
  let lastTurn: string | undefined
  for (let i = data.items.length - 1; i >= 0 && lastTurn === undefined; i--) {
    const it = data.items[i]
    if (it.kind === 'turn') lastTurn = it.stopReason
  }
  const pausedAtBudget = threadId === null && !running && !archived && !!session.budget && lastTurn === 'budget_reached'

  return (
    <section className="thread-view" aria-label={sessionTitle(session)} ref={viewRef} {...(canSend ? drop.handlers : {})}>
      {drop.over && canSend && (
        <div className="drop-overlay" aria-hidden="true">
          Drop to upload into this session: the agent reads it at /mnt/session/uploads
        </div>
      )}
      <ThreadHeader
        session={session}
        envName={env?.name}
        pending={pending.length}
        running={running}
        failing={failing}
        pausedAtBudget={pausedAtBudget}
        onChanged={(s) => {
          upsert(s)
          fresh.reload()
          refresh()
        }}
        onDeleted={() => {
          refresh()
          window.location.hash = '/sessions'
        }}
      />
      {!setup.modelReady && !setup.settings?.endpoint?.configured && <ModelNotice go={(p) => (window.location.hash = p)} compact />}
      <div className="thread-body">
        {(tree.nodes.length > 1 || threadId) && <ThreadTree nodes={tree.nodes} runs={workflows.runs} selected={threadId} pending={pendingByThread} onOpen={onOpenThread} />}
        <div className="thread-main">
          {threadId && (
            <div className="thread-crumb" aria-label="Selected thread">
              <Icon name={selectedNode?.kind === 'advisor' ? 'brain' : 'branch'} size={13} />
              {selectedRunAgent && selectedRun ? (
                <>
                  <span>
                    Agent <strong>{selectedRunAgent.label ?? selectedRunAgent.agentName}</strong>
                    {selectedRunAgent.label ? ` (${selectedRunAgent.agentName})` : ''} of the workflow run <strong>{selectedRun.name}</strong> <span className="mono muted">{shortThreadId(threadId)}</span>
                  </span>
                  <span className={`thread-node-status status-run-${selectedRunAgent.status}`}>
                    <span className="status-dot" aria-hidden="true" />
                    {RUN_AGENT_WORD[selectedRunAgent.status]}
                  </span>
                  <span className="muted">Its answer goes to the run's program; this thread is read here.</span>
                </>
              ) : (
                <>
                  <span>
                    {selectedNode?.kind === 'advisor' ? 'Advisor consultation' : 'Thread of'} <strong>{selectedNode?.label ?? 'subagent'}</strong>
                    {selectedNode?.detail ? ` (${selectedNode.detail})` : ''} <span className="mono muted">{shortThreadId(threadId)}</span>
                  </span>
                  {selectedNode && <span className={`thread-node-status status-${selectedNode.archived ? 'archived' : selectedNode.status}`}>{selectedNode.archived ? `archived ${relativeTime(selectedThread?.archived_at)}` : selectedNode.status}</span>}
                  <span className="muted">Messages go to the lead; this thread is read here.</span>
                </>
              )}
              <button type="button" className="link-btn" onClick={() => onOpenThread(null)}>
                Back to the primary thread
              </button>
            </div>
          )}
          {threadId === null && <OutcomeCard sessionId={sessionId} evaluations={session.outcome_evaluations} lastEventType={data.lastEventType} eventCount={data.eventCount} />}
          {data.error && <ErrorNote error={data.error} />}
          {data.loading ? (
            <div className="center grow">
              <Spinner label="Loading the thread" />
            </div>
          ) : data.items.length === 0 ? (
            <div className="grow">
              <Empty icon="chat" title="Nothing here yet">
                {threadId ? 'This thread has no events yet.' : canSend ? 'Send a message to start the agent.' : 'This session has no events.'}
              </Empty>
            </div>
          ) : (
            <WorkflowRunsContext.Provider value={runsView}>
            <Timeline
              items={items}
              sessionIdle={!running}
              modelBusy={data.modelBusy || (running && threadId === null)}
              hasOlder={data.hasOlder}
              loadingOlder={data.loadingOlder}
              loadOlder={data.loadOlder}
              prependMark={data.prependMark}
              pendingIds={pendingIds}
              onAnswer={onAnswer}
              onOpenThread={openThread}
              sentMark={sentMark}
            />
            </WorkflowRunsContext.Provider>
          )}
        </div>
      </div>
      {data.connection === 'reconnecting' && <div className="conn-banner" role="status">Reconnecting to the live stream…</div>}
      <UploadList rows={uploads.rows} />
      {threadId === null && <Composer sessionId={sessionId} onSent={() => setSentMark((m) => m + 1)} disabled={!canSend || pausedAtBudget} running={running} reason={archived ? 'This session is archived.' : session.status === 'terminated' ? 'This session has terminated.' : pausedAtBudget ? 'Paused at its budget: raise it above to continue.' : undefined} />}
    </section>
  )
}

function ThreadHeader({
  session,
  envName,
  pending,
  running,
  failing,
  pausedAtBudget,
  onChanged,
  onDeleted,
}: {
  session: Session
  envName?: string
  pending: number
  running: boolean
  failing?: { retry?: string; attempts?: number; maxAttempts?: number; message: string }
  pausedAtBudget: boolean
  onChanged: (s: Session) => void
  onDeleted: () => void
}) {
  const client = useClient()
  const [busy, setBusy] = useState<string>()
  const [err, setErr] = useState<unknown>()
  // The backend this session's sandbox actually runs on (known after its first tool call).
  const backend = useQuery(() => client.request<{ sandbox: { label: string } | null }>('sessions.sandbox', { id: session.id }).catch(() => ({ sandbox: null })), [session.id, session.status])
  const { environments } = useSessions()
  const selfHosted = environments.find((e) => e.id === session.environment_id)?.config.type === 'self_hosted'
  const agent = session.agent as { name?: string; model?: unknown; version?: number }
  const modelId = modelIdOf(agent.model)
  const u = session.usage ?? {}
  const cost = sessionCost(u, modelId)
  const act = async (what: string, fn: () => Promise<unknown>) => {
    setBusy(what)
    setErr(undefined)
    try {
      await fn()
      onChanged(await client.request<Session>('sessions.retrieve', { id: session.id }))
    } catch (e) {
      setErr(e)
    } finally {
      setBusy(undefined)
    }
  }
  const interrupt = () => act('interrupt', () => client.request('events.send', { id: session.id }, { events: [{ type: 'user.interrupt' }] }))
  // Escape twice quickly interrupts a running turn, like a terminal's ^C.
  const lastEsc = useRef(0)
  useEffect(() => {
    if (!running) return
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== 'Escape' || document.querySelector('.dialog')) return
      const now = Date.now()
      if (now - lastEsc.current < 600) void interrupt()
      lastEsc.current = now
    }
    window.addEventListener('keydown', onKey)
    return () => window.removeEventListener('keydown', onKey)
  })
  return (
    <header className="thread-header">
      <div className="thread-title-row">
        <div className="thread-title">
          <TitleEditor session={session} onRenamed={onChanged} />
          <div className="thread-sub">
            <StatusBadge status={session.archived_at ? 'archived' : session.status} pending={pending} />
            {failing && (
              <span className="pill pill-error status-error" title={failing.message} aria-label="Session error">
                {failing.retry === 'retrying' ? `model failing, retrying ${failing.attempts ?? ''}${failing.maxAttempts ? `/${failing.maxAttempts}` : ''}` : 'error'}
              </span>
            )}
            {selfHosted && !session.archived_at && <WorkerStatus environmentId={session.environment_id} />}
            {backend.data?.sandbox && (
              <span className="thread-backend" title="Where this session's tools run" aria-label="Sandbox backend">
                <Icon name="box" size={12} /> {backend.data.sandbox.label}
              </span>
            )}
            <span title="Agent">
              <Icon name="robot" size={13} /> {agent.name ?? 'agent'}
              {agent.version ? ` v${agent.version}` : ''}
            </span>
            {modelId && <span className="mono" title="Model">{modelId}</span>}
            <span title="Environment">
              <Icon name="box" size={13} /> {envName ?? session.environment_id}
            </span>
            <span title={session.updated_at}>updated {relativeTime(session.updated_at)}</span>
            {session.vault_ids.length > 0 && <VaultChips ids={session.vault_ids} />}
            {session.metadata?.corral_dream_id && <DreamChip dreamId={session.metadata.corral_dream_id} resources={session.resources} />}
            {session.resources.map((r, i) => (
              <span key={i} className="chip-static" title={JSON.stringify(r)}>
                <Icon name={resourceChip(r as unknown as Record<string, unknown>).icon} size={12} />
                {resourceChip(r as unknown as Record<string, unknown>).label}
              </span>
            ))}
          </div>
        </div>
        <div className="thread-actions">
          {!running && (
            <Button
              variant="ghost"
              disabled={!!busy}
              title="Delete this session and its whole log"
              onClick={() => {
                if (window.confirm('Delete this session and its whole log? This cannot be undone.'))
                  void (async () => {
                    setBusy('delete')
                    try {
                      await client.request('sessions.delete', { id: session.id })
                      onDeleted()
                    } catch (e) {
                      setErr(e)
                      setBusy(undefined)
                    }
                  })()
              }}
            >
              Delete
            </Button>
          )}
          {!session.archived_at && (
            <Button
              variant="ghost"
              icon="archive"
              disabled={!!busy}
              onClick={() => {
                if (window.confirm('Archive this session? It stays readable but accepts no new events.')) void act('archive', () => client.request('sessions.archive', { id: session.id }))
              }}
            >
              Archive
            </Button>
          )}
          {/* Interrupt keeps its own place at the end; when the turn ends the place stays empty,
              so a second click where Interrupt was lands on nothing (not on Delete). */}
          <span className="interrupt-slot">
            {running && (
              <Button variant="danger" icon="stop" onClick={interrupt} disabled={busy === 'interrupt'} title="Interrupt the turn (Esc Esc)">
                Interrupt
              </Button>
            )}
          </span>
        </div>
      </div>
      <dl className="usage" aria-label="Usage">
        <div>
          <dt>Input</dt>
          <dd>{tokens(u.input_tokens)}</dd>
        </div>
        <div>
          <dt>Output</dt>
          <dd>{tokens(u.output_tokens)}</dd>
        </div>
        <div>
          <dt>Cache read</dt>
          <dd>{tokens(u.cache_read_input_tokens)}</dd>
        </div>
        <div>
          <dt>Cache write</dt>
          <dd>{tokens((u.cache_creation?.ephemeral_5m_input_tokens ?? 0) + (u.cache_creation?.ephemeral_1h_input_tokens ?? 0))}</dd>
        </div>
        <div>
          <dt>Cost</dt>
          <dd title={cost ? (cost.reported ? 'Reported by the engine' : 'Estimated from tokens at list prices') : 'Unknown model price'}>
            {cost ? `${cost.reported ? '' : '≈ '}${money(cost.usd)}` : '—'}
          </dd>
        </div>
        {session.budget && <BudgetSpend budget={session.budget as BudgetLimit} spent={cost?.usd} estimated={!!cost && !cost.reported} />}
      </dl>
      {pausedAtBudget && <BudgetPause session={session} spent={cost?.usd ?? 0} onRaised={onChanged} />}
      {err ? <ErrorNote error={err} /> : null}
    </header>
  )
}

function Composer({ sessionId, disabled, running, reason, onSent }: { sessionId: string; disabled: boolean; running: boolean; reason?: string; onSent: () => void }) {
  const client = useClient()
  const [text, setText] = useState('')
  const [busy, setBusy] = useState(false)
  const [err, setErr] = useState<unknown>()
  const send = async () => {
    const body = text.trim()
    if (!body || busy) return
    setBusy(true)
    setErr(undefined)
    try {
      await client.request('events.send', { id: sessionId }, { events: [{ type: 'user.message', content: [{ type: 'text', text: body }] }] })
      setText('')
      onSent()
    } catch (e) {
      setErr(e)
    } finally {
      setBusy(false)
    }
  }
  return (
    <form
      className="composer"
      onSubmit={(e) => {
        e.preventDefault()
        void send()
      }}
    >
      {err ? <ErrorNote error={err} /> : null}
      <div className="composer-box">
        <label htmlFor="composer-input" className="sr-only">
          Message
        </label>
        <textarea
          id="composer-input"
          placeholder={reason ?? (running ? 'Send a message (it will be read when the agent next looks)…' : 'Message the agent… (Enter to send, Shift+Enter for a new line)')}
          value={text}
          disabled={disabled}
          rows={Math.min(10, Math.max(2, text.split('\n').length))}
          onChange={(e) => setText(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === 'Enter' && !e.shiftKey && !e.nativeEvent.isComposing) {
              e.preventDefault()
              void send()
            }
          }}
        />
        <Button type="submit" variant="primary" disabled={disabled || busy || !text.trim()}>
          Send
        </Button>
      </div>
    </form>
  )
}

/** The session title; click (or Enter on it) to rename. */
function TitleEditor({ session, onRenamed }: { session: Session; onRenamed: (s: Session) => void }) {
  const client = useClient()
  const [editing, setEditing] = useState(false)
  const [value, setValue] = useState('')
  const [err, setErr] = useState<string>()
  const saving = useRef(false)
  if (!editing || session.archived_at) {
    return (
      <h1>
        <button
          type="button"
          className="title-btn"
          title={session.archived_at ? undefined : 'Rename'}
          disabled={!!session.archived_at}
          onClick={() => {
            setValue(session.title ?? '')
            setErr(undefined)
            setEditing(true)
          }}
        >
          {sessionTitle(session)}
        </button>
      </h1>
    )
  }
  const save = async () => {
    // Enter submits and the input then loses focus: one save, not two.
    if (saving.current) return
    saving.current = true
    try {
      const title = value.trim() || null
      const updated = title === session.title ? session : await client.request<Session>('sessions.update', { id: session.id }, { title })
      setEditing(false)
      onRenamed(updated)
    } catch (e) {
      setErr((e as Error).message)
    } finally {
      saving.current = false
    }
  }
  return (
    <form
      className="title-form"
      onSubmit={(e) => {
        e.preventDefault()
        void save()
      }}
    >
      <label htmlFor="session-title" className="sr-only">
        Session title
      </label>
      <input id="session-title" autoFocus value={value} maxLength={512} onChange={(e) => setValue(e.target.value)} onKeyDown={(e) => e.key === 'Escape' && setEditing(false)} onBlur={() => void save()} />
      {err && <span className="confirm-err">{err}</span>}
    </form>
  )
}


/** The vaults a session uses, by name, each a link to its page. */
/** A dream's session (docs/dreams.md): says so, and leads to the store it writes on the Memory page. */
function DreamChip({ dreamId, resources }: { dreamId: string; resources: readonly { type: string }[] }) {
  const store = resources.find((r): r is { type: 'memory_store'; memory_store_id: string } => r.type === 'memory_store')
  return (
    <a className="chip-static" href={store ? `#/memory/${store.memory_store_id}` : '#/memory'} title={`This session runs dream ${dreamId}; the store it writes is on the Memory page`}>
      <Icon name="moon" size={12} /> Dream
    </a>
  )
}

function VaultChips({ ids }: { ids: readonly string[] }) {
  const client = useClient()
  const vaults = useQuery(() => client.request<Page<Vault>>('vaults.list', {}, { limit: 100, include_archived: true }), [ids.join(',')])
  const names = new Map((vaults.data?.data ?? []).map((v) => [v.id, v.display_name]))
  return (
    <>
      {ids.map((id) => (
        <a key={id} className="chip-static" href={`#/vaults/${id}`} title={`Vault ${id}: its credentials are this session's`}>
          <Icon name="lock" size={12} /> {names.get(id) ?? id}
        </a>
      ))}
    </>
  )
}
