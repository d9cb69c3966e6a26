import { useEffect, useState } from 'react'
import { useClient } from '../../api/context'
import type { Dream, MemoryStore, Session } from '../../../../shared/api/types'
import { Button, Dialog, ErrorNote, Field, Spinner } from '../../ui/components'
import { useAction, useQuery } from '../../ui/hooks'
import { useSetup } from '../setup/SetupProvider'
import { DREAM_STATUS_LABEL, dreamClock, dreamCreateBody, dreamDraftProblem, dreamOpen, dreamReads } from './dream-draft'

/** A dream's status drawn with the session statuses' colours. */
const DREAM_STATUS_CLASS: Record<Dream['status'], string> = { pending: 'rescheduling', running: 'running', completed: 'idle', failed: 'terminated', canceled: 'archived' }

interface Page<T> {
  data: T[]
  next_page?: string | null
}

/**
 * A store's dreams on the Memory page (docs/dreams.md): start one over chosen sessions, watch it
 * (its session is a link), open the store it wrote, cancel a running one, archive an ended one.
 */
export function DreamsPanel({ store, onOutputs }: { store: MemoryStore; onOutputs?: () => void }) {
  const client = useClient()
  const { settings } = useSetup()
  const [starting, setStarting] = useState(false)
  const action = useAction()
  // read every 1.5 s while a dream of this store may still change, else every 10 s (one started elsewhere)
  const [watching, setWatching] = useState(false)
  const all = useQuery(() => client.request<Page<Dream>>('dreams.list', {}, { limit: 100 }), [store.id], watching ? 1500 : 10_000)
  const dreams = (all.data?.data ?? []).filter((d) => dreamReads(d, store.id))
  const anyOpen = dreams.some(dreamOpen)
  useEffect(() => setWatching(anyOpen), [anyOpen])
  // a dream that made a store: the page's list of stores reads again, so the new one is there
  const outputs = dreams.flatMap((d) => d.outputs.map((o) => o.memory_store_id)).join(',')
  useEffect(() => {
    if (outputs) onOutputs?.()
  }, [outputs, onOutputs])
  return (
    <section className="dreams" aria-label="Dreams">
      <div className="dreams-head">
        <h3>Dreams</h3>
        <Button small icon="moon" onClick={() => setStarting(true)} disabled={!!store.archived_at}>
          Dream…
        </Button>
      </div>
      <p className="muted small">A dream reads past sessions and rewrites this store&apos;s memories: merged, corrected, organized.</p>
      {all.error ? <ErrorNote error={all.error} /> : null}
      <ErrorNote error={action.error} />
      <ul className="plain-list dream-list">
        {dreams.map((d) => {
          const output = d.outputs[0]?.memory_store_id
          const clock = dreamClock(d, Date.now(), settings?.dream_time_limit_minutes)
          return (
            <li key={d.id} className="dream-row" aria-label={`Dream ${d.id}`}>
              <span className={`status status-${DREAM_STATUS_CLASS[d.status]}`}>
                <span className="status-dot" aria-hidden="true" />
                {DREAM_STATUS_LABEL[d.status]}
              </span>{' '}
              <span className="muted small">{new Date(d.created_at).toLocaleString()}</span>
              {clock ? <span className="muted small"> · {clock}</span> : null}
              <div className="small">
                {d.inputs.map((i) => (i.type === 'sessions' ? `${i.session_ids.length} session${i.session_ids.length === 1 ? '' : 's'}` : null))}
                {' · '}
                {d.output_behavior.type === 'update_existing' ? 'updates this store' : 'writes a new store'}
              </div>
              {d.error ? <div className="error-note small">{d.error.message}</div> : null}
              <div className="dream-actions">
                {d.session_id ? <a href={`#/sessions/${d.session_id}`}>Watch its session</a> : null}
                {output && output !== store.id ? <a href={`#/memory/${output}`}>Open the store it wrote</a> : null}
                {dreamOpen(d) ? (
                  <Button small variant="ghost" disabled={!!action.busy} onClick={() => void action.run(() => client.request('dreams.cancel', { id: d.id }).then(all.reload), d.id)}>
                    Cancel
                  </Button>
                ) : (
                  <Button small variant="ghost" disabled={!!action.busy} onClick={() => void action.run(() => client.request('dreams.archive', { id: d.id }).then(all.reload), d.id)}>
                    Archive
                  </Button>
                )}
              </div>
            </li>
          )
        })}
      </ul>
      {all.data && dreams.length === 0 ? <p className="muted small">No dreams over this store yet.</p> : null}
      {starting ? (
        <NewDream
          store={store}
          onClose={() => setStarting(false)}
          onStarted={() => {
            setStarting(false)
            all.reload()
          }}
        />
      ) : null}
    </section>
  )
}

