import type { AnyEventInput, AnyLoggedEvent } from '../../shared/api/events'

/**
 * An event as the API shows it: one member of the SDK's closed union (so `switch (e.type)`
 * narrows), with `id`, `processed_at`, optional `session_thread_id`, and the fields Corral adds
 * (CorralEventFields, src/shared/api/events.ts).
 */
export type LoggedEvent = AnyLoggedEvent

/**
 * An event on its way into the log, as the rooms above write it: a member of the same union
 * without `processed_at` (the log assigns it) and with `id` optional (the log assigns one
 * unless the writer chose it, as the harness does for an event it previewed under that id).
 */
export type EventInput = AnyEventInput

/**
 * What the log's storage takes: any type and fields (it stores events, it does not read them).
 * Its own tests and the send path, which appends events the API's zod schemas checked, write these.
 */
export type RawEventInput = { type: string; session_thread_id?: string | null; [field: string]: unknown }

/** An event with its position in its session's log. `seq` starts at 1 and has no gaps. */
export interface StoredEvent {
  seq: number
  sessionId: string
  event: LoggedEvent
}

export interface EventReadParams {
  /** Only events with seq > after (read forward from where a reader left off). */
  after?: number
  /** Only events with seq < before (e.g. the N events before a point, with order 'desc'). */
  before?: number
  /** At most this many (default 100, max 1000). */
  limit?: number
  order?: 'asc' | 'desc'
  /** Only events of these types. */
  types?: readonly string[]
  /** A thread id: only that thread's events; null: only the primary thread's; undefined: all. */
  threadId?: string | null
  /**
   * Only what the stream of this thread shows (isOnThreadStream, src/shared/api/events.ts): null,
   * the session stream (the primary's events and its children's primary-visible ones); a child's
   * id, that child's events but the `session.thread_created` naming it. Undefined: no such filter.
   */
  streamOf?: string | null
  /**
   * Also the events committed on this connection whose fsync is still running (by default a read
   * stops before a session's first event not yet on disk). For a brain catching up on its own
   * thread only: what it may do with such an event is build a model request, which leaves nothing
   * behind that outlives the process; a tool call still reaches the hands only once its journal
   * record is on disk, and the WAL is synced in order, so everything read before it is too.
   */
  includeUnsynced?: boolean
}

/**
 * How an append resolves: `committed`, as soon as its transaction committed (before the WAL's
 * fsync returns; see EventReadParams.includeUnsynced); by default once it is on disk. `lazy`: it
 * joins the next group another append commits, or the one the event loop's check phase commits
 * (setImmediate) at the latest, instead of committing as soon as the task that made it is done:
 * for events nothing waits on soon (a model request's span start, appended while the model
 * answers), which would otherwise each take a commit of their own.
 */
export interface EventAppendOptions {
  committed?: boolean
  lazy?: boolean
}

/**
 * An append's events computed inside its transaction instead of before it: for a writer whose
 * events depend on the session's log as it stands at the commit (a status aggregate over every
 * thread), so concurrent writers share one group commit instead of taking turns behind a lock
 * held across commits. `earlier`: the session's events appended earlier in the same transaction
 * (seq order; empty when none), which the log's reads do not show yet: what is before the first
 * of them is committed and readable as ever (read with `before` set to its seq). Runs
 * synchronously, and may run twice (a group redone with each append in a savepoint after one of
 * them failed): it must change nothing outside itself but what the log's committed events say.
 * Throwing rejects this append only.
 */
export type EventsAtCommit = (group: { earlier: readonly StoredEvent[] }) => readonly EventInput[]

export type EventListener = (stored: StoredEvent) => void
export type Disposer = () => void

/**
 * The session log: append-only, gapless per session, durable once a promise resolves.
 * Implementations: SqliteEventLog.
 */
export interface EventLog {
  /**
   * Appends events to one session atomically (all or none) and resolves with them stored,
   * once they are durable (with `committed`: once committed, see EventAppendOptions).
   * Subscribers are told only once they are durable.
   * Throws CorralError not_found_error for an unknown session. `events` may be computed inside
   * the append's transaction (EventsAtCommit).
   */
  append(sessionId: string, events: readonly EventInput[] | EventsAtCommit, options?: EventAppendOptions): Promise<StoredEvent[]>
  /** Reads events by position; see EventReadParams. */
  read(sessionId: string, params?: EventReadParams): StoredEvent[]
  /** One event by its `sevt_` id, or undefined. */
  get(eventId: string): StoredEvent | undefined
  /** The seq of the last event of a session (0 when it has none); with `includeUnsynced`, of the last one committed (see EventReadParams). */
  lastSeq(sessionId: string, options?: Pick<EventReadParams, 'includeUnsynced'>): number
  /**
   * Live subscription: delivers every event with seq > fromSeq, history first then live,
   * each exactly once and in order. Returns a disposer.
   */
  tail(sessionId: string, fromSeq: number, listener: EventListener): Disposer
  /** Every event appended to any session from now on, once it is durable. Returns a disposer. */
  subscribeAll(listener: EventListener): Disposer
  /**
   * Every event appended to any session from now on, as soon as its append committed: before it
   * is durable (an OS crash may yet lose it, with everything committed after it; a killed process
   * does not), in commit order. For what stays inside the process and the log — waking a brain,
   * a workflow run's driver — whose reads then include what is unsynced (EventReadParams); never
   * for what a client or the hands see, which wait for `subscribeAll`. Returns a disposer.
   */
  subscribeCommitted(listener: EventListener): Disposer
  /**
   * Until the disposer runs, `subscribeCommitted` listeners also hear what another process (another
   * connection to the same file) appends to this session, shortly after its commit, in seq order.
   * Absent where no other process can write (the caller then hears only this log's appends).
   */
  hearForeign?(sessionId: string): Disposer
  /**
   * Resolves once everything committed so far is durable; rejects as a durable append would when
   * it could not be made so. After an append with `committed`: its events are durable once this
   * resolves (a writer holds a lock until the commit only, and waits for the disk outside it).
   */
  whenSynced(): Promise<void>
}

/** Convenience: append one event and return it (an EventInput through EventLog, anything through the storage). */
export async function emitEvent<E extends EventInput | RawEventInput>(log: { append(sessionId: string, events: readonly E[]): Promise<StoredEvent[]> }, sessionId: string, event: NoInfer<E>): Promise<StoredEvent> {
  const [stored] = await log.append(sessionId, [event])
  return stored
}
