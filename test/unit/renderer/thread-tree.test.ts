import { describe, expect, it } from 'vitest'
import type { SessionThread } from '../../../src/renderer/src/api/types'
import { RUN_GROUP_SHOWN, ThreadStatusBoard, threadCost, threadCostText, threadNodeLabel, threadTree, treeRows } from '../../../src/renderer/src/features/thread/thread-tree'
import { money } from '../../../src/renderer/src/ui/format'

const SESSION = 'sesn_01TREE'
let clock = 0
function thread(id: string, fields: Partial<SessionThread> & { agentName?: string } = {}): SessionThread {
  const { agentName, ...rest } = fields
  return {
    type: 'session_thread',
    id,
    session_id: SESSION,
    parent_thread_id: 'sthr_01PRIMARY',
    agent: { type: 'agent', id: `agent_${id}`, version: 1, name: agentName ?? id } as unknown as SessionThread['agent'],
    status: 'idle',
    archived_at: null,
    created_at: new Date(Date.UTC(2026, 11, 1, 12, 0, ++clock)).toISOString(),
    updated_at: new Date(Date.UTC(2026, 11, 1, 12, 0, clock)).toISOString(),
    workflow_run_id: null,
    stats: null,
    usage: null,
    ...rest,
  }
}
const cost = (cents: string) => ({ list_cost: { amount: cents, currency: 'USD' as const } })

describe('threadTree', () => {
  const primary = thread('sthr_01PRIMARY', { parent_thread_id: null, agentName: 'lead', status: 'running', usage: cost('12') })
  const advisor = thread('sthr_01ADVISOR', { agent: { type: 'advisor', model: 'claude-opus-4-1' } as unknown as SessionThread['agent'], status: 'terminated', usage: cost('40') })
  const researcher = thread('sthr_01RESEARCHER', { agentName: 'researcher', status: 'running' })
  const writer = thread('sthr_01WRITER', { agentName: 'writer', usage: cost('3') })
  const archived = thread('sthr_01OLD', { agentName: 'tester', status: 'terminated', archived_at: '2026-12-01T12:30:00.000Z' })

  it('draws the primary first, its subagents by agent name in creation order, then the advisor consultations', () => {
    const nodes = threadTree([advisor, writer, archived, primary, researcher].sort((a, b) => b.created_at.localeCompare(a.created_at)))
    expect(nodes.map((n) => [n.kind, n.label, n.depth])).toEqual([
      ['primary', 'lead', 0],
      ['subagent', 'researcher', 1],
      ['subagent', 'writer', 1],
      ['subagent', 'tester', 1],
      ['advisor', 'Advisor', 1],
    ])
    expect(nodes.find((n) => n.kind === 'advisor')?.detail).toBe('claude-opus-4-1')
  })

  it("gives each thread its own cost: its usage.list_cost (minor units) when reported, else estimated from its tokens at its model's list price, else none", () => {
    const tokensOnly = thread('sthr_01TOKENS', { agentName: 'counter', agent: { type: 'agent', name: 'counter', model: { id: 'claude-sonnet-4-6' } } as unknown as SessionThread['agent'], usage: { input_tokens: 1_000_000, output_tokens: 100_000 } })
    const nodes = threadTree([primary, writer, researcher, advisor, tokensOnly])
    expect(Object.fromEntries(nodes.map((n) => [n.label, n.cost]))).toEqual({
      lead: { usd: 0.12, reported: true },
      writer: { usd: 0.03, reported: true },
      researcher: undefined,
      counter: { usd: 4.5, reported: false },
      Advisor: { usd: 0.4, reported: true },
    })
    expect(threadCostText(nodes.find((n) => n.label === 'counter')!, money)).toBe('≈ $4.50')
    expect(threadCostText(nodes.find((n) => n.label === 'researcher')!, money)).toBe('—')
    expect(threadCost({ agent: primary.agent, usage: { list_cost: { amount: '1.5', currency: 'USD' } } })).toBeUndefined()
  })

  it('shows an archived thread as archived and terminated, whatever the stream said of it', () => {
    const live = new Map([['sthr_01OLD', 'idle' as const]])
    const node = threadTree([primary, archived], live).find((n) => n.id === 'sthr_01OLD')!
    expect(node).toMatchObject({ archived: true, status: 'terminated' })
    expect(threadNodeLabel(node, money)).toBe('tester · archived')
  })

  it("takes each thread's live status from the stream's session.thread_status_* events over the objects read before", () => {
    const board = new ThreadStatusBoard()
    expect(board.apply({ type: 'session.thread_status_idle', session_thread_id: 'sthr_01RESEARCHER' })).toEqual({ changed: true, settled: true })
    expect(board.apply({ type: 'session.thread_status_running', session_thread_id: 'sthr_01WRITER' })).toEqual({ changed: true, settled: false })
    expect(board.apply({ type: 'session.thread_status_running', session_thread_id: 'sthr_01WRITER' })).toEqual({ changed: false, settled: false })
    // A session-level status event is the aggregate: it sets no thread's status.
    expect(board.apply({ type: 'session.status_idle' })).toEqual({ changed: false, settled: false })
    // A thread event that is no status event sets nothing either.
    expect(board.apply({ type: 'agent.message', session_thread_id: 'sthr_01WRITER' })).toEqual({ changed: false, settled: false })
    const nodes = threadTree([primary, researcher, writer], board.snapshot())
    expect(Object.fromEntries(nodes.map((n) => [n.label, n.status]))).toEqual({ lead: 'running', researcher: 'idle', writer: 'running' })
    expect(board.apply({ type: 'session.thread_status_terminated', session_thread_id: 'sthr_01WRITER' }).settled).toBe(true)
    expect(threadTree([primary, writer], board.snapshot())[1].status).toBe('terminated')
  })

  it("reads a session.thread_status_* that names no thread as the primary's own status", () => {
    const board = new ThreadStatusBoard()
    expect(board.apply({ type: 'session.thread_status_idle', session_thread_id: null })).toEqual({ changed: true, settled: true })
    expect(threadTree([primary, researcher], board.snapshot()).map((n) => n.status)).toEqual(['idle', 'running'])
  })

  it('names an inline agent as such and reads a screen-reader label with status and cost', () => {
    const inline = thread('sthr_01INLINE', { agent: { type: 'inline', name: 'grader', model: 'claude-sonnet-4-5' } as unknown as SessionThread['agent'], usage: cost('7') })
    const [lead, node] = threadTree([primary, inline])
    expect(node).toMatchObject({ kind: 'subagent', label: 'grader', detail: 'inline' })
    expect(threadNodeLabel(node, money)).toBe('grader · idle · $0.07')
    expect(threadNodeLabel(lead, money)).toBe('lead (primary) · running · $0.12')
  })
})

