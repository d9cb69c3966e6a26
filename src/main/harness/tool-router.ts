/**
 * `execute(name, input) → string`: the only way a brain touches the world. The harness hands
 * every tool call to a ToolRouter and records what comes back; it never knows where the call ran.
 */
export interface ToolCall {
  sessionId: string
  /** The `agent.tool_use` (or `agent.mcp_tool_use` / `agent.custom_tool_use`) event id. */
  toolUseId: string
  name: string
  input: Record<string, unknown>
  signal?: AbortSignal
  onOutput?: (chunk: string) => void
}

export interface ToolOutcome {
  content: string
  isError: boolean
  exitCode?: number | null
  durationMs?: number
}

/** What a hand knows about a call an earlier process started. */
export type ToolRecovery = { state: 'finished'; outcome: ToolOutcome } | { state: 'running' } | { state: 'unknown' } | { state: 'not_started' }

export interface ToolRouter {
  /** Runs one call wherever its tool lives; a failure the model should see is `isError`, not a throw. */
  execute(call: ToolCall): Promise<ToolOutcome>
  /**
   * For a call that a previous process started and never recorded a result for: what really
   * happened, if the hand can tell; `unknown` otherwise (the harness then tells the model so).
   * `not_started` (optional to return) means the hand knows the call never began, so the
   * harness may run it now; `running` makes the harness ask again until it finishes.
   */
  recover(call: Omit<ToolCall, 'signal' | 'onOutput'>): Promise<ToolRecovery>
  /**
   * Why a call of `toolName` in this session cannot run at all now (no sandbox backend can
   * serve it), or undefined. Optional: the harness asks before putting an `ask` call to the
   * user, so nobody is asked to approve a call that would fail anyway.
   */
  unavailable?(sessionId: string, toolName: string): Promise<string | undefined>
  /** Releases a session's hands (archive, delete, shutdown). */
  release(sessionId: string, options?: { removeWorkspace?: boolean }): Promise<void>
}
