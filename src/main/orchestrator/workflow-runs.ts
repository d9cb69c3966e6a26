/**
 * Workflow runs at run time (issue #12; docs/workflows.md): every open run of a session gets a
 * WorkflowExecution (harness/workflows/execution.ts) that this class hosts. It starts each
 * `agent()` call's thread (its events and journal row in one transaction), hears from the log
 * when a run's thread is done, records the result with the thread's archive (one transaction:
 * the completion order is the seq of the event that finished the thread), writes the run's
 * `workflow_run.*` events, and ends the run (timeout, program end, stop). At start-up every open
 * run is replayed from its journal. Dispose with `stop()`.
 */
import type { QuickJSWASMModule } from 'quickjs-emscripten'
import { CorralError } from '../../shared/errors'
import { newId, primaryThreadId } from '../../shared/api/ids'
import type { EventInput, EventLog, StoredEvent } from '../session/event-log'
import type { WorkflowStore } from '../session/workflow-store'
import { isLeaseLost } from '../session/lease-store'
import type { DelegationRoster, ThreadAgent, ThreadRef } from '../harness/platform-tools'
import { WorkflowExecution, type AgentCall, type CallOutcome, type ExecutionEnd, type JournalRow } from '../harness/workflows/execution'
import { quickJS, type ProgramLimits } from '../harness/workflows/program'
import { MAX_WORKFLOW_TIMEOUT_SECONDS } from '../harness/workflows/tools'

/**
 * The log as the runs need it: appends whose journal write commits in the same transaction, and
 * a hook inside every append's transaction (SqliteEventLog.addBatchProjector) where a run
 * thread's turn that ends with its archive gets its result recorded.
 */
export type WorkflowLog = EventLog & {
  append(sessionId: string, events: readonly EventInput[], options?: { precheck?: () => void; committed?: boolean }): Promise<StoredEvent[]>
  commitWith(write: () => void): Promise<void>
  addBatchProjector?(projector: (sessionRid: number, stored: readonly StoredEvent[]) => void): void
}

export interface WorkflowRunsParams {
  log: WorkflowLog
  store: WorkflowStore
  sessions: { retrieve(id: string): { id: string; agent: unknown; status?: string }; rosterOf?(id: string): DelegationRoster | null }
  /**
   * The scheduler whose lease the runs are driven under (orchestrator/scheduler.ts): `stopThread`
   * stops a thread's brain (before it is archived) and resolves once it has stopped; `pin` takes
   * and keeps the session's lease while its runs are driven (false: another process holds it),
   * `unpin` gives it back to the scheduler's idle rule; `onLease` tells of a lease taken or lost.
   */
  brains: {
    stopThread(thread: ThreadRef): Promise<void>
    pin(sessionId: string): boolean
    unpin(sessionId: string): void
    onLease(listener: (sessionId: string, held: boolean) => void): () => void
  }
  /** Run inside every write's transaction: throws the lease-lost conflict when this engine no longer owns the session's lease (SqliteLeaseStore.fence); without it, no fence. */
  fence?: (sessionId: string) => void
  /** How often a session whose open runs another process drives is looked at again (default 1000 ms). */
  retryMs?: number
  /** Threads working at once per run (default 64: `workflows.maxConcurrentAgents`). */
  maxConcurrentAgents?: number
  /** Agents per run (default 1000). */
  maxAgents?: number
  program?: ProgramLimits
  onError?: (sessionId: string, err: unknown) => void
}

interface RunThread {
  index: number
  agentName: string
  /**
   * The text of the thread's `agent.message` events as this process heard them, when it heard
   * them all (it started the thread: every event of it since was committed here); undefined for a
   * thread re-attached after a restart or a takeover, whose answer is then read from the log.
   */
  heard?: string[]
}

