import type { SessionStore } from '../session/session-store'
import type { SqliteLeaseStore } from '../session/lease-store'
import type { ToolJournal } from '../session/tool-journal'
import { resolveModelEndpoint, type Settings } from '../config'
import { Harness, type HarnessOptions, type McpToolSource, type PreviewSink, type SessionSource } from '../harness/harness'
import { AnthropicModelClient, type ModelClient } from '../harness/model-client'
import { ThreadedModelClient } from '../harness/model-thread'
import { NoHandsToolRouter, type ToolRouter } from '../hands/tool-router'
import { Scheduler } from './scheduler'
import { fencedJournal, fencedLog, type PrecheckedLog } from './lease-fence'
import { WorkflowRuns, type WorkflowLog } from './workflow-runs'
import type { WorkflowStore } from '../session/workflow-store'
import type { ProgramLimits } from '../harness/workflows/program'
import type { AdvisorTierTable } from '../../shared/api/advisor-tiers'
import type { WorkflowLogSource } from '../harness/platform-tools'

/** A workflow store's log lines as ant__workflow_run_status reads them. */
const workflowLogSource = (store: WorkflowStore): WorkflowLogSource => ({ lines: (runId, params) => store.logs(runId, params), count: (runId) => store.logCount(runId) })

let warnedNoEndpoint = false

/** Harness settings an engine takes (EngineConfig.harness). */
export interface BrainsOptions extends HarnessOptions {
  /** false: build the harness but never run a brain (tools that only read or write the log). */
  enabled?: boolean
  /** Lease lifetime (default 15 s); a brain renews it at a third of that (the engine gives it to the lease store). */
  leaseTtlMs?: number
  /** Model request stall timeout, overriding settings (ms). */
  stallTimeoutMs?: number
  /**
   * Where the model client runs: 'inline' (on the engine's event loop: the default, what the
   * desktop, `corral serve` and `corral run` use, and always when a ModelClient is given) or
   * 'worker' (one worker thread per process for every brain's requests: harness/model-thread.ts,
   * which says why it is no longer the default).
   */
  modelThread?: 'worker' | 'inline'
  /** Workflow runs: threads working at once per run (default 64), agents per run (default 1000), the program's limits. */
  workflows?: { maxConcurrentAgents?: number; maxAgents?: number; program?: ProgramLimits }
}

/** A ModelClient whose endpoint can change under running brains (settings updates). */
class SwitchableModelClient implements ModelClient {
  constructor(public inner: ModelClient) {}
  stream(...args: Parameters<ModelClient['stream']>): ReturnType<ModelClient['stream']> {
    return this.inner.stream(...args)
  }
}

export interface BrainsParams {
  log: PrecheckedLog
  sessions: SessionSource & Pick<SessionStore, 'needingBrains'>
  /** At most one brain per session (session/lease-store.ts). */
  leases: SqliteLeaseStore
  /** The harness's record of tool calls handed to the hands (session/tool-journal.ts). */
  journal: ToolJournal
  /** The journal of workflow runs; without it no run is executed (session/workflow-store.ts). */
  workflows?: WorkflowStore
  previews: PreviewSink
  settings: Settings
  env: NodeJS.ProcessEnv
  router?: ToolRouter
  /** The sessions' MCP tools (the engine's McpToolRouter, which is also `router`). */
  mcp?: McpToolSource
  model?: ModelClient
  /** The advisor pairing table with the user's settings laid over it, read at each consultation start. */
  advisorTiers?: () => AdvisorTierTable
  options?: BrainsOptions
  onError?: (msg: string) => void
}

/** The brains of an engine: harness + scheduler + leases, built from settings. */
export class Brains {
  readonly harness: Harness
  readonly scheduler: Scheduler
  readonly leases: SqliteLeaseStore
  readonly router: ToolRouter
  /** The open workflow runs' executions (absent without a workflow store). */
  readonly workflowRuns?: WorkflowRuns
  private readonly model: SwitchableModelClient
  private started = false

