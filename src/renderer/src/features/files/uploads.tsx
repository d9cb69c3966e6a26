import { useCallback, useRef, useState, type DragEvent, type ReactNode } from 'react'
import { useClient } from '../../api/context'
import type { UploadedFile } from '../../api/client'
import { formatBytes } from '../../ui/format'

/**
 * Uploading files into a session (issue #16): a file dropped (or chosen) is sent to the files API
 * (`POST /v1/files`) at once, with its progress, and then handed to `attach`, which makes it a
 * session's `file` resource: added to a running session (`POST /v1/sessions/{id}/resources`), or
 * listed for the new-session dialog to include at creation. A failure (a 413 over the cap, a name
 * already used in the session) is the engine's message on the file's row; nothing else is lost.
 */

export interface UploadRow {
  key: number
  name: string
  size: number
  sent: number
  state: 'uploading' | 'attaching' | 'done' | 'failed'
  /** Where the sandbox sees it, once attached. */
  where?: string
  error?: string
}

/** What `attach` answers: where the sandbox will see the file. */
export type AttachUpload = (file: UploadedFile, name: string) => Promise<string>

/** The uploads of one drop target: `add(files)` starts them; `rows` says how each stands. */
export function useUploads(attach: AttachUpload): { rows: UploadRow[]; add: (files: readonly File[]) => void; available: boolean } {
  const client = useClient()
  const [rows, setRows] = useState<UploadRow[]>([])
  const next = useRef(0)
  const attachRef = useRef(attach)
  attachRef.current = attach
  const upload = client.uploadFile
  const add = useCallback(
    (files: readonly File[]) => {
      for (const file of files) {
        const key = ++next.current
        const set = (patch: Partial<UploadRow>) => setRows((rs) => rs.map((r) => (r.key === key ? { ...r, ...patch } : r)))
        setRows((rs) => [...rs, { key, name: file.name, size: file.size, sent: 0, state: 'uploading' }])
        if (!upload) {
          set({ state: 'failed', error: 'This window cannot upload files.' })
          continue
        }
        void (async () => {
          try {
            const meta = await upload(file, (sent) => set({ sent }))
            set({ state: 'attaching', sent: file.size })
            const where = await attachRef.current(meta, file.name)
            set({ state: 'done', where })
          } catch (e) {
            set({ state: 'failed', error: (e as Error).message ?? String(e) })
          }
        })()
      }
    },
    [upload],
  )
  return { rows, add, available: upload !== undefined }
}

/** The files a drop carries (none for a drag of text or of something else). */
export function droppedFiles(e: DragEvent): File[] {
  return Array.from(e.dataTransfer?.files ?? [])
}

/** Whether a drag carries files (what the drop targets react to). */
export function dragHasFiles(e: DragEvent): boolean {
  return Array.from(e.dataTransfer?.types ?? []).includes('Files')
}

/**
 * Handlers that make an element a drop target for files: `over` is true while files are dragged
 * over it (for its highlight). Other drags (text, links) are left to the browser.
 */
export function useFileDrop(onFiles: (files: File[]) => void): { over: boolean; handlers: { onDragEnter: (e: DragEvent) => void; onDragOver: (e: DragEvent) => void; onDragLeave: (e: DragEvent) => void; onDrop: (e: DragEvent) => void } } {
  const [over, setOver] = useState(false)
  const depth = useRef(0)
  return {
    over,
    handlers: {
      onDragEnter: (e) => {
        if (!dragHasFiles(e)) return
        e.preventDefault()
        depth.current++
        setOver(true)
      },
      onDragOver: (e) => {
        if (!dragHasFiles(e)) return
        e.preventDefault()
        e.dataTransfer.dropEffect = 'copy'
      },
      onDragLeave: (e) => {
        if (!dragHasFiles(e)) return
        depth.current = Math.max(0, depth.current - 1)
        if (depth.current === 0) setOver(false)
      },
      onDrop: (e) => {
        const files = droppedFiles(e)
        depth.current = 0
        setOver(false)
        if (files.length === 0) return
        e.preventDefault()
        onFiles(files)
      },
    },
  }
}

/** The rows of a drop target's uploads: a progress bar while sending, then where it went, or the error. */
export function UploadList({ rows }: { rows: readonly UploadRow[] }) {
  if (rows.length === 0) return null
  return (
    <ul className="upload-list" aria-label="Uploads">
      {rows.map((r) => {
        const pct = r.size > 0 ? Math.min(100, Math.round((r.sent / r.size) * 100)) : 100
        return (
          <li key={r.key} className={`upload-row upload-${r.state}`}>
            <span className="upload-name mono">{r.name}</span>
            <span className="muted">{formatBytes(r.size)}</span>
            {r.state === 'uploading' && (
              <>
                <progress max={100} value={pct} aria-label={`Uploading ${r.name}`} />
                <span className="upload-pct">{pct}%</span>
              </>
            )}
            {r.state === 'attaching' && <span className="muted">Adding to the session…</span>}
            {r.state === 'done' && <span className="upload-where">{r.where}</span>}
            {r.state === 'failed' && (
              <span className="upload-error" role="alert">
                {r.error}
              </span>
            )}
          </li>
        )
      })}
    </ul>
  )
}

/** A visible drop area with a "choose files" button (the same uploads without dragging). */
export function DropArea({ onFiles, children }: { onFiles: (files: File[]) => void; children?: ReactNode }) {
  const { over, handlers } = useFileDrop(onFiles)
  const input = useRef<HTMLInputElement>(null)
  return (
    <div className={over ? 'drop-area drop-over' : 'drop-area'} {...handlers} data-testid="file-drop">
      <span>{children ?? 'Drop files here to upload them,'}</span>{' '}
      <button type="button" className="link-btn" onClick={() => input.current?.click()}>
        or choose files…
      </button>
      <input
        ref={input}
        type="file"
        multiple
        hidden
        aria-label="Files to upload"
        onChange={(e) => {
          const files = Array.from(e.target.files ?? [])
          e.target.value = ''
          if (files.length) onFiles(files)
        }}
      />
    </div>
  )
}