interface ActiveRun {
  sessionId: string
  runId: string
  name: string
  primaryId: string
  execution?: WorkflowExecution
  /** The run's threads not yet archived, with their call index. */
  threads: Map<string, RunThread>
  /** Declared phases (name → ids not yet used, in order). */
  declared: Map<string, string[]>
  /** phase id → its `phase_started` event id. */
  phaseStarts: Map<string, string>
  logLine: number
  /** The session's agent (without its roster) and its workflows roster, read at the run's first agent() call. */
  agents?: { lead: ThreadAgent; workflows: DelegationRoster['workflows'] | undefined }
  timer?: NodeJS.Timeout
  ended: boolean
  /** Paused at the session's budget (`status_idle`): agent calls wait in `deferred` until `status_running`. */
  paused: boolean
  deferred: (() => void)[]
}

const RUN_EVENT_TYPES = ['workflow_run.created', 'workflow_run.status_running', 'workflow_run.status_idle', 'workflow_run.status_ended', 'workflow_run.phase_started', 'workflow_run.phase_ended']
const FAILED_BECAUSE: Record<string, string> = {
  retries_exhausted: 'its model requests kept failing until the retries were exhausted',
  refusal: 'the model refused the task',
}

export class WorkflowRuns {
  private readonly active = new Map<string, ActiveRun>()
  /** A run's thread → its run id. */
  private readonly runOfThread = new Map<string, string>()
  /** Sessions with open runs that another process drives (its lease): tried again every retryMs. */
  private readonly waiting = new Set<string>()
  private retryTimer?: NodeJS.Timeout
  private unsubscribe?: () => void
  private leaseOff?: () => void
  private module?: QuickJSWASMModule
  private stopped = false
  private projecting = false
  /**
   * Run threads whose turn ended with their archive in one append (the harness writes a run
   * thread's archive with its final idle): the idle's seq, and the call's outcome when it was
   * recorded in that transaction (project). Read at the idle's commit notification; an entry
   * whose append rolled back is never matched (its seq is not notified) and is replaced.
   */
  private readonly archivedWithIdle = new Map<string, { idleSeq: number; outcome?: CallOutcome }>()

  constructor(private readonly p: WorkflowRunsParams) {}

  /** Subscribes to the log and replays every open run of every session. */
  async start(): Promise<void> {
    this.module = await quickJS()
    if (this.stopped) return
    // a run's driver hears of its threads at their commits (before the fsync): what it does then
    // is write to the log and start threads, nothing a client or the hands see
    this.unsubscribe = this.p.log.subscribeCommitted((s) => this.onEvent(s))
    if (!this.projecting && this.p.log.addBatchProjector) {
      this.projecting = true
      this.p.log.addBatchProjector((_rid, stored) => this.project(stored))
    }
    this.leaseOff = this.p.brains.onLease((sessionId, held) => {
      if (!held) this.leaseLost(sessionId)
      else if (this.waiting.has(sessionId)) queueMicrotask(() => this.resumeSession(sessionId))
    })
    for (const sessionId of this.p.store.sessionsWithOpenRuns()) this.resumeSession(sessionId)
  }

  /** Sessions whose open runs another process drives now (this one takes over when it can). */
  waitingSessions(): string[] {
    return [...this.waiting]
  }

  /** Open runs being executed now (for tests and the bench). */
  activeRuns(): string[] {
    return [...this.active.keys()]
  }

  /** Stops executing (writes nothing more; the next start replays from the journal). */
  async stop(): Promise<void> {
    this.stopped = true
    this.unsubscribe?.()
    this.leaseOff?.()
    if (this.retryTimer) clearInterval(this.retryTimer)
    this.waiting.clear()
    for (const r of this.active.values()) {
      if (r.timer) clearTimeout(r.timer)
      r.execution?.dispose()
    }
    this.active.clear()
    this.runOfThread.clear()
  }

  /** A deleted session's runs: executed no more (their log went with the session; nothing is written). */
  dropSession(sessionId: string): void {
    for (const r of [...this.active.values()]) if (r.sessionId === sessionId) this.drop(r)
  }

