/**
 * Exhaustive folds over events (Temporal's activation handlers, for the log): a fold names a
 * handler for every event type, or says `'ignore'` for it. A fold that forgets a type does not
 * compile, so a new event type (say `workflow_run.*` growing a member) is found by the
 * compiler in every fold, not by a reviewer.
 *
 *     const step = defineFold<State, { seq: number }>({
 *       'user.message': (s, e, { seq }) => { s.lastUserSeq = seq },
 *       'agent.thinking': 'ignore',
 *       ...every other type
 *     })
 *     step(state, event, { seq })
 */
import type { EventType, LoggedEventOf } from './events'

/** An event with its position in its session's log: what folds read. */
export interface SeqEvent {
  seq: number
  event: { id: string; type: string; session_thread_id?: string | null }
}

/** A handler for one event type: gets the state, the event narrowed to its type, and the fold's context. */
export type FoldHandler<S, T extends EventType, C> = (state: S, event: LoggedEventOf<T>, context: C) => void

/** One entry per event type: its handler, or `'ignore'` (an explicit decision, never a default). */
export type FoldHandlers<S, C = undefined> = { [T in EventType]: FoldHandler<S, T, C> | 'ignore' }

/** A fold step: applies one event to the state. Events of a type the fold does not know (a newer log) are ignored. */
export type FoldStep<S, C> = (state: S, event: { type: string }, context: C) => void

/**
 * Builds a fold step from a handler table that covers every event type. The step takes any
 * logged event and hands it to its type's handler narrowed to that type (the log's contract: an
 * event of type T has T's shape), so the handlers need no casts.
 */
export function defineFold<S, C = undefined>(handlers: FoldHandlers<S, C>): FoldStep<S, C> {
  const table = handlers as unknown as Record<string, ((state: S, event: unknown, context: C) => void) | 'ignore' | undefined>
  return (state, event, context) => {
    const h = Object.prototype.hasOwnProperty.call(table, event.type) ? table[event.type] : undefined
    if (h && h !== 'ignore') h(state, event, context)
  }
}

/** The given types, each marked `'ignore'`: for spreading the types a fold does not read into its table. */
export function ignoring<const T extends readonly EventType[]>(...types: T): { [K in T[number]]: 'ignore' } {
  return Object.fromEntries(types.map((t) => [t, 'ignore'])) as { [K in T[number]]: 'ignore' }
}
