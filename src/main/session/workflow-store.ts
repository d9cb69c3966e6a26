import type { Statement } from 'better-sqlite3'
import { CorralError } from '../../shared/errors'
import { foldWorkflowRuns, WORKFLOW_RUN_EVENT_TYPES, type WorkflowRunEventLike, type WorkflowRunFacts } from '../../shared/api/workflow-runs'
import type { Db } from './database'
import type { EventLog } from './event-log'

/**
 * A session's open workflow runs (created, not ended) as its primary's events say, in creation
 * order. Synchronous reads: callable inside an append's precheck (the transaction), so a check
 * against open runs and the write it guards see the same log.
 */
export function openWorkflowRuns(log: Pick<EventLog, 'read'>, sessionId: string): WorkflowRunFacts[] {
  const events: WorkflowRunEventLike[] = []
  let after = 0
  for (;;) {
    const page = log.read(sessionId, { types: WORKFLOW_RUN_EVENT_TYPES, threadId: null, after, limit: 1000 })
    for (const s of page) events.push(s.event as unknown as WorkflowRunEventLike)
    if (page.length < 1000) break
    after = page[page.length - 1].seq
  }
  return [...foldWorkflowRuns(events).values()].filter((r) => r.status !== 'ended')
}

/** Whether a run counts as running for what it blocks: running, or created and not yet started (it starts at once). */
export const isRunningRun = (r: WorkflowRunFacts) => r.status === 'running' || !r.started

/** The 400 of what an open run blocks (spec multiagent §6.9): `error.details.error_code` is `workflow_run_open`. */
export function workflowRunOpenError(message: string): CorralError {
  return new CorralError('invalid_request_error', message, { fields: { details: { error_code: 'workflow_run_open' } } })
}

/** A call out of a run's program as the journal keeps it (harness/workflows/execution.ts's JournalRow). */
export interface WorkflowCallRow {
  index: number
  kind: 'agent' | 'phase_start' | 'phase_end'
  argsHash: string
  threadId: string | null
  phaseId: string | null
  outcome: { ok: true; value: string } | { ok: false; message: string } | null
  resolvedSeq: number | null
}

/**
 * The journal of workflow runs (docs/workflows.md): a row per call out of a run's program and
 * the program's log lines (tables workflow_calls, workflow_logs). The writes are synchronous
 * statements meant to run as the `precheck` of the log append that carries the call's events
 * (SqliteEventLog.append(..., { precheck })), so a row commits with its events or not at all;
 * `commitWith` does the same for a write with no events (a log line).
 */
export class WorkflowStore {
  private readonly insertCall: Statement
  private readonly resolveCall: Statement
  private readonly selectCalls: Statement
  private readonly insertLog: Statement
  private readonly selectLogs: Statement
  private readonly countLogs: Statement
  private readonly selectRunOfThread: Statement
  private readonly selectOpenSessions: Statement
  private readonly selectEnded: Statement

  constructor(db: Db) {
    this.insertCall = db.prepare(
      'INSERT INTO workflow_calls (run_id, call_index, session_id, kind, args_hash, thread_id, phase_id) VALUES (@run, @index, @session, @kind, @hash, @thread, @phase)',
    )
    this.resolveCall = db.prepare('UPDATE workflow_calls SET outcome = @outcome, resolved_seq = @seq WHERE run_id = @run AND call_index = @index AND outcome IS NULL')
    this.selectCalls = db.prepare('SELECT call_index, kind, args_hash, thread_id, phase_id, outcome, resolved_seq FROM workflow_calls WHERE run_id = ? ORDER BY call_index')
    this.insertLog = db.prepare('INSERT OR IGNORE INTO workflow_logs (run_id, line, session_id, text) VALUES (?, ?, ?, ?)')
    this.selectLogs = db.prepare('SELECT line, text FROM workflow_logs WHERE run_id = ? AND line > ? ORDER BY line LIMIT ?')
    this.countLogs = db.prepare('SELECT COUNT(*) AS n FROM workflow_logs WHERE run_id = ?')
    this.selectRunOfThread = db.prepare('SELECT run_id, call_index FROM workflow_calls WHERE thread_id = ?')
    // through the events' type index (status_ended is listed in it: not a dense type). The index
    // is partial: without `type_mark IS NOT 0` SQLite cannot use it and walked the session's
    // whole log instead — once per append of a run (its precheck), 0.4 ms a time at 4,000 events
    this.selectEnded = db.prepare(
      `SELECT 1 FROM events e INDEXED BY events_type_marks WHERE e.session_rid = (SELECT rid FROM sessions WHERE id = ?) AND e.type = 'workflow_run.status_ended' AND e.type_mark IS NOT 0 AND json_extract(e.data, '$.workflow_run_id') = ? LIMIT 1`,
    )
    // per session through the events' type index: more runs created than ended
    this.selectOpenSessions = db.prepare(
      `SELECT s.id FROM sessions s WHERE s.deleting = 0 AND s.archived_at IS NULL
         AND (SELECT COUNT(*) FROM events e INDEXED BY events_type_marks WHERE e.session_rid = s.rid AND e.type = 'workflow_run.created' AND e.type_mark IS NOT 0)
           > (SELECT COUNT(*) FROM events e INDEXED BY events_type_marks WHERE e.session_rid = s.rid AND e.type = 'workflow_run.status_ended' AND e.type_mark IS NOT 0)`,
    )
  }

