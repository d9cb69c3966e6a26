import type { ToolCall, ToolOutcome, ToolRecovery, ToolRouter, ToolTarget } from '../../src/main/hands/tool-router'

/**
 * An in-memory ToolRouter backend for unit tests of routers that compose backends: it answers
 * `<label>:<tool>` to each call it serves and records what it was asked. `serves` (the names it
 * takes) makes it say "not mine" for every other name; without it, it has no `serves` at all
 * and takes every call it is given, as the ToolRouter contract allows.
 */
export class FakeToolRouter implements ToolRouter {
  readonly calls: ToolCall[] = []
  readonly recovered: string[] = []
  readonly released: { sessionId: string; options?: { removeWorkspace?: boolean } }[] = []
  /** Set to make release fail (a backend whose cleanup breaks). */
  releaseError?: Error
  serves?: (call: ToolTarget) => Promise<boolean>

  constructor(
    readonly label: string,
    options: { serves?: readonly string[]; unavailable?: string } = {},
  ) {
    const names = options.serves && new Set(options.serves)
    if (names) this.serves = async (call) => names.has(call.name)
    if (options.unavailable !== undefined) {
      const reason = options.unavailable
      this.unavailable = async () => reason
    }
  }

  unavailable?: (sessionId: string, toolName: string) => Promise<string | undefined>

  async execute(call: ToolCall): Promise<ToolOutcome> {
    this.calls.push(call)
    if (this.serves && !(await this.serves(call))) return { content: `unknown tool "${call.name}"`, isError: true }
    return { content: `${this.label}:${call.name}`, isError: false }
  }

  async recover(call: Omit<ToolCall, 'signal' | 'onOutput'>): Promise<ToolRecovery> {
    this.recovered.push(call.toolUseId)
    return { state: 'not_started' }
  }

  async release(sessionId: string, options?: { removeWorkspace?: boolean }): Promise<void> {
    this.released.push({ sessionId, options })
    if (this.releaseError) throw this.releaseError
  }
}