  /**
   * Drives the session's open runs not driven here yet, under its lease: when another process
   * holds it, the session waits (looked at again every retryMs, and when the scheduler takes
   * the lease) and the holder drives them.
   */
  private resumeSession(sessionId: string): void {
    if (this.stopped || !this.module) return
    try {
      const events = this.p.log.read(sessionId, { types: ['workflow_run.created', 'workflow_run.status_ended'], limit: 1000, threadId: null, includeUnsynced: true })
      const ended = new Set(events.filter((s) => s.event.type === 'workflow_run.status_ended').map((s) => (s.event as { workflow_run_id: string }).workflow_run_id))
      const open = events.filter((s) => s.event.type === 'workflow_run.created' && !ended.has(s.event.workflow_run_id) && !this.active.has(s.event.workflow_run_id))
      if (open.length === 0) {
        this.waiting.delete(sessionId)
        return
      }
      if (!this.p.brains.pin(sessionId)) return this.wait(sessionId)
      this.waiting.delete(sessionId)
      for (const s of open) this.open(sessionId, s)
      if (!this.hasRuns(sessionId)) this.p.brains.unpin(sessionId)
    } catch (err) {
      this.p.onError?.(sessionId, err)
    }
  }

  private hasRuns(sessionId: string): boolean {
    for (const r of this.active.values()) if (r.sessionId === sessionId) return true
    return false
  }

  private wait(sessionId: string): void {
    this.waiting.add(sessionId)
    if (this.retryTimer || this.stopped) return
    this.retryTimer = setInterval(() => {
      for (const id of [...this.waiting]) this.resumeSession(id)
      if (this.waiting.size === 0 && this.retryTimer) {
        clearInterval(this.retryTimer)
        this.retryTimer = undefined
      }
    }, this.p.retryMs ?? 1000)
    this.retryTimer.unref()
  }

  /** Another process took the session's lease: its runs are no longer driven here (nothing more is written); the holder replays them. */
  private leaseLost(sessionId: string): void {
    let had = false
    for (const r of [...this.active.values()])
      if (r.sessionId === sessionId) {
        had = true
        this.drop(r, false)
      }
    if (had) this.wait(sessionId)
  }

  /** Throws inside a write's transaction when the session's lease is no longer this engine's. */
  private fence(sessionId: string): void {
    this.p.fence?.(sessionId)
  }

  private onEvent(stored: StoredEvent): void {
    if (this.stopped) return
    const e = stored.event
    try {
      switch (e.type) {
        case 'workflow_run.created':
          return this.open(stored.sessionId, stored)
        case 'workflow_run.status_idle':
        case 'workflow_run.status_running': {
          const r = this.active.get(e.workflow_run_id)
          if (r && !r.ended) this.setPaused(r, e.type === 'workflow_run.status_idle')
          return
        }
        case 'workflow_run.status_ended': {
          // ended by the stop tool (or by us): the run's threads are archived
          const r = this.active.get(e.workflow_run_id)
          if (r && !r.ended) void this.finish(r)
          return
        }
        case 'agent.message': {
          // a run thread's answer as it is written (read back from the log only when some was missed)
          const tid = e.session_thread_id
          const runId = tid ? this.runOfThread.get(tid) : undefined
          const heard = runId ? this.active.get(runId)?.threads.get(tid!)?.heard : undefined
          if (heard) pushTexts(heard, e)
          return
        }
        case 'session.thread_status_idle':
        case 'session.thread_status_terminated': {
          const tid = e.session_thread_id
          const runId = tid ? this.runOfThread.get(tid) : undefined
          if (!tid || !runId) return
          const r = this.active.get(runId)
          if (r && !r.ended) this.threadChanged(r, tid, stored)
          return
        }
        case 'session.status_terminated':
        case 'session.deleted':
          for (const r of [...this.active.values()]) if (r.sessionId === stored.sessionId) this.drop(r)
          return
      }
    } catch (err) {
      this.p.onError?.(stored.sessionId, err)
    }
  }

