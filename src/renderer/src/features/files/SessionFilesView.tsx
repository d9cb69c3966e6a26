import { useState } from 'react'
import { useClient } from '../../api/context'
import { Button, ErrorNote, Spinner } from '../../ui/components'
import { useQuery } from '../../ui/hooks'
import { saveFile } from './save-file'

interface ApiFile {
  id: string
  filename: string
  mime_type: string
  size_bytes: number
  created_at: string
}
interface Page<T> {
  data: T[]
  next_page?: string | null
}
interface FileResource {
  id: string
  type: string
  file_id?: string
  mount_path?: string
}

/** Bytes as a person reads them. */
function size(n: number): string {
  if (n < 1024) return `${n} B`
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`
  return `${(n / 1024 / 1024).toFixed(1)} MB`
}

/**
 * A session's files: its inputs (the `file` resources mounted read-only under
 * /mnt/session/uploads) and its outputs (what the agent wrote under /mnt/session/outputs, kept as
 * session-scoped files), each downloadable.
 */
export function SessionFilesView({ sessionId }: { sessionId: string }) {
  const client = useClient()
  const [err, setErr] = useState<unknown>()
  const resources = useQuery(() => client.request<Page<FileResource>>('sessionResources.list', { id: sessionId }, { limit: 100 }), [sessionId])
  const outputs = useQuery(() => client.request<Page<ApiFile>>('apiFiles.list', {}, { scope_id: sessionId, limit: 100 }), [sessionId])
  const inputs = (resources.data?.data ?? []).filter((r) => r.type === 'file' && r.file_id)
  const inputIds = inputs.map((r) => r.file_id!).slice(0, 100)
  const inputFiles = useQuery(() => (inputIds.length ? client.request<Page<ApiFile>>('apiFiles.list', {}, { ids: inputIds }) : Promise.resolve({ data: [] })), [inputIds.join(',')])

  const download = async (id: string, name: string) => {
    setErr(undefined)
    try {
      const f = await client.request<{ filename: string; mime_type: string; content_base64: string }>('apiFiles.read', { id })
      saveFile(name, f.content_base64, f.mime_type || undefined)
    } catch (e) {
      setErr(e)
    }
  }
  const reload = () => {
    resources.reload()
    outputs.reload()
    inputFiles.reload()
  }
  const byId = new Map((inputFiles.data?.data ?? []).map((f) => [f.id, f]))
  return (
    <div className="session-files">
      <div className="row">
        <Button small onClick={reload}>
          Refresh
        </Button>
      </div>
      <ErrorNote error={err ?? resources.error ?? outputs.error ?? inputFiles.error} />
      <section aria-label="Inputs">
        <h3>Inputs</h3>
        <p className="muted small">Files given to the session, read-only in the sandbox under /mnt/session/uploads.</p>
        {!resources.data ? <Spinner label="Loading inputs" /> : inputs.length === 0 ? <p className="muted">No input files.</p> : null}
        <ul className="plain-list file-rows">
          {inputs.map((r) => {
            const f = byId.get(r.file_id!)
            const name = f?.filename ?? r.file_id!
            return (
              <li key={r.id} className="file-row">
                <span className="file-name">{r.mount_path}</span>
                <span className="muted small">{f ? size(f.size_bytes) : 'file no longer stored'}</span>
                {f ? (
                  <Button small onClick={() => void download(f.id, name)} aria-label={`Download ${name}`}>
                    Download
                  </Button>
                ) : null}
              </li>
            )
          })}
        </ul>
      </section>
      <section aria-label="Outputs">
        <h3>Outputs</h3>
        <p className="muted small">What the agent wrote under /mnt/session/outputs, kept after each tool call.</p>
        {!outputs.data ? <Spinner label="Loading outputs" /> : outputs.data.data.length === 0 ? <p className="muted">No outputs yet.</p> : null}
        <ul className="plain-list file-rows">
          {outputs.data?.data.map((f) => (
            <li key={f.id} className="file-row">
              <span className="file-name">{f.filename}</span>
              <span className="muted small">
                {size(f.size_bytes)} · {new Date(f.created_at).toLocaleString()}
              </span>
              <Button small onClick={() => void download(f.id, f.filename)} aria-label={`Download ${f.filename}`}>
                Download
              </Button>
            </li>
          ))}
        </ul>
      </section>
    </div>
  )
}
