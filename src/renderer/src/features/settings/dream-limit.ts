/**
 * The Settings screen's field for a dream's time limit (`dream_time_limit_minutes` of
 * `GET/POST /v1/corral/settings`). Pure: what the field shows for the saved limit, and the change
 * a text makes (or why it cannot be saved); the engine checks again and answers 400 naming the field.
 */
import { DEFAULT_DREAM_TIME_LIMIT_MINUTES, MAX_DREAM_TIME_LIMIT_MINUTES } from '../../../../shared/api/dreams'

/** The saved limit as the field shows it: empty for the default hour, else the minutes. */
export function formatDreamLimit(minutes: number | undefined): string {
  return minutes === undefined || minutes === DEFAULT_DREAM_TIME_LIMIT_MINUTES ? '' : String(minutes)
}

/** The change a text makes: empty restores the default (null); otherwise a number of minutes above 0, at most a week. */
export function parseDreamLimit(text: string): { change: { dream_time_limit_minutes: number | null } } | { error: string } {
  const t = text.trim()
  if (!t) return { change: { dream_time_limit_minutes: null } }
  if (!/^\d+(\.\d+)?$/.test(t)) return { error: 'write a number of minutes, e.g. 90' }
  const minutes = Number(t)
  if (minutes <= 0) return { error: 'the limit must be more than 0 minutes' }
  if (minutes > MAX_DREAM_TIME_LIMIT_MINUTES) return { error: `at most a week (${MAX_DREAM_TIME_LIMIT_MINUTES} minutes)` }
  return { change: { dream_time_limit_minutes: minutes } }
}