  /**
   * Inside an append's transaction: a run's thread archived in the same append as the idle that
   * ends its turn (its brain's last batch) gets the call's result recorded there, with the idle's
   * seq as its completion order, so the result, the idle and the archive are one commit. Nothing
   * in memory changes but `archivedWithIdle` (the transaction may roll back); a thread whose
   * answer this process did not hear whole is left to threadChanged (a write of its own).
   */
  private project(batch: readonly StoredEvent[]): void {
    if (this.stopped || this.runOfThread.size === 0) return
    for (let i = 1; i < batch.length; i++) {
      const e = batch[i].event as { type: string; session_thread_id?: string; archived?: boolean }
      if (e.type !== 'session.thread_status_terminated' || e.archived !== true || !e.session_thread_id) continue
      const tid = e.session_thread_id
      const r = this.active.get(this.runOfThread.get(tid) ?? '')
      const t = r?.threads.get(tid)
      const idle = batch[i - 1]
      if (!r || r.ended || !t || idle.event.type !== 'session.thread_status_idle' || idle.event.session_thread_id !== tid) continue
      const heard = t.heard && [...t.heard, ...textsOf(batch.slice(0, i - 1), tid)]
      // (never a read of the log in here: without the whole answer the outcome is threadChanged's)
      const outcome = this.outcomeOf(r, tid, t, idle.event, heard ?? [])
      if (outcome === 'waiting') continue
      if (heard) this.p.store.resolveAgent({ runId: r.runId, index: t.index, outcome, resolvedSeq: idle.seq })
      this.archivedWithIdle.set(tid, { idleSeq: idle.seq, outcome: heard ? outcome : undefined })
    }
  }

  /** Starts (or, after a restart, replays) the run `created` announced. */
  private open(sessionId: string, created: StoredEvent): void {
    const ev = created.event as StoredEvent['event'] & { type: 'workflow_run.created'; tool_use_id?: string }
    const runId = ev.workflow_run_id
    if (this.active.has(runId) || !this.module) return
    if (!this.p.brains.pin(sessionId)) return this.wait(sessionId)
    const call = ev.tool_use_id ? this.p.log.get(ev.tool_use_id) : undefined
    const input = (call?.event as { input?: Record<string, unknown> } | undefined)?.input
    const r: ActiveRun = { sessionId, runId, name: ev.name, primaryId: primaryThreadId(sessionId), threads: new Map(), declared: new Map(), phaseStarts: new Map(), logLine: 0, ended: false, paused: false, deferred: [] }
    for (const ph of ev.phases) r.declared.set(ph.name, [...(r.declared.get(ph.name) ?? []), ph.id])
    this.active.set(runId, r)
    if (!input || typeof input.program !== 'string') {
      this.end(r, { type: 'error', error: { type: 'program_error', message: 'the run has no program (its ant__workflow_run_start call is not in the log)' } }, [], 'unknown_error')
      return
    }
    // what the log already says of the run: its phases, whether it started
    const seen = this.p.log.read(sessionId, { types: RUN_EVENT_TYPES, after: created.seq - 1, limit: 1000, threadId: null, includeUnsynced: true }).filter((s) => (s.event as { workflow_run_id?: string }).workflow_run_id === runId)
    for (const s of seen) {
      if (s.event.type === 'workflow_run.phase_started') {
        r.phaseStarts.set(s.event.workflow_run_phase_id, s.event.id)
        for (const ids of r.declared.values()) if (ids.includes(s.event.workflow_run_phase_id)) ids.splice(ids.indexOf(s.event.workflow_run_phase_id), 1)
      }
    }
    const started = seen.some((s) => s.event.type === 'workflow_run.status_running' || s.event.type === 'workflow_run.status_idle')
    r.paused = seen.filter((s) => s.event.type === 'workflow_run.status_running' || s.event.type === 'workflow_run.status_idle').at(-1)?.event.type === 'workflow_run.status_idle'
    const journal = this.p.store.calls(runId)
    for (const row of journal) if (row.kind === 'agent' && row.threadId && !row.outcome) this.track(r, row.threadId, { index: row.index, agentName: '' })
    r.logLine = this.p.store.logCount(runId)
    const timeout = typeof input.timeout_seconds === 'number' ? Math.min(input.timeout_seconds, MAX_WORKFLOW_TIMEOUT_SECONDS) : MAX_WORKFLOW_TIMEOUT_SECONDS
    const left = Date.parse(ev.processed_at) + timeout * 1000 - Date.now()
    if (left <= 0) return this.end(r, { type: 'error', error: { type: 'program_error', message: '' } }, [], 'timeout_error', `the run reached its lifetime of ${timeout} s`)
    r.timer = setTimeout(() => this.end(r, { type: 'error', error: { type: 'program_error', message: '' } }, this.openPhasesOf(r), 'timeout_error', `the run reached its lifetime of ${timeout} s`), Math.min(left, 2 ** 31 - 1))
    r.timer.unref()
    if (!started) this.appendRun(r, [{ type: 'workflow_run.status_running', workflow_run_id: runId }])
    const attached: JournalRow[] = []
    r.execution = new WorkflowExecution({
      module: this.module,
      source: input.program,
      args: input.args ?? null,
      journal,
      maxConcurrent: this.p.maxConcurrentAgents,
      maxAgents: this.p.maxAgents,
      program: this.p.program,
      host: {
        startAgent: (c, hash) => this.startAgent(r, c, hash),
        attachAgent: (_c, row) => attached.push(row),
        phaseStarted: (c, hash) => this.phaseStarted(r, c.index, c.name, hash),
        phaseEnded: (c, phaseId, hash) => this.phaseEnded(r, c.index, phaseId, hash),
        log: (line) => this.logLine(r, line),
        ended: (end, open) => setImmediate(() => this.end(r, end, open)),
      },
    })
    r.execution.start()
    // a re-attached thread may have finished before its row was written: its result is in its events
    for (const row of attached) this.checkThread(r, row.threadId!)
  }

