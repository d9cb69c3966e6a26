import type { Session } from '../../api/types'

/**
 * Sessions newest activity first (`updated_at`, the time the list shows), then newest created:
 * the list is read by "what happened last", so it is ordered that way too. Returns a new array.
 */
export function byLastActivity(sessions: readonly Session[]): Session[] {
  return [...sessions].sort((a, b) => (a.updated_at === b.updated_at ? (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : 0) : a.updated_at < b.updated_at ? 1 : -1))
}
