/**
 * The model client's own thread (a worker_threads entry; harness/model-thread.ts starts it):
 * it runs AnthropicModelClient, the official SDK's streaming Messages request, so the HTTP
 * client, the SSE parsing and the response's JSON stay off the engine's event loop, which keeps
 * the log, the scheduler and the API. The harness's brains send it requests and hear back what
 * the ModelStreamHandlers hear (previews) and the finished response, or the classified error.
 *
 * Messages in: `{ type: 'stream', id, params, request }`, `{ type: 'abort', id }`.
 * Messages out: `{ type: 'ready' }` once, then per request `{ id, type: 'block_start', index,
 * block }`, `{ id, type: 'text', index, text }` (deltas of one block coalesced until the next
 * macrotask), `{ id, type: 'usage', usage }`, and last `{ id, type: 'done', response }` or
 * `{ id, type: 'error', error: { kind, message, status?, retryAfterMs? } }`. What one turn of this
 * thread's event loop produced, for every request, goes out as one post (`{ type: 'batch',
 * messages }` when more than one): each post wakes the engine's thread. A request's `done` or
 * `error` is posted at once, with whatever waited before it.
 */
import { parentPort } from 'node:worker_threads'
import { AnthropicModelClient, ModelRequestError, type ModelRequest } from './model-client'
import { touchToolSet, type FromModelThread, type FromModelThreadPost, type ModelThreadParams, type ToModelThread } from './model-thread-protocol'

const port = parentPort
if (!port) throw new Error('harness/model-worker.ts runs as a worker thread (harness/model-thread.ts starts it)')

/** One SDK client per distinct endpoint, so requests to the same endpoint share its connections. */
const clients = new Map<string, AnthropicModelClient>()
const inFlight = new Map<number, AbortController>()
const toolSets = new Map<number, NonNullable<ModelRequest['tools']>>()

function clientFor(params: ModelThreadParams): AnthropicModelClient {
  const key = JSON.stringify(params)
  let client = clients.get(key)
  if (!client) {
    client = new AnthropicModelClient(params)
    clients.set(key, client)
  }
  return client
}

/** Messages of this turn of the event loop, posted together at its end (flush). */
let outbox: FromModelThread[] = []
let flushScheduled = false
function flush(): void {
  flushScheduled = false
  const messages = outbox
  if (messages.length === 0) return
  outbox = []
  if (messages.length === 1) port!.postMessage(messages[0] satisfies FromModelThreadPost)
  else port!.postMessage({ type: 'batch', messages } satisfies FromModelThreadPost)
}
function send(m: FromModelThread): void {
  outbox.push(m)
  // a finished request goes out at once (with what came before it): the engine's thread starts on
  // it while this one reads the next response, instead of after every response of this turn
  if (m.type === 'done' || m.type === 'error') return flush()
  if (!flushScheduled) {
    flushScheduled = true
    setImmediate(flush)
  }
}
/** A text delta joins the previous one of the same block when nothing came between them. */
function sendText(id: number, index: number, text: string): void {
  const last = outbox[outbox.length - 1]
  if (last && last.type === 'text' && last.id === id && last.index === index) last.text += text
  else send({ id, type: 'text', index, text })
}

async function stream(id: number, params: ModelThreadParams, request: ModelRequest): Promise<void> {
  const controller = new AbortController()
  inFlight.set(id, controller)
  try {
    const response = await clientFor(params).stream(request, {
      signal: controller.signal,
      onBlockStart: (index, block) => send({ id, type: 'block_start', index, block }),
      onTextDelta: (index, text) => sendText(id, index, text),
      onUsage: (usage) => send({ id, type: 'usage', usage }),
    })
    send({ id, type: 'done', response })
  } catch (err) {
    const e = err instanceof ModelRequestError ? err : new ModelRequestError('connection', (err as Error)?.message ?? String(err))
    send({ id, type: 'error', error: { kind: e.kind, message: e.message, status: e.status, retryAfterMs: e.retryAfterMs } })
  } finally {
    inFlight.delete(id)
  }
}

port.on('message', (m: ToModelThread) => {
  if (m.type === 'stream') {
    let request = m.request
    if (m.toolSet) {
      const tools = m.toolSet.tools ?? toolSets.get(m.toolSet.id)
      if (!tools) {
        send({ id: m.id, type: 'error', error: { kind: 'connection', message: `model request failed: the model client thread does not hold tool set ${m.toolSet.id}` } })
        return
      }
      touchToolSet(toolSets, m.toolSet.id, tools)
      request = { ...request, tools }
    }
    void stream(m.id, m.params, request)
  }
  else if (m.type === 'abort') inFlight.get(m.id)?.abort()
})
port.postMessage({ type: 'ready' } satisfies FromModelThreadPost)
