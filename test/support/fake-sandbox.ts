import type { Sandbox, SandboxProvider, SandboxProvisionParams, SandboxToolCall, ToolOutcome, ToolRecovery } from '../../src/main/hands/sandbox'

/*
 * In-memory sandbox backends for unit tests of the routers above a SandboxProvider: they record
 * what they were asked (created sandboxes, calls, disposals, releases, sweeps) and answer by the contract of
 * src/main/hands/sandbox.ts. The real backends are tested against test/integration/hands/sandbox.contract.ts.
 */

/** A sandbox that answers `<backend>:<tool>` to every call; recover knows `toolu_done` as finished. */
export class FakeSandbox implements Sandbox {
  readonly calls: SandboxToolCall[] = []
  disposed: { removeWorkspace?: boolean } | undefined
  constructor(
    readonly backend: string,
    readonly params: SandboxProvisionParams,
  ) {}
  async provision(): Promise<void> {}
  async execute(call: SandboxToolCall): Promise<ToolOutcome> {
    this.calls.push(call)
    return { content: `${this.backend}:${call.name}`, isError: false, exitCode: 0 }
  }
  async recover(id: string): Promise<ToolRecovery> {
    return id === 'toolu_done' ? { state: 'finished', outcome: { content: 'was done', isError: false } } : { state: 'unknown' }
  }
  async dispose(options?: { removeWorkspace?: boolean }): Promise<void> {
    this.disposed = options ?? {}
  }
}

/** A backend whose availability the test sets; it records the sandboxes it made and the sessions it released by id. */
export class FakeProvider implements SandboxProvider {
  readonly created: FakeSandbox[] = []
  readonly released: { sessionId: string; removeWorkspace?: boolean }[] = []
  disposed = false
  swept: ReadonlySet<string> | undefined
  constructor(
    readonly backend: string,
    public availability: { ok: boolean; reason?: string },
  ) {}
  async available() {
    return this.availability
  }
  create(params: SandboxProvisionParams): FakeSandbox {
    const s = new FakeSandbox(this.backend, params)
    this.created.push(s)
    return s
  }
  async release(sessionId: string, options?: { removeWorkspace?: boolean }): Promise<void> {
    this.released.push({ sessionId, ...options })
  }
  async sweep(keep: ReadonlySet<string>): Promise<number> {
    this.swept = keep
    return 2
  }
  async dispose(): Promise<void> {
    this.disposed = true
  }
}
