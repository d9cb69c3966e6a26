/**
 * The model client on a thread of its own (EngineConfig.harness.modelThread: 'worker'; an option,
 * not the default). Every model request of every brain is one message to one worker thread per
 * process (harness/model-worker.ts), which runs the official SDK's streaming request; the
 * engine's event loop only hears the previews and the finished response, so the HTTP client's
 * and the SSE parser's work runs beside the log and the scheduler. Measured on two cores it does
 * not pay for its two thread hops per request: with the model client on the event loop a thread's
 * turn is ≈ 1 ms shorter (one child alone ≈ 1.2 ms), a workflow run's overhead no higher, and the
 * engine's CPU lower, also with responses streamed in a hundred paced deltas each (the parsing the
 * thread was to keep off the loop); see docs/multiagent.md, "Eighteenth session". It stays for a
 * machine where that balance differs.
 *
 * The contract is ModelClient's, unchanged: the same previews, the same response, the same
 * ModelRequestError kinds (rebuilt from the worker's), abort through the handlers' signal. A
 * worker that dies fails its requests as `connection` errors (retryable: the harness retries
 * them as any network failure) and the next request starts a new one.
 */
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { Worker } from 'node:worker_threads'
import { ModelRequestError, type ModelClient, type ModelRequest, type ModelResponse, type ModelStreamHandlers } from './model-client'
import { touchToolSet, type FromModelThread, type FromModelThreadPost, type ModelThreadParams, type ToModelThread } from './model-thread-protocol'

interface Pending {
  handlers: ModelStreamHandlers
  resolve: (r: ModelResponse) => void
  reject: (e: ModelRequestError) => void
}

/** Starts harness/model-worker: the bundle's model-worker.js beside this file, else the TypeScript source through tsx. */
export function startModelWorker(): Worker {
  const here = typeof __dirname === 'string' ? __dirname : process.cwd()
  const built = join(here, 'model-worker.js')
  if (typeof __filename === 'string' && __filename.endsWith('.js') && existsSync(built)) return new Worker(built)
  const source = join(here, 'model-worker.ts')
  const tsx = createRequire(join(here, 'model-thread.ts')).resolve('tsx/cjs/api')
  return new Worker(`require(${JSON.stringify(tsx)}).register(); require(${JSON.stringify(source)})`, { eval: true })
}

/** One worker thread and the requests in flight on it. */
export class ModelThread {
  private static sharedThread: ModelThread | undefined
  /** The process's model thread (started on its first request). */
  static shared(): ModelThread {
    return (this.sharedThread ??= new ModelThread())
  }

  private worker?: Worker
  private readonly pending = new Map<number, Pending>()
  private nextId = 1
  /** Tool sets by array (the context view hands a thread the same array turn after turn), and those the worker holds. */
  private readonly toolSetIds = new WeakMap<object, number>()
  private nextToolSet = 1
  private workerToolSets = new Map<number, true>()

  constructor(private readonly start: () => Worker = startModelWorker) {}

  /** Requests in flight (for tests and diagnostics). */
  get inFlight(): number {
    return this.pending.size
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker
    const worker = this.start()
    worker.on('message', (m: FromModelThreadPost) => {
      if (m.type !== 'batch') return this.onMessage(m)
      for (const one of m.messages) this.onMessage(one)
    })
    const fail = (why: string) => {
      if (this.worker !== worker) return
      this.worker = undefined
      const err = new ModelRequestError('connection', `model request failed: the model client thread ${why}`)
      for (const p of this.pending.values()) p.reject(err)
      this.pending.clear()
    }
    worker.on('error', (e) => fail(`failed (${e.message})`))
    worker.on('exit', (code) => fail(`exited (code ${code})`))
    this.workerToolSets = new Map()
    // alive for the process only while a request is in flight (unref after the listeners: adding one refs it again)
    worker.unref()
    this.worker = worker
    return worker
  }

  private onMessage(m: FromModelThread): void {
    if (m.type === 'ready') return
    const p = this.pending.get(m.id)
    if (!p) return
    switch (m.type) {
      case 'block_start':
        p.handlers.onBlockStart?.(m.index, m.block)
        break
      case 'text':
        p.handlers.onTextDelta?.(m.index, m.text)
        break
      case 'usage':
        p.handlers.onUsage?.(m.usage)
        break
      case 'done':
        this.settled(m.id)
        p.resolve(m.response)
        break
      case 'error':
        // (a bug guard: a worker that lost a tool set gets every set in full again)
        if (m.error.message.includes('does not hold tool set')) this.workerToolSets.clear()
        this.settled(m.id)
        p.reject(new ModelRequestError(m.error.kind, m.error.message, { status: m.error.status, retryAfterMs: m.error.retryAfterMs }))
        break
    }
  }

  private settled(id: number): void {
    this.pending.delete(id)
    if (this.pending.size === 0) this.worker?.unref()
  }

  stream(params: ModelThreadParams, request: ModelRequest, handlers: ModelStreamHandlers): Promise<ModelResponse> {
    if (handlers.signal.aborted) return Promise.reject(new ModelRequestError('aborted', 'the model request was interrupted'))
    const worker = this.ensureWorker()
    const id = this.nextId++
    const onAbort = () => worker.postMessage({ type: 'abort', id } satisfies ToModelThread)
    return new Promise<ModelResponse>((resolve, reject) => {
      this.pending.set(id, {
        handlers,
        resolve: (r) => {
          handlers.signal.removeEventListener('abort', onAbort)
          resolve(r)
        },
        reject: (e) => {
          handlers.signal.removeEventListener('abort', onAbort)
          reject(e)
        },
      })
      handlers.signal.addEventListener('abort', onAbort, { once: true })
      if (this.pending.size === 1) worker.ref()
      worker.postMessage(this.message(id, params, request))
    })
  }

  /** The stream message: the request's tools by reference once the worker holds them. */
  private message(id: number, params: ModelThreadParams, request: ModelRequest): ToModelThread {
    const tools = request.tools
    if (!tools?.length) return { type: 'stream', id, params, request }
    let setId = this.toolSetIds.get(tools)
    if (setId === undefined) this.toolSetIds.set(tools, (setId = this.nextToolSet++))
    const held = this.workerToolSets.has(setId)
    touchToolSet(this.workerToolSets, setId, true)
    const { tools: _t, ...rest } = request
    return { type: 'stream', id, params, request: rest as ModelRequest, toolSet: held ? { id: setId } : { id: setId, tools } }
  }

  /** Stops the worker; requests in flight fail as connection errors. */
  async dispose(): Promise<void> {
    const w = this.worker
    if (!w) return
    await w.terminate()
  }
}

/** ModelClient over a ModelThread (by default the process's shared one). */
export class ThreadedModelClient implements ModelClient {
  constructor(
    private readonly params: ModelThreadParams,
    private readonly thread: ModelThread = ModelThread.shared(),
  ) {}
  stream(request: ModelRequest, handlers: ModelStreamHandlers): Promise<ModelResponse> {
    return this.thread.stream(this.params, request, handlers)
  }
}