  /** Sessions with a workflow run that has not ended (to replay at start-up). */
  sessionsWithOpenRuns(): string[] {
    return this.selectOpenSessions.pluck().all() as string[]
  }

  /**
   * Whether the run's `workflow_run.status_ended` is in the log, as this connection sees it: inside
   * an append's transaction (a precheck), an end committed earlier in the same group included.
   */
  runEnded(sessionId: string, runId: string): boolean {
    return this.selectEnded.get(sessionId, runId) !== undefined
  }

  /** Records a call (throws on a second row for the same index: a call is journaled once). */
  recordCall(p: { runId: string; sessionId: string; index: number; kind: WorkflowCallRow['kind']; argsHash: string; threadId?: string | null; phaseId?: string | null }): void {
    this.insertCall.run({ run: p.runId, index: p.index, session: p.sessionId, kind: p.kind, hash: p.argsHash, thread: p.threadId ?? null, phase: p.phaseId ?? null })
  }

  /** Records an agent call's result and completion order (once: a second result is ignored). */
  resolveAgent(p: { runId: string; index: number; outcome: NonNullable<WorkflowCallRow['outcome']>; resolvedSeq: number }): void {
    this.resolveCall.run({ run: p.runId, index: p.index, outcome: JSON.stringify(p.outcome), seq: p.resolvedSeq })
  }

  /** A run's journal, by call index. */
  calls(runId: string): WorkflowCallRow[] {
    return (this.selectCalls.all(runId) as { call_index: number; kind: WorkflowCallRow['kind']; args_hash: string; thread_id: string | null; phase_id: string | null; outcome: string | null; resolved_seq: number | null }[]).map((r) => ({
      index: r.call_index,
      kind: r.kind,
      argsHash: r.args_hash,
      threadId: r.thread_id,
      phaseId: r.phase_id,
      outcome: r.outcome === null ? null : (JSON.parse(r.outcome) as WorkflowCallRow['outcome']),
      resolvedSeq: r.resolved_seq,
    }))
  }

  /** The run and call a thread was started for, if it is a run's thread. */
  callOfThread(threadId: string): { runId: string; index: number } | undefined {
    const r = this.selectRunOfThread.get(threadId) as { run_id: string; call_index: number } | undefined
    return r && { runId: r.run_id, index: r.call_index }
  }

  /** Keeps a log line (its number is its place in the program's output: a replayed line is not kept twice). */
  addLog(p: { runId: string; sessionId: string; line: number; text: string }): void {
    this.insertLog.run(p.runId, p.line, p.sessionId, p.text)
  }

  /** A run's log lines after `after` (a line number), at most `limit`. */
  logs(runId: string, params: { after?: number; limit?: number } = {}): { line: number; text: string }[] {
    return this.selectLogs.all(runId, params.after ?? 0, Math.min(params.limit ?? 1000, 1000)) as { line: number; text: string }[]
  }

  logCount(runId: string): number {
    return (this.countLogs.get(runId) as { n: number }).n
  }
}
