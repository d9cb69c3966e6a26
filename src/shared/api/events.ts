/**
 * Event facts, in one place: which event types exist, the status a status event sets, what an
 * answer answers, and what a request waits for. The session store, the thread store, the
 * harness fold, the context view and the renderer all read these tables, so they cannot
 * disagree (they used to: four status maps, one of them with `rescheduled` where the API says
 * `rescheduling`).
 *
 * Event types are the SDK's closed union (`SessionEvent`), so `switch (e.type)` narrows.
 * Corral adds no event type of its own today; one would be added to `EventType` here, and
 * every exhaustive fold (fold.ts) would then fail to compile until it handles it.
 * Corral does add fields to some events; they are named in `CorralEventFields`.
 */
import type { BetaManagedAgentsSessionThreadStatus } from '@anthropic-ai/sdk/resources/beta/sessions/threads/threads'
import { primaryThreadId } from './ids'
import type { Session, SessionEvent } from './types'

/**
 * Every event type the log holds: the API's (Corral adds none). Taken from the event union
 * itself: the SDK's `SessionEventType` list lacks `session.deleted`, which the union has.
 */
export type EventType = SessionEvent['type']

/** The SDK's event of one type (the API's fields only). */
export type EventOf<T extends EventType> = Extract<SessionEvent, { type: T }>

/** `stderr_ranges`: the parts of the result's text a bash command wrote to stderr, [from, to) in UTF-16 code units, ascending. */
type Result = { interrupted?: boolean; exit_code?: number; duration_ms?: number; stderr_ranges?: [number, number][] }

/**
 * The fields Corral writes beyond the API's, per event type: the one list of Corral's
 * additions to the API's events. All optional: an event written by an older Corral, or sent by
 * a client, may lack them.
 */
export interface CorralEventFields {
  /** `model`: the request's model; `stop_reason`: why the response stopped (`compaction` for a summary); `context_seq`: the last seq the request saw; `interrupted`: the turn was stopped mid-request. */
  'span.model_request_end': { model?: string; stop_reason?: string | null; context_seq?: number; interrupted?: boolean }
  /** `context_seq`: an idle written with a model answer covers only what that request saw. */
  'session.status_idle': { context_seq?: number }
  'session.thread_status_idle': { context_seq?: number }
  /** Which attempt of a failing episode this is, of how many, and the endpoint's HTTP status. */
  'session.error': { attempt?: number; max_attempts?: number; status_code?: number }
  /** The model's thinking block as the Messages API needs it back (or that it was redacted). */
  'agent.thinking': { thinking?: string; signature?: string; redacted?: boolean }
  /** The summary and the last seq (and event) it covers. */
  'agent.thread_context_compacted': { summary?: string; through_seq?: number; through_event_id?: string }
  /** `interrupted`: written while stopping a turn (not news for the model); exit code and duration for the tool card. */
  'agent.tool_result': Result
  'agent.mcp_tool_result': Result
  'user.tool_result': Result
  'user.custom_tool_result': Result
  /** Allowed without asking, by the confirmation with this id (an allow-for-session). */
  'agent.tool_use': { corral_allowed_by?: string }
  /** Remember this exact bash command for the rest of the session. */
  'user.tool_confirmation': { corral_allow_for_session?: boolean }
  /** The session's new vault_ids (the API's event names only title, metadata, budget and agent). */
  'session.updated': { vault_ids?: string[] }
  /** The resolved agent snapshot and the parent thread of a child thread; a workflow run's thread: the program's call index and the call's `label`. */
  'session.thread_created': { agent?: unknown; parent_thread_id?: string | null; workflow_call_index?: number; workflow_label?: string | null }
  /** `archived`: written by `POST …/threads/{tid}/archive` (the thread's `archived_at` is this event's `processed_at`). */
  'session.thread_status_terminated': { archived?: boolean }
  /** The grader's per-criterion gaps (the API's event carries the explanation only), and the grader's model (its usage is priced at it). */
  'span.outcome_evaluation_end': { gaps?: { criterion: string; gap: string }[]; model?: string }
  /** `tool_use_id`: the `ant__workflow_run_start` call whose input is the run's program, args and lifetime (docs/workflows.md). */
  'workflow_run.created': { tool_use_id?: string }
  /** The run's `name` again, and `output`: the program's return value (JSON), for the primary's reading turn, the status tool and a run card. */
  'workflow_run.status_ended': { name?: string; output?: unknown; session_archived?: boolean }
  /** `session_archived`: written by the session's archive, which ended the run (listed, never streamed: spec §6.9). */
  'workflow_run.phase_ended': { session_archived?: boolean }
}

