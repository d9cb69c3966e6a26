/**
 * The workflow tools (issue #12), platform tools of the primary thread when the session's
 * roster enables `multiagent.workflows`: `ant__workflow_run_start`, `ant__workflow_run_status`,
 * `ant__workflow_run_stop`. Their contract is in docs/workflows.md. The start tool checks the
 * program and the open-run limit and writes `workflow_run.created` in the batch of its result;
 * the orchestrator (orchestrator/workflow-runs.ts) runs the program from there.
 */
import { newId } from '../../../shared/api/ids'
import { foldWorkflowRuns, type WorkflowRunEventLike, type WorkflowRunFacts } from '../../../shared/api/workflow-runs'
import type { EventInput } from '../../session/event-log'
import type { ViewEvent } from '../context/view'
import type { PlatformOfferContext, PlatformTool, PlatformToolContext, PlatformToolResult } from '../platform-tools'
import { checkProgramSyntax, quickJS } from './program'

export const WORKFLOW_RUN_START_TOOL = 'ant__workflow_run_start'
export const WORKFLOW_RUN_STATUS_TOOL = 'ant__workflow_run_status'
export const WORKFLOW_RUN_STOP_TOOL = 'ant__workflow_run_stop'

/** Open runs a session may have at once (idle ones count). */
export const MAX_OPEN_WORKFLOW_RUNS = 10
/** A run's longest (and default) lifetime. */
export const MAX_WORKFLOW_TIMEOUT_SECONDS = 86_400

const offeredToLead = (ctx: PlatformOfferContext) => ctx.threadKey === null && ctx.roster?.workflows?.enabled === true
const fail = (text: string, events?: EventInput[]): PlatformToolResult => ({ outcome: { content: text, isError: true }, events })
const truncate = (s: string, n: number) => (s.length > n ? s.slice(0, n) : s)

/** A session's runs as its primary's events say (created, status, phases, end): the shared fold. */
export type RunFacts = WorkflowRunFacts

/** Folds the primary's `workflow_run.*` events into each run's facts, in creation order. */
export function workflowRuns(events: readonly ViewEvent[]): Map<string, RunFacts> {
  return foldWorkflowRuns(events.map((v) => v.event as unknown as WorkflowRunEventLike))
}

const openCount = (runs: Map<string, RunFacts>) => [...runs.values()].filter((r) => r.status !== 'ended').length

