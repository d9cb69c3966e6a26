/**
 * Workflow runs as Corral shows them (docs/workflows.md): the fold of a session's
 * `workflow_run.*` events into each run's facts, and the shapes of Corral's own routes
 * `GET /v1/corral/sessions/{id}/workflow_runs`, `…/{run_id}` and `…/{run_id}/logs` (the API has
 * no endpoint listing runs: spec multiagent §6.10). Plain TypeScript for all three processes.
 */

/** The seven `workflow_run.*` event types (spec §6.4), all on the primary stream. */
export const WORKFLOW_RUN_EVENT_TYPES = [
  'workflow_run.created',
  'workflow_run.status_running',
  'workflow_run.status_idle',
  'workflow_run.phase_started',
  'workflow_run.phase_ended',
  'workflow_run.error',
  'workflow_run.status_ended',
] as const

export type WorkflowRunStatus = 'running' | 'idle' | 'ended'

export interface WorkflowRunPhaseFacts {
  id: string
  name: string
  description: string | null
  /** Listed in `workflow_run.created` (an undeclared phase, opened by the program under another name, is not). */
  declared: boolean
  status: 'pending' | 'started' | 'ended'
  started_at: string | null
  ended_at: string | null
}

/** One run as its events say. */
export interface WorkflowRunFacts {
  id: string
  name: string
  description: string | null
  /** Declared phases in their order, then undeclared ones as they started. */
  phases: WorkflowRunPhaseFacts[]
  status: WorkflowRunStatus
  /** Whether the run has started executing (a status event came). */
  started: boolean
  /** Phase ids started and not yet ended → their `phase_started` event id. */
  openPhases: Map<string, string>
  /** `status_ended.result`, once ended. */
  result?: unknown
  /** Corral's `status_ended.output` (the program's return value), once ended. */
  output?: unknown
  /** The `ant__workflow_run_start` call that started it (Corral's `tool_use_id`). */
  toolUseId: string | null
  createdAt: string
  endedAt: string | null
}

/** What the fold reads of an event: the common fields and the run's. */
export interface WorkflowRunEventLike {
  id: string
  type: string
  processed_at?: string
  [field: string]: unknown
}

/**
 * Folds events (any, in log order; only the `workflow_run.*` ones are read) into each run's
 * facts, in creation order. A refused start (`workflow_run_id: null`) makes no run; events
 * after a run's `status_ended` change nothing.
 */
export function foldWorkflowRuns(events: Iterable<WorkflowRunEventLike>): Map<string, WorkflowRunFacts> {
  const runs = new Map<string, WorkflowRunFacts>()
  for (const e of events) {
    if (!e.type.startsWith('workflow_run.')) continue
    const id = e.workflow_run_id
    if (typeof id !== 'string') continue
    const at = e.processed_at ?? ''
    if (e.type === 'workflow_run.created') {
      const declared = (Array.isArray(e.phases) ? e.phases : []) as { id: string; name: string; description?: string | null }[]
      runs.set(id, {
        id,
        name: String(e.name ?? ''),
        description: (e.description as string | null | undefined) ?? null,
        phases: declared.map((p) => ({ id: p.id, name: p.name, description: p.description ?? null, declared: true, status: 'pending', started_at: null, ended_at: null })),
        status: 'idle',
        started: false,
        openPhases: new Map(),
        toolUseId: typeof e.tool_use_id === 'string' ? e.tool_use_id : null,
        createdAt: at,
        endedAt: null,
      })
      continue
    }
    const r = runs.get(id)
    if (!r || r.status === 'ended') continue
    switch (e.type) {
      case 'workflow_run.status_running':
        r.status = 'running'
        r.started = true
        break
      case 'workflow_run.status_idle':
        r.status = 'idle'
        r.started = true
        break
      case 'workflow_run.phase_started': {
        const pid = String(e.workflow_run_phase_id)
        r.openPhases.set(pid, e.id)
        let ph = r.phases.find((p) => p.id === pid)
        if (!ph) r.phases.push((ph = { id: pid, name: pid, description: null, declared: false, status: 'pending', started_at: null, ended_at: null }))
        ph.status = 'started'
        ph.started_at = at
        break
      }
      case 'workflow_run.phase_ended': {
        const pid = String(e.workflow_run_phase_id)
        r.openPhases.delete(pid)
        const ph = r.phases.find((p) => p.id === pid)
        if (ph) (ph.status = 'ended'), (ph.ended_at = at)
        break
      }
      case 'workflow_run.status_ended':
        r.status = 'ended'
        r.result = e.result
        r.output = e.output
        r.endedAt = at
        break
    }
  }
  return runs
}

/** The run's agents by state (docs/workflows.md, "The routes"). */
export interface WorkflowRunAgentCounts {
  /** Agent calls that got a thread. */
  started: number
  /** Their thread is running (or rescheduling). */
  working: number
  /** Their thread is idle without an answer yet: waiting on the client (a confirmation, a custom tool) or paused at the budget. */
  waiting: number
  /** Answered: the program has the agent's text. */
  done: number
  /** Failed: the call rejected, or the thread was stopped before it answered. */
  failed: number
}

/** `GET /v1/corral/sessions/{id}/workflow_runs` (each row) and `…/{run_id}` (with `agents_list`). */
export interface WorkflowRunView {
  type: 'workflow_run'
  id: string
  session_id: string
  name: string
  description: string | null
  status: WorkflowRunStatus
  phases: WorkflowRunPhaseFacts[]
  agents: WorkflowRunAgentCounts
  /** `{type: completed} | {type: stopped} | {type: error, error: {type, message}}` once ended, else null. */
  result: unknown
  /** The program's return value (JSON, at most 64 KiB) once it completed, else null. */
  output: unknown
  /** The run's threads' list cost so far (archived ones included), `{amount, currency}` in whole cents as the API writes amounts (the sum of each thread's rounded figure). */
  list_cost: { amount: string; currency: 'USD' } | null
  /** Lines the program logged (read them from `…/logs`). */
  log_lines: number
  created_at: string
  ended_at: string | null
}

/** One agent of a run (`…/{run_id}` `agents_list`, in call order). */
export interface WorkflowRunAgentView {
  session_thread_id: string
  agent_name: string
  /** The call's `options.label`. */
  label: string | null
  /** The `agent()` call's index in the program. */
  call_index: number | null
  state: 'working' | 'waiting' | 'done' | 'failed'
  /** The thread's status (the threads API's). */
  thread_status: string
  /** Why it failed (server-written, as the program's AgentError says), when it failed. */
  error: string | null
  created_at: string
  archived_at: string | null
  list_cost: { amount: string; currency: string } | null
}

export interface WorkflowRunDetailView extends WorkflowRunView {
  agents_list: WorkflowRunAgentView[]
}

/** `GET /v1/corral/sessions/{id}/workflow_runs/{run_id}/logs`: a page of log lines. */
export interface WorkflowRunLogPage {
  data: { line: number; text: string }[]
  next_page: string | null
}
