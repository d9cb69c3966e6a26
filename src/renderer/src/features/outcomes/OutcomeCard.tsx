import { useEffect, useRef } from 'react'
import { useClient } from '../../api/context'
import type { Page, SessionEvent } from '../../api/types'
import { useQuery } from '../../ui/hooks'
import { foldOutcomes, OUTCOME_EVENT_TYPES, type OutcomeRecord } from '../../../../shared/api/outcomes'
import { outcomeResultLabel, outcomeResultTone } from './outcome-view'

type Evaluation = { outcome_id: string; result: string }

/**
 * The session's outcome (`user.define_outcome`): its description and rubric, each evaluation's
 * verdict with the grader's explanation and gaps, and the result (live from
 * `Session.outcome_evaluations`). Re-reads the outcome events when one goes by on the stream.
 * Nothing is drawn for a session without an outcome.
 */
export function OutcomeCard({ sessionId, evaluations, lastEventType, eventCount }: { sessionId: string; evaluations: readonly Evaluation[] | undefined; lastEventType: string | undefined; eventCount: number }) {
  const client = useClient()
  const q = useQuery(
    () => client.request<Page<SessionEvent>>('events.list', { id: sessionId }, { types: [...OUTCOME_EVENT_TYPES], limit: 1000 }),
    [sessionId],
  )
  const reload = useRef(q.reload)
  reload.current = q.reload
  // an outcome event went by, or the session's outcome results moved (an end and the idle come in one batch)
  const results = JSON.stringify(evaluations ?? [])
  useEffect(() => {
    if (lastEventType && (OUTCOME_EVENT_TYPES as readonly string[]).includes(lastEventType)) reload.current()
  }, [lastEventType, eventCount])
  useEffect(() => {
    reload.current()
  }, [results])
  const records = foldOutcomes((q.data?.data ?? []) as unknown as { id: string; type: string }[])
  if (records.length === 0) return null
  const live = new Map((evaluations ?? []).map((e) => [e.outcome_id, e.result]))
  const current = records[records.length - 1]
  return (
    <div className="outcome-cards">
      {records.length > 1 && (
        <details className="outcome-earlier">
          <summary>{records.length - 1} earlier outcome{records.length > 2 ? 's' : ''}</summary>
          {records.slice(0, -1).map((r) => (
            <OutcomeBody key={r.outcome_id} record={r} result={live.get(r.outcome_id) ?? r.result} />
          ))}
        </details>
      )}
      <OutcomeBody record={current} result={live.get(current.outcome_id) ?? current.result} />
    </div>
  )
}

function OutcomeBody({ record, result }: { record: OutcomeRecord; result: string }) {
  return (
    <section className={`outcome-card outcome-${outcomeResultTone(result)}`} aria-label="Outcome">
      <header className="outcome-head">
        <span className="outcome-kicker">Outcome</span>
        <strong className="outcome-description">{record.description}</strong>
        <span className={`pill outcome-result outcome-result-${outcomeResultTone(result)}`} aria-label="Outcome result">
          {outcomeResultLabel(result)}
        </span>
      </header>
      <details className="outcome-rubric" open={record.iterations.length === 0}>
        <summary>Rubric</summary>
        <pre className="outcome-rubric-text">{record.rubric}</pre>
      </details>
      {record.iterations.length > 0 && (
        <ol className="outcome-iterations" aria-label="Evaluations">
          {record.iterations.map((it) => (
            <li key={`${it.start_id}-${it.iteration}`} className={`outcome-iteration outcome-${outcomeResultTone(it.result ?? 'evaluating')}`}>
              <span className="outcome-iteration-head">
                Evaluation {it.iteration + 1} of at most {record.max_iterations}: <strong>{outcomeResultLabel(it.result ?? 'evaluating')}</strong>
              </span>
              {it.explanation && <p className="outcome-explanation">{it.explanation}</p>}
              {it.gaps.length > 0 && (
                <ul className="outcome-gaps">
                  {it.gaps.map((g, i) => (
                    <li key={i}>
                      <strong>{g.criterion}</strong>: {g.gap}
                    </li>
                  ))}
                </ul>
              )}
            </li>
          ))}
        </ol>
      )}
    </section>
  )
}
