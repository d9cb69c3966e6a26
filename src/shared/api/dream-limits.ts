/**
 * A dream's time limit (docs/dreams.md): the engine's default and the longest the settings take,
 * shared by the settings' schema, the engine and the desktop's Settings field.
 */

/** The limit when the settings name none, in minutes: an hour. */
export const DEFAULT_DREAM_TIME_LIMIT_MINUTES = 60

/** The longest limit the settings take, in minutes: a week. */
export const MAX_DREAM_TIME_LIMIT_MINUTES = 7 * 24 * 60