function NewDream({ store, onClose, onStarted }: { store: MemoryStore; onClose: () => void; onStarted: () => void }) {
  const client = useClient()
  const setup = useSetup()
  const sessions = useQuery(() => client.request<Page<Session>>('sessions.list', {}, { limit: 100, include_archived: true }), [])
  // the sessions a person would feed a dream: not the dreams' own
  const choices = (sessions.data?.data ?? []).filter((s) => !s.metadata?.corral_dream_id)
  const [picked, setPicked] = useState<string[]>([])
  const [model, setModel] = useState(setup.settings?.model?.default_model ?? 'claude-sonnet-5-5')
  const [instructions, setInstructions] = useState('')
  const [updateExisting, setUpdateExisting] = useState(false)
  const action = useAction()
  const draft = { storeId: store.id, sessionIds: picked, model, instructions, updateExisting }
  const problem = dreamDraftProblem(draft)
  const toggle = (id: string) => setPicked((p) => (p.includes(id) ? p.filter((x) => x !== id) : [...p, id]))
  return (
    <Dialog title={`Dream over ${store.name}`} onClose={onClose} wide>
      <Field id="dream-sessions" label={`Sessions to read (${picked.length} chosen)`} hint="Their messages, tool calls and results are given to the dream as transcripts.">
        {!sessions.data ? <Spinner label="Loading sessions" /> : null}
        {sessions.error ? <ErrorNote error={sessions.error} /> : null}
        <div className="dream-sessions" id="dream-sessions" role="group" aria-label="Sessions to read">
          {choices.length > 0 ? (
            <Button small variant="ghost" onClick={() => setPicked(choices.slice(0, 10).map((s) => s.id))}>
              The 10 most recent
            </Button>
          ) : null}
          {choices.map((s) => (
            <label key={s.id} className="check-row">
              <input type="checkbox" checked={picked.includes(s.id)} onChange={() => toggle(s.id)} /> {s.title ?? s.id}{' '}
              <span className="muted small">
                {s.agent.name} · {new Date(s.created_at).toLocaleString()}
              </span>
            </label>
          ))}
          {sessions.data && choices.length === 0 ? <p className="muted">There are no sessions to read yet.</p> : null}
        </div>
      </Field>
      <Field id="dream-model" label="Model" hint="The model that reads the transcripts and rewrites the memories.">
        <input id="dream-model" value={model} onChange={(e) => setModel(e.target.value)} />
      </Field>
      <Field id="dream-instructions" label="Guidance (optional)" hint="What to look for and how to organize the store, in a few sentences.">
        <textarea id="dream-instructions" rows={3} value={instructions} onChange={(e) => setInstructions(e.target.value)} />
      </Field>
      <div className="radio-row dream-output" role="radiogroup" aria-label="Where the result goes">
        <label>
          <input type="radio" name="dream-output" checked={!updateExisting} onChange={() => setUpdateExisting(false)} /> A new store, starting as a copy of this one (this store is left as it is)
        </label>
        <label>
          <input type="radio" name="dream-output" checked={updateExisting} onChange={() => setUpdateExisting(true)} /> This store, rewritten in place (every change is a version you can go back to)
        </label>
      </div>
      <ErrorNote error={action.error} />
      {problem ? <p className="muted small">{problem}</p> : null}
      <footer className="dialog-foot">
        <Button variant="ghost" onClick={onClose}>
          Close
        </Button>
        <Button variant="primary" disabled={!!problem || !!action.busy} onClick={() => void action.run(() => client.request('dreams.create', {}, dreamCreateBody(draft)).then(onStarted), 'start')}>
          {action.busy ? 'Starting…' : 'Start the dream'}
        </Button>
      </footer>
    </Dialog>
  )
}