export const workflowRunStartTool: PlatformTool = {
  name: WORKFLOW_RUN_START_TOOL,
  definition: {
    name: WORKFLOW_RUN_START_TOOL,
    description:
      'Start a workflow run: a JavaScript program (the body of an async function) that Corral runs in the background and that starts many agents. ' +
      'Globals: agent(spec, prompt, options?) → Promise<string> (spec: a predefined workflow agent\'s name, "self", or { name, system, description? } for an inline agent; ' +
      'options: { label? }; resolves with the agent\'s final text, rejects with an Error naming why its thread failed), phase(name, fn) → Promise (runs fn inside the named phase), ' +
      'log(...values), and args (your args). The function\'s return value (JSON) is the run\'s output. There is no Date, Math.random, timers, fetch or import: a program is deterministic. ' +
      `At most 64 agents work at once, 1,000 per run. Returns at once with {"workflow_run_id": "wrun_…"}; when the run ends you get a message with its result and output. At most ${MAX_OPEN_WORKFLOW_RUNS} runs open at once.`,
    input_schema: {
      type: 'object',
      properties: {
        name: { type: 'string', description: 'A short name for the run (64 characters are kept)' },
        description: { type: 'string', description: 'What the run does (256 characters are kept)' },
        phases: {
          type: 'array',
          description: 'The phases the program will open with phase(name, fn), in order',
          items: { type: 'object', properties: { name: { type: 'string' }, description: { type: 'string' } }, required: ['name'] },
        },
        timeout_seconds: { type: 'number', description: `The run's lifetime in seconds (at most ${MAX_WORKFLOW_TIMEOUT_SECONDS}, the default)` },
        args: { description: 'Any JSON value: the program\'s args' },
        program: { type: 'string', description: 'The program: the body of an async function' },
      },
      required: ['name', 'program'],
    },
  },
  offered: offeredToLead,
  async run(ctx) {
    const input = ctx.call.input
    const refuse = (field: string, rule: string) => fail(`${WORKFLOW_RUN_START_TOOL}: ${field} ${rule}.`)
    if (typeof input.name !== 'string' || !input.name.trim()) return refuse('name', 'is required and must be a non-empty string')
    if (input.description !== undefined && input.description !== null && typeof input.description !== 'string') return refuse('description', 'must be a string')
    if (typeof input.program !== 'string' || !input.program.trim()) return refuse('program', 'is required and must be a non-empty string (the body of an async function)')
    const timeout = input.timeout_seconds
    if (timeout !== undefined && (typeof timeout !== 'number' || !Number.isFinite(timeout) || timeout <= 0 || timeout > MAX_WORKFLOW_TIMEOUT_SECONDS)) {
      return refuse('timeout_seconds', `must be a number of seconds above 0 and at most ${MAX_WORKFLOW_TIMEOUT_SECONDS}`)
    }
    const phasesIn = input.phases ?? []
    if (!Array.isArray(phasesIn)) return refuse('phases', 'must be an array of { name, description? }')
    for (let i = 0; i < phasesIn.length; i++) {
      const ph = phasesIn[i] as { name?: unknown; description?: unknown } | null
      if (!ph || typeof ph !== 'object' || typeof ph.name !== 'string' || !ph.name.trim()) return refuse(`phases[${i}].name`, 'is required and must be a non-empty string')
      if (ph.description !== undefined && ph.description !== null && typeof ph.description !== 'string') return refuse(`phases[${i}].description`, 'must be a string')
    }
    const syntax = checkProgramSyntax(await quickJS(), input.program)
    if (syntax) return fail(`${WORKFLOW_RUN_START_TOOL}: the program does not parse: ${syntax.message} (line ${syntax.line}, column ${syntax.column}).`)
    const runs = workflowRuns(ctx.events)
    if (openCount(runs) >= MAX_OPEN_WORKFLOW_RUNS) {
      const message = `This session already has ${MAX_OPEN_WORKFLOW_RUNS} open workflow runs, the most it may have at once; wait for one to end or stop one.`
      return fail(`${WORKFLOW_RUN_START_TOOL}: ${message}`, [{ type: 'workflow_run.error', workflow_run_id: null, error: { type: 'max_workflow_runs_error', message } }])
    }
    const id = newId('workflowRun')
    const phases = (phasesIn as { name: string; description?: string | null }[]).map((ph) => ({ id: newId('workflowPhase'), name: truncate(ph.name, 64), description: ph.description ? truncate(ph.description, 256) : null }))
    const created: EventInput = {
      type: 'workflow_run.created',
      workflow_run_id: id,
      name: truncate(input.name, 64),
      description: typeof input.description === 'string' ? truncate(input.description, 256) : null,
      phases,
      tool_use_id: ctx.call.id,
    }
    return { outcome: { content: JSON.stringify({ workflow_run_id: id }), isError: false }, events: [created] }
  },
}

/** Log lines the status tool shows of one run: the last LOG_TAIL, or LOG_PAGE after `log_after`. */
const LOG_TAIL = 20
const LOG_PAGE = 50
/** A log line's characters in the tool's result (a line is kept whole, up to 4,096, with the run). */
const LOG_LINE_CHARS = 500

/** What the status tool says of a run's log: how many lines, and the lines asked for (with where the next page starts). */
function runLog(runId: string, ctx: PlatformToolContext, after: number | undefined): Record<string, unknown> | undefined {
  const source = ctx.workflowLogs
  if (!source) return undefined
  const total = source.count(runId)
  const from = after ?? Math.max(0, total - LOG_TAIL)
  const lines = source.lines(runId, { after: from, limit: after === undefined ? LOG_TAIL : LOG_PAGE })
  const out: Record<string, unknown> = {
    total_lines: total,
    lines: lines.map((l) => ({ line: l.line, text: l.text.length > LOG_LINE_CHARS ? `${l.text.slice(0, LOG_LINE_CHARS)}…` : l.text })),
  }
  const last = lines.at(-1)?.line ?? from
  if (last < total) out.next_log_after = last
  return out
}

