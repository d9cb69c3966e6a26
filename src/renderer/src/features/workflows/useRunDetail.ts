import { useEffect, useRef, useState } from 'react'
import { useClient } from '../../api/context'
import type { WorkflowRunDetailView } from '../../../../shared/api/workflow-runs'

/** At most one read of a run's detail this often while its events move. */
const SPACING_MS = 2000

/**
 * A run's view from Corral's route (`workflowRuns.retrieve`: its log line count, its cost, each
 * agent's `list_cost` and why it failed), read when the card mounts and again when `revision`
 * (the board's, bumped by every event of the run) moves, at most once every SPACING_MS, and once
 * more when the run ends. One request for all its agents, however many: the grid's costs do not
 * wait on the thread list. Undefined until read, or on an engine without the route.
 */
export function useRunDetail(sessionId: string, runId: string, revision: number, ended: boolean): WorkflowRunDetailView | undefined {
  const client = useClient()
  const [detail, setDetail] = useState<WorkflowRunDetailView>()
  const lastRead = useRef(0)
  const timer = useRef<ReturnType<typeof setTimeout>>(undefined)
  const inFlight = useRef(false)
  const again = useRef(false)
  const alive = useRef(true)
  useEffect(() => {
    alive.current = true
    return () => {
      alive.current = false
      if (timer.current) clearTimeout(timer.current)
    }
  }, [])
  useEffect(() => {
    const read = () => {
      timer.current = undefined
      if (inFlight.current) {
        // Moved while a read was out: read once more after it (the run's end must not be missed).
        again.current = true
        return
      }
      inFlight.current = true
      lastRead.current = Date.now()
      client
        .request<WorkflowRunDetailView>('workflowRuns.retrieve', { id: sessionId, runId })
        .then((d) => alive.current && setDetail(d))
        .catch(() => {})
        .finally(() => {
          inFlight.current = false
          if (again.current && alive.current && !timer.current) {
            again.current = false
            timer.current = setTimeout(read, SPACING_MS)
          }
        })
    }
    if (timer.current) return
    const wait = Math.max(0, lastRead.current + SPACING_MS - Date.now())
    if (wait === 0) read()
    else timer.current = setTimeout(read, ended ? Math.min(wait, 300) : wait)
  }, [client, sessionId, runId, revision, ended])
  return detail
}
