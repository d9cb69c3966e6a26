/**
 * Platform tools: tools the harness runs itself (they read the log and the session's roster and
 * append events; no sandbox, no client). Delegation (`list_agents`, `send_to_agent`,
 * delegation.ts) and the advisor (`ant__advisor`) are platform tools. Each is offered per thread
 * (`offered`), is logged like any tool (`agent.tool_use` with `evaluated_permission: "allow"`,
 * then its `agent.tool_result`), and may return events that are appended in ONE batch with its
 * result, so a crash either loses the call's whole effect (and the restarted brain runs it again)
 * or keeps all of it (and the call is never run twice).
 */
import type { ThreadKey } from '../../shared/api/events'
import { primaryThreadId } from '../../shared/api/ids'
import type { EventInput, EventLog } from '../session/event-log'
import type { ToolOutcome } from '../hands/tool-router'
import type { ViewEvent } from './context/view'
import type { ModelClient } from './model-client'
import type { ModelToolDefinition } from './tools'
import type { SessionThreads, ThreadAgent } from './session-threads'

export type { ThreadAgent }

/** A thread of a session: the `sthr_` id of the thread (the primary's is primaryThreadId(sessionId)). */
export interface ThreadRef {
  sessionId: string
  threadId: string
}

/** The ref of a session's primary thread. */
export function primaryRef(sessionId: string): ThreadRef {
  return { sessionId, threadId: primaryThreadId(sessionId) }
}

/** What a session may delegate to, as pinned at its creation (SessionStore.rosterOf's shape). */
export interface DelegationRoster {
  subagents: { enabled: boolean; inlineAgents: boolean; agents: readonly ThreadAgent[] }
  /** What workflow runs may use (absent: workflows off). */
  workflows?: { enabled: boolean; inlineAgents: boolean; agents: readonly ThreadAgent[] }
  /** The advisor model, or null when the advisor is off. */
  advisor: string | null
}

/** Which thread a tool is offered to, and with what configuration. */
export interface PlatformOfferContext {
  thread: ThreadRef
  /** The log's key of the thread: null for the primary. */
  threadKey: ThreadKey
  /** The session agent's snapshot (the primary's agent). */
  sessionAgent: ThreadAgent
  /** The thread's own agent. */
  agent: ThreadAgent
  roster: DelegationRoster | null
  /** The `outc_` id of the outcome the primary works toward, while one is active (outcomes.ts). */
  activeOutcome?: string | null
}

export interface PlatformToolCall {
  /** The `agent.tool_use` event's id. */
  id: string
  /** Its position in the log. */
  seq: number
  name: string
  input: Record<string, unknown>
}

export interface PlatformToolContext extends PlatformOfferContext {
  call: PlatformToolCall
  log: EventLog
  model: ModelClient
  /** The session's events the harness has read so far (every thread's; filter with isOnThread). */
  events: readonly ViewEvent[]
  /** The session's threads as the log says (children, their agents and statuses). */
  threads: SessionThreads
  /** Aborted by an interrupt or a shutdown. */
  signal: AbortSignal
  /** Whether the session's one budget is spent (the check the harness makes before every model request). */
  budgetReached: () => boolean
  /** The log lines of the session's workflow runs (what their programs logged), when the harness has them. */
  workflowLogs?: WorkflowLogSource
}

/** Where the workflow status tool reads a run's log lines (the workflow store: one row per line, numbered from 1). */
export interface WorkflowLogSource {
  /** The run's lines after line `after` (0: from the first), at most `limit`, in order. */
  lines(runId: string, params: { after?: number; limit?: number }): { line: number; text: string }[]
  /** How many lines the run logged. */
  count(runId: string): number
}

export interface PlatformToolResult {
  outcome: ToolOutcome
  /** Appended with the tool's result, in one batch (before it). */
  events?: EventInput[]
  /** The call was cut short by an interrupt of its turn: its result is not news for the model (the turn stops). */
  interrupted?: boolean
}

export interface PlatformTool {
  name: string
  definition: ModelToolDefinition
  offered(ctx: PlatformOfferContext): boolean
  run(ctx: PlatformToolContext): Promise<PlatformToolResult>
}

/** The platform tools of a harness, by name. */
export class PlatformTools {
  private readonly byName = new Map<string, PlatformTool>()

  constructor(tools: readonly PlatformTool[] = []) {
    for (const t of tools) this.register(t)
  }

  register(tool: PlatformTool): void {
    if (this.byName.has(tool.name)) throw new Error(`platform tool ${tool.name} registered twice`)
    this.byName.set(tool.name, tool)
  }

  /** The tools offered to this thread, in registration order. */
  offered(ctx: PlatformOfferContext): PlatformTool[] {
    return [...this.byName.values()].filter((t) => t.offered(ctx))
  }

  /** The tool of that name when it is offered to this thread. */
  find(name: string, ctx: PlatformOfferContext): PlatformTool | undefined {
    const t = this.byName.get(name)
    return t && t.offered(ctx) ? t : undefined
  }
}
