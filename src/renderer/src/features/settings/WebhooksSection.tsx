import { useState } from 'react'
import { useClient } from '../../api/context'
import { Button, ErrorNote, Field, Spinner } from '../../ui/components'
import { CodeBlock } from '../../ui/Code'
import { useQuery } from '../../ui/hooks'
import { relativeTime } from '../../ui/format'
import { useSetup } from '../setup/SetupProvider'
import { MAX_WEBHOOK_ENDPOINTS, type NewWebhookEndpoint, type WebhookDelivery, type WebhookEndpoint, type WebhookEventType } from '../../../../shared/api/webhooks'
import { DEFAULT_WEBHOOK_EVENTS, parseWebhookUrl, retryText, webhookEventGroups, webhookEventLabel, webhookEventsSummary } from './webhook-form'

const VERIFY_SNIPPET = "const event = client.beta.webhooks.unwrap(rawBody, { headers, key: process.env.CORRAL_WEBHOOK_SECRET })"

/**
 * Settings → Webhooks (docs/webhooks.md): the endpoints Corral posts signed events to. Add one (its
 * signing secret is shown once), turn it off and on, change its events, regenerate its secret,
 * delete it, and read its recent deliveries.
 */
export function WebhooksSection() {
  const client = useClient()
  const endpoints = useQuery(() => client.request<{ data: WebhookEndpoint[] }>('webhooks.list', {}, { limit: 100 }), [])
  const [secret, setSecret] = useState<{ endpoint: string; url: string; secret: string }>()
  const [adding, setAdding] = useState(false)
  const list = endpoints.data?.data ?? []
  // an engine built without a keychain has no webhook routes (503); one whose keychain does not
  // answer lists its endpoints but can keep no new secret, so adding one is off and says why
  const unavailable = endpoints.error && (endpoints.error as { status?: number }).status === 503
  const keychain = useSetup().settings?.keychain
  const noKeychain = keychain?.available === false
  return (
    <section className="card-section webhooks-section" aria-labelledby="s-webhooks">
      <h2 id="s-webhooks">Webhooks</h2>
      <p className="muted">
        Corral posts a signed message to your URL when a session starts, goes idle, needs you or ends (and when agents, environments, stores, vaults and schedules change), so
        your own program can react without polling. Failed deliveries are retried for a day, also after a restart.
      </p>
      {endpoints.loading && !endpoints.data && <Spinner label="Loading webhooks" />}
      {unavailable ? (
        <p className="note" role="status">
          {(endpoints.error as Error).message}
        </p>
      ) : (
        <>
          <ErrorNote error={endpoints.error} />
          {noKeychain && (
            <div className="note note-warn" role="status">
              <strong>Endpoints cannot be added here: no OS keychain is available, and Corral keeps each endpoint&apos;s signing secret there.</strong> {keychain.problem}
            </div>
          )}
          {secret && (
            <div className="note key-once" role="status" data-testid="webhook-secret">
              <p>
                <strong>The signing secret of {secret.url}, shown once.</strong> Keep it where your program can read it; Corral will not show it again (regenerate it if it is lost).
                Verify each delivery with the official SDK:
              </p>
              <CodeBlock code={secret.secret} language="text" />
              <CodeBlock code={VERIFY_SNIPPET} language="ts" />
              <Button small onClick={() => setSecret(undefined)}>
                Done
              </Button>
            </div>
          )}
          {list.length === 0 && !endpoints.loading && !endpoints.error && <p className="muted">No endpoint yet.</p>}
          <ul className="webhook-list" aria-label="Webhook endpoints">
            {list.map((e) => (
              <EndpointRow
                key={e.id}
                endpoint={e}
                onChanged={endpoints.reload}
                onSecret={(s) => setSecret({ endpoint: e.id, url: e.url, secret: s })}
                onDeleted={() => setSecret((shown) => (shown?.endpoint === e.id ? undefined : shown))}
              />
            ))}
          </ul>
          {adding ? (
            <EndpointForm
              onCancel={() => setAdding(false)}
              onCreated={(made) => {
                setAdding(false)
                setSecret({ endpoint: made.id, url: made.url, secret: made.signing_secret })
                endpoints.reload()
              }}
            />
          ) : (
            <Button icon="plus" onClick={() => setAdding(true)} disabled={list.length >= MAX_WEBHOOK_ENDPOINTS || !endpoints.data || noKeychain}>
              Add an endpoint
            </Button>
          )}
          {list.length >= MAX_WEBHOOK_ENDPOINTS && <p className="muted">{MAX_WEBHOOK_ENDPOINTS} endpoints at most: delete one to add another.</p>}
        </>
      )}
    </section>
  )
}