  private track(r: ActiveRun, threadId: string, t: RunThread): void {
    r.threads.set(threadId, t)
    this.runOfThread.set(threadId, r.runId)
  }

  /** Throws inside an append's transaction when the run has ended since (its events are then not written). */
  private assertOpen(r: ActiveRun): void {
    if (this.p.store.runEnded(r.sessionId, r.runId)) throw new CorralError('invalid_request_error', `workflow run ${r.runId} has ended`)
  }

  /**
   * Appends the run's events (and its journal write, in the same transaction). Resolves at the
   * commit, before the fsync: what the driver does next (the program goes on, more threads) is
   * written to the log after it, and the WAL is synced in order.
   */
  private appendRun(r: ActiveRun, events: EventInput[], journal?: () => void): Promise<StoredEvent[] | undefined> {
    return this.p.log
      .append(r.sessionId, events, {
        committed: true,
        precheck: () => {
          this.fence(r.sessionId)
          this.assertOpen(r)
          journal?.()
        },
      })
      .catch((err: unknown) => this.writeFailed(r, err))
  }

  private writeFailed(r: ActiveRun, err: unknown): undefined {
    if (isLeaseLost(err)) this.leaseLost(r.sessionId)
    else if (!(err instanceof CorralError && err.code === 'invalid_request_error')) this.p.onError?.(r.sessionId, err)
    return undefined
  }

  /** The agent a call names: a predefined workflow agent, "self", or an inline one; a string saying why not otherwise. */
  private resolveAgent(r: ActiveRun, c: AgentCall): ThreadAgent | string {
    // read once per run: the session's agent cannot change while a run is open (workflow_run_open)
    r.agents ??= (() => {
      const { multiagent: _m, ...lead } = this.p.sessions.retrieve(r.sessionId).agent as ThreadAgent & { multiagent?: unknown }
      return { lead: lead as ThreadAgent, workflows: this.p.sessions.rosterOf?.(r.sessionId)?.workflows }
    })()
    const { lead, workflows: wf } = r.agents
    if (typeof c.spec === 'string') {
      if (c.spec === 'self') return lead as ThreadAgent
      const listed = wf?.agents.find((a) => a.name === c.spec)
      if (listed) return listed
      const names = wf?.agents.map((a) => a.name).join(', ') || 'none'
      return `agent ${JSON.stringify(c.spec)} is not one of this session's predefined workflow agents (${names}); use "self" or an inline { name, system }`
    }
    if (wf && !wf.inlineAgents) return `inline agents are not enabled for this session's workflows; use a predefined agent or "self"`
    return { type: 'inline', name: c.spec.name, description: c.spec.description, model: lead.model, system: c.spec.system, tools: lead.tools ?? [], mcp_servers: lead.mcp_servers ?? [], skills: lead.skills ?? [] }
  }

