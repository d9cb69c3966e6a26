import { useEffect, useState } from 'react'
import type { CorralClient } from '../../api/client'
import { useClient } from '../../api/context'
import type { Session } from '../../api/types'
import type { WorkflowRunView } from '../../../../shared/api/workflow-runs'

/** How often the session list re-reads the runs of the sessions it follows. */
const POLL_MS = 3000

/** A session's open workflow runs, summed: how many, their agents started and done. */
export interface RunProgress {
  runs: number
  started: number
  done: number
  waiting: number
}

/** "workflow · 37/200 done", or "2 workflows · 37/200 done". */
export function runProgressLabel(p: RunProgress): string {
  return `${p.runs === 1 ? 'workflow' : `${p.runs} workflows`} · ${p.done}/${p.started} done`
}

/**
 * The open workflow runs of the sessions `follow` says may have one (running, or waiting for the
 * person), for the session list: each followed session's runs from Corral's route
 * (`workflowRuns.list`, every page; their agents' counts are the engine's), every POLL_MS while the
 * page is visible. A session no longer followed is dropped. Timer and reads end with the list.
 */
export function useRunProgress(sessions: readonly Session[], follow: (s: Session) => boolean): ReadonlyMap<string, RunProgress> {
  const client = useClient()
  const [progress, setProgress] = useState<ReadonlyMap<string, RunProgress>>(new Map())
  const key = sessions
    .filter((s) => !s.archived_at && follow(s))
    .map((s) => s.id)
    .join(',')

  useEffect(() => {
    const ids = key ? key.split(',') : []
    if (ids.length === 0) {
      setProgress(new Map())
      return
    }
    let live = true
    let busy = false
    const poll = async () => {
      if (busy || document.visibilityState !== 'visible') return
      busy = true
      try {
        const next = new Map<string, RunProgress>()
        await Promise.all(
          ids.map(async (id) => {
            const open = (await openRuns(client, id).catch(() => [])) as WorkflowRunView[]
            if (open.length === 0) return
            next.set(id, {
              runs: open.length,
              started: open.reduce((n, r) => n + r.agents.started, 0),
              done: open.reduce((n, r) => n + r.agents.done, 0),
              waiting: open.reduce((n, r) => n + r.agents.waiting, 0),
            })
          }),
        )
        if (live) setProgress(next)
      } finally {
        busy = false
      }
    }
    void poll()
    const t = setInterval(() => void poll(), POLL_MS)
    return () => {
      live = false
      clearInterval(t)
    }
  }, [client, key])

  return progress
}

/** A session's runs that have not ended, through every page of `workflowRuns.list`. */
async function openRuns(client: CorralClient, sessionId: string): Promise<WorkflowRunView[]> {
  const out: WorkflowRunView[] = []
  let page: string | undefined
  for (let i = 0; i < 20; i++) {
    const r = await client.request<{ data: WorkflowRunView[]; next_page: string | null }>('workflowRuns.list', { id: sessionId }, page ? { limit: 100, page } : { limit: 100 })
    out.push(...r.data.filter((run) => run.status !== 'ended'))
    if (!r.next_page) break
    page = r.next_page
  }
  return out
}
