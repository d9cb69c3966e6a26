/** The messages between the engine and its model thread (harness/model-thread.ts ↔ harness/model-worker.ts). */
import type { AnthropicModelClientParams, ModelRequest, ModelRequestError, ModelResponse, ModelUsage, ResponseBlock } from './model-client'

export type ModelThreadParams = Omit<AnthropicModelClientParams, 'fetch'>

/**
 * A request's `tools` travel once per distinct set: `toolSet: { id, tools }` the first time
 * (the worker keeps it), `toolSet: { id }` after that. Both sides keep the TOOL_SETS most
 * recently used ids, updated in message order, so they always agree on which ids the worker has.
 */
export type ToModelThread = { type: 'stream'; id: number; params: ModelThreadParams; request: ModelRequest; toolSet?: { id: number; tools?: ModelRequest['tools'] } } | { type: 'abort'; id: number }

export const TOOL_SETS = 64

/** Marks `id` most recently used in an insertion-ordered map, dropping the least recently used past TOOL_SETS. */
export function touchToolSet<V>(sets: Map<number, V>, id: number, value: V): void {
  sets.delete(id)
  sets.set(id, value)
  if (sets.size > TOOL_SETS) sets.delete(sets.keys().next().value as number)
}

/**
 * What the worker posts: one message, or (`batch`) every message one turn of its event loop
 * produced, in order. A cross-thread message wakes the engine's thread each time (on a VM that
 * wake costs tens of microseconds of CPU on each side), and a response that arrives in one chunk
 * (block starts, text, usage, done) is one wake instead of five.
 */
export type FromModelThreadPost = FromModelThread | { type: 'batch'; messages: FromModelThread[] }

export type FromModelThread =
  | { type: 'ready' }
  | { id: number; type: 'block_start'; index: number; block: ResponseBlock['type'] }
  | { id: number; type: 'text'; index: number; text: string }
  | { id: number; type: 'usage'; usage: ModelUsage }
  | { id: number; type: 'done'; response: ModelResponse }
  | { id: number; type: 'error'; error: { kind: ModelRequestError['kind']; message: string; status?: number; retryAfterMs?: number } }

