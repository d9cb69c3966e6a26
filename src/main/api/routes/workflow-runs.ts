import type { Hono } from 'hono'
import { z } from 'zod'
import { CorralError, invalid, notFound } from '../../../shared/errors'
import {
  foldWorkflowRuns,
  WORKFLOW_RUN_EVENT_TYPES,
  type WorkflowRunAgentView,
  type WorkflowRunDetailView,
  type WorkflowRunEventLike,
  type WorkflowRunFacts,
  type WorkflowRunLogPage,
  type WorkflowRunView,
} from '../../../shared/api/workflow-runs'
import type { StoredEvent } from '../../session/event-log'
import type { ApiServices } from '../services'
import { validate } from '../validate'
import { noQuery, query } from './common'

const pageQuerySchema = z.strictObject({
  limit: z.coerce.number().int().min(1).max(1000).optional(),
  page: z.string().optional(),
})
const logQuerySchema = z.strictObject({
  limit: z.coerce.number().int().min(1).max(1000).optional(),
  page: z.string().optional(),
  /** Lines after this line number (a live log's tail: the last line the reader has). */
  after_line: z.coerce.number().int().min(0).optional(),
})

const encode = (tag: string, n: number) => Buffer.from(`${tag}${n}`).toString('base64url')
function decode(tag: string, page: string): number {
  const raw = Buffer.from(page, 'base64url').toString()
  const n = Number(raw.slice(tag.length))
  if (!raw.startsWith(tag) || !Number.isInteger(n) || n < 0) throw invalid('page: not a cursor this server issued')
  return n
}

/** Every event of the given types (and thread filter) of a session, a page of the log at a time. */
function readAll(s: ApiServices, sessionId: string, p: { types: readonly string[]; threadId?: string | null }): StoredEvent[] {
  const out: StoredEvent[] = []
  let after = 0
  for (;;) {
    const page = s.log.read(sessionId, { types: p.types, threadId: p.threadId, after, limit: 1000 })
    out.push(...page)
    if (page.length < 1000) return out
    after = page[page.length - 1].seq
  }
}

/** The session's runs as their events say, in creation order (404 for an unknown session). */
function runsOf(s: ApiServices, sessionId: string): Map<string, WorkflowRunFacts> {
  s.sessions.retrieve(sessionId)
  return foldWorkflowRuns(readAll(s, sessionId, { types: WORKFLOW_RUN_EVENT_TYPES, threadId: null }).map((x) => x.event as unknown as WorkflowRunEventLike))
}

function runOf(s: ApiServices, sessionId: string, runId: string): WorkflowRunFacts {
  const r = runsOf(s, sessionId).get(runId)
  if (!r) throw notFound(`workflow run of session ${sessionId}`, runId)
  return r
}

/** Each run's agents: thread_created (label, call index), the thread (status, cost) and the journal (the answer or why it failed). */
function agentsOf(s: ApiServices, sessionId: string, runIds: ReadonlySet<string>): Map<string, WorkflowRunAgentView[]> {
  const byRun = new Map<string, WorkflowRunAgentView[]>()
  for (const id of runIds) byRun.set(id, [])
  const threads = new Map(s.threads.all(sessionId).map((t) => [t.id, t]))
  const journal = new Map<string, Map<string, { ok: boolean; message?: string } | null>>()
  const outcomeOf = (runId: string, tid: string) => {
    let m = journal.get(runId)
    if (!m) {
      m = new Map()
      for (const row of s.workflows?.calls(runId) ?? []) if (row.kind === 'agent' && row.threadId) m.set(row.threadId, row.outcome && (row.outcome.ok ? { ok: true } : { ok: false, message: row.outcome.message }))
      journal.set(runId, m)
    }
    return m.get(tid) ?? null
  }
  for (const { event } of readAll(s, sessionId, { types: ['session.thread_created'] })) {
    const e = event as unknown as { session_thread_id: string; agent_name: string; workflow_run_id?: string | null; workflow_label?: string | null; workflow_call_index?: number; processed_at: string }
    const list = e.workflow_run_id ? byRun.get(e.workflow_run_id) : undefined
    if (!list) continue
    const t = threads.get(e.session_thread_id)
    const outcome = outcomeOf(e.workflow_run_id!, e.session_thread_id)
    const status = t?.status ?? 'terminated'
    const state: WorkflowRunAgentView['state'] = outcome ? (outcome.ok ? 'done' : 'failed') : status === 'terminated' ? 'failed' : status === 'idle' ? 'waiting' : 'working'
    list.push({
      session_thread_id: e.session_thread_id,
      agent_name: e.agent_name,
      label: e.workflow_label ?? null,
      call_index: typeof e.workflow_call_index === 'number' ? e.workflow_call_index : null,
      state,
      thread_status: status,
      error: outcome && !outcome.ok ? (outcome.message ?? null) : state === 'failed' ? 'its thread was stopped before it answered' : null,
      created_at: e.processed_at,
      archived_at: t?.archived_at ?? null,
      list_cost: (t?.usage as { list_cost?: { amount: string; currency: string } } | null | undefined)?.list_cost ?? null,
    })
  }
  return byRun
}