  /** The budget paused the run (no new agent starts: spec §9) or resumed it (the calls that waited start, in call order). */
  private setPaused(r: ActiveRun, paused: boolean): void {
    r.paused = paused
    if (paused) return
    const waiting = r.deferred.splice(0)
    for (const start of waiting) start()
  }

  private startAgent(r: ActiveRun, c: AgentCall, argsHash: string): void {
    if (r.paused) {
      r.deferred.push(() => this.startAgent(r, c, argsHash))
      return
    }
    const agent = this.resolveAgent(r, c)
    if (typeof agent === 'string') {
      // the thread cannot be created: the call rejects (the program may catch it); nothing is journaled
      queueMicrotask(() => r.execution?.complete(c.index, { ok: false, message: agent }))
      return
    }
    const { multiagent: _m, ...snapshot } = agent as ThreadAgent & { multiagent?: unknown }
    const tid = newId('thread')
    this.track(r, tid, { index: c.index, agentName: agent.name, heard: [] })
    const content = [{ type: 'text' as const, text: c.prompt }]
    const events: EventInput[] = [
      { type: 'session.thread_created', session_thread_id: tid, agent_name: agent.name, workflow_run_id: r.runId, agent: snapshot, parent_thread_id: r.primaryId, workflow_call_index: c.index, workflow_label: c.label },
      { type: 'session.thread_status_running', session_thread_id: tid, agent_name: agent.name },
      { type: 'agent.thread_message_received', session_thread_id: tid, from_session_thread_id: r.primaryId, from_agent_name: null, content },
    ]
    void this.appendRun(r, events, () => this.p.store.recordCall({ runId: r.runId, sessionId: r.sessionId, index: c.index, kind: 'agent', argsHash, threadId: tid }))
  }

  private phaseStarted(r: ActiveRun, index: number, name: string, argsHash: string): string {
    const declared = r.declared.get(name)
    const phaseId = declared?.length ? declared.shift()! : newId('workflowPhase')
    const id = newId('event')
    r.phaseStarts.set(phaseId, id)
    void this.appendRun(r, [{ id, type: 'workflow_run.phase_started', workflow_run_id: r.runId, workflow_run_phase_id: phaseId }], () =>
      this.p.store.recordCall({ runId: r.runId, sessionId: r.sessionId, index, kind: 'phase_start', argsHash, phaseId }),
    )
    return phaseId
  }

  private phaseEnded(r: ActiveRun, index: number, phaseId: string, argsHash: string): void {
    const startedId = r.phaseStarts.get(phaseId) ?? ''
    r.phaseStarts.delete(phaseId)
    void this.appendRun(r, [{ type: 'workflow_run.phase_ended', workflow_run_id: r.runId, workflow_run_phase_id: phaseId, phase_started_id: startedId }], () =>
      this.p.store.recordCall({ runId: r.runId, sessionId: r.sessionId, index, kind: 'phase_end', argsHash }),
    )
  }

  private logLine(r: ActiveRun, text: string): void {
    const line = ++r.logLine
    // a replayed line has the same number: the store keeps the first
    void this.p.log.commitWith(() => this.p.store.addLog({ runId: r.runId, sessionId: r.sessionId, line, text })).catch((err: unknown) => this.p.onError?.(r.sessionId, err))
  }

  private openPhasesOf(r: ActiveRun): string[] {
    return [...r.phaseStarts.keys()]
  }