type CorralFieldsOf<T extends EventType> = T extends keyof CorralEventFields ? CorralEventFields[T] : unknown

/** What every logged event has: its id, when it was processed, and its thread (null / absent: the primary). */
export interface EventCommon {
  id: string
  processed_at: string
  session_thread_id?: string | null
}

/** A logged event of one type: the API's fields, Corral's additions, and the common ones. */
export type LoggedEventOf<T extends EventType> = EventOf<T> & CorralFieldsOf<T> & EventCommon

/**
 * An event of one type on its way into the log: the API's fields and Corral's, without
 * `processed_at` (the log assigns it) and with `id` optional (assigned unless the writer chose it).
 */
export type EventInputOf<T extends EventType> = Omit<EventOf<T>, 'id' | 'processed_at'> & CorralFieldsOf<T> & { id?: string; session_thread_id?: string | null }

/** Any event on its way into the log: a closed union like AnyLoggedEvent. */
export type AnyEventInput = { [T in EventType]: EventInputOf<T> }[EventType]

/** Any logged event: a closed union, so `switch (e.type)` narrows. */
export type AnyLoggedEvent = { [T in EventType]: LoggedEventOf<T> }[EventType]

/** Where the session status and a thread's status come from. */
export type SessionStatus = Session['status']
export type ThreadStatus = BetaManagedAgentsSessionThreadStatus

/**
 * The one status table: each status event type, whose status it sets (`session`: the session's,
 * which is also its primary thread's; `thread`: the thread the event names) and to what.
 */
export const STATUS_EVENTS = {
  'session.status_running': { scope: 'session', status: 'running' },
  'session.status_idle': { scope: 'session', status: 'idle' },
  'session.status_rescheduled': { scope: 'session', status: 'rescheduling' },
  'session.status_terminated': { scope: 'session', status: 'terminated' },
  'session.thread_status_running': { scope: 'thread', status: 'running' },
  'session.thread_status_idle': { scope: 'thread', status: 'idle' },
  'session.thread_status_rescheduled': { scope: 'thread', status: 'rescheduling' },
  'session.thread_status_terminated': { scope: 'thread', status: 'terminated' },
} as const satisfies Record<string, { scope: 'session' | 'thread'; status: SessionStatus & ThreadStatus }>

export type StatusEventType = keyof typeof STATUS_EVENTS
export const STATUS_EVENT_TYPES = Object.keys(STATUS_EVENTS) as StatusEventType[]

/** A status change: the thread it is about (null: the primary thread, i.e. the session) and its new status. */
export interface StatusChange {
  scope: 'session' | 'thread'
  thread: string | null
  status: SessionStatus
}

/**
 * The status an event sets, or undefined when it sets none. A session-level status event
 * describes the primary thread; one that carries a thread id sets nothing (the thread's own
 * `session.thread_status_*` events do).
 */
export function statusChangeOf(e: { type: string; session_thread_id?: string | null }): StatusChange | undefined {
  const row = (STATUS_EVENTS as Record<string, { scope: 'session' | 'thread'; status: SessionStatus }>)[e.type]
  if (!row) return undefined
  if (row.scope === 'session') return e.session_thread_id ? undefined : { scope: 'session', thread: null, status: row.status }
  return { scope: 'thread', thread: e.session_thread_id ?? null, status: row.status }
}

/** The session's status after this event, when it changes it (a primary-thread `session.status_*`). */
export function sessionStatusOf(e: { type: string; session_thread_id?: string | null }): SessionStatus | undefined {
  const c = statusChangeOf(e)
  return c?.scope === 'session' ? c.status : undefined
}

/** Requests: the calls of the model that something answers (a result, and for some a confirmation). */
export const REQUEST_TYPES = ['agent.tool_use', 'agent.mcp_tool_use', 'agent.custom_tool_use'] as const
export type RequestType = (typeof REQUEST_TYPES)[number]
export type RequestEvent = EventOf<RequestType>