function view(s: ApiServices, sessionId: string, r: WorkflowRunFacts, agents: readonly WorkflowRunAgentView[]): WorkflowRunView {
  const count = (state: WorkflowRunAgentView['state']) => agents.filter((a) => a.state === state).length
  const costs = agents.map((a) => a.list_cost).filter((c): c is { amount: string; currency: string } => !!c)
  return {
    type: 'workflow_run',
    id: r.id,
    session_id: sessionId,
    name: r.name,
    description: r.description,
    status: r.status,
    phases: r.phases,
    agents: { started: agents.length, working: count('working'), waiting: count('waiting'), done: count('done'), failed: count('failed') },
    result: r.result ?? null,
    output: r.status === 'ended' ? (r.output ?? null) : null,
    list_cost: costs.length ? { amount: String(costs.reduce((n, c) => n + Number(c.amount), 0)), currency: 'USD' } : null,
    log_lines: s.workflows?.logCount(r.id) ?? 0,
    created_at: r.createdAt,
    ended_at: r.endedAt,
  }
}

/**
 * Corral's own routes for a session's workflow runs (docs/workflows.md, "The routes"): what a
 * run card needs that the events do not carry in one place — each run's status, phases, agent
 * counts, output and cost, a run's agents, and the program's log lines (kept in the journal,
 * never on the stream).
 */
export function workflowRunRoutes(app: Hono, s: ApiServices): void {
  app.get('/v1/corral/sessions/:id/workflow_runs', (c) => {
    const q = validate(pageQuerySchema, query(c), 'query')
    const sid = c.req.param('id')
    const runs = [...runsOf(s, sid).values()]
    const start = q.page !== undefined ? decode('r', q.page) : 0
    const limit = q.limit ?? 100
    const slice = runs.slice(start, start + limit)
    const agents = agentsOf(s, sid, new Set(slice.map((r) => r.id)))
    const end = start + slice.length
    return c.json({ data: slice.map((r) => view(s, sid, r, agents.get(r.id) ?? [])), next_page: end < runs.length ? encode('r', end) : null })
  })
  app.get('/v1/corral/sessions/:id/workflow_runs/:runId', (c) => {
    noQuery(c)
    const sid = c.req.param('id')
    const r = runOf(s, sid, c.req.param('runId'))
    const agents = agentsOf(s, sid, new Set([r.id])).get(r.id) ?? []
    const detail: WorkflowRunDetailView = { ...view(s, sid, r, agents), agents_list: agents }
    return c.json(detail)
  })
  app.get('/v1/corral/sessions/:id/workflow_runs/:runId/logs', (c) => {
    const q = validate(logQuerySchema, query(c), 'query')
    if (q.page !== undefined && q.after_line !== undefined) throw invalid('query: give page or after_line, not both')
    const sid = c.req.param('id')
    const r = runOf(s, sid, c.req.param('runId'))
    if (!s.workflows) throw new CorralError('not_found_error', 'this engine keeps no workflow journal')
    const limit = q.limit ?? 100
    const after = q.page !== undefined ? decode('l', q.page) : (q.after_line ?? 0)
    const data = s.workflows.logs(r.id, { after, limit })
    // one probe for "is there more" (a read is capped at 1000, so limit + 1 would not do at 1000)
    const more = data.length === limit && s.workflows.logs(r.id, { after: data[data.length - 1].line, limit: 1 }).length > 0
    const page: WorkflowRunLogPage = { data, next_page: more && data.length ? encode('l', data[data.length - 1].line) : null }
    return c.json(page)
  })
}
