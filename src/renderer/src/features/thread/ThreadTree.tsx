import { Icon } from '../../ui/components'
import { money } from '../../ui/format'
import { threadCostText, threadNodeLabel, type ThreadNode } from './thread-tree'

const STATUS_WORD: Record<string, string> = { running: 'running', idle: 'idle', rescheduling: 'rescheduling', terminated: 'terminated' }

/**
 * The session's threads as a tree: the primary, its subagents by agent name, its advisor
 * consultations; each with its live status and its own cost. Selecting one opens its timeline.
 */
export function ThreadTree({ nodes, selected, pending, onOpen }: { nodes: readonly ThreadNode[]; selected: string | null; pending: ReadonlyMap<string, number>; onOpen: (threadId: string | null) => void }) {
  const advisors = nodes.filter((n) => n.kind === 'advisor').length
  let advisorShown = 0
  return (
    <nav className="thread-tree" aria-label="Threads">
      <ul>
        {nodes.map((n) => {
          const isSelected = n.kind === 'primary' ? selected === null : selected === n.id
          const waiting = pending.get(n.kind === 'primary' ? '' : n.id) ?? 0
          const heading = n.kind === 'advisor' && advisorShown++ === 0 ? <li className="thread-tree-group">Advisor · {advisors}</li> : null
          return (
            <FragmentRow key={n.id} heading={heading}>
              <li className={`thread-node depth-${n.depth} kind-${n.kind}${n.archived ? ' archived' : ''}`}>
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
                    {n.label}
                    {n.kind === 'primary' ? <span className="thread-node-detail"> · primary</span> : n.detail ? <span className="thread-node-detail"> {n.detail}</span> : null}
                  </span>
                  {waiting > 0 && (
                    <span className="count-badge">
                      {waiting}
                      <span className="sr-only"> waiting for you</span>
                    </span>
                  )}
                  <span className={`thread-node-status status-${n.archived ? 'archived' : n.status}`}>
                    <span className="status-dot" aria-hidden="true" />
                    {n.archived ? 'archived' : (STATUS_WORD[n.status] ?? n.status)}
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
