import { setTimeout as delay } from 'node:timers/promises'

/** Waits `ms`, or until `signal` aborts, whichever comes first; resolves either way (a retry's backoff). */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return delay(ms, undefined, { signal }).catch(() => undefined)
}
