import { useEffect, useState } from 'react'
import { useClient } from '../../api/context'
import type { Memory, MemoryListItem, MemoryStore, MemoryVersion } from '../../../../shared/api/types'
import { Button, Dialog, Empty, ErrorNote, Spinner } from '../../ui/components'
import { DiffView } from '../../ui/Code'
import { useQuery } from '../../ui/hooks'
import { actorLabel, memoryTree } from './memory-tree'
import { DreamsPanel } from './DreamsPanel'

interface Page<T> {
  data: T[]
  next_page?: string | null
}

/**
 * The Memory page: the memory stores, a store's memories as a tree, a memory's content (edited in
 * place, saved with the content hash it was read at, so another writer's change is a conflict and
 * not lost), and its version history: who wrote each version (a session links to it), a diff
 * between any two versions, and redaction with a confirmation.
 */
export function MemoryView({ storeId, memoryId, onGo }: { storeId?: string; memoryId?: string; onGo: (path: string) => void }) {
  const client = useClient()
  const stores = useQuery(() => client.request<Page<MemoryStore>>('memoryStores.list', {}, { limit: 100 }), [])
  const current = storeId ?? stores.data?.data[0]?.id
  return (
    <div className="split memory-page">
      <aside className="sidebar memory-stores" aria-label="Memory stores">
        <h2 className="sidebar-title">Memory stores</h2>
        {stores.error ? <ErrorNote error={stores.error} /> : null}
        {!stores.data ? <Spinner label="Loading memory stores" /> : null}
        {stores.data?.data.length === 0 ? (
          <Empty icon="box" title="No memory stores yet">
            Create one with <code>client.beta.memoryStores.create</code>, then attach it in the new-session dialog.
          </Empty>
        ) : null}
        <ul className="plain-list">
          {stores.data?.data.map((s) => (
            <li key={s.id}>
              <a href={`#/memory/${s.id}`} className={`list-row${s.id === current ? ' active' : ''}`} aria-current={s.id === current ? 'page' : undefined}>
                <span className="list-title">{s.name}</span>
                {s.description ? <span className="muted small">{s.description}</span> : null}
              </a>
            </li>
          ))}
        </ul>
      </aside>
      <main className="pane memory-main" id="main">
        {current ? <StorePane key={current} storeId={current} store={stores.data?.data.find((s) => s.id === current)} memoryId={memoryId} onGo={onGo} onStoresChanged={stores.reload} /> : null}
      </main>
    </div>
  )
}

function StorePane({ storeId, store, memoryId, onGo, onStoresChanged }: { storeId: string; store?: MemoryStore; memoryId?: string; onGo: (path: string) => void; onStoresChanged: () => void }) {
  const client = useClient()
  const memories = useQuery(() => client.request<Page<MemoryListItem>>('memories.list', { id: storeId }, { limit: 100 }), [storeId])
  const items = (memories.data?.data ?? []).filter((m): m is Extract<MemoryListItem, { type: 'memory' }> => m.type === 'memory')
  const rows = memoryTree(items)
  return (
    <div className="memory-store">
      <nav className="memory-tree" aria-label="Memories">
        {memories.error ? <ErrorNote error={memories.error} /> : null}
        {!memories.data ? <Spinner label="Loading memories" /> : null}
        {memories.data && rows.length === 0 ? <p className="muted">This store holds no memories yet.</p> : null}
        <ul role="tree" className="plain-list">
          {rows.map((r) =>
            r.kind === 'folder' ? (
              <li key={r.path} role="treeitem" aria-expanded="true" className="tree-folder" style={{ paddingLeft: `${r.depth * 14}px` }}>
                {r.name}/
              </li>
            ) : (
              <li key={r.id} role="treeitem" aria-selected={r.id === memoryId} style={{ paddingLeft: `${r.depth * 14}px` }}>
                <a href={`#/memory/${storeId}/${r.id}`} className={`tree-memory${r.id === memoryId ? ' active' : ''}`} title={r.path}>
                  {r.name}
                </a>
              </li>
            ),
          )}
        </ul>
        {store ? <DreamsPanel store={store} onOutputs={onStoresChanged} /> : null}
      </nav>
      <section className="memory-detail">
        {memoryId ? <MemoryPane key={memoryId} storeId={storeId} memoryId={memoryId} onGo={onGo} onSaved={memories.reload} /> : <p className="muted">Choose a memory to read, edit, or see its history.</p>}
      </section>
    </div>
  )
}