/** The event checkboxes, in groups (every type Corral sends). */
function EventPicker({ idPrefix, chosen, onChange }: { idPrefix: string; chosen: ReadonlySet<string>; onChange: (next: Set<string>) => void }) {
  const toggle = (t: string, on: boolean) => {
    const next = new Set(chosen)
    if (on) next.add(t)
    else next.delete(t)
    onChange(next)
  }
  return (
    <div className="webhook-events">
      {webhookEventGroups().map((g) => (
        <fieldset key={g.title} className="webhook-event-group">
          <legend>{g.title}</legend>
          {g.types.map((t) => (
            <label key={t} className="check" htmlFor={`${idPrefix}-${t}`}>
              <input id={`${idPrefix}-${t}`} type="checkbox" checked={chosen.has(t)} onChange={(e) => toggle(t, e.target.checked)} />
              <span>{webhookEventLabel(t)}</span> <code className="muted">{t}</code>
            </label>
          ))}
        </fieldset>
      ))}
    </div>
  )
}

/** Adds an endpoint: its URL (checked as typed), an optional name and its events; the API's 400 is shown with the form kept. */
function EndpointForm({ onCreated, onCancel }: { onCreated: (e: NewWebhookEndpoint) => void; onCancel: () => void }) {
  const client = useClient()
  const [url, setUrl] = useState('')
  const [name, setName] = useState('')
  const [chosen, setChosen] = useState<Set<string>>(new Set(DEFAULT_WEBHOOK_EVENTS))
  const [touched, setTouched] = useState(false)
  const [busy, setBusy] = useState(false)
  const [err, setErr] = useState<unknown>()
  const parsed = parseWebhookUrl(url)
  const urlProblem = touched && 'error' in parsed ? parsed.error : undefined
  const submit = async () => {
    setTouched(true)
    if ('error' in parsed || chosen.size === 0) return
    setBusy(true)
    setErr(undefined)
    try {
      onCreated(await client.request<NewWebhookEndpoint>('webhooks.create', {}, { url: parsed.url, ...(name.trim() ? { name: name.trim() } : {}), enabled_events: [...chosen] }))
    } catch (e) {
      setErr(e)
    } finally {
      setBusy(false)
    }
  }
  return (
    <form
      className="form webhook-form"
      aria-label="New webhook endpoint"
      onSubmit={(e) => {
        e.preventDefault()
        void submit()
      }}
    >
      <fieldset disabled={busy}>
        <Field
          id="wh-url"
          label="URL"
          hint={urlProblem ? <span id="wh-url-hint" className="key-problem">{urlProblem}</span> : <span id="wh-url-hint">Where your program listens, e.g. http://127.0.0.1:8787/hooks (loopback is fine).</span>}
        >
          <input
            id="wh-url"
            value={url}
            placeholder="http://127.0.0.1:8787/hooks"
            aria-invalid={urlProblem ? true : undefined}
            aria-describedby="wh-url-hint"
            onChange={(e) => setUrl(e.target.value)}
            onBlur={() => setTouched(url.trim() !== '')}
          />
        </Field>
        <Field id="wh-name" label="Name (optional)">
          <input id="wh-name" value={name} maxLength={255} placeholder="my notifier" onChange={(e) => setName(e.target.value)} />
        </Field>
        <EventPicker idPrefix="wh-new" chosen={chosen} onChange={setChosen} />
        {chosen.size === 0 && <p className="key-problem">Pick at least one event.</p>}
        <div className="form-actions">
          <Button type="submit" variant="primary" disabled={chosen.size === 0}>
            {busy ? 'Adding…' : 'Add endpoint'}
          </Button>
          <Button variant="ghost" onClick={onCancel}>
            Cancel
          </Button>
          {busy && <Spinner label="Adding the endpoint" />}
        </div>
      </fieldset>
      <ErrorNote error={err} />
    </form>
  )
}

/** One endpoint: its state, events, actions, and (opened) its events' editor and its deliveries. */
function EndpointRow({ endpoint: e, onChanged, onSecret, onDeleted }: { endpoint: WebhookEndpoint; onChanged: () => void; onSecret: (secret: string) => void; onDeleted: () => void }) {
  const client = useClient()
  const [busy, setBusy] = useState<string>()
  const [err, setErr] = useState<unknown>()
  const [editing, setEditing] = useState(false)
  const [chosen, setChosen] = useState<Set<string>>(new Set(e.enabled_events))
  const [showDeliveries, setShowDeliveries] = useState(false)
  const on = e.state === 'enabled'
  const act = async (what: string, run: () => Promise<unknown>) => {
    setBusy(what)
    setErr(undefined)
    try {
      await run()
      onChanged()
    } catch (x) {
      setErr(x)
    } finally {
      setBusy(undefined)
    }
  }
  /** `act`, once the person said yes to `question`. */
  const confirmed = (question: string, what: string, run: () => Promise<unknown>) => {
    if (window.confirm(question)) void act(what, run)
  }
  const label = e.name || e.url
  return (
    <li className={`webhook-row${on ? '' : ' off'}`} data-testid="webhook-endpoint">
      <div className="webhook-head">
        <span className={`pill${on ? ' pill-good' : ''}`}>{on ? 'On' : 'Off'}</span>
        <span className="mono selectable webhook-url">{e.url}</span>
        {e.name && <span className="muted">{e.name}</span>}
      </div>
      <p className="muted webhook-summary">{webhookEventsSummary(e.enabled_events)}</p>
      <div className="form-actions">
        <Button small onClick={() => void act('state', () => client.request('webhooks.update', { id: e.id }, { state: on ? 'disabled' : 'enabled' }))} disabled={busy !== undefined}>
          {busy === 'state' ? 'Saving…' : on ? 'Turn off' : 'Turn on'}
        </Button>
        <Button small onClick={() => (setChosen(new Set(e.enabled_events)), setEditing(!editing))} aria-expanded={editing}>
          Events…
        </Button>
        <Button small onClick={() => setShowDeliveries(!showDeliveries)} aria-expanded={showDeliveries}>
          Deliveries
        </Button>
        <Button
          small
          variant="ghost"
          disabled={busy !== undefined}
          onClick={() =>
            confirmed(`Make a new signing secret for ${label}? Deliveries are signed with it from now on; your program needs the new one.`, 'secret', async () =>
              onSecret((await client.request<{ signing_secret: string }>('webhooks.regenerateSigningSecret', { id: e.id })).signing_secret),
            )
          }
        >
          {busy === 'secret' ? 'Regenerating…' : 'New secret'}
        </Button>
        <Button
          small
          variant="ghost"
          disabled={busy !== undefined}
          onClick={() =>
            confirmed(`Delete the endpoint ${label}? Its secret and its deliveries go with it.`, 'delete', async () => {
              await client.request('webhooks.delete', { id: e.id })
              onDeleted()
            })
          }
        >
          {busy === 'delete' ? 'Deleting…' : 'Delete'}
        </Button>
      </div>
      {editing && (
        <form
          className="form"
          aria-label={`Events of ${label}`}
          onSubmit={(ev) => {
            ev.preventDefault()
            if (chosen.size === 0) return
            void act('events', async () => {
              await client.request('webhooks.update', { id: e.id }, { enabled_events: [...chosen] as WebhookEventType[] })
              setEditing(false)
            })
          }}
        >
          <fieldset disabled={busy !== undefined}>
            <EventPicker idPrefix={`wh-${e.id}`} chosen={chosen} onChange={setChosen} />
            {chosen.size === 0 && <p className="key-problem">Pick at least one event.</p>}
            <div className="form-actions">
              <Button type="submit" variant="primary" disabled={chosen.size === 0}>
                {busy === 'events' ? 'Saving…' : 'Save events'}
              </Button>
              <Button variant="ghost" onClick={() => setEditing(false)}>
                Cancel
              </Button>
            </div>
          </fieldset>
        </form>
      )}
      {showDeliveries && <Deliveries endpointId={e.id} />}
      <ErrorNote error={err} />
    </li>
  )
}

/** An endpoint's recent deliveries, newest first; refreshed every 5 s while shown. */
function Deliveries({ endpointId }: { endpointId: string }) {
  const client = useClient()
  const q = useQuery(() => client.request<{ data: WebhookDelivery[] }>('webhooks.deliveries', { id: endpointId }, { limit: 50 }), [endpointId], 5000)
  const rows = q.data?.data ?? []
  return (
    <div className="webhook-deliveries">
      <h3>
        Recent deliveries{' '}
        <Button small variant="ghost" onClick={q.reload}>
          Refresh
        </Button>
      </h3>
      {q.loading && !q.data && <Spinner label="Loading deliveries" />}
      <ErrorNote error={q.error} />
      {q.data && rows.length === 0 && <p className="muted">Nothing sent yet.</p>}
      {rows.length > 0 && (
        <table className="webhook-table" aria-label="Deliveries">
          <thead>
            <tr>
              <th scope="col">Event</th>
              <th scope="col">About</th>
              <th scope="col">Status</th>
              <th scope="col">When</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((d) => (
              <tr key={d.id} data-testid="webhook-delivery">
                <td>
                  <code>{d.event_type}</code>
                </td>
                <td className="mono">{d.resource_id}</td>
                <td>
                  <span className={`pill ${d.status === 'delivered' ? 'pill-good' : d.status === 'failed' ? 'pill-bad' : 'pill-running'}`}>{d.status}</span>{' '}
                  {d.attempts > 1 || d.status !== 'delivered' ? `${d.attempts} attempt${d.attempts === 1 ? '' : 's'}` : ''}
                  {d.last_error && d.status !== 'delivered' && <div className="key-problem">{d.last_error}</div>}
                </td>
                <td>
                  <time dateTime={d.created_at} title={new Date(d.created_at).toLocaleString()}>
                    {relativeTime(d.created_at)}
                  </time>
                  {d.delivered_at && (
                    <div className="muted">
                      delivered{' '}
                      <time dateTime={d.delivered_at} title={new Date(d.delivered_at).toLocaleString()}>
                        {relativeTime(d.delivered_at)}
                      </time>
                    </div>
                  )}
                  {d.status === 'pending' && d.next_attempt_at && <div className="muted">{retryText(d.next_attempt_at)}</div>}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  )
}
