import { useMemo, useState } from 'react'
import { Icon } from '../../ui/components'
import { money } from '../../ui/format'
import { RUN_AGENT_WORD, runOpen, runProgressText, type RunState } from '../workflows/run-board'
import { threadCostText, threadNodeLabel, treeRows, type RunGroupInfo, type ThreadNode } from './thread-tree'

const STATUS_WORD: Record<string, string> = { running: 'running', idle: 'idle', rescheduling: 'rescheduling', terminated: 'terminated' }

const NO_RUNS: ReadonlyMap<string, RunState> = new Map()

/**
 * The session's threads as a tree: the primary, its subagents by agent name, each workflow run's
 * threads under a row for the run (collapsed by default, with its counter; the group of the
 * selected thread opens), its advisor consultations; each with its live status and its own cost.
 * Selecting one opens its timeline.
 */
export function ThreadTree({ nodes, runs = NO_RUNS, selected, pending, onOpen }: { nodes: readonly ThreadNode[]; runs?: ReadonlyMap<string, RunState>; selected: string | null; pending: ReadonlyMap<string, number>; onOpen: (threadId: string | null) => void }) {
  const advisors = nodes.filter((n) => n.kind === 'advisor').length
  let advisorShown = 0
  const [expanded, setExpanded] = useState<ReadonlySet<string>>(new Set())
  const info = useMemo(() => {
    const m = new Map<string, RunGroupInfo>()
    for (const r of runs.values()) m.set(r.id, { name: r.name, counts: r.counts, open: runOpen(r) })
    return m
  }, [runs])
  const selectedRun = selected ? nodes.find((n) => n.id === selected)?.runId : undefined
  const open = selectedRun && !expanded.has(selectedRun) ? new Set([...expanded, selectedRun]) : expanded
  // A run's threads in the program's call order (the board's), not by their creation instant.
  const { rank, agentOf } = useMemo(() => {
    const rank = new Map<string, number>()
    const agentOf = new Map<string, RunState['agents'][number]>()
    for (const r of runs.values())
      r.agents.forEach((a, i) => {
        rank.set(a.threadId, a.callIndex ?? i)
        agentOf.set(a.threadId, a)
      })
    return { rank, agentOf }
  }, [runs])
  const rows = treeRows(nodes, info, open, selected, (t) => rank.get(t))
  const toggle = (runId: string) => setExpanded((s) => (open.has(runId) ? new Set([...s].filter((x) => x !== runId)) : new Set([...s, runId])))
  return (
    <nav className="thread-tree" aria-label="Threads">
      <ul>
        {rows.map((row) => {
          if (row.type === 'run') {
            const word = row.counts ? runProgressText({ counts: { ...row.counts, paused: 0, stopped: 0 }, status: 'running' }) : `workflow · ${row.threads}`
            const waiting = row.counts?.waiting ?? 0
            return (
              <li key={`run:${row.runId}`} className="thread-run-group" data-run={row.runId}>
                <button type="button" className="thread-run-btn" aria-expanded={row.expanded} onClick={() => toggle(row.runId)} title={`${row.name}: ${row.threads} thread${row.threads === 1 ? '' : 's'}`}>
                  <Icon name="chevron" size={11} />
                  <span className="thread-node-name">{row.name}</span>
                  {waiting > 0 && (
                    <span className="count-badge">
                      {waiting}
                      <span className="sr-only"> waiting for you</span>
                    </span>
                  )}
                  <span className={`thread-run-progress${row.open === false ? ' ended' : ''}`}>{word}</span>
                </button>
              </li>
            )
          }
          if (row.type === 'more') {
            return (
              <li key={`more:${row.runId}`} className="thread-run-more muted">
                and {row.hidden} more in the run's card
              </li>
            )
          }
          const n = row.node
          const runAgent = row.inRun ? agentOf.get(n.id) : undefined
          const runLabel = runAgent?.label ?? undefined
          // A run's thread is archived by Corral once the program has its answer: what it did is its status.
          const statusWord = runAgent ? RUN_AGENT_WORD[runAgent.status] : n.archived ? 'archived' : (STATUS_WORD[n.status] ?? n.status)
          const statusClass = runAgent ? `run-${runAgent.status}` : n.archived ? 'archived' : n.status
          const isSelected = n.kind === 'primary' ? selected === null : selected === n.id
          const waiting = pending.get(n.kind === 'primary' ? '' : n.id) ?? 0
          const heading = n.kind === 'advisor' && advisorShown++ === 0 ? <li className="thread-tree-group">Advisor · {advisors}</li> : null
          return (
            <FragmentRow key={n.id} heading={heading}>
              <li className={`thread-node depth-${row.inRun ? 2 : n.depth} kind-${n.kind}${row.inRun ? ' in-run' : n.archived ? ' archived' : ''}`}>
                <button
                  type="button"
                  className={`thread-node-btn${isSelected ? ' active' : ''}`}
                  aria-current={isSelected ? 'page' : undefined}
                  title={threadNodeLabel(n, money) + (waiting ? ` · ${waiting} waiting for you` : '')}
                  data-thread={n.id}
                  onClick={() => onOpen(n.kind === 'primary' ? null : n.id)}
                >
                  <Icon name={n.kind === 'primary' ? 'robot' : n.kind === 'advisor' ? 'brain' : 'branch'} size={13} />
                  <span className="thread-node-name">
                    {runLabel ?? n.label}
                    {n.kind === 'primary' ? <span className="thread-node-detail"> · primary</span> : row.inRun ? (runLabel ? <span className="thread-node-detail"> {n.label}</span> : null) : n.detail ? <span className="thread-node-detail"> {n.detail}</span> : null}
                  </span>
                  {waiting > 0 && (
                    <span className="count-badge">
                      {waiting}
                      <span className="sr-only"> waiting for you</span>
                    </span>
                  )}
                  <span className={`thread-node-status status-${statusClass}`}>
                    <span className="status-dot" aria-hidden="true" />
                    {statusWord}
                  </span>
                  <span className="thread-node-cost" title={n.cost ? (n.cost.reported ? "This thread's list cost, reported by the engine" : "This thread's cost, estimated from its tokens at list prices") : 'No model request of this thread has ended yet'}>
                    {n.cost ? threadCostText(n, money) : <span aria-hidden="true">—</span>}
                  </span>
                </button>
              </li>
            </FragmentRow>
          )
        })}
      </ul>
    </nav>
  )
}

function FragmentRow({ heading, children }: { heading: React.ReactNode; children: React.ReactNode }) {
  return (
    <>
      {heading}
      {children}
    </>
  )
}
