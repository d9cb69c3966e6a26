import { useEffect, useState } from 'react'
import type { CorralClient } from '../../api/client'
import { useClient } from '../../api/context'
import { followSession } from '../../api/follow'
import type { Page, SessionEvent } from '../../api/types'
import { RUN_BOARD_EVENT_TYPES, RunBoard, type RefusedRun, type RunBoardEvent, type RunState } from './run-board'

/** Events per page when a board reads a session's run history (the API's largest page). */
const PAGE = 1000

/**
 * Every event a RunBoard reads of one session, oldest first: all pages of a typed
 * `events.list`, or only those processed at or after `since` (the board drops the ones it has).
 */
export async function readRunEvents(client: CorralClient, sessionId: string, since?: string): Promise<RunBoardEvent[]> {
  const out: RunBoardEvent[] = []
  let page: string | undefined
  for (;;) {
    const q: Record<string, unknown> = { types: [...RUN_BOARD_EVENT_TYPES], order: 'asc', limit: PAGE }
    if (page) q.page = page
    if (since) q['created_at[gte]'] = since
    const res = await client.request<Page<SessionEvent>>('events.list', { id: sessionId }, q)
    out.push(...(res.data as unknown as RunBoardEvent[]))
    if (!res.next_page) return out
    page = res.next_page
  }
}

export interface WorkflowRunsData {
  /** By run id. */
  runs: ReadonlyMap<string, RunState>
  /** Starts the engine refused. */
  refused: readonly RefusedRun[]
  /** The board itself, for what the views ask of it by thread (its run, its agent). */
  board: RunBoard
}

/**
 * A session's workflow runs, kept live. Costs nothing in a session without runs: it asks once
 * whether the session has a `workflow_run.created` (or `seen` says the timeline has folded one);
 * once it has one, it opens a stream of its own (no
 * previews), reads the run history (typed `events.list`, every page), folds both into a
 * RunBoard (de-duplicated by id) and re-renders at most once per animation frame however fast
 * events come. Disposed with the view.
 */
export function useWorkflowRuns(sessionId: string, seen: boolean): WorkflowRunsData {
  const client = useClient()
  const [active, setActive] = useState(false)
  const [data, setData] = useState<WorkflowRunsData>(() => ({ runs: new Map(), refused: [], board: new RunBoard() }))

  // Has the session ever started a run? One small read per session opened.
  useEffect(() => {
    setActive(false)
    setData({ runs: new Map(), refused: [], board: new RunBoard() })
    let live = true
    client
      .request<Page<SessionEvent>>('events.list', { id: sessionId }, { types: ['workflow_run.created', 'workflow_run.error'], limit: 1 })
      .then((r) => live && r.data.length > 0 && setActive(true))
      .catch(() => {})
    return () => void (live = false)
  }, [client, sessionId])
  useEffect(() => {
    if (seen) setActive(true)
  }, [seen])

  useEffect(() => {
    if (!active) return
    let live = true
    let frame = 0
    const board = new RunBoard()
    const publish = () => {
      if (frame) return
      frame = requestAnimationFrame(() => {
        frame = 0
        if (live) setData({ runs: new Map(board.runs().map((r) => [r.id, r])), refused: board.refused().slice(), board })
      })
    }
    const fold = (events: readonly RunBoardEvent[]) => {
      let changed = false
      for (const e of events) changed = board.apply(e) || changed
      if (changed || events.length === 0) publish()
    }
    // the history is read once the stream is open (followSession): a thread that ends meanwhile is in one or the other
    const stop = followSession(client, sessionId, {}, {
      history: () => readRunEvents(client, sessionId),
      onHistory: fold,
      // The history could not be read: fold what the stream brings rather than nothing.
      onHistoryError: () => publish(),
      onMessage: (msg) => {
        if (msg.kind === 'event' && board.apply(msg.event as unknown as RunBoardEvent)) publish()
      },
      // Back after a drop: whatever the stream could not resume is in the history.
      onResync: fold,
    })
    return () => {
      live = false
      stop()
      if (frame) cancelAnimationFrame(frame)
    }
  }, [client, sessionId, active])

  return data
}
