/**
 * The tool seam: `execute(name, input) → string`, the only way a brain touches the world. The
 * harness hands every tool call to a ToolRouter and records what comes back; it never knows where
 * the call ran. The hands own this contract (the harness imports nothing else of hands/); the
 * call family itself stands on the hands' ground floor (sandbox.ts). Implementations: the
 * composite HandsRouter (router.ts) over SandboxToolRouter (sandbox-router.ts) and McpToolRouter
 * (mcp/router.ts), and NoHandsToolRouter below; all pass test/integration/hands/tool-router.contract.ts.
 */
import type { ToolCall, ToolOutcome, ToolRecovery } from './sandbox'

export type { OutputStream, PreviewStream, ToolCall, ToolOutcome, ToolRecovery, ToolRouteKind } from './sandbox'

/** The parts of a call that say who serves it. */
export type ToolTarget = Pick<ToolCall, 'sessionId' | 'name' | 'route'>

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
  /**
   * Whether this router serves the call at all: false is a backend's "not mine", and the
   * composite router offers the call to the next backend of its route. Optional: a router
   * without it serves every call it is given.
   */
  serves?(call: ToolTarget): Promise<boolean>
  /** Releases a session's hands (archive, delete, shutdown); idempotent. */
  release(sessionId: string, options?: { removeWorkspace?: boolean }): Promise<void>
}

/**
 * Used when no hands are plugged in: every call is answered with an error the model can read,
 * naming what is missing; no call ever started, so recovery says `not_started`.
 */
export class NoHandsToolRouter implements ToolRouter {
  async execute(call: Pick<ToolCall, 'name'>): Promise<ToolOutcome> {
    return { content: `The ${call.name} tool is unavailable: no sandbox backend is configured in this Corral engine.`, isError: true }
  }
  async recover(): Promise<ToolRecovery> {
    return { state: 'not_started' }
  }
  async release(): Promise<void> {}
}
