/**
 * What the workflows bench reads off the scripted model's request records, for the engine's runs
 * and for the bare run beside them (bench/bare-run.ts), so both are held to one definition.
 */

/** A worker request as the workflow model process records it (ms since the epoch; null until it happened). */
export interface WorkerRequest {
  prompt: string
  arrivedAbs: number | null
  endedAbs: number | null
}

/**
 * The slot refills: the i-th response to end frees the slot the (concurrent + i)-th request fills
 * (phase boundaries aside), so each refill is that request's arrival less that response's end.
 */
export function slotRefillsMs(workers: readonly WorkerRequest[], concurrent: number): number[] {
  const ends = workers.map((w) => w.endedAbs).filter((t): t is number => t !== null).sort((a, b) => a - b)
  const arrivals = workers.map((w) => w.arrivedAbs).filter((t): t is number => t !== null).sort((a, b) => a - b)
  return arrivals.slice(concurrent).map((a, i) => a - ends[i])
}

/** The ideal run: ⌈agents / concurrent⌉ rounds of the model's own time per agent. */
export const idealRunMs = (agents: number, concurrent: number, perAgentMs: number): number => Math.ceil(agents / concurrent) * perAgentMs
