/**
 * The limit on a session's child threads (spec multiagent.md §3.3), as one rule for everything
 * that counts them: the runtime's `send_to_agent` (harness/session-threads.ts) and the thread
 * store (session/thread-store.ts).
 */

/** Child threads a session may hold at once (idle ones included; archiving frees the slot). */
export const MAX_LIVE_CHILD_THREADS = 25

/** What the rule reads of a thread. */
export interface ThreadSlotFacts {
  /** null: the primary thread (it holds no slot). */
  parentThreadId: string | null
  status: string
  /** The thread's agent type; an advisor consultation (`advisor`) holds no slot. */
  agentType?: string
  /** A workflow-run thread holds no slot. */
  workflowRunId?: string | null
}

/** Whether a thread holds one of its session's child slots: a child, not terminated, neither an advisor consultation nor a workflow-run thread. */
export function holdsChildSlot(t: ThreadSlotFacts): boolean {
  return t.parentThreadId !== null && t.status !== 'terminated' && t.agentType !== 'advisor' && (t.workflowRunId ?? null) === null
}

/** How many of these threads hold a child slot. */
export function countChildSlots(threads: Iterable<ThreadSlotFacts>): number {
  let n = 0
  for (const t of threads) if (holdsChildSlot(t)) n++
  return n
}