  constructor(private readonly p: BrainsParams & { env: NodeJS.ProcessEnv; settings: Settings }) {
    const endpoint = resolveModelEndpoint(p.env, p.settings)
    this.model = new SwitchableModelClient(p.model ?? this.endpointClient(endpoint))
    const model = this.model
    this.router = p.router ?? new NoHandsToolRouter()
    // a brain writes only under its session's lease, checked inside each write's transaction (lease-fence.ts)
    const fence = (sessionId: string) => p.leases.fence(sessionId)
    this.harness = new Harness({
      log: fencedLog(p.log, fence),
      sessions: p.sessions,
      model,
      router: this.router,
      journal: fencedJournal(p.journal, fence),
      previews: p.previews,
      mcp: p.mcp,
      advisorTiers: p.advisorTiers,
      ...(p.workflows ? { workflowLogs: workflowLogSource(p.workflows) } : {}),
      options: { maxRetries: endpoint.maxRetries, ...p.options },
    })
    this.leases = p.leases
    this.scheduler = new Scheduler({
      log: p.log,
      sessions: p.sessions,
      harness: this.harness,
      leases: this.leases,
      onError: (sessionId, err) => (p.onError ?? console.error)(`[corral] brain of ${sessionId} failed: ${(err as Error).stack ?? String(err)}`),
    })
    if (p.workflows) {
      this.workflowRuns = new WorkflowRuns({
        log: p.log as WorkflowLog,
        store: p.workflows,
        sessions: p.sessions,
        brains: this.scheduler,
        fence: (sessionId) => this.leases.fence(sessionId, 'which drives its workflow runs now'),
        ...p.options?.workflows,
        onError: (sessionId, err) => (p.onError ?? console.error)(`[corral] a workflow run of ${sessionId} failed: ${(err as Error).stack ?? String(err)}`),
      })
    }
  }

  /**
   * Starts the scheduler and wakes every session that was running. Brains run only when a
   * model is reachable: a ModelClient was given, or ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL (or
   * the settings) name an endpoint; otherwise nothing would answer and no request may leave
   * the machine unasked.
   */
  start(): string[] {
    if (this.p.options?.enabled === false || this.started) return []
    const endpoint = resolveModelEndpoint(this.p.env, this.p.settings)
    if (!this.p.model && !endpoint.apiKey && !endpoint.baseUrl) {
      if (!warnedNoEndpoint) (this.p.onError ?? console.warn)('[corral] no model endpoint configured (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL or settings.model): sessions will not run')
      warnedNoEndpoint = true
      return []
    }
    this.started = true
    const ids = this.scheduler.start()
    this.workflowRuns?.start().catch((err: unknown) => (this.p.onError ?? console.error)(`[corral] workflow runs could not start: ${(err as Error).stack ?? String(err)}`))
    return ids
  }

  /**
   * New model endpoint settings (the settings API, a key stored in the keychain): later model
   * requests use them, and brains start if they could not before. A ModelClient given at
   * construction is kept.
   */
  reconfigure(env: NodeJS.ProcessEnv, settings: Settings): string[] {
    this.p.env = env
    this.p.settings = settings
    if (!this.p.model) this.model.inner = this.endpointClient(resolveModelEndpoint(env, settings))
    return this.start()
  }

  private endpointClient(endpoint: ReturnType<typeof resolveModelEndpoint>): ModelClient {
    const params = {
      apiKey: endpoint.apiKey,
      baseURL: endpoint.baseUrl,
      compatibilityMode: endpoint.compatibilityMode,
      stallTimeoutMs: this.p.options?.stallTimeoutMs ?? endpoint.stallTimeoutMs,
      requestTimeoutMs: endpoint.requestTimeoutMs,
    }
    return this.p.options?.modelThread === 'worker' ? new ThreadedModelClient(params) : new AnthropicModelClient(params)
  }

  async stop(): Promise<void> {
    await this.workflowRuns?.stop()
    await this.scheduler.stop()
  }
}
