import { useState } from 'react'
import { useClient } from '../../api/context'
import type { PackageStatus } from '../../api/types'
import { Button, ErrorNote, Spinner } from '../../ui/components'
import { relativeTime } from '../../ui/format'
import { useQuery } from '../../ui/hooks'

/**
 * Where a saved environment's packages stand (`GET /v1/corral/environments/{id}/packages`): not
 * installed yet, installing (with the install's latest lines, polled every second), cached, or
 * failed with the package manager's words; a button installs them now.
 */
export function PackagesStatus({ environmentId, version }: { environmentId: string; version: string }) {
  const client = useClient()
  const [installing, setInstalling] = useState(false)
  const [actionError, setActionError] = useState<unknown>()
  const [poll, setPoll] = useState(false)
  const q = useQuery(
    () =>
      client.request<PackageStatus>('environments.packages.retrieve', { id: environmentId }).then((s) => {
        setPoll(s.state === 'installing')
        return s
      }),
    [environmentId, version, poll],
    poll ? 1000 : undefined,
  )
  const install = async () => {
    setInstalling(true)
    setActionError(undefined)
    try {
      await client.request<PackageStatus>('environments.packages.prepare', { id: environmentId })
      q.reload()
    } catch (e) {
      setActionError(e)
    } finally {
      setInstalling(false)
    }
  }
  const s = q.data
  if (q.error) return (q.error as { status?: number }).status === 404 ? null : <ErrorNote error={q.error} />
  if (!s || s.state === 'none') return null
  const where = s.backend ? ` (${s.backend})` : ''
  return (
    <div className="packages-status" aria-live="polite">
      <ErrorNote error={actionError} />
      {s.state === 'missing' && (
        <div className="note">
          Not installed yet{where}: the first session of this environment installs them, or{' '}
          <Button small onClick={() => void install()} disabled={installing}>
            Install now
          </Button>
        </div>
      )}
      {s.state === 'installing' && (
        <div className="note">
          <Spinner label="Installing packages" /> Installing {s.summary}
          {where}
          {s.started_at ? `, started ${relativeTime(s.started_at)}` : ''}…
        </div>
      )}
      {s.state === 'ready' && (
        <div className="note note-good">
          Installed and cached{where}: {s.summary}
          {s.finished_at ? ` (finished ${relativeTime(s.finished_at)})` : ''}
        </div>
      )}
      {s.state === 'failed' && (
        <>
          <ErrorNote error={{ type: 'sandbox_error', message: s.error ?? 'the install failed' }} />
          <Button small onClick={() => void install()} disabled={installing}>
            Try again
          </Button>
        </>
      )}
      {s.progress.length > 0 && (s.state === 'installing' || s.state === 'failed') && <pre className="code-block packages-log">{s.progress.join('\n')}</pre>}
    </div>
  )
}
