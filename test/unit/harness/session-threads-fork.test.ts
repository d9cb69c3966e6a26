import { afterEach, describe, expect, it, vi } from 'vitest'
import { SessionThreads, type AggregateStatus, type ThreadFacts } from '../../../src/main/harness/session-threads'
import type { StoredEvent } from '../../../src/main/session/event-log'

const SID = 'sesn_01FORK'
const PRIMARY = 'sthr_01FORK'
type Ev = Record<string, unknown> & { type: string }

const created = (id: string): Ev => ({ type: 'session.thread_created', session_thread_id: id, agent_name: 'w', agent: { name: 'w', model: 'm' } })
const status = (id: string, s: 'running' | 'idle' | 'rescheduled' | 'terminated', stop_reason?: Record<string, unknown>): Ev => ({
  type: `session.thread_status_${s}`,
  session_thread_id: id,
  agent_name: 'w',
  ...(stop_reason ? { stop_reason, stop_details: null } : {}),
})

/** The aggregate as spec §4.4 words it, by walking every thread (what the tally stands in for). */
function walked(t: SessionThreads): AggregateStatus {
  const all: ThreadFacts[] = [t.primary, ...t.children.values()]
  if (all.some((f) => f.status === 'running')) return { status: 'running' }
  if (all.some((f) => f.status === 'rescheduling')) return { status: 'rescheduling' }
  const pending = all.flatMap((f) => (f.status === 'idle' && f.lastIdle?.type === 'requires_action' ? (f.lastIdle.event_ids ?? []) : []))
  if (pending.length) return { status: 'idle', stop_reason: { type: 'requires_action', event_ids: pending } }
  if ([...t.runs.values()].includes('running')) return { status: 'running' }
  if (all.some((f) => f.status === 'idle' && f.lastIdle?.type === 'budget_reached')) return { status: 'idle', stop_reason: { type: 'budget_reached' } }
  const own = t.primary.lastIdle?.type
  return { status: 'idle', stop_reason: { type: own === 'retries_exhausted' || own === 'refusal' ? own : 'end_turn' } }
}

