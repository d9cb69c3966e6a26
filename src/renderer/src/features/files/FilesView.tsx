import { useState } from 'react'
import { useClient } from '../../api/context'
import type { WorkspaceListing } from '../../api/types'
import { Button, ErrorNote, Icon, Spinner } from '../../ui/components'
import { useQuery } from '../../ui/hooks'
import { saveFile } from './save-file'

/**
 * The session's mounted folders as the sandbox sees them: browse, download a file. (Upload into a
 * session is uploads.tsx's drag and drop; the session's own workspace without a folder is not listed yet.)
 */
export function FilesView({ sessionId }: { sessionId: string }) {
  const client = useClient()
  const [path, setPath] = useState<string>()
  const [err, setErr] = useState<unknown>()
  const q = useQuery(() => client.request<WorkspaceListing>('files.list', { id: sessionId }, path ? { path } : {}), [sessionId, path])

  const download = async (p: string, name: string) => {
    setErr(undefined)
    try {
      const f = await client.request<{ name: string; content_base64: string }>('files.read', { id: sessionId }, { path: p })
      saveFile(name, f.content_base64)
    } catch (e) {
      setErr(e)
    }
  }

  if (q.error) return <ErrorNote error={q.error} />
  if (!q.data) return <Spinner label="Loading files" />
  const listing = q.data
  const root = listing.roots.find((r) => listing.path === r.path || listing.path.startsWith(r.path + '/'))
  const parent = root && listing.path !== root.path ? listing.path.slice(0, listing.path.lastIndexOf('/')) || '/' : undefined
  return (
    <section className="files" aria-label="Files">
      <div className="files-head">
        {listing.roots.length > 1 && (
          <select aria-label="Folder" value={root?.path} onChange={(e) => setPath(e.target.value)}>
            {listing.roots.map((r) => (
              <option key={r.path} value={r.path}>
                {r.path} ({r.host_path})
              </option>
            ))}
          </select>
        )}
        <code className="files-path">{listing.path}</code>
        {root && <span className="muted">{root.host_path}{root.read_only ? ' · read-only' : ''}</span>}
      </div>
      <ErrorNote error={err} />
      <table className="files-table">
        <thead>
          <tr>
            <th>Name</th>
            <th>Size</th>
            <th>Modified</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {parent && (
            <tr>
              <td colSpan={4}>
                <button type="button" className="link-btn" onClick={() => setPath(parent)}>
                  ..
                </button>
              </td>
            </tr>
          )}
          {listing.entries.map((e) => (
            <tr key={e.path}>
              <td>
                {e.kind === 'directory' ? (
                  <button type="button" className="link-btn" onClick={() => setPath(e.path)}>
                    <Icon name="box" size={13} /> {e.name}/
                  </button>
                ) : (
                  <span>
                    {e.name}
                    {e.kind === 'symlink' ? ' (symlink)' : ''}
                  </span>
                )}
              </td>
              <td>{e.kind === 'file' ? e.size : ''}</td>
              <td>{new Date(e.modified_at).toLocaleString()}</td>
              <td>
                {e.kind === 'file' && (
                  <Button small onClick={() => void download(e.path, e.name)} aria-label={`Download ${e.name}`}>
                    Download
                  </Button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  )
}
