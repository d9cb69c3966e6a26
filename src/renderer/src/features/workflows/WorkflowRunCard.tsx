import { createContext, memo, useContext, useEffect, useMemo, useRef, useState } from 'react'
import { useVirtualizer } from '@tanstack/react-virtual'
import type { SessionThread } from '../../api/types'
import { Icon } from '../../ui/components'
import { clock, duration, money } from '../../ui/format'
import { threadCost, threadCostText } from '../thread/thread-tree'
import { agentDurationMs, RUN_AGENT_WORD, runCounterParts, runOpen, runResultText, type RunAgent, type RunPhase, type RunState } from './run-board'
import { RunLog } from './RunLog'
import { useRunDetail } from './useRunDetail'
import type { WorkflowRunAgentView } from '../../../../shared/api/workflow-runs'

/** What a run card reads beyond its run: the session's thread objects (each agent's cost) and how to open a thread. */
export interface WorkflowRunsView {
  sessionId: string
  runs: ReadonlyMap<string, RunState>
  threads: ReadonlyMap<string, SessionThread>
  openThread: (threadId: string) => void
}

export const WorkflowRunsContext = createContext<WorkflowRunsView | null>(null)

/** Rows of the agents grid kept in the DOM around the visible ones; the grid's row height in px. */
const GRID_OVERSCAN = 8
const GRID_ROW = 30
const GRID_MAX_HEIGHT = 300

/** The card's tone: busy while open, good when completed, warn when stopped, bad on an error. */
function runTone(run: RunState): 'busy' | 'good' | 'warn' | 'bad' {
  if (!run.result) return 'busy'
  return run.result.type === 'completed' ? 'good' : run.result.type === 'stopped' ? 'warn' : 'bad'
}

function runStatusWord(run: RunState): string {
  if (run.result) return runResultText(run.result).split(' — ')[0]
  if (run.counts.waiting > 0) return 'Waiting on you'
  return run.status === 'idle' ? 'Paused' : run.status === 'created' ? 'Starting' : 'Running'
}

/** Now, every second while `on` (the durations of working agents move); a timer owned by the component. */
function useNow(on: boolean): number {
  const [now, setNow] = useState(() => Date.now())
  useEffect(() => {
    if (!on) return
    const t = setInterval(() => setNow(Date.now()), 1000)
    return () => clearInterval(t)
  }, [on])
  return now
}

/**
 * A workflow run in the session's timeline, at its `workflow_run.created`: its name and
 * description, its phases with their progress, the live counter of its agents, the grid of its
 * agents (virtualized: a 1,000-agent run keeps ~20 rows in the DOM; a click opens the agent's
 * thread), its log, its output (JSON, folded) and its result. Drawn from the session's RunBoard
 * (WorkflowRunsContext); nothing until the board has read the run.
 */
export function WorkflowRunCard({ runId, name }: { runId: string; name: string }) {
  const view = useContext(WorkflowRunsContext)
  const run = view?.runs.get(runId)
  const open = run ? runOpen(run) : false
  const now = useNow(open)
  const detail = useRunDetail(view?.sessionId ?? '', runId, run?.revision ?? -1, !open)
  const agentViews = useMemo(() => new Map((detail?.agents_list ?? []).map((a) => [a.session_thread_id, a])), [detail])
  if (!view || !run) {
    return (
      <section className="run-card run-busy" aria-label={`Workflow run ${name}`}>
        <header className="run-head">
          <span className="run-kicker">Workflow run</span>
          <strong className="run-name">{name}</strong>
        </header>
      </section>
    )
  }
  const tone = runTone(run)
  return (
    <section className={`run-card run-${tone}`} aria-label={`Workflow run ${run.name}`} data-run={run.id}>
      <header className="run-head">
        <Icon name="branch" size={14} />
        <span className="run-kicker">Workflow run</span>
        <strong className="run-name">{run.name}</strong>
        <span className={`pill run-status run-status-${tone}`} aria-label="Run status">
          {runStatusWord(run)}
        </span>
        {detail?.list_cost && <span className="run-cost" title="The run's list cost: the sum of its threads'">{costText(detail.list_cost)}</span>}
        <time title={run.createdAt}>{clock(run.createdAt)}</time>
      </header>
      {run.description && <p className="run-description">{run.description}</p>}
      <RunCounter run={run} />
      {run.phases.length > 0 && (
        <ol className="run-phases" aria-label="Phases">
          {run.phases.map((p) => (
            <PhaseRow key={p.id} phase={p} />
          ))}
        </ol>
      )}
      <AgentGrid run={run} now={now} threads={view.threads} agentViews={agentViews} openThread={view.openThread} />
      <RunLog sessionId={view.sessionId} runId={run.id} open={open} lines={detail?.log_lines} />
      {run.result && (
        <div className={`run-result run-result-${tone}`} role="status" aria-label="Run result">
          <strong>{run.result.type === 'error' ? `Error: ${run.result.errorType.replace(/_/g, ' ')}` : runResultText(run.result)}</strong>
          {run.result.type === 'error' && run.result.message && <span className="run-result-message">{run.result.message}</span>}
          {run.endedAt && <time title={run.endedAt}> · {clock(run.endedAt)}</time>}
        </div>
      )}
      {run.hasOutput && (
        <details className="run-output">
          <summary>Output</summary>
          <pre className="run-output-json">{jsonText(run.output)}</pre>
        </details>
      )}
    </section>
  )
}

/** "$0.42" from whole cents. */
function costText(c: { amount: string; currency: string }): string {
  return c.currency === 'USD' && /^\d+$/.test(c.amount) ? money(Number(c.amount) / 100) : `${c.amount} ${c.currency}`
}

