import type { ToolCall, ToolOutcome, ToolRecovery, ToolRouteKind, ToolRouter, ToolTarget } from './tool-router'

/** One backend of the hands: the route kind whose calls it takes, and the router that runs them. */
export interface HandsBackend {
  /** routeTool's kind: `toolset` (the sandbox, later the work queue), `mcp` (remote MCP servers). */
  route: ToolRouteKind
  hands: ToolRouter
}

export interface HandsRouterOptions {
  /**
   * The backends, in the order they are asked: a call goes to the first backend of its route
   * kind that serves it (a backend's `serves` answering false is its "not mine"; a backend
   * without `serves` takes every call of its kind). A call without a route kind is offered to
   * every backend in this order. The router does not own them: their owner disposes them.
   */
  backends: readonly HandsBackend[]
}

/**
 * The one ToolRouter the engine gives the harness: it dispatches each call by its route kind
 * to the backend that serves it (toolset → the sandbox hands, mcp → the MCP hands; the work
 * queue of a self-hosted environment is one more entry, not one more wrapper). A call no backend
 * serves is answered with an `isError` outcome naming the tool, never a throw; its recovery is
 * `unknown`. `release` releases the session on every backend.
 */
export class HandsRouter implements ToolRouter {
  constructor(private readonly options: HandsRouterOptions) {}

  async execute(call: ToolCall): Promise<ToolOutcome> {
    const hands = await this.backendFor(call)
    if (!hands) return declined(call)
    return hands.execute(call)
  }

  async recover(call: Omit<ToolCall, 'signal' | 'onOutput'>): Promise<ToolRecovery> {
    const hands = await this.backendFor(call)
    // No backend serves it now: nobody can say what became of it.
    if (!hands) return { state: 'unknown' }
    return hands.recover(call)
  }

  async unavailable(sessionId: string, toolName: string): Promise<string | undefined> {
    return (await this.backendFor({ sessionId, name: toolName }))?.unavailable?.(sessionId, toolName)
  }

  async serves(call: ToolTarget): Promise<boolean> {
    return (await this.backendFor(call)) !== undefined
  }

  /**
   * Releases the session on every backend (each once, even if it is listed for two route kinds);
   * one backend's failure does not keep the others from releasing, and is thrown afterwards.
   */
  async release(sessionId: string, options?: { removeWorkspace?: boolean }): Promise<void> {
    const routers = [...new Set(this.options.backends.map((b) => b.hands))]
    const results = await Promise.allSettled(routers.map((r) => r.release(sessionId, options)))
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected')
    if (failed) throw failed.reason
  }

  private async backendFor(call: ToolTarget): Promise<ToolRouter | undefined> {
    for (const b of this.options.backends) {
      if (call.route !== undefined && b.route !== call.route) continue
      if (!b.hands.serves || (await b.hands.serves(call))) return b.hands
    }
    return undefined
  }
}

function declined(call: ToolTarget): ToolOutcome {
  const kind = call.route ? ` (a${call.route === 'toolset' ? ' toolset' : 'n MCP'} tool)` : ''
  return { content: `unknown tool "${call.name}"${kind}: none of this Corral's hands serves it`, isError: true }
}
