import type { Dream } from '../../../../shared/api/types'
import { MAX_DREAM_SESSIONS } from '../../../../shared/api/dream-schemas'

/** The dream form of the Memory page, as data. */
export interface DreamDraft {
  storeId: string
  sessionIds: string[]
  model: string
  instructions: string
  /** Write into this store instead of a new copy. */
  updateExisting: boolean
}

/** What the form cannot send yet, in words (undefined: ready). */
export function dreamDraftProblem(d: DreamDraft): string | undefined {
  if (d.sessionIds.length === 0) return 'Choose at least one session for the dream to read.'
  if (d.sessionIds.length > MAX_DREAM_SESSIONS) return `A dream reads at most ${MAX_DREAM_SESSIONS} sessions (${d.sessionIds.length} chosen).`
  if (!d.model.trim()) return 'Name the model that runs the dream.'
  if (d.instructions.length > 4096) return `Guidance is at most 4,096 characters (${d.instructions.length.toLocaleString('en-US')}).`
  return undefined
}

/** The body of `dreams.create` for the form. */
export function dreamCreateBody(d: DreamDraft): Record<string, unknown> {
  return {
    inputs: [
      { type: 'memory_store', memory_store_id: d.storeId },
      { type: 'sessions', session_ids: [...new Set(d.sessionIds)] },
    ],
    model: d.model.trim(),
    ...(d.instructions.trim() ? { instructions: d.instructions.trim() } : {}),
    ...(d.updateExisting ? { output_behavior: { type: 'update_existing', memory_store_id: d.storeId } } : {}),
  }
}

/** Whether a dream reads the store (the Memory page lists a store's dreams). */
export function dreamReads(dream: Dream, storeId: string): boolean {
  return dream.inputs.some((i) => i.type === 'memory_store' && i.memory_store_id === storeId)
}

export const DREAM_STATUS_LABEL: Record<Dream['status'], string> = {
  pending: 'Starting',
  running: 'Dreaming',
  completed: 'Done',
  failed: 'Failed',
  canceled: 'Canceled',
}

/** Whether a dream may still change (the page polls while one does). */
export const dreamOpen = (d: Pick<Dream, 'status'>): boolean => d.status === 'pending' || d.status === 'running'

/**
 * How long an open dream has run against its time limit, for its row: "12 min of its 60-minute
 * limit". Minutes are whole, rounded down (under one: "under a minute"); without a known limit
 * (an engine without the setting) only the time run. Undefined for an ended dream.
 */
export function dreamClock(d: Pick<Dream, 'status' | 'created_at'>, now: number, limitMinutes: number | undefined): string | undefined {
  if (!dreamOpen(d)) return undefined
  const ms = Math.max(0, now - Date.parse(d.created_at))
  const ran = ms < 60_000 ? 'under a minute' : `${Math.floor(ms / 60_000)} min`
  return limitMinutes === undefined ? `running ${ran}` : `running ${ran} of its ${limitMinutes}-minute limit`
}