function mulberry32(seed: number): () => number {
  return () => {
    seed |= 0
    seed = (seed + 0x6d2b79f5) | 0
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

describe('the threads fold: its aggregate and its previews', () => {
  it('says the aggregate a walk over every thread would say, through thousands of random status changes', () => {
    const rand = mulberry32(20261201)
    const t = new SessionThreads(SID, PRIMARY)
    const ids = Array.from({ length: 40 }, (_, i) => `sthr_c${i}`)
    let seq = 0
    for (const id of ids) t.apply(++seq, created(id))
    t.apply(++seq, { type: 'workflow_run.created', workflow_run_id: 'wrun_1' })
    const reasons = [{ type: 'end_turn' }, { type: 'requires_action', event_ids: ['sevt_x'] }, { type: 'budget_reached' }, { type: 'retries_exhausted' }]
    for (let i = 0; i < 4000; i++) {
      const id = rand() < 0.1 ? PRIMARY : ids[Math.floor(rand() * ids.length)]
      const r = rand()
      if (r < 0.4) t.apply(++seq, status(id, 'running'))
      else if (r < 0.85) t.apply(++seq, status(id, 'idle', { ...reasons[Math.floor(rand() * reasons.length)], ...(rand() < 0.5 ? { event_ids: [`sevt_${i}`] } : {}) }))
      else if (r < 0.95) t.apply(++seq, status(id, 'rescheduled'))
      else if (r < 0.97) t.apply(++seq, { type: rand() < 0.5 ? 'workflow_run.status_idle' : 'workflow_run.status_running', workflow_run_id: 'wrun_1' })
      else t.apply(++seq, status(id, 'terminated'))
      expect(t.aggregate()).toEqual(walked(t))
    }
  })

  it('previews a batch in a fork without changing the fold it came from', () => {
    const t = new SessionThreads(SID, PRIMARY)
    let seq = 0
    for (const id of ['sthr_a', 'sthr_b']) t.apply(++seq, created(id))
    t.apply(++seq, status('sthr_a', 'running'))
    t.apply(++seq, { type: 'session.status_running' })
    const before = { a: { ...t.children.get('sthr_a')! }, b: { ...t.children.get('sthr_b')! }, primary: { ...t.primary }, lastSeq: t.lastSeq }
    const fork = t.fork()
    let s = t.lastSeq
    for (const e of [status('sthr_a', 'idle', { type: 'end_turn' }), { type: 'agent.thread_message_received', from_session_thread_id: 'sthr_a' }, created('sthr_c'), status('sthr_b', 'running')]) fork.apply(++s, e)
    // the fork says what the batch does
    expect(fork.child('sthr_a')?.status).toBe('idle')
    expect(fork.child('sthr_b')?.status).toBe('running')
    expect(fork.child('sthr_c')).toBeDefined()
    expect(fork.allChildren().map((c) => c.id)).toEqual(['sthr_a', 'sthr_b', 'sthr_c'])
    expect(fork.aggregate()).toEqual({ status: 'running' })
    fork.apply(++s, status('sthr_b', 'idle', { type: 'end_turn' }))
    expect(fork.aggregateEvent()).toEqual({ type: 'session.status_idle', stop_reason: { type: 'end_turn' }, stop_details: null })
    // the fold it came from is as it was
    expect(t.children.get('sthr_a')).toEqual(before.a)
    expect(t.children.get('sthr_b')).toEqual(before.b)
    expect(t.children.has('sthr_c')).toBe(false)
    expect(t.primary).toEqual(before.primary)
    expect(t.lastSeq).toBe(before.lastSeq)
    expect(t.aggregate()).toEqual({ status: 'running' })
    expect(t.aggregateEvent()).toBeUndefined()
  })

  describe('running threads and active time', () => {
    afterEach(() => vi.useRealTimers())

    it('stay each fold\'s own while forks, forks of forks and their origins change in any order', () => {
      vi.useFakeTimers({ now: Date.parse('2026-01-01T01:00:00.000Z') })
      const rand = mulberry32(20261206)
      const ids = ['', ...Array.from({ length: 12 }, (_, i) => `sthr_r${i}`)]
      // each fold beside a naive model of it: its own copy of the running set, its union time
      type Model = { running: Set<string>; ms: number; since: number }
      const folds: { t: SessionThreads; m: Model; seq: number }[] = []
      const root = new SessionThreads(SID, PRIMARY)
      let seq = 0
      for (const id of ids.slice(1)) root.apply(++seq, created(id))
      folds.push({ t: root, m: { running: new Set(), ms: 0, since: 0 }, seq })
      const activeOf = (t: SessionThreads) => (t.usageEvent(null) as unknown as { usage: { active_seconds: number } }).usage.active_seconds
      const modelActive = (m: Model) => (m.ms + (m.running.size > 0 ? Date.now() - m.since : 0)) / 1000
      let clock = Date.parse('2026-01-01T00:00:00.000Z')
      for (let i = 0; i < 3000; i++) {
        if (rand() < 0.08 && folds.length < 40) {
          const from = folds[Math.floor(rand() * folds.length)]
          folds.push({ t: from.t.fork(), m: { running: new Set(from.m.running), ms: from.m.ms, since: from.m.since }, seq: from.seq })
          continue
        }
        const f = folds[Math.floor(rand() * folds.length)]
        const id = ids[Math.floor(rand() * ids.length)]
        const on = rand() < 0.5
        clock += 1000
        const at = new Date(clock).toISOString()
        f.t.apply(++f.seq, { ...(id === '' ? status(PRIMARY, on ? 'running' : 'idle', on ? undefined : { type: 'end_turn' }) : status(id, on ? 'running' : 'idle', on ? undefined : { type: 'end_turn' })), processed_at: at })
        if (on !== f.m.running.has(id)) {
          const was = f.m.running.size > 0
          if (on) f.m.running.add(id)
          else f.m.running.delete(id)
          if (!was && f.m.running.size > 0) f.m.since = clock
          if (was && f.m.running.size === 0) f.m.ms += clock - f.m.since
        }
        for (const g of folds) expect(activeOf(g.t)).toBe(modelActive(g.m))
      }
    })
  })

  describe('the fold at commit (atCommit)', () => {
    /** A log holding what is committed, read as the fold's catch-up reads it. */
    const logOf = (committed: StoredEvent[]) => ({
      read: (_sid: string, p: { after?: number; before?: number; types?: readonly string[]; limit?: number }) =>
        committed.filter((s) => s.seq > (p.after ?? 0) && s.seq < (p.before ?? Infinity) && (!p.types || p.types.includes(s.event.type))).slice(0, p.limit ?? 100),
    })
    const stored = (seq: number, e: Ev): StoredEvent => ({ seq, sessionId: SID, event: e as never })
    const setUp = () => {
      const committed = [stored(1, created('sthr_a')), stored(2, created('sthr_b')), stored(3, status('sthr_a', 'running')), stored(4, status('sthr_b', 'running'))]
      const fold = new SessionThreads(SID, PRIMARY)
      return { committed, fold, log: logOf(committed) }
    }

    it('goes on within one group from the copy the last append made, and says what a fresh copy would', () => {
      const { fold, log } = setUp()
      const g1 = [stored(5, status('sthr_a', 'idle', { type: 'end_turn' }))]
      const first = fold.atCommit(log, g1)
      expect(first).not.toBe(fold)
      expect(first.child('sthr_a')?.status).toBe('idle')
      const g2 = [...g1, stored(6, status('sthr_b', 'idle', { type: 'end_turn' }))]
      const second = fold.atCommit(log, g2)
      expect(second).toBe(first)
      const fresh = fold.fork()
      for (const s of g2) fresh.apply(s.seq, s.event as never)
      expect(second.aggregate()).toEqual(fresh.aggregate())
      expect(second.allChildren().map((c) => c.status)).toEqual(['idle', 'idle'])
      // the fold itself holds only what is committed
      expect(fold.allChildren().map((c) => c.status)).toEqual(['running', 'running'])
      expect(fold.aggregate()).toEqual({ status: 'running' })
    })

    it('starts over for a group redone after a rollback (new events at the same seqs) and after the fold moved on', () => {
      const { committed, fold, log } = setUp()
      const before = fold.atCommit(log, [stored(5, status('sthr_a', 'idle', { type: 'end_turn' }))])
      expect(before.child('sthr_a')?.status).toBe('idle')
      // the redo wrote something else at seq 5
      const redo = fold.atCommit(log, [stored(5, status('sthr_a', 'rescheduled'))])
      expect(redo).not.toBe(before)
      expect(redo.child('sthr_a')?.status).toBe('rescheduling')
      // the group committed; the next one starts from the fold caught up on it
      committed.push(stored(5, status('sthr_a', 'rescheduled')), stored(6, status('sthr_b', 'idle', { type: 'end_turn' })))
      const next = fold.atCommit(log, [stored(7, status('sthr_a', 'idle', { type: 'end_turn' }))])
      expect(fold.lastSeq).toBe(6)
      expect(next.allChildren().map((c) => c.status)).toEqual(['idle', 'idle'])
      expect(next.aggregateEvent()).toEqual({ type: 'session.status_idle', stop_reason: { type: 'end_turn' }, stop_details: null })
    })
  })
})