describe('treeRows', () => {
  const primary = thread('sthr_01P', { parent_thread_id: null, agentName: 'lead' })
  const sub = thread('sthr_01SUB', { agentName: 'researcher' })
  const runThreads = Array.from({ length: 150 }, (_, i) => thread(`sthr_01R${String(i).padStart(3, '0')}`, { agentName: 'reviewer', workflow_run_id: 'wrun_01A', ...(i < 40 ? { archived_at: '2026-12-01T13:00:00.000Z', status: 'terminated' as const } : { status: 'running' as const }) }))
  const nodes = threadTree([primary, sub, ...runThreads])
  const info = new Map([['wrun_01A', { name: 'review all', counts: { started: 150, working: 100, waiting: 2, done: 37, failed: 11 }, open: true }]])

  it("gathers a workflow run's threads under one row for the run, collapsed by default, with the run's counts", () => {
    const rows = treeRows(nodes, info, new Set())
    expect(rows.map((r) => (r.type === 'run' ? `run:${r.name}:${r.threads}:${r.expanded}` : r.type === 'thread' ? r.node.label : 'more'))).toEqual(['lead', 'researcher', 'run:review all:150:false'])
    expect(rows[2]).toMatchObject({ counts: { done: 37, waiting: 2 }, open: true, hidden: 0 })
  })

  it('shows the first threads of an expanded run and how many more the card has, and the selected one wherever it is', () => {
    const rows = treeRows(nodes, info, new Set(['wrun_01A']), 'sthr_01R149')
    const inRun = rows.filter((r) => r.type === 'thread' && r.inRun === 'wrun_01A')
    expect(inRun).toHaveLength(RUN_GROUP_SHOWN + 1)
    expect(inRun.at(-1)).toMatchObject({ node: { id: 'sthr_01R149' } })
    expect(rows.find((r) => r.type === 'run')).toMatchObject({ expanded: true, hidden: 150 - RUN_GROUP_SHOWN - 1 })
    expect(rows.at(-1)).toEqual({ type: 'more', runId: 'wrun_01A', hidden: 150 - RUN_GROUP_SHOWN - 1 })
  })

  it("orders an expanded run's threads by the program's call order when it is known, not by their creation instant", () => {
    const order = new Map(runThreads.map((t, i) => [t.id, 149 - i]))
    const rows = treeRows(nodes, info, new Set(['wrun_01A']), null, (id) => order.get(id))
    const inRun = rows.filter((r) => r.type === 'thread' && r.inRun)
    expect(inRun.slice(0, 2)).toMatchObject([{ node: { id: 'sthr_01R149' } }, { node: { id: 'sthr_01R148' } }])
    // the group itself stays where the run's first thread was created
    expect(rows.map((r) => r.type).slice(0, 3)).toEqual(['thread', 'thread', 'run'])
  })

  it("counts a run not on the board yet from its threads (archived ones finished), named by its id", () => {
    const [row] = treeRows(nodes, new Map(), new Set()).filter((r) => r.type === 'run')
    expect(row).toMatchObject({ name: 'wrun_01A', counts: { started: 150, done: 40, working: 110 } })
  })
})