  /** A re-attached thread's state in the log: done or failed already, or still working. */
  private checkThread(r: ActiveRun, tid: string): void {
    const [last, before] = this.p.log.read(r.sessionId, { threadId: tid, types: ['session.thread_status_idle', 'session.thread_status_terminated'], order: 'desc', limit: 2, includeUnsynced: true })
    if (!last) return
    // archived by its brain with the idle that ended its turn (one append): the idle says how it ended
    if (before && isArchiveOf(last, before)) this.threadChanged(r, tid, before, true)
    else this.threadChanged(r, tid, last)
  }

  /** How a run thread's status event ends its call: 'waiting' (on the client, on the budget) or its outcome. */
  private outcomeOf(r: ActiveRun, tid: string, t: RunThread, e: StoredEvent['event'], heard: string[] | undefined): CallOutcome | 'waiting' {
    const ev = e as { type: string; stop_reason?: { type: string }; agent_name?: string; archived?: boolean }
    if (ev.type === 'session.thread_status_idle') {
      const why = ev.stop_reason?.type ?? 'end_turn'
      if (why === 'requires_action' || why === 'budget_reached') return 'waiting'
      return why === 'end_turn' ? { ok: true, value: heard ? heard.join('\n') : this.resultOf(r, tid) } : { ok: false, message: `agent thread ${tid} (${ev.agent_name ?? t.agentName}) failed: ${FAILED_BECAUSE[why] ?? why}` }
    }
    return { ok: false, message: `agent thread ${tid} (${ev.agent_name ?? t.agentName}) failed: it was terminated${ev.archived ? ' (archived)' : ''}` }
  }

  /**
   * A run's thread went idle or was terminated: when that ends its turn for good, the program gets
   * its result. `archived`: the thread's archive is in the log already (written with this idle).
   */
  private threadChanged(r: ActiveRun, tid: string, stored: StoredEvent, archived = false): void {
    const t = r.threads.get(tid)
    if (!t) return
    const inTx = this.archivedWithIdle.get(tid)
    if (inTx?.idleSeq === stored.seq) {
      this.archivedWithIdle.delete(tid)
      archived = true
      // recorded in the idle's own transaction (project): the slot is free and the call done now
      if (inTx.outcome) {
        const outcome = inTx.outcome
        r.threads.delete(tid)
        this.runOfThread.delete(tid)
        r.execution?.release(t.index)
        queueMicrotask(() => r.execution?.complete(t.index, outcome))
        return
      }
    }
    const e = stored.event as { type: string; agent_name?: string }
    const outcome = this.outcomeOf(r, tid, t, stored.event, t.heard)
    if (outcome === 'waiting') return
    r.threads.delete(tid)
    this.runOfThread.delete(tid)
    this.archivedWithIdle.delete(tid)
    const archive: EventInput[] = archived || e.type === 'session.thread_status_terminated' ? [] : [{ type: 'session.thread_status_terminated', session_thread_id: tid, agent_name: e.agent_name ?? t.agentName, archived: true }]
    const record = () => this.p.store.resolveAgent({ runId: r.runId, index: t.index, outcome, resolvedSeq: stored.seq })
    const done = archive.length
      ? this.appendRun(r, archive, record)
      : this.p.log
          .commitWith(() => {
            this.fence(r.sessionId)
            record()
          })
          .then(
            () => [],
            (err: unknown) => this.writeFailed(r, err),
          )
    // the slot is free from this commit on: a waiting call's thread is created in it too
    r.execution?.release(t.index)
    void done.then((ok) => {
      if (ok) r.execution?.complete(t.index, outcome)
    })
  }

  /** An agent's answer: the text of its thread's messages (a run's thread has one task). */
  private resultOf(r: ActiveRun, tid: string): string {
    const texts: string[] = []
    let after = 0
    for (;;) {
      const page = this.p.log.read(r.sessionId, { threadId: tid, types: ['agent.message'], after, limit: 1000, includeUnsynced: true })
      for (const s of page) {
        after = s.seq
        pushTexts(texts, s.event)
      }
      if (page.length < 1000) return texts.join('\n')
    }
  }

