/**
 * The advisor pairing rule ("the advisor must not be weaker than the model it advises"), kept as
 * data: the advisor tool's compatibility table (October 2026 revision) is exactly a ranking of
 * models in tiers, with Claude Sonnet 4.6 as the floor an advisor must reach. Naming is no guide
 * (Haiku 5.5 ranks above Opus 4.6), so the ranking is a table, never a heuristic on names.
 *
 * A model absent from the table (a local model, an older or newer id) may be advised by any
 * model; an advisor absent from the table can advise only such models. The user extends the
 * table in settings (`advisorTiers` in settings.json: model id → tier number on this scale).
 */

/** The name of every advisor consultation thread (reserved by V8 while the advisor is enabled). */
export const ADVISOR_AGENT_NAME = 'anthropic.advisor'

/** Tier (low → high) of each model the advisor tool's table knows. */
export const ADVISOR_TIERS: Readonly<Record<string, number>> = {
  'claude-haiku-4-5': 0,
  'claude-sonnet-4-6': 1,
  'claude-opus-4-6': 2,
  'claude-sonnet-5': 3,
  'claude-haiku-5-5': 3,
  'claude-opus-4-7': 4,
  'claude-opus-4-8': 4,
  'claude-sonnet-5-5': 5,
  'claude-opus-5': 6,
  'claude-opus-5-5': 6,
  'claude-fable-5': 6,
  'claude-mythos-5': 6,
  'claude-fable-5-1': 7,
  'claude-mythos-5-1': 7,
}

/** The lowest tier an advisor must reach (that of claude-sonnet-4-6). */
export const ADVISOR_FLOOR_TIER = 1

/** A tier table: model id → tier; the built-in one, or it extended by the user's settings. */
export type AdvisorTierTable = Readonly<Record<string, number>>

/**
 * The built-in table with the user's entries laid over it (a user entry for a known model
 * replaces its tier). `extra` is what settings.json holds under `advisorTiers`; entries that are
 * not a model id mapped to a whole number ≥ 0 are refused with an Error naming the entry.
 */
export function advisorTierTable(extra?: unknown): AdvisorTierTable {
  if (extra === undefined || extra === null) return ADVISOR_TIERS
  if (typeof extra !== 'object' || Array.isArray(extra)) throw new Error('advisorTiers: an object mapping model ids to tier numbers')
  const table: Record<string, number> = { ...ADVISOR_TIERS }
  for (const [model, tier] of Object.entries(extra as Record<string, unknown>)) {
    if (typeof tier !== 'number' || !Number.isInteger(tier) || tier < 0) throw new Error(`advisorTiers.${model}: a whole number ≥ 0 (the built-in tiers run from 0, claude-haiku-4-5, to 7)`)
    table[model] = tier
  }
  return table
}

/**
 * Why `advisor` may not advise `executor`, or null when the pair is allowed. The rule: when the
 * executor is in the table, the advisor must be in it too, at a tier ≥ the executor's and ≥ the
 * floor; an executor absent from the table may be advised by any model.
 */
export function advisorPairingProblem(executor: string, advisor: string, table: AdvisorTierTable = ADVISOR_TIERS): string | null {
  const e = table[executor]
  if (e === undefined) return null
  const a = table[advisor]
  if (a === undefined) return `${advisor} is not in the advisor tier table, so it cannot advise ${executor}, which is (add it to advisorTiers in settings.json to allow it)`
  if (a < ADVISOR_FLOOR_TIER) return `${advisor} is below the advisor floor (an advisor must be claude-sonnet-4-6 or more capable)`
  if (a < e) return `${advisor} (tier ${a}) is weaker than ${executor} (tier ${e}); the advisor must be at least as capable as the model it advises`
  return null
}