/** What the status tool says of one run (`log`: its program's log lines, asked for one run at a time). */
function runStatus(r: RunFacts, ctx: PlatformToolContext, log?: { after?: number }): Record<string, unknown> {
  const threads = [...ctx.threads.children.values()].filter((c) => c.workflowRunId === r.id)
  let running = 0
  let done = 0
  let failed = 0
  for (const t of threads) {
    if (t.status !== 'terminated' && !(t.status === 'idle' && t.lastIdle && t.lastIdle.type !== 'requires_action' && t.lastIdle.type !== 'budget_reached')) running++
    else if (t.lastIdle?.type === 'end_turn') done++
    else failed++
  }
  const phaseName = (pid: string) => r.phases.find((p) => p.id === pid)?.name ?? pid
  const out: Record<string, unknown> = {
    workflow_run_id: r.id,
    name: r.name,
    status: r.status,
    open_phases: [...r.openPhases.keys()].map(phaseName),
    agents: { started: threads.length, running, done, failed },
  }
  if (r.status === 'ended') {
    out.result = r.result
    out.output = r.output ?? null
  }
  if (log) {
    const lines = runLog(r.id, ctx, log.after)
    if (lines) out.log = lines
  } else if (ctx.workflowLogs) out.log_lines = ctx.workflowLogs.count(r.id)
  return out
}

export const workflowRunStatusTool: PlatformTool = {
  name: WORKFLOW_RUN_STATUS_TOOL,
  definition: {
    name: WORKFLOW_RUN_STATUS_TOOL,
    description:
      'The status of your workflow runs (or of one): its status (running, idle, ended), open phases, counts of agents started / running / done / failed, its result and output once ended, and how many lines its program logged. ' +
      `With workflow_run_id, also the lines its program logged with log(): the last ${LOG_TAIL}, or with log_after the next ${LOG_PAGE} after that line number (next_log_after says where the page after starts).`,
    input_schema: {
      type: 'object',
      properties: {
        workflow_run_id: { type: 'string', description: 'One run; all runs of the session without it' },
        log_after: { type: 'integer', minimum: 0, description: `With workflow_run_id: the log lines after this line number (lines are numbered from 1), ${LOG_PAGE} at most` },
      },
    },
  },
  offered: offeredToLead,
  async run(ctx) {
    const id = ctx.call.input.workflow_run_id
    if (id !== undefined && typeof id !== 'string') return fail(`${WORKFLOW_RUN_STATUS_TOOL}: workflow_run_id must be a string.`)
    const after = ctx.call.input.log_after
    if (after !== undefined && (typeof after !== 'number' || !Number.isInteger(after) || after < 0)) return fail(`${WORKFLOW_RUN_STATUS_TOOL}: log_after must be a line number (an integer, 0 or more).`)
    if (after !== undefined && id === undefined) return fail(`${WORKFLOW_RUN_STATUS_TOOL}: log_after needs workflow_run_id (a run's log is read one run at a time).`)
    const runs = workflowRuns(ctx.events)
    if (typeof id === 'string') {
      const r = runs.get(id)
      if (!r) return fail(`${WORKFLOW_RUN_STATUS_TOOL}: workflow_run_id ${id} is not a run of this session.`)
      return { outcome: { content: JSON.stringify(runStatus(r, ctx, { after: after as number | undefined })), isError: false } }
    }
    return { outcome: { content: JSON.stringify({ workflow_runs: [...runs.values()].map((r) => runStatus(r, ctx)) }), isError: false } }
  },
}

export const workflowRunStopTool: PlatformTool = {
  name: WORKFLOW_RUN_STOP_TOOL,
  definition: {
    name: WORKFLOW_RUN_STOP_TOOL,
    description: 'Stop a workflow run: it ends with the result "stopped"; its agents are stopped and archived.',
    input_schema: { type: 'object', properties: { workflow_run_id: { type: 'string' } }, required: ['workflow_run_id'] },
  },
  offered: offeredToLead,
  async run(ctx) {
    const id = ctx.call.input.workflow_run_id
    if (typeof id !== 'string' || !id) return fail(`${WORKFLOW_RUN_STOP_TOOL}: workflow_run_id is required and must be a string.`)
    const r = workflowRuns(ctx.events).get(id)
    if (!r) return fail(`${WORKFLOW_RUN_STOP_TOOL}: workflow_run_id ${id} is not a run of this session.`)
    if (r.status === 'ended') return fail(`${WORKFLOW_RUN_STOP_TOOL}: run ${id} has already ended.`)
    const events: EventInput[] = [...r.openPhases].map(([phaseId, startedId]) => ({ type: 'workflow_run.phase_ended', workflow_run_id: id, workflow_run_phase_id: phaseId, phase_started_id: startedId }))
    events.push({ type: 'workflow_run.status_ended', workflow_run_id: id, result: { type: 'stopped' }, name: r.name })
    return { outcome: { content: JSON.stringify({ workflow_run_id: id, stopped: true }), isError: false }, events }
  },
}

export const WORKFLOW_TOOLS: readonly PlatformTool[] = [workflowRunStartTool, workflowRunStatusTool, workflowRunStopTool]
