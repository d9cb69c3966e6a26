/**
 * One workflow run's execution: the program (program.ts) with its journal and its limits. Pure:
 * it writes nothing itself; its host (orchestrator/workflow-runs.ts) starts the threads, writes
 * the events and journal rows, and tells it when an agent's thread is done. docs/workflows.md
 * has the rules; in short:
 *
 * - every call out of the program has a call index; a call whose index has a journal row of the
 *   same kind and arguments hash re-attaches to it (a finished agent resolves from its row, in
 *   the recorded completion order; an unfinished one waits on its thread; a phase writes no
 *   event again); a row of another kind or hash, or a recorded completion whose call the
 *   program does not make, is a divergence: `program_error` naming the call;
 * - at most `maxConcurrent` agents at once (further calls wait in call order); the
 *   `maxAgents + 1`-th agent call ends the run with `thread_limit_error`, which the program
 *   cannot catch.
 */
import { hash } from 'node:crypto'
import type { QuickJSWASMModule } from 'quickjs-emscripten'
import { WorkflowProgram, type AgentSpec, type CallOutcome, type ProgramCall, type ProgramLimits } from './program'

export type { AgentSpec, CallOutcome }

export type AgentCall = Extract<ProgramCall, { kind: 'agent' }>

/** A journal row as the store keeps it (session/workflow-store.ts). */
export interface JournalRow {
  index: number
  kind: ProgramCall['kind']
  argsHash: string
  /** An agent call's thread. */
  threadId: string | null
  /** A phase start's `wrph_` id. */
  phaseId: string | null
  /** An agent call's result, once its thread is done. */
  outcome: CallOutcome | null
  /** When it was done: the seq of the event that finished its thread (the completion order). */
  resolvedSeq: number | null
}

/** How a run's program ended (the run's `status_ended` result follows from it). */
export type ExecutionEnd =
  | { type: 'completed'; output: unknown }
  | { type: 'error'; error: { type: 'program_error' | 'thread_limit_error'; message: string }; output?: undefined }

export interface ExecutionHost {
  /** A new agent call to run: start its thread (and write its journal row with it). */
  startAgent(call: AgentCall, argsHash: string): void
  /** A journaled agent call without a result: its thread lives on; call `complete` when it is done. */
  attachAgent(call: AgentCall, row: JournalRow): void
  /** A new phase: returns its `wrph_` id (written with its `phase_started` and journal row). */
  phaseStarted(call: Extract<ProgramCall, { kind: 'phase_start' }>, argsHash: string): string
  /** A phase left (written once: never for a journaled phase end). */
  phaseEnded(call: Extract<ProgramCall, { kind: 'phase_end' }>, phaseId: string, argsHash: string): void
  log(line: string): void
  /** Once: the program ended; `openPhases` are the phases it started and never left. */
  ended(end: ExecutionEnd, openPhases: string[]): void
}

export interface WorkflowExecutionParams {
  module: QuickJSWASMModule
  source: string
  args: unknown
  journal: readonly JournalRow[]
  host: ExecutionHost
  /** Threads working at once (default 64). */
  maxConcurrent?: number
  /** Agents over the run's life (default 1000). */
  maxAgents?: number
  program?: ProgramLimits
}

/** The longest output (the return value's JSON text) a run may have: it travels in its `status_ended` event. */
export const MAX_WORKFLOW_OUTPUT_CHARS = 65_536

/** The arguments hash of a call: what replay compares (never its index). */
export function callHash(c: ProgramCall): string {
  const what = c.kind === 'agent' ? { kind: c.kind, spec: c.spec, prompt: c.prompt, label: c.label } : c.kind === 'phase_start' ? { kind: c.kind, name: c.name } : { kind: c.kind, start: c.startIndex }
  return hash('sha256', JSON.stringify(what), 'hex').slice(0, 32)
}

const describe = (c: ProgramCall) => (c.kind === 'agent' ? `agent(${JSON.stringify(typeof c.spec === 'string' ? c.spec : c.spec.name)})` : c.kind === 'phase_start' ? `phase(${JSON.stringify(c.name)})` : 'the end of a phase')

export class WorkflowExecution {
  private readonly program: WorkflowProgram
  private readonly rows = new Map<number, JournalRow>()
  /** Recorded completions, in completion order, and how many have been delivered. */
  private readonly replay: JournalRow[]
  private cursor = 0
  /** Agent calls made and not yet answered (index → whether it holds a working slot). */
  private readonly open = new Map<number, boolean>()
  /** Agent calls waiting for a slot, in call order (a new call's hash is computed when it starts: 500 calls come at once at a phase's start). */
  private readonly queue: AgentCall[] = []
  private readonly phases = new Map<number, string>()
  private readonly openPhases = new Set<number>()
  private agents = 0
  /** How many open calls hold a working slot (kept, not counted: a run may have a thousand calls open). */
  private slots = 0
  private limitHit = false
  private endedWith: ExecutionEnd | undefined
  private readonly maxConcurrent: number
  private readonly maxAgents: number

  constructor(private readonly p: WorkflowExecutionParams) {
    this.maxConcurrent = p.maxConcurrent ?? 64
    this.maxAgents = p.maxAgents ?? 1000
    for (const r of p.journal) this.rows.set(r.index, r)
    this.replay = p.journal.filter((r) => r.kind === 'agent' && r.outcome && r.resolvedSeq !== null).sort((a, b) => a.resolvedSeq! - b.resolvedSeq!)
    this.agents = p.journal.filter((r) => r.kind === 'agent').length
    this.program = new WorkflowProgram(p.module, {
      source: p.source,
      args: p.args,
      limits: p.program,
      hooks: { onCall: (c) => this.onCall(c), onLog: (l) => p.host.log(l), onEnd: (e) => this.onEnd(e) },
    })
  }

