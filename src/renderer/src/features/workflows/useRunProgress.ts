import { useEffect, useRef, useState } from 'react'
import { useClient } from '../../api/context'
import type { Session } from '../../api/types'
import { RunBoard, runOpen } from './run-board'
import { readRunEvents } from './useWorkflowRuns'

/** How often the session list re-reads the run events of the sessions it follows. */
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
 * person), for the session list: each followed session's run events are read once in full, then
 * every POLL_MS only those processed since the last one read (`created_at[gte]`), folded into a
 * RunBoard per session. A session no longer followed is dropped. Timer and reads end with the list.
 */
export function useRunProgress(sessions: readonly Session[], follow: (s: Session) => boolean): ReadonlyMap<string, RunProgress> {
  const client = useClient()
  const [progress, setProgress] = useState<ReadonlyMap<string, RunProgress>>(new Map())
  const followed = sessions.filter((s) => !s.archived_at && follow(s)).map((s) => s.id)
  const key = followed.join(',')
  const state = useRef(new Map<string, { board: RunBoard; since?: string }>())

  useEffect(() => {
    const ids = key ? key.split(',') : []
    const boards = state.current
    for (const id of [...boards.keys()]) if (!ids.includes(id)) boards.delete(id)
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
        await Promise.all(
          ids.map(async (id) => {
            const entry = boards.get(id) ?? { board: new RunBoard() }
            boards.set(id, entry)
            const events = await readRunEvents(client, id, entry.since).catch(() => [])
            for (const e of events) entry.board.apply(e)
            const last = events[events.length - 1]
            if (last?.processed_at) entry.since = last.processed_at
          }),
        )
        if (!live) return
        const next = new Map<string, RunProgress>()
        for (const id of ids) {
          const open = boards.get(id)?.board.runs().filter(runOpen) ?? []
          if (open.length === 0) continue
          next.set(id, {
            runs: open.length,
            started: open.reduce((n, r) => n + r.counts.started, 0),
            done: open.reduce((n, r) => n + r.counts.done, 0),
            waiting: open.reduce((n, r) => n + r.counts.waiting, 0),
          })
        }
        setProgress(next)
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
