import { OPERATIONS, operationPath, toQueryString, type StreamMessage } from '../../../shared/api/operations'
import { ApiError, type CorralClient, type OperationName, type QueryParams, type StreamOptions, type UploadedFile } from './client'
import { SseParser } from './sse'

const PREVIEW_TYPES = new Set(['event_start', 'event_delta'])

/**
 * Sent on every request: `corral serve` refuses a cookie-authenticated POST without it (a page
 * of another origin cannot add it without a CORS preflight, which the server never grants).
 */
export const CSRF_HEADERS: Readonly<Record<string, string>> = { 'x-corral-csrf': '1' }

/**
 * Browser mode: the HTTP API on the page's own origin, authenticated by the HttpOnly cookie that
 * `corral serve` set at sign-in (this code never sees the token). State-changing requests go as
 * `application/json` with `X-Corral-CSRF: 1`, which the server requires of cookie requests.
 */
export class HttpClient implements CorralClient {
  readonly transport = 'http' as const

  constructor(private readonly base = '') {}

  async apiUrl(): Promise<string> {
    return new URL(this.base || '/', window.location.href).origin
  }

  async request<T>(op: OperationName, path: Record<string, string> = {}, payload?: unknown): Promise<T> {
    const spec = OPERATIONS[op]
    let url = this.base + operationPath(op, path)
    const headers: Record<string, string> = { accept: 'application/json', ...CSRF_HEADERS }
    const init: RequestInit = { method: spec.method, credentials: 'same-origin', headers }
    if (spec.method === 'GET') url += toQueryString(payload as QueryParams | undefined)
    else {
      headers['content-type'] = 'application/json'
      if (payload !== undefined) init.body = JSON.stringify(payload)
    }
    let res: Response
    try {
      res = await fetch(url, init)
    } catch (err) {
      throw new ApiError(0, 'connection_error', `Corral is not reachable (${(err as Error).message})`)
    }
    const text = await res.text()
    let body: unknown
    try {
      body = text ? JSON.parse(text) : null
    } catch {
      throw new ApiError(res.status, 'api_error', `HTTP ${res.status}: the answer was not JSON`)
    }
    if (!res.ok) {
      const e = (body as { error?: { type?: string; message?: string } } | null)?.error
      throw new ApiError(res.status, e?.type ?? 'api_error', e?.message ?? `HTTP ${res.status}`)
    }
    return body as T
  }

  /** XMLHttpRequest, not fetch: only it reports an upload's progress. Same cookie, same CSRF header. */
  readonly uploadFile = (file: File, onProgress?: (sent: number, total: number) => void): Promise<UploadedFile> =>
    new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest()
      xhr.open('POST', `${this.base}/v1/files`)
      xhr.withCredentials = true
      for (const [k, v] of Object.entries(CSRF_HEADERS)) xhr.setRequestHeader(k, v)
      xhr.setRequestHeader('accept', 'application/json')
      xhr.upload.onprogress = (e) => onProgress?.(e.loaded, e.lengthComputable ? e.total : file.size)
      xhr.onerror = () => reject(new ApiError(0, 'connection_error', 'Corral is not reachable (the upload was cut off)'))
      xhr.onload = () => {
        let body: unknown
        try {
          body = xhr.responseText ? JSON.parse(xhr.responseText) : null
        } catch {
          return reject(new ApiError(xhr.status, 'api_error', `HTTP ${xhr.status}: the answer was not JSON`))
        }
        if (xhr.status >= 200 && xhr.status < 300) return resolve(body as UploadedFile)
        const e = (body as { error?: { type?: string; message?: string } } | null)?.error
        reject(new ApiError(xhr.status, e?.type ?? 'api_error', e?.message ?? `HTTP ${xhr.status}`))
      }
      const form = new FormData()
      form.append('file', file, file.name)
      xhr.send(form)
    })

  stream(sessionId: string, options: StreamOptions, listener: (msg: StreamMessage) => void): () => void {
    let stopped = false
    let lastSeq = options.after
    let controller: AbortController | undefined
    let attempt = 0

    const connect = async (): Promise<void> => {
      while (!stopped) {
        controller = new AbortController()
        const q: QueryParams = { after: lastSeq, event_deltas: options.previews ? ['agent.message', 'agent.thinking', 'agent.tool_result'] : undefined }
        try {
          const path = options.thread ? operationPath('threads.retrieve', { id: sessionId, threadId: options.thread }) : operationPath('events.list', { id: sessionId })
          const res = await fetch(`${this.base}${path}/stream${toQueryString(q)}`, {
            credentials: 'same-origin',
            headers: { accept: 'text/event-stream', ...CSRF_HEADERS },
            signal: controller.signal,
          })
          if (res.status === 404 || res.status === 401 || res.status === 403) {
            options.onState?.('reconnecting')
            return // the session is gone or we are signed out: retrying cannot help
          }
          if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`)
          attempt = 0
          options.onState?.('open')
          const reader = res.body.pipeThrough(new TextDecoderStream()).getReader()
          const parser = new SseParser()
          for (;;) {
            const { value, done } = await reader.read()
            if (done) break
            for (const m of parser.push(value)) {
              if (PREVIEW_TYPES.has(m.event)) listener({ kind: 'preview', preview: JSON.parse(m.data) })
              else {
                const seq = m.id !== undefined ? Number(m.id) : NaN
                if (Number.isInteger(seq)) lastSeq = seq
                listener({ kind: 'event', seq, event: JSON.parse(m.data) })
              }
            }
          }
        } catch {
          if (stopped) return
        }
        if (stopped) return
        options.onState?.('reconnecting')
        attempt++
        await new Promise((r) => setTimeout(r, Math.min(5000, 250 * 2 ** Math.min(attempt, 5))))
      }
    }
    void connect()
    return () => {
      stopped = true
      controller?.abort()
    }
  }
}
