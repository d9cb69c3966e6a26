/**
 * A session's workflow runs as the run card draws them: a fold over the run's events on the
 * session stream (docs/workflows.md, "The events"): `workflow_run.*` for the run, its phases and
 * its result, and the `session.thread_*` events of the threads whose `session.thread_created`
 * names the run, for its agents. Pure: no DOM, no React.
 *
 * Incremental: `apply` costs O(1) map work per event plus one copy of the run it changes (a run
 * object and its `agents` array are replaced, never mutated, so React sees what moved), so a
 * 1,000-agent run is folded as its events come, never by re-reading the log.
 */
import { WORKFLOW_RUN_EVENT_TYPES } from '../../../../shared/api/workflow-runs'

/** What one agent of a run is doing, from its thread's events. */
export type RunAgentStatus =
  /** created, its brain not yet working */
  | 'starting'
  | 'working'
  /** its thread idles `requires_action`: a confirmation or a custom tool result is asked of the person */
  | 'waiting'
  /** its thread idles at the session's budget */
  | 'paused'
  /** its turn ended (`end_turn`): the program has its answer */
  | 'done'
  /** its thread failed (retries exhausted, a refusal) or was terminated before its answer */
  | 'failed'
  /** archived by the run's end while it still worked (a stopped run, a timeout, an error) */
  | 'stopped'

export interface RunAgent {
  threadId: string
  agentName: string
  /** The call's `options.label` (Corral's `workflow_label`), null when it gave none. */
  label: string | null
  /** The program's call index (Corral's `workflow_call_index`). */
  callIndex?: number
  /** The phase it was started in: the innermost phase open at its creation, null outside phases. */
  phaseId: string | null
  status: RunAgentStatus
  /** The idle's stop reason when it failed, waits or paused (`retries_exhausted`, `requires_action`, …). */
  stopReason?: string
  /** Its `session.thread_created`'s processed_at. */
  startedAt?: string
  /** When it finished (done, failed, stopped): the deciding event's processed_at. */
  endedAt?: string
  archived: boolean
}

export interface RunPhase {
  id: string
  name: string
  description: string | null
  /** False for a phase the program entered without declaring it (its name is not on the wire). */
  declared: boolean
  startedAt?: string
  endedAt?: string
  /** Agents started while this was the innermost open phase, and how many of them are done. */
  agents: number
  done: number
}

export interface RunCounts {
  started: number
  /** starting or working */
  working: number
  waiting: number
  paused: number
  done: number
  failed: number
  stopped: number
}

export type RunResult = { type: 'completed' } | { type: 'stopped' } | { type: 'error'; errorType: string; message: string }

export interface RunState {
  id: string
  name: string
  description: string | null
  /** The `workflow_run.created` event: where the card sits in the timeline. */
  createdEventId: string
  createdAt?: string
  /** The `ant__workflow_run_start` call (Corral's `tool_use_id`), when known. */
  toolUseId?: string
  status: 'created' | 'running' | 'idle' | 'ended'
  phases: RunPhase[]
  /** In creation order. */
  agents: RunAgent[]
  counts: RunCounts
  /** The error a `workflow_run.error` announced (before its `status_ended`). */
  error?: { type: string; message: string }
  result?: RunResult
  /** The program's return value (Corral's `output` on `status_ended`); `hasOutput` tells a null output from none (a run that did not complete has none unless it says otherwise). */
  output?: unknown
  hasOutput: boolean
  endedAt?: string
  /** Bumped on every change: a cheap "did it move" for memoized views. */
  revision: number
}

/** The event types the board reads (a typed `events.list` reads exactly these). */
export const RUN_BOARD_EVENT_TYPES = [
  ...WORKFLOW_RUN_EVENT_TYPES,
  'session.thread_created',
  'session.thread_status_running',
  'session.thread_status_idle',
  'session.thread_status_rescheduled',
  'session.thread_status_terminated',
] as const

/** The fields of a logged event the board reads. */
export interface RunBoardEvent {
  id: string
  type: string
  processed_at?: string | null
  [field: string]: unknown
}

