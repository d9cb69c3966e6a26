import { useEffect, useRef, useState } from 'react'
import { ApiError } from '../../api/client'
import { useClient } from '../../api/context'
import type { WorkflowRunLogPage } from '../../../../shared/api/workflow-runs'

/** How often an open section re-reads a running run's log tail. */
const TAIL_MS = 2000
/** Lines per page when the section first reads the log. */
const PAGE = 1000
/** At most this many lines are kept on screen (the newest ones); the route pages the rest. */
const KEPT = 5000

/**
 * The run's log lines (`log(...)` in its program), kept by the engine in its journal and read
 * through Corral's route (`workflowRuns.logs`, docs/workflows.md "The routes"): every page once
 * the section is opened, then the tail (`after_line`) every TAIL_MS while the run is open. An
 * engine without the route (404 without a run named) says the log is not available. Nothing is
 * read while the section is closed; its timer ends with it.
 */
export function RunLog({ sessionId, runId, open, lines: count }: { sessionId: string; runId: string; open: boolean; lines?: number }) {
  const client = useClient()
  const [shown, setShown] = useState(false)
  const [lines, setLines] = useState<{ line: number; text: string }[]>([])
  const [state, setState] = useState<'idle' | 'loading' | 'ready' | 'unavailable' | 'error'>('idle')
  const [error, setError] = useState<string>()
  const last = useRef(0)

  useEffect(() => {
    if (!shown) return
    let live = true
    let timer: ReturnType<typeof setTimeout> | undefined
    const add = (data: { line: number; text: string }[]) => {
      if (data.length === 0) return
      last.current = data[data.length - 1].line
      setLines((old) => {
        const next = [...old, ...data.filter((l) => l.line > (old[old.length - 1]?.line ?? 0))]
        return next.length > KEPT ? next.slice(next.length - KEPT) : next
      })
    }
    const first = async () => {
      let page: string | undefined
      for (;;) {
        const r = await client.request<WorkflowRunLogPage>('workflowRuns.logs', { id: sessionId, runId }, page ? { limit: PAGE, page } : { limit: PAGE })
        if (!live) return
        add(r.data)
        if (!r.next_page) return
        page = r.next_page
      }
    }
    const tail = async () => {
      const r = await client.request<WorkflowRunLogPage>('workflowRuns.logs', { id: sessionId, runId }, { after_line: last.current, limit: PAGE })
      if (live) add(r.data)
    }
    const loop = (read: () => Promise<void>) => {
      read()
        .then(() => {
          if (!live) return
          setState('ready')
          if (open) timer = setTimeout(() => loop(tail), TAIL_MS)
        })
        .catch((e: unknown) => {
          if (!live) return
          if (e instanceof ApiError && e.status === 404 && !e.message.includes(runId)) setState('unavailable')
          else {
            setState('error')
            setError((e as Error).message)
          }
        })
    }
    if (last.current === 0) {
      setState('loading')
      loop(first)
    } else loop(tail)
    return () => {
      live = false
      if (timer) clearTimeout(timer)
    }
  }, [client, sessionId, runId, shown, open])

  return (
    <details className="run-log" data-run={runId} onToggle={(e) => setShown((e.currentTarget as HTMLDetailsElement).open)}>
      <summary>
        Log{count !== undefined ? ` · ${count} line${count === 1 ? '' : 's'}` : ''}
      </summary>
      {state === 'unavailable' ? (
        <p className="run-log-unavailable muted" role="note">
          Log not available: this engine serves no log lines for a run.
        </p>
      ) : state === 'error' ? (
        <p className="run-log-unavailable confirm-err" role="alert">
          The log could not be read: {error}
        </p>
      ) : lines.length === 0 ? (
        <p className="run-log-unavailable muted">{state === 'loading' || state === 'idle' ? 'Reading the log…' : 'The program has logged nothing yet.'}</p>
      ) : (
        <pre className="run-log-lines" aria-label="Log lines">
          {lines.map((l) => (
            <span key={l.line} className="run-log-line" data-line={l.line}>
              {l.text}
              {'\n'}
            </span>
          ))}
        </pre>
      )}
    </details>
  )
}
