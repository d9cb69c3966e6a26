/**
 * The session's thread tree as the session view draws it: the primary thread, its subagent
 * threads by agent name, and its advisor consultations, each with its status and cost. Pure: no
 * DOM, no React.
 *
 * Two sources, each for what it is freshest at: the thread objects (`GET /threads`: agent,
 * parent, archived, `usage.list_cost`, re-read when a thread goes idle) and the stream's
 * `session.thread_status_*` events (status, live). `ThreadStatusBoard` folds the latter;
 * `threadTree` joins both.
 */
import { statusChangeOf, type ThreadStatus } from '../../../../shared/api/events'
import type { SessionThread } from '../../api/types'
import { modelIdOf, sessionCost, type Cost } from '../../ui/format'

/** The agent name the platform gives an advisor consultation (spec §7.3). */
export const ADVISOR_AGENT_NAME = 'anthropic.advisor'

export type ThreadKind = 'primary' | 'subagent' | 'advisor' | 'workflow'

export interface ThreadNode {
  id: string
  kind: ThreadKind
  /** What the person reads: the agent's name; "Advisor" for a consultation. */
  label: string
  /** A second word: the advisor's model, "inline" for an inline agent, the workflow run. */
  detail?: string
  status: ThreadStatus
  /** Archived threads read `terminated` in the API; the tree says "archived". */
  archived: boolean
  /** The thread's own cost (threadCost): reported by the engine, or estimated from its tokens. */
  cost?: Cost
  parentId: string | null
  /** 0 for the primary, 1 for its children (delegation is one level deep). */
  depth: number
  /** A workflow run's thread: its run. */
  runId?: string
}

/** The kind of a thread object, from its agent snapshot and workflow run. */
export function threadKind(t: Pick<SessionThread, 'parent_thread_id' | 'agent' | 'workflow_run_id'>): ThreadKind {
  if (t.parent_thread_id === null) return 'primary'
  const agent = t.agent as { type?: string; name?: string }
  if (agent.type === 'advisor' || agent.name === ADVISOR_AGENT_NAME) return 'advisor'
  if (t.workflow_run_id) return 'workflow'
  return 'subagent'
}

/**
 * A thread's cost: its own `usage.list_cost` when the engine reports one (minor units: an integer
 * string of cents), else estimated from its tokens at its model's list prices, as the session
 * header does (`reported: false`, drawn "≈"); undefined before its first model request ends or
 * for a model without a known price.
 */
export function threadCost(t: Pick<SessionThread, 'usage' | 'agent'>): Cost | undefined {
  if (!t.usage) return undefined
  const cost = t.usage.list_cost
  if (cost && (cost.currency !== 'USD' || !/^\d+$/.test(cost.amount))) return undefined
  return sessionCost(t.usage, modelIdOf((t.agent as { model?: unknown }).model))
}

function nodeOf(t: SessionThread, status: ThreadStatus): ThreadNode {
  const kind = threadKind(t)
  const agent = t.agent as { type?: string; name?: string; model?: unknown }
  const model = modelIdOf(agent.model)
  const label = kind === 'advisor' ? 'Advisor' : (agent.name ?? t.id)
  const detail = kind === 'advisor' ? model : kind === 'workflow' ? (t.workflow_run_id ?? undefined) : agent.type === 'inline' ? 'inline' : undefined
  return {
    id: t.id,
    kind,
    label,
    detail,
    status: t.archived_at ? 'terminated' : status,
    archived: t.archived_at !== null,
    cost: threadCost(t),
    parentId: t.parent_thread_id,
    depth: t.parent_thread_id === null ? 0 : 1,
    ...(kind === 'workflow' && t.workflow_run_id ? { runId: t.workflow_run_id } : {}),
  }
}

/**
 * The tree, flattened in the order it is drawn: the primary first, then under it its subagent
 * (and workflow) threads in creation order, then its advisor consultations in creation order.
 * `live` overrides a thread's status with what the stream said since the objects were read; an
 * archived thread stays `terminated` whatever it says. Threads whose parent is not in the list
 * are drawn under the primary (delegation is one level deep).
 */
export function threadTree(threads: readonly SessionThread[], live: ReadonlyMap<string, ThreadStatus> = new Map()): ThreadNode[] {
  const status = (t: SessionThread) => live.get(t.id) ?? (t.parent_thread_id === null ? live.get(PRIMARY_KEY) : undefined) ?? t.status
  const primary = threads.find((t) => t.parent_thread_id === null)
  const byTime = (a: SessionThread, b: SessionThread) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id)
  const children = threads.filter((t) => t !== primary).sort(byTime)
  const out: ThreadNode[] = []
  if (primary) out.push(nodeOf(primary, status(primary)))
  for (const t of children) if (threadKind(t) !== 'advisor') out.push(nodeOf(t, status(t)))
  for (const t of children) if (threadKind(t) === 'advisor') out.push(nodeOf(t, status(t)))
  return out
}

/** The board's key for a `session.thread_status_*` that names no thread: the primary's own. */
export const PRIMARY_KEY = ''

/**
 * The statuses the stream announced, by thread id. `session.thread_status_*` names its thread
 * (a child's, or the primary's own; one naming none is the primary's, PRIMARY_KEY); a
 * session-level status event is the aggregate and says nothing about any one thread. `apply` returns true when a thread went idle or terminated,
 * which is when its cost moved (the view re-reads the thread objects then).
 */
