/**
 * What the engine and the desktop both know of dreams (docs/dreams.md): the time limit's default
 * and the longest the settings take, and the metadata of the agent and environment Corral runs
 * dreams with.
 */

/** The limit when the settings name none, in minutes: an hour. */
export const DEFAULT_DREAM_TIME_LIMIT_MINUTES = 60

/** The longest limit the settings take, in minutes: a week. */
export const MAX_DREAM_TIME_LIMIT_MINUTES = 7 * 24 * 60

/** The metadata that marks the agent and environment Corral runs dreams with (it finds them again by it). */
export const DREAM_METADATA = { corral_role: 'dreams' } as const

/** Whether an agent or environment is the one Corral keeps for dreams (not one to start a session on). */
export function isDreamsOwn(x: { metadata?: Record<string, string> | null }): boolean {
  return x.metadata?.corral_role === DREAM_METADATA.corral_role
}