/** A start the engine refused (`workflow_run.error` with a null run id: `max_workflow_runs_error`). */
export interface RefusedRun {
  eventId: string
  at?: string
  errorType: string
  message: string
}

const ENDED: ReadonlySet<RunAgentStatus> = new Set(['done', 'failed', 'stopped'])

const EMPTY_COUNTS: RunCounts = { started: 0, working: 0, waiting: 0, paused: 0, done: 0, failed: 0, stopped: 0 }

/** The counter an agent status adds to. */
function bucket(s: RunAgentStatus): keyof Omit<RunCounts, 'started'> {
  return s === 'starting' ? 'working' : s
}

export class RunBoard {
  private readonly byId = new Map<string, RunState>()
  private readonly order: string[] = []
  /** thread id → its run and index in the run's agents. */
  private readonly threadOf = new Map<string, { runId: string; index: number }>()
  /** run id → its open phases, innermost last. */
  private readonly openPhases = new Map<string, string[]>()
  private readonly seen = new Set<string>()
  private readonly refusedStarts: RefusedRun[] = []

  /** The runs in creation order. */
  runs(): RunState[] {
    return this.order.map((id) => this.byId.get(id)!)
  }

  run(id: string): RunState | undefined {
    return this.byId.get(id)
  }

  /** The run a thread belongs to, when it is a run's thread this board has seen created. */
  runOfThread(threadId: string): string | undefined {
    return this.threadOf.get(threadId)?.runId
  }

  /** The agent of a run's thread, when known. */
  agentOfThread(threadId: string): RunAgent | undefined {
    const at = this.threadOf.get(threadId)
    return at ? this.byId.get(at.runId)?.agents[at.index] : undefined
  }

  /** Starts the engine refused (no run was created). */
  refused(): readonly RefusedRun[] {
    return this.refusedStarts
  }

  /** True when an event of this id has been folded (history and stream overlap). */
  has(eventId: string): boolean {
    return this.seen.has(eventId)
  }

  /**
   * Folds one stored event in (events of other kinds, and thread events of threads that belong
   * to no run, are ignored). Returns whether anything changed. Duplicates are ignored.
   */
  apply(e: RunBoardEvent): boolean {
    if (!e || typeof e.id !== 'string' || this.seen.has(e.id)) return false
    this.seen.add(e.id)
    const at = e.processed_at ?? undefined
    if (e.type === 'workflow_run.created') return this.created(e, at)
    if (e.type.startsWith('workflow_run.')) return this.runEvent(e, at)
    if (e.type.startsWith('session.thread_')) return this.threadEvent(e, at)
    return false
  }

  private created(e: RunBoardEvent, at: string | undefined): boolean {
    const id = str(e.workflow_run_id)
    if (!id || this.byId.has(id)) return false
    const phases = Array.isArray(e.phases) ? (e.phases as { id?: unknown; name?: unknown; description?: unknown }[]) : []
    this.byId.set(id, {
      id,
      name: str(e.name) ?? id,
      description: str(e.description) ?? null,
      createdEventId: e.id,
      createdAt: at,
      toolUseId: str(e.tool_use_id),
      status: 'created',
      phases: phases.filter((p) => typeof p?.id === 'string').map((p) => ({ id: p.id as string, name: str(p.name) ?? (p.id as string), description: str(p.description) ?? null, declared: true, agents: 0, done: 0 })),
      agents: [],
      counts: { ...EMPTY_COUNTS },
      hasOutput: false,
      revision: 0,
    })
    this.order.push(id)
    this.openPhases.set(id, [])
    return true
  }

