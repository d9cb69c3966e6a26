import { useClient } from '../../api/context'
import { Icon } from '../../ui/components'
import { relativeTime } from '../../ui/format'
import { useQuery } from '../../ui/hooks'

/**
 * In the header of a session on a self_hosted environment: whether a worker serves its queue
 * (the queue's stats, polled every 3 s). With none polling the session is not stuck, it waits:
 * the pill says so and how long the oldest item has waited.
 */
export function WorkerStatus({ environmentId }: { environmentId: string }) {
  const client = useClient()
  const stats = useQuery(
    () => client.request<{ depth: number; pending: number; oldest_queued_at: string | null; workers_polling: number | null }>('environments.work.stats', { id: environmentId }),
    [environmentId],
    3000,
  )
  const s = stats.data
  if (!s) return null
  const polling = s.workers_polling ?? 0
  if (polling > 0) {
    return (
      <span className="thread-backend" title="Its tools run on a self-hosted worker" aria-label="Worker status">
        <Icon name="box" size={12} /> {polling} worker{polling === 1 ? '' : 's'} polling
      </span>
    )
  }
  return (
    <span className="pill pill-warn" title="Add a worker in Environments: the session goes on once one polls" aria-label="Worker status">
      waiting for a worker{s.depth ? ` · ${s.depth} queued${s.oldest_queued_at ? `, oldest ${relativeTime(s.oldest_queued_at)}` : ''}` : ''}
    </span>
  )
}
