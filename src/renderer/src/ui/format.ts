/** Small formatting helpers: relative times, durations, token counts, money. Pure. */

export function relativeTime(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return '—'
  const t = Date.parse(iso)
  if (Number.isNaN(t)) return '—'
  const s = Math.round((now - t) / 1000)
  if (s < 5) return 'just now'
  if (s < 60) return `${s}s ago`
  const m = Math.round(s / 60)
  if (m < 60) return `${m}m ago`
  const h = Math.round(m / 60)
  if (h < 24) return `${h}h ago`
  const d = Math.round(h / 24)
  if (d < 30) return `${d}d ago`
  return new Date(t).toLocaleDateString()
}

/** A size for people: 512 B, 3.4 KiB, 12.0 MiB. */
export function formatBytes(n: number): string {
  return n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 / 1024).toFixed(1)} MiB`
}

export function duration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return ''
  if (ms < 1000) return `${Math.round(ms)} ms`
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`
  const m = Math.floor(ms / 60_000)
  const s = Math.round((ms % 60_000) / 1000)
  return `${m}m ${s}s`
}

export function tokens(n: number | undefined): string {
  if (!n) return '0'
  if (n < 1000) return String(n)
  if (n < 1_000_000) return `${(n / 1000).toFixed(n < 10_000 ? 1 : 0)}k`
  return `${(n / 1_000_000).toFixed(2)}M`
}

export function clock(iso: string | undefined): string {
  if (!iso) return ''
  const d = new Date(iso)
  return Number.isNaN(d.getTime()) ? '' : d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' })
}

export interface UsageLike {
  input_tokens?: number
  output_tokens?: number
  cache_read_input_tokens?: number
  cache_creation?: { ephemeral_5m_input_tokens?: number; ephemeral_1h_input_tokens?: number }
  list_cost?: { amount: string; currency: string } | null
}

/** USD per million tokens by model family, from Anthropic's public list prices. */
const PRICES: { match: RegExp; input: number; output: number }[] = [
  { match: /opus-4-[01]|opus-3/, input: 15, output: 75 },
  { match: /opus/, input: 5, output: 25 },
  { match: /sonnet/, input: 3, output: 15 },
  { match: /haiku-3(?!-5)/, input: 0.25, output: 1.25 },
  { match: /haiku-3-5/, input: 0.8, output: 4 },
  { match: /haiku/, input: 1, output: 5 },
]

export interface Cost {
  usd: number
  /** True when reported by the engine (`usage.list_cost`); false when estimated here from tokens. */
  reported: boolean
}

/**
 * What a session cost: `usage.list_cost` when the engine reports it (minor units, so "2500" is
 * $25.00), else an estimate from the tokens at the model family's list price (cache reads at
 * 0.1×, 5-minute cache writes at 1.25×, 1-hour writes at 2×). Undefined for an unknown model.
 */
export function sessionCost(usage: UsageLike | undefined, modelId: string | undefined): Cost | undefined {
  if (!usage) return undefined
  if (usage.list_cost && /^\d+$/.test(usage.list_cost.amount)) return { usd: Number(usage.list_cost.amount) / 100, reported: true }
  const price = PRICES.find((p) => modelId && p.match.test(modelId))
  if (!price) return undefined
  const m = 1_000_000
  const usd =
    ((usage.input_tokens ?? 0) * price.input +
      (usage.output_tokens ?? 0) * price.output +
      (usage.cache_read_input_tokens ?? 0) * price.input * 0.1 +
      (usage.cache_creation?.ephemeral_5m_input_tokens ?? 0) * price.input * 1.25 +
      (usage.cache_creation?.ephemeral_1h_input_tokens ?? 0) * price.input * 2) /
    m
  return { usd, reported: false }
}

export function money(usd: number): string {
  if (usd === 0) return '$0.00'
  if (usd < 0.01) return '<$0.01'
  return `$${usd.toFixed(2)}`
}

export function modelIdOf(model: unknown): string | undefined {
  if (typeof model === 'string') return model
  if (model && typeof model === 'object' && typeof (model as { id?: unknown }).id === 'string') return (model as { id: string }).id
  return undefined
}
