/**
 * The run's log lines (`log(...)` in its program). They are kept in the engine's journal, not on
 * the session stream (docs/workflows.md), and this engine serves them by no route yet: the section
 * says so rather than showing an empty log.
 */
export function RunLog({ runId }: { sessionId: string; runId: string; open: boolean }) {
  return (
    <details className="run-log" data-run={runId}>
      <summary>Log</summary>
      <p className="run-log-unavailable muted" role="note">
        Log not available: this engine keeps the run's log lines but serves them by no route yet.
      </p>
    </details>
  )
}