/**
 * The one answer table: each answer type, the field naming the request it answers, the request
 * types it may answer, and whether it is the request's result (`result`) or only lets it run
 * (`confirmation`). `by`: who writes it (`client` answers are checked on send).
 */
export const ANSWERS = {
  'agent.tool_result': { field: 'tool_use_id', answers: ['agent.tool_use'], kind: 'result', by: 'harness' },
  'agent.mcp_tool_result': { field: 'mcp_tool_use_id', answers: ['agent.mcp_tool_use'], kind: 'result', by: 'harness' },
  'user.tool_result': { field: 'tool_use_id', answers: ['agent.tool_use'], kind: 'result', by: 'client' },
  'user.custom_tool_result': { field: 'custom_tool_use_id', answers: ['agent.custom_tool_use'], kind: 'result', by: 'client' },
  'user.tool_confirmation': { field: 'tool_use_id', answers: ['agent.tool_use', 'agent.mcp_tool_use'], kind: 'confirmation', by: 'client' },
} as const satisfies {
  [T in EventType]?: { field: keyof EventOf<T> & string; answers: readonly RequestType[]; kind: 'result' | 'confirmation'; by: 'harness' | 'client' }
}

export type AnswerType = keyof typeof ANSWERS
export type AnswerEvent = EventOf<AnswerType>
export const ANSWER_TYPES = Object.keys(ANSWERS) as AnswerType[]
/** The answers that are a request's result (every answer but a confirmation). */
export type ResultType = { [T in AnswerType]: (typeof ANSWERS)[T]['kind'] extends 'result' ? T : never }[AnswerType]
export const RESULT_TYPES = ANSWER_TYPES.filter((t): t is ResultType => ANSWERS[t].kind === 'result')

export function isRequest<E extends { type: string }>(e: E): e is E & { type: RequestType } {
  return (REQUEST_TYPES as readonly string[]).includes(e.type)
}

export function isAnswer<E extends { type: string }>(e: E): e is E & { type: AnswerType } {
  return Object.prototype.hasOwnProperty.call(ANSWERS, e.type)
}

/** The id of the request an answer answers (its `tool_use_id` / `mcp_tool_use_id` / `custom_tool_use_id`), or undefined for any other event. */
export function answeredUseId(e: { type: string }): string | undefined {
  if (!isAnswer(e)) return undefined
  const id = (e as unknown as Record<string, unknown>)[ANSWERS[e.type].field]
  return typeof id === 'string' ? id : undefined
}

/** True when `e` is a request's result (not a confirmation). */
export function isResult<E extends { type: string }>(e: E): e is E & { type: ResultType } {
  return isAnswer(e) && ANSWERS[e.type].kind === 'result'
}

/**
 * The permission a request was evaluated to: a custom tool has none (the client runs it);
 * a toolset call without one was allowed, an MCP call without one asks.
 */
export function permissionOf(e: { type: RequestType; evaluated_permission?: string | null }): 'allow' | 'ask' | 'deny' | null {
  if (e.type === 'agent.custom_tool_use') return null
  const p = e.evaluated_permission
  if (p === 'allow' || p === 'ask' || p === 'deny') return p
  return e.type === 'agent.mcp_tool_use' ? 'ask' : 'allow'
}

/**
 * What a request waits for from the person before anything else happens to it: a custom
 * tool's `result` (the client runs it), a `confirmation` (its permission asks), or nothing.
 */
export function awaitsFromUser(type: RequestType, permission: 'allow' | 'ask' | 'deny' | null | undefined): 'result' | 'confirmation' | null {
  if (type === 'agent.custom_tool_use') return 'result'
  return permission === 'ask' ? 'confirmation' : null
}

/**
 * Is a request pending on the person: it waits for them (awaitsFromUser) and the answer it
 * waits for has not come (a confirmation, or for a custom tool its result).
 */
export function isPending(r: { type: RequestType; permission: 'allow' | 'ask' | 'deny' | null | undefined; confirmed: boolean; resulted: boolean }): boolean {
  if (r.resulted) return false
  const awaits = awaitsFromUser(r.type, r.permission)
  return awaits === 'result' || (awaits === 'confirmation' && !r.confirmed)
}