  private runEvent(e: RunBoardEvent, at: string | undefined): boolean {
    const id = str(e.workflow_run_id)
    if (e.type === 'workflow_run.error' && !id) {
      const err = (e.error ?? {}) as { type?: unknown; message?: unknown }
      this.refusedStarts.push({ eventId: e.id, at, errorType: str(err.type) ?? 'unknown_error', message: str(err.message) ?? '' })
      return true
    }
    const run = id ? this.byId.get(id) : undefined
    if (!run) return false
    switch (e.type) {
      case 'workflow_run.status_running':
        return this.update(run, { status: run.status === 'ended' ? 'ended' : 'running' })
      case 'workflow_run.status_idle':
        return this.update(run, { status: run.status === 'ended' ? 'ended' : 'idle' })
      case 'workflow_run.phase_started': {
        const pid = str(e.workflow_run_phase_id)
        if (!pid) return false
        this.openPhases.get(run.id)!.push(pid)
        const known = run.phases.some((p) => p.id === pid)
        const phases = known
          ? run.phases.map((p) => (p.id === pid ? { ...p, startedAt: p.startedAt ?? at } : p))
          : [...run.phases, { id: pid, name: `Phase ${run.phases.length + 1}`, description: null, declared: false, startedAt: at, agents: 0, done: 0 }]
        return this.update(run, { phases })
      }
      case 'workflow_run.phase_ended': {
        const pid = str(e.workflow_run_phase_id)
        if (!pid) return false
        const open = this.openPhases.get(run.id)!
        const i = open.lastIndexOf(pid)
        if (i >= 0) open.splice(i, 1)
        return this.update(run, { phases: run.phases.map((p) => (p.id === pid ? { ...p, endedAt: p.endedAt ?? at } : p)) })
      }
      case 'workflow_run.error': {
        const err = (e.error ?? {}) as { type?: unknown; message?: unknown }
        return this.update(run, { error: { type: str(err.type) ?? 'unknown_error', message: str(err.message) ?? '' } })
      }
      case 'workflow_run.status_ended': {
        const r = (e.result ?? {}) as { type?: unknown; error?: { type?: unknown; message?: unknown } }
        let result: RunResult
        if (r.type === 'completed' || r.type === 'stopped') result = { type: r.type }
        else {
          const err = r.error ?? run.error ?? {}
          result = { type: 'error', errorType: str((err as { type?: unknown }).type) ?? 'unknown_error', message: str((err as { message?: unknown }).message) ?? '' }
        }
        this.openPhases.set(run.id, [])
        // A run that did not complete has no return value: its null output is not shown as one.
        const hasOutput = 'output' in e && (result.type === 'completed' || (e.output !== null && e.output !== undefined))
        return this.update(run, { status: 'ended', result, endedAt: at, output: e.output, hasOutput })
      }
      default:
        return false
    }
  }

  private threadEvent(e: RunBoardEvent, at: string | undefined): boolean {
    const tid = str(e.session_thread_id)
    if (!tid) return false
    if (e.type === 'session.thread_created') {
      const runId = str(e.workflow_run_id)
      const run = runId ? this.byId.get(runId) : undefined
      if (!run || this.threadOf.has(tid)) return false
      const open = this.openPhases.get(run.id)!
      const phaseId = open.length ? open[open.length - 1] : null
      const agent: RunAgent = {
        threadId: tid,
        agentName: str(e.agent_name) ?? 'agent',
        label: str(e.workflow_label) ?? null,
        callIndex: typeof e.workflow_call_index === 'number' ? e.workflow_call_index : undefined,
        phaseId,
        status: 'starting',
        startedAt: at,
        archived: false,
      }
      this.threadOf.set(tid, { runId: run.id, index: run.agents.length })
      const counts = { ...run.counts, started: run.counts.started + 1, working: run.counts.working + 1 }
      const phases = phaseId ? run.phases.map((p) => (p.id === phaseId ? { ...p, agents: p.agents + 1 } : p)) : run.phases
      return this.update(run, { agents: [...run.agents, agent], counts, phases })
    }
    const where = this.threadOf.get(tid)
    if (!where) return false
    const run = this.byId.get(where.runId)!
    const old = run.agents[where.index]
    let next: RunAgent = old
    switch (e.type) {
      case 'session.thread_status_running':
      case 'session.thread_status_rescheduled':
        if (!ENDED.has(old.status)) next = { ...old, status: 'working', stopReason: undefined }
        break
      case 'session.thread_status_idle': {
        if (ENDED.has(old.status)) break
        const reason = str((e.stop_reason as { type?: unknown } | undefined)?.type) ?? 'end_turn'
        if (reason === 'end_turn') next = { ...old, status: 'done', stopReason: undefined, endedAt: at }
        else if (reason === 'requires_action') next = { ...old, status: 'waiting', stopReason: reason }
        else if (reason === 'budget_reached') next = { ...old, status: 'paused', stopReason: reason }
        else next = { ...old, status: 'failed', stopReason: reason, endedAt: at }
        break
      }
      case 'session.thread_status_terminated': {
        const archived = e.archived === true
        if (ENDED.has(old.status)) next = archived && !old.archived ? { ...old, archived } : old
        else next = { ...old, status: run.status === 'ended' ? 'stopped' : 'failed', stopReason: run.status === 'ended' ? undefined : 'terminated', endedAt: at, archived }
        break
      }
      default:
        return false
    }
    if (next === old) return false
    const agents = run.agents.slice()
    agents[where.index] = next
    const patch: Partial<RunState> = { agents }
    if (next.status !== old.status) {
      const counts = { ...run.counts }
      counts[bucket(old.status)]--
      counts[bucket(next.status)]++
      patch.counts = counts
      const delta = (next.status === 'done' ? 1 : 0) - (old.status === 'done' ? 1 : 0)
      if (delta && old.phaseId) patch.phases = run.phases.map((p) => (p.id === old.phaseId ? { ...p, done: p.done + delta } : p))
    }
    return this.update(run, patch)
  }

