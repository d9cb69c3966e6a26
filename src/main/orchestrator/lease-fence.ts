/**
 * A brain writes only while its engine holds the session's lease. The scheduler stops a brain
 * when a renewal finds the lease gone, but a process that was paused (a laptop asleep, SIGSTOP,
 * a long GC) wakes with brains mid-turn whose model answers arrive before the next renewal runs;
 * another engine has meanwhile taken the lease and re-run the same threads. So every write a
 * brain makes — its events and its tool journal's records — is fenced inside its transaction:
 * when the session's lease row no longer names this engine, nothing is written and the write
 * rejects with the lease-lost conflict (session/lease-store.ts `isLeaseLost`), which ends the brain
 * quietly (Scheduler). A tool call whose journal record is refused never reaches the hands.
 */
import type { EventAppendOptions, EventInput, EventLog, EventsAtCommit, StoredEvent } from '../session/event-log'
import type { ToolJournal } from '../session/tool-journal'

/** A log whose appends take a precheck run inside their transaction (SqliteEventLog). */
export type PrecheckedLog = EventLog & {
  append(sessionId: string, events: readonly EventInput[] | EventsAtCommit, options?: EventAppendOptions & { precheck?: () => void }): Promise<StoredEvent[]>
}

/** `log` with every append fenced by `fence(sessionId)` (throws when the lease is lost); reads and subscriptions pass through. */
export function fencedLog(log: PrecheckedLog, fence: (sessionId: string) => void): EventLog {
  return {
    append: (sessionId, events, options) => log.append(sessionId, events, { ...options, precheck: () => fence(sessionId) }),
    read: (sessionId, params) => log.read(sessionId, params),
    get: (eventId) => log.get(eventId),
    lastSeq: (sessionId, options) => log.lastSeq(sessionId, options),
    tail: (sessionId, fromSeq, listener) => log.tail(sessionId, fromSeq, listener),
    subscribeAll: (listener) => log.subscribeAll(listener),
    subscribeCommitted: (listener) => log.subscribeCommitted(listener),
    whenSynced: () => log.whenSynced(),
  }
}

/** `journal` with every record fenced the same way. */
export function fencedJournal(journal: ToolJournal, fence: (sessionId: string) => void): ToolJournal {
  return {
    markStarted: (sessionId, toolUseId) => journal.markStarted(sessionId, toolUseId, { precheck: () => fence(sessionId) }),
    wasStarted: (toolUseId) => journal.wasStarted(toolUseId),
  }
}
