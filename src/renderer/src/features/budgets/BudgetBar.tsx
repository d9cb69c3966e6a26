import { useState } from 'react'
import { useClient } from '../../api/context'
import type { Session } from '../../api/types'
import { Button, ErrorNote } from '../../ui/components'
import { money } from '../../ui/format'
import { budgetOfCents, capUsd, parseUsd, spendFraction, suggestedRaise, type BudgetLimit } from './budget'

/** The header's spend against the cap: "$1.20 of $5.00", with a bar that fills as it nears the cap. */
export function BudgetSpend({ budget, spent, estimated }: { budget: BudgetLimit; spent: number | undefined; estimated: boolean }) {
  const cap = capUsd(budget) ?? 0
  const frac = spent === undefined ? 0 : spendFraction(spent, cap)
  const tone = frac >= 1 ? 'over' : frac >= 0.8 ? 'near' : 'ok'
  return (
    <div className="budget-spend" aria-label="Spend against the budget">
      <dt>Budget</dt>
      <dd title={estimated ? 'Spend estimated from tokens at list prices' : 'Spend at list prices'}>
        {spent === undefined ? '—' : `${estimated ? '≈ ' : ''}${money(spent)}`} of {money(cap)}
        <span className={`budget-meter budget-${tone}`} role="meter" aria-valuemin={0} aria-valuemax={cap} aria-valuenow={spent ?? 0} aria-label="Budget used">
          <span style={{ width: `${Math.round(frac * 100)}%` }} />
        </span>
      </dd>
    </div>
  )
}

/**
 * A session paused at its budget: says so, and raises the cap (`POST /v1/sessions/{id}` with a
 * higher `budget`); the engine then resumes the paused work by itself. A raise at or below the
 * spend is refused by the engine with its own message, shown here.
 */
export function BudgetPause({ session, spent, onRaised }: { session: Session; spent: number; onRaised: (s: Session) => void }) {
  const client = useClient()
  const cap = capUsd(session.budget as BudgetLimit | null) ?? 0
  const [text, setText] = useState(() => suggestedRaise(cap, spent))
  const [err, setErr] = useState<unknown>()
  const [busy, setBusy] = useState(false)
  const parsed = parseUsd(text)
  const raise = async () => {
    if ('error' in parsed) return
    setBusy(true)
    setErr(undefined)
    try {
      onRaised(await client.request<Session>('sessions.update', { id: session.id }, { budget: budgetOfCents(parsed.cents) }))
    } catch (e) {
      setErr(e)
    } finally {
      setBusy(false)
    }
  }
  return (
    <div className="budget-pause" role="status" aria-label="Paused at its budget">
      <strong>Paused at its budget — raise it to continue</strong>
      <span className="muted">
        It has spent {money(spent)} of {money(cap)}. Raising the budget resumes the work where it stopped.
      </span>
      <form
        className="budget-raise"
        onSubmit={(e) => {
          e.preventDefault()
          void raise()
        }}
      >
        <label htmlFor="budget-raise-input">New budget in USD</label>
        <input id="budget-raise-input" inputMode="decimal" value={text} onChange={(e) => setText(e.target.value)} aria-invalid={'error' in parsed} />
        <Button type="submit" variant="primary" disabled={busy || 'error' in parsed}>
          Raise budget
        </Button>
        {'error' in parsed && <span className="key-problem">{parsed.error}</span>}
      </form>
      <ErrorNote error={err} />
    </div>
  )
}