  private update(run: RunState, patch: Partial<RunState>): boolean {
    this.byId.set(run.id, { ...run, ...patch, revision: run.revision + 1 })
    return true
  }
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' && v ? v : undefined
}

/** What the tree and a run thread's header call an agent's status. */
export const RUN_AGENT_WORD: Record<RunAgentStatus, string> = { starting: 'starting', working: 'working', waiting: 'waiting on you', paused: 'paused at the budget', done: 'done', failed: 'failed', stopped: 'stopped' }

/** The words of a run's result: "Completed", "Stopped", "Error: timeout error — …". */
export function runResultText(r: RunResult): string {
  if (r.type === 'completed') return 'Completed'
  if (r.type === 'stopped') return 'Stopped'
  return `Error: ${r.errorType.replace(/_/g, ' ')}${r.message ? ` — ${r.message}` : ''}`
}

/** What a run reads as in one line, as the session list and the thread tree show it: "workflow · 37/200 done". */
export function runProgressText(run: Pick<RunState, 'counts' | 'status'>): string {
  const c = run.counts
  return `workflow · ${c.done}/${c.started} done`
}

/** "3 working · 1 waiting on you · 12 done · 1 failed", leaving out the empty kinds except working and done. */
export function runCounterParts(c: RunCounts): { key: keyof RunCounts; label: string; n: number }[] {
  const parts: { key: keyof RunCounts; label: string; n: number }[] = [
    { key: 'working', label: 'working', n: c.working },
    { key: 'waiting', label: 'waiting on you', n: c.waiting },
    { key: 'done', label: 'done', n: c.done },
    { key: 'failed', label: 'failed', n: c.failed },
  ]
  if (c.paused) parts.splice(2, 0, { key: 'paused', label: 'paused at the budget', n: c.paused })
  if (c.stopped) parts.push({ key: 'stopped', label: 'stopped', n: c.stopped })
  return parts
}

/** An agent's duration in ms: to its end, or to `now` while it has not ended; undefined without a start. */
export function agentDurationMs(a: Pick<RunAgent, 'startedAt' | 'endedAt'>, now: number): number | undefined {
  if (!a.startedAt) return undefined
  const start = Date.parse(a.startedAt)
  const end = a.endedAt ? Date.parse(a.endedAt) : now
  return Number.isFinite(start) && Number.isFinite(end) ? Math.max(0, end - start) : undefined
}

/** True while the run has not ended. */
export function runOpen(run: Pick<RunState, 'status'>): boolean {
  return run.status !== 'ended'
}
