import { useState } from 'react'
import { useClient } from '../../api/context'
import type { ChangesRevertResponse, FolderChange, SessionChangesResponse } from '../../api/types'
import { Button, Empty, ErrorNote, Spinner } from '../../ui/components'
import { useQuery } from '../../ui/hooks'
import { formatBytes } from '../../ui/format'
import { UnifiedDiff } from './UnifiedDiff'

const KIND_LABEL: Record<FolderChange['kind'], string> = { created: 'Created', modified: 'Modified', deleted: 'Deleted' }


/**
 * What the agent changed in the session's read-write folders, per turn, with diffs, and revert
 * of a file, a turn or everything. Changes Corral cannot put back say why.
 */
export function ChangesView({ sessionId }: { sessionId: string }) {
  const client = useClient()
  const q = useQuery(() => client.request<SessionChangesResponse>('changes.list', { id: sessionId }), [sessionId], 3000)
  const [busy, setBusy] = useState(false)
  const [err, setErr] = useState<unknown>()
  const [note, setNote] = useState<string>()
  const [open, setOpen] = useState<Record<number, boolean>>({})

  const revert = async (resourceIndex: number, body: { scope: 'file' | 'turn' | 'all'; path?: string; turn?: number }, what: string) => {
    setBusy(true)
    setErr(undefined)
    setNote(undefined)
    try {
      const r = await client.request<ChangesRevertResponse>('changes.revert', { id: sessionId }, { resource_index: resourceIndex, ...body })
      setNote(`Reverted ${what}: ${r.reverted.length} file${r.reverted.length === 1 ? '' : 's'} put back.`)
      q.reload()
    } catch (e) {
      setErr(e)
    } finally {
      setBusy(false)
    }
  }

  if (q.error) return <ErrorNote error={q.error} />
  if (!q.data) return <Spinner label="Loading changes" />
  if (!q.data.folders.length) return <Empty icon="box" title="No read-write folder">This session mounts no folder of your machine read-write, so there is nothing to review here.</Empty>

  return (
    <section className="changes" aria-label="Changes">
      <ErrorNote error={err} />
      {note && (
        <p className="changes-note" role="status">
          {note}
        </p>
      )}
      {q.data.folders.map((f) => {
        const live = f.changes.filter((c) => !c.reverted && !c.reverts)
        const turns = [...new Set(f.changes.map((c) => c.turn))]
        return (
          <div key={f.resource_index} className="changes-folder">
            <header className="changes-head">
              <div>
                <h2>{f.host_path}</h2>
                <p className="muted">
                  mounted at <code>{f.mount_path}</code> · {live.length} change{live.length === 1 ? '' : 's'} not reverted · change store {formatBytes(f.store_bytes)}
                </p>
              </div>
              <Button small disabled={busy || !live.length} onClick={() => void revert(f.resource_index, { scope: 'all' }, 'everything')}>
                Revert everything
              </Button>
            </header>
            {f.changes.length === 0 && <p className="muted">The agent has not changed anything in this folder yet.</p>}
            {turns.map((t) => {
              const inTurn = f.changes.filter((c) => c.turn === t)
              const liveInTurn = inTurn.filter((c) => !c.reverted && !c.reverts)
              return (
                <div key={String(t)} className="changes-turn" aria-label={t === null ? 'Outside a tool call' : `Turn ${t}`} role="group">
                  <div className="changes-turn-head">
                    <h3>{t === null ? 'Reverts and changes outside a tool call' : `Turn ${t}`}</h3>
                    {t !== null && (
                      <Button small disabled={busy || !liveInTurn.length} onClick={() => void revert(f.resource_index, { scope: 'turn', turn: t }, `turn ${t}`)}>
                        Revert turn {t}
                      </Button>
                    )}
                  </div>
                  <ul className="changes-list">
                    {inTurn.map((c) => (
                      <li key={c.seq} className={`change change-${c.kind}${c.reverted ? ' change-reverted' : ''}`} aria-label={`${KIND_LABEL[c.kind]} ${c.path}`}>
                        <div className="change-row">
                          <button type="button" className="link-btn change-path" aria-expanded={!!open[c.seq]} onClick={() => setOpen((o) => ({ ...o, [c.seq]: !o[c.seq] }))}>
                            <span className={`change-kind change-kind-${c.kind}`}>{KIND_LABEL[c.kind]}</span> <code>{c.path}</code>
                          </button>
                          {c.reverts && <span className="muted">revert</span>}
                          {c.reverted && <span className="muted">reverted</span>}
                          {!c.reverts && !c.reverted && (c.revertable ? (
                            <Button small disabled={busy} onClick={() => void revert(f.resource_index, { scope: 'file', path: c.path }, c.path)} aria-label={`Revert ${c.path}`}>
                              Revert file
                            </Button>
                          ) : (
                            <span className="change-unrevertable" title={c.reason ?? undefined}>
                              Cannot revert: {c.reason}
                            </span>
                          ))}
                        </div>
                        {open[c.seq] && (c.diff ? <UnifiedDiff diff={c.diff} path={c.path} /> : <p className="muted">{c.after?.link !== undefined ? `symlink to ${c.after.link}` : c.before?.hash === null ? 'No diff: Corral did not see the content before.' : 'No diff: binary or large file.'}</p>)}
                      </li>
                    ))}
                  </ul>
                </div>
              )
            })}
          </div>
        )
      })}
    </section>
  )
}
