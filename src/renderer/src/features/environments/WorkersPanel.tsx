import { useState } from 'react'
import { useClient } from '../../api/context'
import { Button, ErrorNote } from '../../ui/components'
import { relativeTime } from '../../ui/format'
import { useQuery } from '../../ui/hooks'

/** An environment key as `/v1/corral/environments/{id}/keys` shows it (`key` only in the answer that mints it). */
interface EnvironmentKey {
  id: string
  prefix: string
  created_at: string
  last_used_at: string | null
  revoked_at: string | null
  key?: string
}

interface QueueStats {
  depth: number
  pending: number
  oldest_queued_at: string | null
  workers_polling: number | null
}

/** Where a worker reaches this Corral: the page's own address in browser mode, the default port in the desktop app. */
function corralUrl(): string {
  return window.location.protocol.startsWith('http') ? window.location.origin : 'http://127.0.0.1:4610'
}

/**
 * A self_hosted environment's workers: the queue (waiting, delivered, workers polling in the last
 * 30 s, polled every 3 s), its keys with revoke, and "Add a worker", which mints a key, shows it
 * once and the command that serves the queue with it.
 */
export function WorkersPanel({ environmentId }: { environmentId: string }) {
  const client = useClient()
  const [fresh, setFresh] = useState<EnvironmentKey>()
  const [err, setErr] = useState<unknown>()
  const stats = useQuery(() => client.request<QueueStats>('environments.work.stats', { id: environmentId }), [environmentId], 3000)
  const keys = useQuery(() => client.request<{ data: EnvironmentKey[] }>('environments.keys.list', { id: environmentId }), [environmentId, fresh?.id])
  const add = async () => {
    setErr(undefined)
    try {
      setFresh(await client.request<EnvironmentKey>('environments.keys.create', { id: environmentId }))
    } catch (e) {
      setErr(e)
    }
  }
  const revoke = async (k: EnvironmentKey) => {
    if (!window.confirm(`Revoke the key ${k.prefix}…? Its worker stops at its next request.`)) return
    setErr(undefined)
    try {
      await client.request('environments.keys.revoke', { id: environmentId, keyId: k.id })
      keys.reload()
    } catch (e) {
      setErr(e)
    }
  }
  const s = stats.data
  const command = `npm run cli -- worker --url ${corralUrl()} --environment ${environmentId} --key-file ~/.corral-${environmentId}.key --backend docker`
  return (
    <fieldset className="workers-panel" aria-label="Workers">
      <legend>Workers</legend>
      <ErrorNote error={err ?? stats.error ?? keys.error} />
      {s && (
        <p className="note" aria-live="polite" data-testid="queue-stats">
          {s.workers_polling ? `${s.workers_polling} worker${s.workers_polling === 1 ? '' : 's'} polling` : 'No worker is polling: sessions wait in the queue until one comes.'}
          {' · '}
          {s.depth} waiting, {s.pending} delivered{s.oldest_queued_at ? ` · oldest queued ${relativeTime(s.oldest_queued_at)}` : ''}
        </p>
      )}
      {fresh?.key && (
        <div className="note key-once" role="status">
          <p>
            <strong>The new key, shown once.</strong> Save it to a file on the worker machine (readable only by you), then run:
          </p>
          <pre className="mono selectable" data-testid="new-key">{fresh.key}</pre>
          <pre className="mono selectable" data-testid="worker-command">{command}</pre>
          <p className="hint">From another machine, open a tunnel first (Corral answers on loopback only): ssh -N -L 4610:127.0.0.1:4610 you@this-machine</p>
          <Button small onClick={() => setFresh(undefined)}>Done</Button>
        </div>
      )}
      <ul className="key-list">
        {(keys.data?.data ?? []).map((k) => (
          <li key={k.id} className={k.revoked_at ? 'revoked' : undefined}>
            <span className="mono">{k.prefix}…</span>
            <span>created {relativeTime(k.created_at)}</span>
            <span>{k.revoked_at ? `revoked ${relativeTime(k.revoked_at)}` : k.last_used_at ? `last used ${relativeTime(k.last_used_at)}` : 'never used'}</span>
            {!k.revoked_at && (
              <Button small variant="ghost" onClick={() => void revoke(k)}>
                Revoke
              </Button>
            )}
          </li>
        ))}
      </ul>
      <Button icon="plus" onClick={() => void add()}>
        Add a worker
      </Button>
    </fieldset>
  )
}