export class ThreadStatusBoard {
  private readonly statuses = new Map<string, ThreadStatus>()

  apply(e: { type: string; session_thread_id?: string | null }): { changed: boolean; settled: boolean } {
    const c = statusChangeOf(e)
    if (!c || c.scope !== 'thread') return { changed: false, settled: false }
    const key = c.thread ?? PRIMARY_KEY
    const before = this.statuses.get(key)
    this.statuses.set(key, c.status)
    return { changed: before !== c.status, settled: c.status === 'idle' || c.status === 'terminated' }
  }

  /** A snapshot for threadTree (a new Map each time, so React sees the change). */
  snapshot(): ReadonlyMap<string, ThreadStatus> {
    return new Map(this.statuses)
  }
}

/** "$0.04", or "≈ $0.04" for an estimate; "—" when there is none yet. */
export function threadCostText(n: Pick<ThreadNode, 'cost'>, money: (usd: number) => string): string {
  if (!n.cost) return '—'
  return `${n.cost.reported ? '' : '≈ '}${money(n.cost.usd)}`
}

/** "researcher · idle · $0.04" — a node's tooltip. */
export function threadNodeLabel(n: ThreadNode, money: (usd: number) => string): string {
  const parts = [n.kind === 'primary' ? `${n.label} (primary)` : n.kind === 'advisor' ? `Advisor consultation${n.detail ? ` on ${n.detail}` : ''}` : n.label]
  parts.push(n.archived ? 'archived' : n.status)
  if (n.cost) parts.push(threadCostText(n, money))
  return parts.join(' · ')
}

/** What the tree needs of a workflow run to group its threads: its name and its agents' counts. */
export interface RunGroupInfo {
  name: string
  counts: { started: number; working: number; waiting: number; done: number; failed: number }
  open: boolean
}

/** A row of the tree as drawn: a thread, or a workflow run's group (its threads follow it when expanded). */
export type TreeRow =
  | { type: 'thread'; node: ThreadNode; inRun?: string }
  | { type: 'run'; runId: string; name: string; threads: number; expanded: boolean; counts?: RunGroupInfo['counts']; open?: boolean; hidden: number }
  /** After an expanded run's threads: how many more it has than the tree shows. */
  | { type: 'more'; runId: string; hidden: number }

/** A run's group shows at most this many of its threads when expanded (its card's grid has them all). */
export const RUN_GROUP_SHOWN = 100

/**
 * The tree's rows: the nodes in threadTree's order, with each workflow run's threads gathered under
 * one row for the run, where its first thread would be, collapsed unless `expanded` names the run;
 * an expanded group shows its first RUN_GROUP_SHOWN threads (and the one `selected`, wherever it
 * is), in the program's call order when `rank` knows it (the run board's), else in creation order.
 * `runs` gives a run's name and its live counts (the run board); a run not in it is named by its
 * id and counted from its threads.
 */
export function treeRows(nodes: readonly ThreadNode[], runs: ReadonlyMap<string, RunGroupInfo>, expanded: ReadonlySet<string>, selected: string | null = null, rank?: (threadId: string) => number | undefined): TreeRow[] {
  const byRun = new Map<string, ThreadNode[]>()
  const firstOf = new Map<string, ThreadNode>()
  for (const n of nodes) if (n.runId) {
    const list = byRun.get(n.runId)
    if (list) list.push(n)
    else byRun.set(n.runId, [n])
  }
  if (rank) {
    for (const [runId, list] of byRun) {
      const first = list[0]
      const sorted = list.map((m, i) => ({ m, r: rank(m.id) ?? Number.MAX_SAFE_INTEGER, i })).sort((a, b) => a.r - b.r || a.i - b.i).map((x) => x.m)
      // the group stays where its first-created thread is
      byRun.set(runId, sorted)
      firstOf.set(runId, first)
    }
  }
  const out: TreeRow[] = []
  for (const n of nodes) {
    if (!n.runId) {
      out.push({ type: 'thread', node: n })
      continue
    }
    const members = byRun.get(n.runId)
    if (!members || (firstOf.get(n.runId) ?? members[0]) !== n) continue
    const info = runs.get(n.runId)
    const open = expanded.has(n.runId)
    const shown = open ? members.filter((m, i) => i < RUN_GROUP_SHOWN || m.id === selected) : []
    const hidden = open ? members.length - shown.length : 0
    out.push({ type: 'run', runId: n.runId, name: info?.name ?? n.runId, threads: members.length, expanded: open, counts: info?.counts ?? countsOf(members), open: info?.open, hidden })
    for (const m of shown) out.push({ type: 'thread', node: m, inRun: n.runId })
    if (hidden > 0) out.push({ type: 'more', runId: n.runId, hidden })
  }
  return out
}

/**
 * A run's counts from its thread objects alone (before its board has read it): a run's thread is
 * archived once the program has its answer, so archived (or terminated) is finished, the rest works.
 */
function countsOf(members: readonly ThreadNode[]): RunGroupInfo['counts'] {
  const c = { started: members.length, working: 0, waiting: 0, done: 0, failed: 0 }
  for (const m of members) {
    if (m.archived || m.status === 'terminated') c.done++
    else c.working++
  }
  return c
}
