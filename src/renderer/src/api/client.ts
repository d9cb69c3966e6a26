/**
 * The renderer's only door to the engine. Two implementations with the same interface:
 * HttpClient (browser mode: fetch + SSE, cookie auth) and IpcClient (Electron: the preload's
 * contextBridge surface). Everything above this folder depends on this interface only.
 */
import type { OperationName, QueryValue, StreamMessage } from '../../../shared/api/operations'

export type { OperationName, StreamMessage }

/** An error the API answered with: its `type` (invalid_request_error, not_found_error, ...) and message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
  ) {
    super(message)
    this.name = 'ApiError'
  }
}

export interface StreamOptions {
  /** Resume after this seq (0: from the first event). Default: events appended from now on. */
  after?: number
  /** Also deliver `event_start` / `event_delta` previews (streaming text). */
  previews?: boolean
  /**
   * A child thread's own stream (`GET /v1/sessions/{id}/threads/{thread}/stream`: its full
   * activity) instead of the session's (the primary thread and what its children show on it,
   * `isPrimaryVisible`).
   */
  thread?: string
  /** Told when the stream (re)connects or drops, for a connection indicator. */
  onState?: (state: 'open' | 'reconnecting') => void
}

export interface CorralClient {
  /** 'http' in a browser (`corral serve`), 'ipc' in the desktop app. */
  readonly transport: 'http' | 'ipc'
  /**
   * Calls one operation of the contract. `path` fills the path's ids; `payload` is the query of a
   * GET and the body of a POST. Rejects with ApiError.
   */
  request<T>(op: OperationName, path?: Record<string, string>, payload?: unknown): Promise<T>
  /**
   * Opens a live stream of one session's events (or of one of its threads, `options.thread`);
   * reconnects by itself and resumes after the last seq it delivered, so nothing is lost or
   * repeated. Returns a disposer.
   */
  stream(sessionId: string, options: StreamOptions, listener: (msg: StreamMessage) => void): () => void
  /** The local API's base URL (for the SDK or the CLI), e.g. http://127.0.0.1:4610. */
  apiUrl(): Promise<string>
  /**
   * Uploads one file (`POST /v1/files`, multipart) and resolves with its metadata; `onProgress`
   * gets the bytes sent so far and the total as they go (browser mode; the desktop sends the
   * file in one message and reports it once). Rejects with ApiError: over the engine's cap, a 413
   * whose message names the cap. Absent where the transport cannot upload.
   */
  readonly uploadFile?: (file: File, onProgress?: (sent: number, total: number) => void) => Promise<UploadedFile>
  /** The system's folder dialog (desktop only; browser mode types a path). Resolves with the path or null. */
  readonly pickFolder?: () => Promise<string | null>
}

export type QueryParams = Record<string, QueryValue>

/** What the files API answers for an upload (the SDK's FileMetadata, the fields the renderer reads). */
export interface UploadedFile {
  id: string
  filename: string
  size_bytes: number
  mime_type: string
}