  /**
   * Ends a run: its open phases' ends, the error (for an error result), `status_ended` with the
   * program's output, in one batch; then its threads are stopped and archived. `errorType`
   * overrides the execution's (the lifetime).
   */
  private end(r: ActiveRun, end: ExecutionEnd, openPhases: string[], errorType?: 'timeout_error' | 'unknown_error', message?: string): void {
    if (r.ended) return
    const error = end.type === 'error' ? { type: errorType ?? end.error.type, message: message ?? end.error.message } : undefined
    const events: EventInput[] = openPhases.map((phaseId) => ({ type: 'workflow_run.phase_ended', workflow_run_id: r.runId, workflow_run_phase_id: phaseId, phase_started_id: r.phaseStarts.get(phaseId) ?? '' }))
    if (error) events.push({ type: 'workflow_run.error', workflow_run_id: r.runId, error: error as never })
    events.push({ type: 'workflow_run.status_ended', workflow_run_id: r.runId, result: error ? { type: 'error', error: error as never } : { type: 'completed' }, name: r.name, ...(end.type === 'completed' ? { output: end.output } : {}) })
    r.ended = true
    void this.appendRun(r, events).then(() => this.finish(r))
  }

  /** After the run's end is in the log: nothing more of the program runs, and its live threads are stopped and archived. */
  private async finish(r: ActiveRun): Promise<void> {
    r.ended = true
    if (r.timer) clearTimeout(r.timer)
    this.active.delete(r.runId)
    setImmediate(() => r.execution?.dispose())
    const live = [...r.threads]
    r.threads.clear()
    for (const [tid] of live) {
      this.runOfThread.delete(tid)
      this.archivedWithIdle.delete(tid)
    }
    for (const [tid, t] of live) {
      await this.p.brains.stopThread({ sessionId: r.sessionId, threadId: tid })
      // (its brain may have archived it with its last idle meanwhile)
      const [last] = this.p.log.read(r.sessionId, { threadId: tid, types: ['session.thread_status_terminated'], order: 'desc', limit: 1, includeUnsynced: true })
      if (last) continue
      await this.p.log
        .append(r.sessionId, [{ type: 'session.thread_status_terminated', session_thread_id: tid, agent_name: t.agentName || 'agent', archived: true }], { precheck: () => this.fence(r.sessionId) })
        .catch((err: unknown) => (isLeaseLost(err) ? undefined : this.p.onError?.(r.sessionId, err)))
    }
    // the lease stays pinned until the run's threads are archived: a takeover in between would find the run ended and its threads live
    if (!this.hasRuns(r.sessionId) && !this.stopped) this.p.brains.unpin(r.sessionId)
  }

  /** Forgets a run without writing anything (its session ended, or its lease went to another process: `unpin` false). */
  private drop(r: ActiveRun, unpin = true): void {
    r.ended = true
    if (r.timer) clearTimeout(r.timer)
    this.active.delete(r.runId)
    for (const tid of r.threads.keys()) {
      this.runOfThread.delete(tid)
      this.archivedWithIdle.delete(tid)
    }
    setImmediate(() => r.execution?.dispose())
    if (unpin && !this.hasRuns(r.sessionId) && !this.stopped) this.p.brains.unpin(r.sessionId)
  }
}

/** Adds an agent.message's text blocks to `texts` (a run thread's answer is its messages' text). */
function pushTexts(texts: string[], event: StoredEvent['event']): void {
  for (const b of (event as { content?: { type: string; text?: string }[] }).content ?? []) if (b.type === 'text' && b.text) texts.push(b.text)
}

/** The agent.message texts of a thread among events. */
function textsOf(events: readonly StoredEvent[], tid: string): string[] {
  const texts: string[] = []
  for (const { event } of events) if (event.type === 'agent.message' && event.session_thread_id === tid) pushTexts(texts, event)
  return texts
}

/** `last` archived its thread in the same append as `idle`, the idle that ended the thread's turn. */
function isArchiveOf(last: StoredEvent, idle: StoredEvent): boolean {
  return last.event.type === 'session.thread_status_terminated' && (last.event as { archived?: boolean }).archived === true && idle.event.type === 'session.thread_status_idle' && last.seq === idle.seq + 1
}
