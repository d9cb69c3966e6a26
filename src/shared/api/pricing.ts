/**
 * List prices of the models a session can run, as data, and the pure functions that apply them:
 * the harness (one budget for a session's threads, `session.usage`) and the thread store (each
 * thread's `usage.list_cost`) price usage with the same table. Plain TypeScript, no I/O.
 */

/** Token counts of one or more model requests of one model (the Messages API's usage fields). */
export interface PricedUsage {
  input_tokens: number
  output_tokens: number
  cache_creation_input_tokens: number
  cache_read_input_tokens: number
}

/** List prices in US cents per million tokens, by model id pattern, first match wins: [pattern, input, output]. */
export const MODEL_LIST_PRICES: readonly (readonly [RegExp, number, number])[] = [
  [/opus-4-[5-9]|opus-[5-9]/, 500, 2500],
  [/opus/, 1500, 7500],
  [/haiku-4|haiku-[5-9]/, 100, 500],
  [/haiku-3-5|3-5-haiku/, 80, 400],
  [/haiku/, 25, 125],
  [/sonnet/, 300, 1500],
]
/** Models Corral has no price for (local models) are charged at Sonnet's list price, so a budget still binds. */
export const DEFAULT_LIST_PRICE: readonly [number, number] = [300, 1500]
/** Cache writes cost this much of the input price, cache reads this much. */
export const CACHE_WRITE_FACTOR = 1.25
export const CACHE_READ_FACTOR = 0.1

/** The list cost of some usage of one model, in US cents (fractional: enforcement uses the unrounded figure). */
export function listCostCents(model: string, u: PricedUsage): number {
  const hit = MODEL_LIST_PRICES.find(([re]) => re.test(model))
  const [inP, outP] = hit ? [hit[1], hit[2]] : DEFAULT_LIST_PRICE
  return (u.input_tokens * inP + u.cache_creation_input_tokens * inP * CACHE_WRITE_FACTOR + u.cache_read_input_tokens * inP * CACHE_READ_FACTOR + u.output_tokens * outP) / 1_000_000
}

/** A cost as the API reports it (`BetaMonetaryAmount`): whole US cents, rounded, as an integer string with no leading zeros. */
export function monetaryAmount(cents: number): { amount: string; currency: 'USD' } {
  return { amount: String(Math.max(0, Math.round(cents))), currency: 'USD' }
}

/** The budget ceiling of a session in cents, or undefined when it has none. `amount` is in minor units (the API's BetaMonetaryAmount). */
export function budgetCents(budget: unknown): number | undefined {
  const b = budget as { type?: string; max_list_cost?: { amount?: string } } | null | undefined
  if (!b || b.type !== 'limit' || typeof b.max_list_cost?.amount !== 'string') return undefined
  const n = Number(b.max_list_cost.amount)
  return Number.isFinite(n) ? n : undefined
}
