/**
 * Budgets as the desktop reads and writes them (spec multiagent §9): the API's amount is whole
 * US cents as a string; people type dollars. Pure.
 */

export interface BudgetLimit {
  type: 'limit'
  max_list_cost: { amount: string; currency: 'USD' }
}

/** Dollars as typed ("5", "12.50", "$3") → the API's whole cents ("500"), or why not. */
export function parseUsd(text: string): { cents: string } | { error: string } {
  const t = text.trim().replace(/^\$/, '')
  if (!/^\d+(\.\d{1,2})?$/.test(t)) return { error: 'An amount in US dollars, like 5 or 12.50' }
  const cents = Math.round(Number(t) * 100)
  if (cents <= 0) return { error: 'More than $0.00' }
  return { cents: String(cents) }
}

export function budgetOfCents(cents: string): BudgetLimit {
  return { type: 'limit', max_list_cost: { amount: cents, currency: 'USD' } }
}

/** A budget's cap in dollars (NaN-free: 0 for a malformed amount). */
export function capUsd(budget: BudgetLimit | null | undefined): number | undefined {
  if (!budget) return undefined
  const n = Number(budget.max_list_cost.amount)
  return Number.isFinite(n) ? n / 100 : 0
}

/** Cents as the field shows them: "12.50", "5". */
export function usdText(cents: string | number): string {
  const n = Number(cents) / 100
  return Number.isInteger(n) ? String(n) : n.toFixed(2)
}

/** The amount a raise starts with: the cap doubled, at least $1 above what was spent. */
export function suggestedRaise(capDollars: number, spentDollars: number): string {
  const cents = Math.max(Math.round(capDollars * 200), Math.round(spentDollars * 100) + 100)
  return usdText(cents)
}

/** How far the spend is along the cap, 0..1 (a spend past the cap shows full). */
export function spendFraction(spentDollars: number, capDollars: number): number {
  if (capDollars <= 0) return 1
  return Math.max(0, Math.min(1, spentDollars / capDollars))
}