/** The output as indented JSON (a string output as JSON too, so its quotes show it is a string). */
export function jsonText(v: unknown): string {
  try {
    return JSON.stringify(v, null, 2) ?? 'null'
  } catch {
    return String(v)
  }
}

function RunCounter({ run }: { run: RunState }) {
  const parts = runCounterParts(run.counts)
  return (
    <div className="run-counter" role="status" aria-label="Agents of the run">
      {parts.map((p) => (
        <span key={p.key} className={`run-count run-count-${p.key}${p.n ? '' : ' zero'}`} data-count={p.key}>
          <strong>{p.n}</strong> {p.label}
        </span>
      ))}
      <span className="run-count run-count-started muted">
        of {run.counts.started} started
      </span>
    </div>
  )
}

function PhaseRow({ phase }: { phase: RunPhase }) {
  const state = phase.endedAt ? 'ended' : phase.startedAt ? 'running' : 'not started'
  const pct = phase.agents ? Math.round((phase.done / phase.agents) * 100) : phase.endedAt ? 100 : 0
  return (
    <li className={`run-phase run-phase-${state.replace(' ', '-')}`} title={phase.description ?? undefined}>
      <span className="run-phase-name">
        {phase.name}
        {!phase.declared && <span className="muted"> (undeclared)</span>}
      </span>
      <span className="run-phase-state">{state}</span>
      <span className="run-phase-agents">
        {phase.done}/{phase.agents} agent{phase.agents === 1 ? '' : 's'} done
      </span>
      <span className="run-phase-bar" role="progressbar" aria-label={`${phase.name} progress`} aria-valuemin={0} aria-valuemax={100} aria-valuenow={pct}>
        <span style={{ width: `${pct}%` }} />
      </span>
    </li>
  )
}

/** The run's agents, virtualized inside the card: label (or agent name), status, duration, cost; a click opens the thread. */
function AgentGrid({ run, now, threads, agentViews, openThread }: { run: RunState; now: number; threads: ReadonlyMap<string, SessionThread>; agentViews: ReadonlyMap<string, WorkflowRunAgentView>; openThread: (t: string) => void }) {
  const scrollRef = useRef<HTMLDivElement>(null)
  const virtualizer = useVirtualizer({
    count: run.agents.length,
    getScrollElement: () => scrollRef.current,
    estimateSize: () => GRID_ROW,
    getItemKey: (i) => run.agents[i]?.threadId ?? i,
    overscan: GRID_OVERSCAN,
  })
  if (run.agents.length === 0) return <p className="run-grid-empty muted">No agent started yet.</p>
  const height = Math.min(GRID_MAX_HEIGHT, run.agents.length * GRID_ROW)
  return (
    <div className="run-grid" role="table" aria-label={`Agents of ${run.name}`} aria-rowcount={run.agents.length + 1}>
      <div className="run-grid-row run-grid-header" role="row" aria-rowindex={1}>
        <span role="columnheader">Agent</span>
        <span role="columnheader">Status</span>
        <span role="columnheader">Duration</span>
        <span role="columnheader">Cost</span>
      </div>
      <div className="run-grid-scroll" ref={scrollRef} style={{ height }} role="rowgroup">
        <div style={{ height: virtualizer.getTotalSize(), position: 'relative' }}>
          {virtualizer.getVirtualItems().map((v) => {
            const a = run.agents[v.index]
            return <AgentRow key={v.key} agent={a} index={v.index} top={v.start} now={a.endedAt ? 0 : now} thread={threads.get(a.threadId)} view={agentViews.get(a.threadId)} openThread={openThread} />
          })}
        </div>
      </div>
    </div>
  )
}

const AgentRow = memo(function AgentRow({ agent, index, top, now, thread, view, openThread }: { agent: RunAgent; index: number; top: number; now: number; thread: SessionThread | undefined; view: WorkflowRunAgentView | undefined; openThread: (t: string) => void }) {
  const ms = agentDurationMs(agent, now)
  // The run's route reports every agent's cost in one read; the thread list, when it has the thread, too.
  const reported = view?.list_cost && view.list_cost.currency === 'USD' && /^\d+$/.test(view.list_cost.amount) ? { usd: Number(view.list_cost.amount) / 100, reported: true } : undefined
  const cost = reported ?? (thread ? threadCost(thread) : undefined)
  const name = agent.label ?? agent.agentName
  return (
    <div className={`run-grid-row run-agent run-agent-${agent.status}`} role="row" aria-rowindex={index + 2} style={{ transform: `translateY(${top}px)`, height: GRID_ROW }} data-thread={agent.threadId}>
      <span role="cell" className="run-agent-name">
        <button type="button" className="link-btn" onClick={() => openThread(agent.threadId)} title={`Open the thread of ${name} (${agent.agentName})`}>
          {name}
        </button>
        {agent.label && <span className="muted"> {agent.agentName}</span>}
      </span>
      <span role="cell" className="run-agent-status" title={agent.status === 'failed' && view?.error ? view.error : undefined}>
        <span className="status-dot" aria-hidden="true" />
        {RUN_AGENT_WORD[agent.status]}
        {agent.status === 'failed' && agent.stopReason ? ` (${agent.stopReason.replace(/_/g, ' ')})` : ''}
      </span>
      <span role="cell" className="run-agent-duration">
        {ms === undefined ? '—' : duration(ms)}
      </span>
      <span role="cell" className="run-agent-cost" title={cost ? (cost.reported ? "This thread's list cost, reported by the engine" : "This thread's cost, estimated from its tokens") : 'No model request of this thread has ended yet'}>
        {threadCostText({ cost }, money)}
      </span>
    </div>
  )
})
