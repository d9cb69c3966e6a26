/**
 * The Settings screen's editor of the user's advisor tier entries (`advisor_tiers` of
 * `GET/POST /v1/corral/settings`): one `model-id tier` pair per line. Pure: what the text area
 * shows for the saved entries, and the entries a text makes (or the first line that breaks a rule).
 */
import { ADVISOR_TIERS } from '../../../../shared/api/advisor-tiers'

/** The saved entries as the text area shows them, one `model tier` per line, in model order. */
export function formatAdvisorTiers(tiers: Readonly<Record<string, number>> | undefined): string {
  return Object.entries(tiers ?? {})
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([model, tier]) => `${model} ${tier}`)
    .join('\n')
}

/**
 * The entries a text makes: each non-empty line is a model id and a whole tier number ≥ 0,
 * separated by spaces, `=` or `:`; `#` starts a comment. A broken line gives an error naming
 * the line and the rule (the engine checks again and answers 400 naming `advisor_tiers`).
 */
export function parseAdvisorTiers(text: string): { tiers: Record<string, number> } | { error: string } {
  const tiers: Record<string, number> = {}
  const lines = text.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].replace(/#.*$/, '').trim()
    if (!line) continue
    const m = /^(\S+?)\s*(?:[=:]\s*|\s+)(\S+)$/.exec(line)
    if (!m) return { error: `line ${i + 1}: write a model id and a tier number, e.g. "qwen-3-235b 5"` }
    const [, model, raw] = m
    if (!/^\d+$/.test(raw)) return { error: `line ${i + 1}: the tier of ${model} must be a whole number ≥ 0 (the built-in tiers run from 0 to 7)` }
    if (model in tiers) return { error: `line ${i + 1}: ${model} is listed twice` }
    tiers[model] = Number(raw)
  }
  return { tiers }
}

/** The built-in tiers, highest first, with their models (what the screen shows beside the editor). */
export function builtInTiers(): { tier: number; models: string[] }[] {
  const byTier = new Map<number, string[]>()
  for (const [model, tier] of Object.entries(ADVISOR_TIERS)) byTier.set(tier, [...(byTier.get(tier) ?? []), model])
  return [...byTier.entries()].sort(([a], [b]) => b - a).map(([tier, models]) => ({ tier, models }))
}