  get ended(): ExecutionEnd | undefined {
    return this.endedWith
  }

  /** Agents working now (started or re-attached, not yet answered). */
  get working(): number {
    return this.slots
  }

  /** Agent calls waiting for a working slot. */
  get waiting(): number {
    return this.queue.length
  }

  /** Runs the program from the top: the journal's completions are delivered, then it goes on live. */
  start(): void {
    this.program.start()
    this.drainReplay()
    if (!this.endedWith && this.cursor < this.replay.length) {
      const r = this.replay[this.cursor]
      this.diverge(`the journal's call ${r.index} (an agent on thread ${r.threadId}) finished in the recorded run, but the program no longer makes it`)
    }
  }

  /**
   * An agent call's thread has stopped working (its result is being recorded): its working slot
   * goes to the next waiting call now, so that call's thread is started in the same commit as the
   * finished one's result instead of one commit later. `complete` still gives the program the
   * result. Ignored for a call not open or whose slot is free already.
   */
  release(index: number): void {
    if (this.endedWith || !this.open.get(index)) return
    this.open.set(index, false)
    this.slots--
    this.startQueued()
  }

  /** An agent call's thread is done (live): its result or why it failed. Ignored for a call not open. */
  complete(index: number, outcome: CallOutcome): void {
    if (this.endedWith || !this.open.has(index)) return
    this.release(index)
    this.open.delete(index)
    this.program.settle(index, outcome)
  }

  /** Ends the program from outside (stop, timeout, archive): nothing more is called on the host but `ended` is not either. */
  dispose(): void {
    this.endedWith ??= { type: 'error', error: { type: 'program_error', message: 'disposed' } }
    this.program.dispose()
  }

  private onCall(c: ProgramCall): void {
    const row = this.rows.get(c.index)
    if (row && (row.kind !== c.kind || row.argsHash !== callHash(c))) {
      return this.diverge(`call ${c.index} is ${describe(c)} but the journal's call ${c.index} was ${row.kind === 'agent' ? 'an agent call' : row.kind === 'phase_start' ? 'a phase start' : 'a phase end'}${row.kind === c.kind ? ' with other arguments' : ''}`)
    }
    if (c.kind === 'phase_start') {
      const id = row?.phaseId ?? this.p.host.phaseStarted(c, callHash(c))
      this.phases.set(c.index, id)
      this.openPhases.add(c.index)
      return
    }
    if (c.kind === 'phase_end') {
      const id = this.phases.get(c.startIndex)
      this.openPhases.delete(c.startIndex)
      if (!row && id) this.p.host.phaseEnded(c, id, callHash(c))
      return
    }
    if (row) {
      if (row.outcome && row.resolvedSeq !== null) this.open.set(c.index, false) // delivered from the journal, in completion order
      else {
        this.open.set(c.index, true)
        this.slots++
        this.p.host.attachAgent(c, row)
      }
      return
    }
    if (this.agents >= this.maxAgents) {
      this.limitHit = true
      this.program.fail(`the program asked for more than ${this.maxAgents} agents (call ${c.index})`)
      return
    }
    this.agents++
    if (this.working >= this.maxConcurrent) {
      this.open.set(c.index, false)
      this.queue.push(c)
      return
    }
    this.open.set(c.index, true)
    this.slots++
    this.p.host.startAgent(c, callHash(c))
  }

  private startQueued(): void {
    while (this.queue.length && this.working < this.maxConcurrent && !this.endedWith) {
      const call = this.queue.shift()!
      if (!this.open.has(call.index)) continue
      this.open.set(call.index, true)
      this.slots++
      this.p.host.startAgent(call, callHash(call))
    }
  }

  /** Delivers recorded completions, in order, while their calls have been made. */
  private drainReplay(): void {
    while (!this.endedWith && this.cursor < this.replay.length) {
      const r = this.replay[this.cursor]
      if (!this.open.has(r.index)) return
      this.cursor++
      this.open.delete(r.index)
      this.program.settle(r.index, r.outcome!)
    }
  }

  private diverge(why: string): void {
    this.program.fail(`the program diverged from its journal: ${why}`)
  }

  private onEnd(e: { type: 'returned'; output: unknown } | { type: 'failed'; message: string }): void {
    if (this.endedWith) return
    if (e.type === 'returned' && this.cursor < this.replay.length) {
      const r = this.replay[this.cursor]
      e = { type: 'failed', message: `the program diverged from its journal: it returned, but the journal's call ${r.index} (an agent on thread ${r.threadId}) finished in the recorded run and the program no longer makes it` }
    }
    const size = e.type === 'returned' ? JSON.stringify(e.output ?? null).length : 0
    if (size > MAX_WORKFLOW_OUTPUT_CHARS) e = { type: 'failed', message: `the program returned ${size} characters of JSON; a run's output may be at most ${MAX_WORKFLOW_OUTPUT_CHARS} (leave large results in files and return their paths)` }
    this.endedWith = e.type === 'returned' ? { type: 'completed', output: e.output } : { type: 'error', error: { type: this.limitHit ? 'thread_limit_error' : 'program_error', message: e.message } }
    const open = [...this.openPhases].map((i) => this.phases.get(i)!).filter(Boolean)
    this.p.host.ended(this.endedWith, open)
  }
}
