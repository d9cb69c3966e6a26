import type { PackageStatus } from '../../../shared/api/types'

// Where an environment's install stands: the progress an install reports, and the board `packageStatus` reads.

export type { PackageState, PackageStatus } from '../../../shared/api/types'

import type { PackageProgress } from '../sandbox'

export type { PackageProgress, PackageProgressEvent } from '../sandbox'

/** The installs of this process, by environment: what `packageStatus` reports besides the caches themselves. */
export class PackageStatusBoard {
  private readonly entries = new Map<string, PackageStatus>()

  /** A progress sink for one environment's install on one backend. */
  reporter(environmentId: string, backend: string): PackageProgress {
    return (e) => {
      const now = new Date().toISOString()
      if (e.kind === 'start') {
        this.entries.set(environmentId, { environment_id: environmentId, state: 'installing', backend, summary: e.summary, started_at: now, progress: [] })
        return
      }
      const entry = this.entries.get(environmentId)
      if (!entry) return
      if (e.kind === 'line') entry.progress = [...entry.progress, e.line].slice(-20)
      else if (e.kind === 'ready') Object.assign(entry, { state: 'ready', finished_at: now, error: undefined })
      else Object.assign(entry, { state: 'failed', finished_at: now, error: e.message })
    }
  }

  get(environmentId: string): PackageStatus | undefined {
    const e = this.entries.get(environmentId)
    return e && { ...e, progress: [...e.progress] }
  }
}