function MemoryPane({ storeId, memoryId, onGo, onSaved }: { storeId: string; memoryId: string; onGo: (path: string) => void; onSaved: () => void }) {
  const client = useClient()
  const memory = useQuery(() => client.request<Memory>('memories.retrieve', { id: storeId, memoryId }, { view: 'full' }), [storeId, memoryId])
  const versions = useQuery(() => client.request<Page<MemoryVersion>>('memoryVersions.list', { id: storeId }, { memory_id: memoryId, limit: 100 }), [storeId, memoryId])
  const [draft, setDraft] = useState<string>()
  const [err, setErr] = useState<unknown>()
  const [busy, setBusy] = useState(false)
  const [compare, setCompare] = useState<string[]>([])
  const [redacting, setRedacting] = useState<MemoryVersion>()
  useEffect(() => setDraft(undefined), [memory.data?.memory_version_id])

  if (memory.error) return <ErrorNote error={memory.error} />
  if (!memory.data) return <Spinner label="Loading the memory" />
  const m = memory.data
  const text = draft ?? m.content ?? ''
  const save = async () => {
    setBusy(true)
    setErr(undefined)
    try {
      await client.request<Memory>('memories.update', { id: storeId, memoryId }, { content: text, precondition: { type: 'content_sha256', content_sha256: m.content_sha256 } })
      memory.reload()
      versions.reload()
      onSaved()
    } catch (e) {
      setErr(e)
    } finally {
      setBusy(false)
    }
  }
  const list = versions.data?.data ?? []
  const picked = compare.map((id) => list.find((v) => v.id === id)).filter((v): v is MemoryVersion => !!v)
  // Older first, so the diff reads from the earlier version to the later one.
  const [older, newer] = [...picked].sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.id < b.id ? -1 : 1))
  const toggle = (id: string) => setCompare((c) => (c.includes(id) ? c.filter((x) => x !== id) : [...c.slice(-1), id]))
  return (
    <div className="memory-pane">
      <header className="memory-head">
        <h2 className="memory-path">{m.path}</h2>
        <span className="muted small">
          {m.content_size_bytes} bytes · sha256 {m.content_sha256.slice(0, 12)}
        </span>
      </header>
      <label htmlFor="memory-content" className="sr-only">
        Content of {m.path}
      </label>
      <textarea id="memory-content" className="memory-editor" value={text} spellCheck={false} onChange={(e) => setDraft(e.target.value)} rows={12} />
      <div className="row">
        <Button variant="primary" disabled={busy || draft === undefined || draft === m.content} onClick={() => void save()}>
          Save
        </Button>
        {draft !== undefined && draft !== m.content ? (
          <Button onClick={() => setDraft(undefined)} disabled={busy}>
            Discard changes
          </Button>
        ) : null}
      </div>
      <ErrorNote error={err} />
      <h3>History</h3>
      {versions.error ? <ErrorNote error={versions.error} /> : null}
      <p className="muted small">Tick two versions to see what changed between them.</p>
      <table className="versions" aria-label="Versions">
        <thead>
          <tr>
            <th scope="col">Compare</th>
            <th scope="col">When</th>
            <th scope="col">Change</th>
            <th scope="col">Written by</th>
            <th scope="col">
              <span className="sr-only">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {list.map((v) => {
            const who = actorLabel(v.created_by as Parameters<typeof actorLabel>[0])
            return (
              <tr key={v.id} data-version={v.id}>
                <td>
                  <input type="checkbox" aria-label={`Compare the version of ${new Date(v.created_at).toLocaleString()}`} checked={compare.includes(v.id)} onChange={() => toggle(v.id)} disabled={v.redacted_at !== null} />
                </td>
                <td>{new Date(v.created_at).toLocaleString()}</td>
                <td>
                  {v.operation}
                  {v.redacted_at ? <span className="badge muted"> redacted</span> : null}
                </td>
                <td>
                  {who.sessionId ? (
                    <a href={`#/sessions/${who.sessionId}`} onClick={(e) => (e.preventDefault(), onGo(`/sessions/${who.sessionId}`))}>
                      {who.text}
                    </a>
                  ) : (
                    who.text
                  )}
                </td>
                <td>
                  {v.redacted_at === null && v.operation !== 'deleted' ? (
                    <Button small onClick={() => setRedacting(v)}>
                      Redact
                    </Button>
                  ) : null}
                </td>
              </tr>
            )
          })}
        </tbody>
      </table>
      {older && newer ? <VersionDiff storeId={storeId} older={older} newer={newer} /> : null}
      {redacting ? (
        <RedactDialog
          storeId={storeId}
          version={redacting}
          onClose={() => setRedacting(undefined)}
          onDone={() => {
            setRedacting(undefined)
            setCompare((c) => c.filter((id) => id !== redacting.id))
            versions.reload()
          }}
        />
      ) : null}
    </div>
  )
}

/** The line diff from one version's content to another's (both read in full). */
function VersionDiff({ storeId, older, newer }: { storeId: string; older: MemoryVersion; newer: MemoryVersion }) {
  const client = useClient()
  const full = useQuery(
    () => Promise.all([older, newer].map((v) => client.request<MemoryVersion>('memoryVersions.retrieve', { id: storeId, versionId: v.id }, { view: 'full' }))),
    [storeId, older.id, newer.id],
  )
  if (full.error) return <ErrorNote error={full.error} />
  if (!full.data) return <Spinner label="Loading the versions" />
  const [a, b] = full.data
  return (
    <section className="version-diff" aria-label="Changes between the two versions">
      <h3>
        {new Date(a.created_at).toLocaleString()} → {new Date(b.created_at).toLocaleString()}
      </h3>
      <DiffView before={a.content ?? ''} after={b.content ?? ''} path={b.path ?? a.path ?? undefined} />
    </section>
  )
}

function RedactDialog({ storeId, version, onClose, onDone }: { storeId: string; version: MemoryVersion; onClose: () => void; onDone: () => void }) {
  const client = useClient()
  const [err, setErr] = useState<unknown>()
  const [busy, setBusy] = useState(false)
  const who = actorLabel(version.created_by as Parameters<typeof actorLabel>[0])
  return (
    <Dialog title="Redact this version?" onClose={onClose}>
      <p>
        The content and path of the version of {new Date(version.created_at).toLocaleString()} (written by {who.text}) are erased for good. The record that it existed, and who wrote
        it, stays. The memory&apos;s current content is not changed.
      </p>
      <ErrorNote error={err} />
      <div className="row">
        <Button
          variant="danger"
          disabled={busy}
          onClick={async () => {
            setBusy(true)
            setErr(undefined)
            try {
              await client.request('memoryVersions.redact', { id: storeId, versionId: version.id })
              onDone()
            } catch (e) {
              setErr(e)
              setBusy(false)
            }
          }}
        >
          Redact
        </Button>
        <Button onClick={onClose} disabled={busy}>
          Cancel
        </Button>
      </div>
    </Dialog>
  )
}
