import type { ModelUsage } from './model-client'

/** List prices in US cents per million tokens: [input, output]. Cache writes cost 1.25× input, reads 0.1×. */
const PRICES: [RegExp, number, number][] = [
  [/opus-4-[5-9]|opus-[5-9]/, 500, 2500],
  [/opus/, 1500, 7500],
  [/haiku-4|haiku-[5-9]/, 100, 500],
  [/haiku-3-5|3-5-haiku/, 80, 400],
  [/haiku/, 25, 125],
  [/sonnet/, 300, 1500],
]
/** Models Corral has no price for (local models) are charged at Sonnet's list price, so a budget still binds. */
const DEFAULT_PRICE: [number, number] = [300, 1500]

/** The list cost of some usage of one model, in US cents (fractional). */
export function listCostCents(model: string, u: ModelUsage): number {
  const hit = PRICES.find(([re]) => re.test(model))
  const [inP, outP] = hit ? [hit[1], hit[2]] : DEFAULT_PRICE
  return (u.input_tokens * inP + u.cache_creation_input_tokens * inP * 1.25 + u.cache_read_input_tokens * inP * 0.1 + u.output_tokens * outP) / 1_000_000
}

/** The budget ceiling of a session in cents, or undefined when it has none. `amount` is in minor units (the API's BetaMonetaryAmount). */
export function budgetCents(budget: unknown): number | undefined {
  const b = budget as { type?: string; max_list_cost?: { amount?: string } } | null | undefined
  if (!b || b.type !== 'limit' || typeof b.max_list_cost?.amount !== 'string') return undefined
  const n = Number(b.max_list_cost.amount)
  return Number.isFinite(n) ? n : undefined
}