/** The events that decide what is pending: requests, their answers, and the idles that list what a thread waits on. */
export const PENDING_EVENT_TYPES: readonly EventType[] = [...REQUEST_TYPES, ...ANSWER_TYPES, 'session.status_idle', 'session.thread_status_idle']

/**
 * Which thread a fold or a read is about, as the log keys it: null is the primary thread (its
 * events carry no `session_thread_id`), a `sthr_` id is that child thread.
 */
export type ThreadKey = string | null
export const PRIMARY_THREAD: ThreadKey = null

/** True when the event is on that thread (the log's keying: no thread id is the primary thread). */
export function isOnThread(e: { session_thread_id?: string | null }, thread: ThreadKey): boolean {
  return (e.session_thread_id || null) === thread
}

/**
 * Narrows a logged event by its type (the log's contract: an event of type T has T's shape).
 * For a reader that wants one type; a fold over many uses defineFold (fold.ts).
 */
export function isEventOf<T extends EventType>(e: { type: string }, type: T): e is { type: string } & LoggedEventOf<T> {
  return e.type === type
}

/**
 * The client answers that the session store routes to the thread of the request they answer
 * (it stamps `session_thread_id`), and the interrupt that names a thread: the client sent them on
 * the session endpoint, so the session stream echoes them.
 */
const CLIENT_ROUTED_TYPES: ReadonlySet<string> = new Set(['user.tool_confirmation', 'user.custom_tool_result', 'user.tool_result', 'user.interrupt'])

/**
 * Is the event shown on the primary (session) stream and in the session's event list? Every
 * event of the primary thread is (no `session_thread_id`, or, for the primary's own
 * `session.thread_status_*` and an interrupt naming it, the primary's id); of a child thread's
 * events, stored once under the child and shown on both streams with the same `id` (spec §4.2,
 * §4.5, §5):
 * - its lifecycle: `session.thread_created` (the parent's event naming the child) and every
 *   `session.thread_status_*`, its `requires_action` idle included;
 * - every call that waits on the client: `agent.tool_use` / `agent.mcp_tool_use` whose permission
 *   asks (permissionOf: an MCP call without an evaluation asks), and every `agent.custom_tool_use`;
 * - the client's own events routed to it: answers (`user.tool_confirmation`,
 *   `user.custom_tool_result`, `user.tool_result`) and a `user.interrupt` naming it.
 * Nothing else of a child (messages, thinking, allowed or denied calls and their results, spans,
 * errors) reaches the primary stream. The log stores this answer with each event, so reads filter
 * in SQL; the live streams and the renderer call this function.
 */
export function isPrimaryVisible(e: { type: string; session_thread_id?: string | null; evaluated_permission?: string | null }): boolean {
  if (!e.session_thread_id) return true
  const t = e.type
  if (t === 'session.thread_created' || t.startsWith('session.thread_status_')) return true
  if (t === 'agent.custom_tool_use' || CLIENT_ROUTED_TYPES.has(t)) return true
  if (t === 'agent.tool_use' || t === 'agent.mcp_tool_use') return permissionOf(e as { type: RequestType; evaluated_permission?: string | null }) === 'ask'
  return false
}

/**
 * The log's thread key of an event of a session: null for the primary thread (no
 * `session_thread_id`, or the primary's own id), else the child's id.
 */
export function threadKeyOf(e: { session_thread_id?: string | null }, sessionId: string): ThreadKey {
  const t = e.session_thread_id
  return !t || t === primaryThreadId(sessionId) ? null : t
}

/**
 * Does the stream (or event list) of thread `thread` of a session show this event? The primary's
 * (null) is the session stream: its own events and the primary-visible ones of its children
 * (isPrimaryVisible). A child's shows its own events but the `session.thread_created` that names
 * it, which is its parent's (the child's list is empty until its first own event).
 */
export function isOnThreadStream(e: { type: string; session_thread_id?: string | null; evaluated_permission?: string | null }, view: { sessionId: string; thread: ThreadKey }): boolean {
  const key = threadKeyOf(e, view.sessionId)
  if (view.thread === null) return key === null || isPrimaryVisible(e)
  return key === view.thread && e.type !== 'session.thread_created'
}
