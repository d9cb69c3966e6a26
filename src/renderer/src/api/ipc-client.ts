import type { IpcResult, StreamMessage, StreamSubscribeParams } from '../../../shared/api/operations'
import { isOnThreadStream } from '../../../shared/api/events'
import { ApiError, type CorralClient, type OperationName, type StreamOptions, type UploadedFile } from './client'

/** What the preload exposes on `window.corral` (src/preload/index.ts). */
export interface CorralBridge {
  call(op: string, pathParams: Record<string, string>, payload?: unknown): Promise<IpcResult>
  subscribe(params: StreamSubscribeParams, listener: (msg: StreamMessage) => void): Promise<IpcResult<{ unsubscribe: () => void }>>
  info(): Promise<{ version: string; platform: string; apiUrl: string }>
  pickFolder?(): Promise<IpcResult<string | null>>
  uploadFile?(file: { name: string; type?: string; bytes: ArrayBuffer }): Promise<IpcResult>
}

declare global {
  interface Window {
    corral?: CorralBridge
  }
}

/** The desktop app: the same operations through the preload's contextBridge surface. */
export class IpcClient implements CorralClient {
  readonly transport = 'ipc' as const

  constructor(private readonly bridge: CorralBridge) {}

  /** The system's folder dialog, when the desktop shell offers one. */
  get pickFolder(): (() => Promise<string | null>) | undefined {
    const pick = this.bridge.pickFolder
    if (!pick) return undefined
    return async () => {
      const res = await pick()
      if (!res.ok) throw new ApiError(res.status, res.error.type, res.error.message)
      return res.data
    }
  }

  /** The files API through the bridge: the file goes in one message, so its progress is reported once, when it has gone. */
  get uploadFile(): ((file: File, onProgress?: (sent: number, total: number) => void) => Promise<UploadedFile>) | undefined {
    const upload = this.bridge.uploadFile
    if (!upload) return undefined
    return async (file, onProgress) => {
      const res = await upload({ name: file.name, type: file.type || undefined, bytes: await file.arrayBuffer() })
      if (!res.ok) throw new ApiError(res.status, res.error.type, res.error.message)
      onProgress?.(file.size, file.size)
      return res.data as UploadedFile
    }
  }

  async apiUrl(): Promise<string> {
    return (await this.bridge.info()).apiUrl
  }

  async request<T>(op: OperationName, path: Record<string, string> = {}, payload?: unknown): Promise<T> {
    const res = await this.bridge.call(op, path, payload)
    if (!res.ok) throw new ApiError(res.status, res.error.type, res.error.message)
    return res.data as T
  }

  /**
   * The adapter's subscription shows what the HTTP stream of the same view shows (isOnThreadStream,
   * the rule the engine's streams use): for the session, the primary's events and the
   * primary-visible ones of its children; for a thread (`options.thread`, passed to the adapter),
   * that thread's own. The check here is kept for an engine whose adapter delivered every
   * thread's events. Previews are kept: the timeline drops those of other threads itself.
   */
  stream(sessionId: string, options: StreamOptions, listener: (msg: StreamMessage) => void): () => void {
    let stopped = false
    let unsubscribe: (() => void) | undefined
    const view = { sessionId, thread: options.thread ?? null }
    const thread = options.thread
    void this.bridge.subscribe({ sessionId, after: options.after, previews: options.previews, ...(thread ? { thread } : {}) }, (msg) => {
      if (stopped) return
      if (msg.kind === 'event' && !isOnThreadStream(msg.event as Parameters<typeof isOnThreadStream>[0], view)) return
      listener(msg)
    }).then((res) => {
      if (!res.ok) return options.onState?.('reconnecting')
      if (stopped) res.data.unsubscribe()
      else {
        unsubscribe = res.data.unsubscribe
        options.onState?.('open')
      }
    })
    return () => {
      stopped = true
      unsubscribe?.()
    }
  }
}
