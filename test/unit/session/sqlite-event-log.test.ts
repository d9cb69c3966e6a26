import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { StoredEvent } from '../../../src/main/session/event-log'
import { emitEvent } from '../../../src/main/session/event-log'
import { memoryStores, message, type Stores } from './fixtures'

let t: Stores
beforeEach(() => {
  t = memoryStores()
})
afterEach(() => t.close())

describe('SqliteEventLog append-only rule', () => {
  it('refuses to UPDATE a stored event', async () => {
    const sid = await t.newSession()
    const e = await emitEvent(t.log, sid, message('hi'))
    expect(() => t.db.prepare("UPDATE events SET type = 'x' WHERE id = ?").run(e.event.id)).toThrow(/append-only: UPDATE refused/)
    expect(t.log.get(e.event.id)?.event.type).toBe('agent.message')
  })

  it('refuses to DELETE an event of a session that is not being deleted', async () => {
    const sid = await t.newSession()
    const e = await emitEvent(t.log, sid, message('hi'))
    expect(() => t.db.prepare('DELETE FROM events WHERE id = ?').run(e.event.id)).toThrow(/append-only: DELETE refused/)
    expect(t.log.lastSeq(sid)).toBe(1)
  })

  it('lets a session delete remove its own log and nothing else', async () => {
    const a = await t.newSession()
    const b = await t.newSession()
    await t.log.append(a, [message('a1'), message('a2')])
    await t.log.append(b, [message('b1')])
    expect(t.sessions.delete(a)).toEqual({ id: a, type: 'session_deleted' })
    expect(t.db.prepare('SELECT COUNT(*) AS n FROM events').get()).toEqual({ n: 1 })
    await expect(t.log.append(a, [message('late')])).rejects.toMatchObject({ code: 'not_found_error' })
    expect(t.log.read(b).map((s) => s.seq)).toEqual([1])
  })
})

describe('SqliteEventLog sequence', () => {
  it('assigns a gapless per-session seq to concurrent appends across sessions', async () => {
    const sids = [await t.newSession(), await t.newSession(), await t.newSession()]
    const jobs: Promise<StoredEvent[]>[] = []
    for (let i = 0; i < 300; i++) jobs.push(t.log.append(sids[i % 3], Array.from({ length: 1 + (i % 3) }, (_, k) => message(`${i}.${k}`))))
    const results = await Promise.all(jobs)
    for (const sid of sids) {
      const seqs = results.flat().filter((s) => s.sessionId === sid).map((s) => s.seq).sort((x, y) => x - y)
      expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1))
      expect(t.log.lastSeq(sid)).toBe(seqs.length)
    }
    const ids = results.flat().map((s) => s.event.id)
    expect(new Set(ids).size).toBe(ids.length)
    expect(ids.every((id) => id.startsWith('sevt_'))).toBe(true)
  })

  it('keeps the events of one append contiguous and in order', async () => {
    const sid = await t.newSession()
    const [a, b] = await Promise.all([t.log.append(sid, [message('a1'), message('a2'), message('a3')]), t.log.append(sid, [message('b1'), message('b2')])])
    const all = [...a, ...b].sort((x, y) => x.seq - y.seq)
    expect(all.map((s) => (s.event as unknown as { content: { text: string }[] }).content[0].text)).toEqual(['a1', 'a2', 'a3', 'b1', 'b2'])
  })

  it('rejects only the failing append of a group and leaves no gap behind it', async () => {
    const sid = await t.newSession()
    const ok1 = t.log.append(sid, [message('one')])
    const bad = t.log.append(sid, [message('two')], {
      precheck: () => {
        throw new Error('refused by precheck')
      },
    })
    const unknown = t.log.append('sesn_nope', [message('x')])
    const ok2 = t.log.append(sid, [message('three')])
    await expect(bad).rejects.toThrow(/refused by precheck/)
    await expect(unknown).rejects.toMatchObject({ code: 'not_found_error' })
    expect((await ok1)[0].seq).toBe(1)
    expect((await ok2)[0].seq).toBe(2)
    expect(t.log.read(sid).map((s) => s.seq)).toEqual([1, 2])
  })

  it('computes an append\'s events inside its transaction, given what the same group wrote of the session before it', async () => {
    const sid = await t.newSession()
    const other = await t.newSession()
    await t.log.append(sid, [message('committed')])
    const seen: { earlier: string[]; readable: number[] }[] = []
    // each computed append counts the messages the log holds for it: the committed ones it can
    // read (before the group's first event of the session) and the group's earlier ones it is given
    const counting = () =>
      t.log.append(sid, ({ earlier }) => {
        const readable = t.log.read(sid, { before: earlier[0]?.seq, includeUnsynced: true }).map((s) => s.seq)
        seen.push({ earlier: earlier.map((s) => (s.event as unknown as { content: { text: string }[] }).content[0].text), readable })
        return [message(`count ${readable.length + earlier.length}`)]
      })
    const [a, , b, c] = await Promise.all([counting(), t.log.append(other, [message('elsewhere')]), t.log.append(sid, [message('plain')]), counting()])
    expect(a.map((s) => s.seq)).toEqual([2])
    expect(b.map((s) => s.seq)).toEqual([3])
    expect(c.map((s) => s.seq)).toEqual([4])
    expect(seen).toEqual([
      { earlier: [], readable: [1] },
      { earlier: ['count 1', 'plain'], readable: [1] },
    ])
    expect(t.log.read(sid).map((s) => (s.event as unknown as { content: { text: string }[] }).content[0].text)).toEqual(['committed', 'count 1', 'plain', 'count 3'])
  })

  it('rejects only a computed append that throws or computes an event without a type, and appends nothing when it computes none', async () => {
    const sid = await t.newSession()
    const ok1 = t.log.append(sid, [message('one')])
    const throws = t.log.append(sid, () => {
      throw new Error('cannot compute')
    })
    const typeless = t.log.append(sid, () => [message('x'), { type: '' }])
    const none = t.log.append(sid, () => [])
    const ok2 = t.log.append(sid, ({ earlier }) => [message(`after ${earlier.length}`)])
    await expect(throws).rejects.toThrow(/cannot compute/)
    await expect(typeless).rejects.toThrow(/events\[1\]\.type/)
    await expect(none).resolves.toEqual([])
    expect((await ok1)[0].seq).toBe(1)
    // the group was redone append by append: the failed ones wrote nothing the last one was given
    expect((await ok2).map((s) => [s.seq, (s.event as unknown as { content: { text: string }[] }).content[0].text])).toEqual([[2, 'after 1']])
    await expect(t.log.append('sesn_nope', () => [message('x')])).rejects.toMatchObject({ code: 'not_found_error' })
  })

  it('rejects a whole append when one of its events has a duplicate pre-assigned id, appending none of it', async () => {
    const sid = await t.newSession()
    const first = await emitEvent(t.log, sid, { ...message('first'), id: 'sevt_FIXED0000000000000000001' })
    // A good append committed in the same group is unaffected.
    const bad = t.log.append(sid, [message('a'), { ...message('b'), id: first.event.id }])
    const good = t.log.append(sid, [message('good')])
    await expect(bad).rejects.toMatchObject({ code: 'api_error' })
    expect((await good)[0].seq).toBe(2)
    expect(t.log.lastSeq(sid)).toBe(2)
    expect((await emitEvent(t.log, sid, message('next'))).seq).toBe(3)
  })

  it('refuses an event without a type, naming the index', async () => {
    const sid = await t.newSession()
    await expect(t.log.append(sid, [message('ok'), { type: '' }])).rejects.toThrow(/events\[1\]\.type/)
    expect(() => t.log.appendSync(sid, [{ type: 7 } as never])).toThrow(/events\[0\]\.type/)
    expect(t.log.lastSeq(sid)).toBe(0)
  })

  it('continues the sequence of a session after its cached tip is dropped by a delete of another session', async () => {
    const a = await t.newSession()
    await t.log.append(a, [message('1'), message('2')])
    const b = await t.newSession()
    t.sessions.delete(b)
    const c = await t.newSession()
    expect((await emitEvent(t.log, c, message('c1'))).seq).toBe(1)
    expect((await emitEvent(t.log, a, message('3'))).seq).toBe(3)
  })
})

describe('SqliteEventLog reads', () => {
  let sid: string
  beforeEach(async () => {
    sid = await t.newSession()
    const events = []
    for (let i = 1; i <= 30; i++) {
      events.push(i % 3 === 0 ? { type: 'agent.thinking', n: i } : { type: 'agent.message', n: i, ...(i % 5 === 0 ? { session_thread_id: 'sthr_child' } : {}) })
    }
    t.log.appendSync(sid, events)
  })
  const ns = (rows: StoredEvent[]) => rows.map((r) => (r.event as unknown as { n: number }).n)

  it('reads forward from where a reader left off', () => {
    expect(ns(t.log.read(sid, { after: 25 }))).toEqual([26, 27, 28, 29, 30])
  })

  it('reads the N events before a point, newest first', () => {
    expect(ns(t.log.read(sid, { before: 10, limit: 3, order: 'desc' }))).toEqual([9, 8, 7])
  })

  it('reads a window between after and before in ascending order', () => {
    expect(ns(t.log.read(sid, { after: 3, before: 8 }))).toEqual([4, 5, 6, 7])
  })

  it('reads only the given types', () => {
    expect(ns(t.log.read(sid, { types: ['agent.thinking'], limit: 4 }))).toEqual([3, 6, 9, 12])
    expect(ns(t.log.read(sid, { types: ['agent.thinking'], order: 'desc', before: 12, limit: 2 }))).toEqual([9, 6])
  })

  it('merges several types in seq order, either way, and honours the limit', () => {
    expect(ns(t.log.read(sid, { types: ['agent.thinking', 'agent.message'], order: 'desc', before: 10, limit: 4 }))).toEqual([9, 8, 7, 6])
    expect(ns(t.log.read(sid, { types: ['agent.message', 'agent.thinking', 'agent.message'], after: 26, limit: 10 }))).toEqual([27, 28, 29, 30])
    expect(ns(t.log.read(sid, { types: ['agent.thinking', 'nothing'], threadId: null, limit: 3 }))).toEqual([3, 6, 9])
    expect(ns(t.log.read(sid, { types: ['agent.message'], threadId: 'sthr_child', order: 'desc', limit: 2 }))).toEqual([25, 20])
  })

  it("reads one thread's events, or the primary thread's with threadId null", () => {
    expect(ns(t.log.read(sid, { threadId: 'sthr_child' }))).toEqual([5, 10, 20, 25])
    expect(ns(t.log.read(sid, { threadId: null, after: 18, limit: 3 }))).toEqual([19, 21, 22])
  })

  it('caps a read at 1000 events and at least 1', () => {
    t.log.appendSync(sid, Array.from({ length: 1200 }, (_, i) => ({ type: 'x', n: 100 + i })))
    expect(t.log.read(sid, { limit: 5000 })).toHaveLength(1000)
    expect(t.log.read(sid, { limit: 0 })).toHaveLength(1)
  })

  it('finds an event by id with its session and seq', () => {
    const third = t.log.read(sid, { after: 2, limit: 1 })[0]
    expect(t.log.get(third.event.id)).toEqual(third)
    expect(t.log.get('sevt_missing')).toBeUndefined()
  })

  it('filters by processed_at', () => {
    const clockTimes = ['2026-01-01T00:00:00.000Z', '2026-01-02T00:00:00.000Z', '2026-01-03T00:00:00.000Z']
    let i = 0
    const s = memoryStores(() => new Date(clockTimes[Math.min(i, 2)]))
    return (async () => {
      const id = await s.newSession()
      for (i = 0; i < 3; i++) s.log.appendSync(id, [{ type: 'x', n: i }])
      expect(ns(s.log.read(id, { processedAt: { gt: '2026-01-01T00:00:00Z' } }))).toEqual([1, 2])
      expect(ns(s.log.read(id, { processedAt: { lte: '2026-01-02T00:00:00+00:00' } }))).toEqual([0, 1])
      s.close()
    })()
  })
})

describe('SqliteEventLog answer lookups', () => {
  it('finds an answer only after its request, in the same session, by the field that names the request', async () => {
    const [sid, other] = [await t.newSession(), await t.newSession()]
    const [use] = await t.log.append(sid, [{ type: 'agent.tool_use', name: 'bash', input: {} }])
    const ask = { sessionId: sid, after: use.seq, type: 'user.tool_confirmation', field: 'tool_use_id', id: use.event.id }
    expect(t.log.hasAnswer(ask)).toBe(false)
    await t.log.append(other, [{ type: 'user.tool_confirmation', tool_use_id: use.event.id, result: 'allow' }])
    expect(t.log.hasAnswer(ask)).toBe(false)
    await t.log.append(sid, [{ type: 'user.tool_confirmation', tool_use_id: 'sevt_someOtherUse', result: 'allow' }])
    expect(t.log.hasAnswer(ask)).toBe(false)
    const [answer] = await t.log.append(sid, [{ type: 'user.tool_confirmation', tool_use_id: use.event.id, result: 'allow' }])
    expect(t.log.hasAnswer(ask)).toBe(true)
    expect(t.log.hasAnswer({ ...ask, after: answer.seq })).toBe(false)
  })

  it('finds an answer of a dense type too, whose events the type index does not all list', async () => {
    const sid = await t.newSession()
    await t.log.append(sid, Array.from({ length: 10 }, (_, i) => ({ type: 'agent.tool_result', tool_use_id: `sevt_use${i}`, content: [] })))
    expect(t.log.hasAnswer({ sessionId: sid, after: 0, type: 'agent.tool_result', field: 'tool_use_id', id: 'sevt_use9' })).toBe(true)
  })

  it('refuses a field that is not a plain name, naming it', () => {
    expect(() => t.log.hasAnswer({ sessionId: 'sesn_x', after: 0, type: 'user.tool_result', field: "x') OR 1 --", id: 'sevt_x' })).toThrow(/^field: .* is not a plain event field name/)
  })
})

describe('SqliteEventLog tail', () => {
  it('delivers history then live events exactly once, in order, while appends race the switch', async () => {
    const sid = await t.newSession()
    t.log.appendSync(sid, Array.from({ length: 2500 }, (_, i) => ({ type: 'x', n: i })))
    const seen: number[] = []
    // Appends queued before the tail opens commit after it: they must arrive live, once.
    const racing = Array.from({ length: 20 }, (_, i) => t.log.append(sid, [{ type: 'y', n: 5000 + i }]))
    const stop = t.log.tail(sid, 100, (s) => seen.push(s.seq))
    await Promise.all(racing)
    for (let i = 0; i < 10; i++) await t.log.append(sid, [{ type: 'z' }, { type: 'z' }])
    t.log.appendSync(sid, [{ type: 'w' }])
    stop()
    await t.log.append(sid, [{ type: 'after-stop' }])
    const expected = Array.from({ length: 2500 + 20 + 20 + 1 - 100 }, (_, i) => 101 + i)
    expect(seen).toEqual(expected)
  })

  it('does not repeat events to a tail opened from inside a listener during a multi-event append', async () => {
    const sid = await t.newSession()
    const inner: number[] = []
    let opened = false
    const outer = t.log.tail(sid, 0, () => {
      if (!opened) {
        opened = true
        t.log.tail(sid, 0, (s) => inner.push(s.seq))
      }
    })
    await t.log.append(sid, [{ type: 'a' }, { type: 'b' }, { type: 'c' }])
    await t.log.append(sid, [{ type: 'd' }])
    outer()
    expect(inner).toEqual([1, 2, 3, 4])
  })

  it('keeps delivering to other subscribers when one throws', async () => {
    const sid = await t.newSession()
    const got: string[] = []
    const errors = console.error
    console.error = () => {}
    try {
      t.log.tail(sid, 0, () => {
        throw new Error('buggy subscriber')
      })
      t.log.subscribeAll((s) => got.push(s.event.type))
      await t.log.append(sid, [{ type: 'a' }, { type: 'b' }])
    } finally {
      console.error = errors
    }
    expect(got).toEqual(['a', 'b'])
  })
})

describe('session projections', () => {
  it('follows the primary thread status events and ignores a child thread status', async () => {
    const sid = await t.newSession()
    expect(t.sessions.retrieve(sid).status).toBe('idle')
    await emitEvent(t.log, sid, { type: 'session.status_running' })
    expect(t.sessions.retrieve(sid).status).toBe('running')
    await emitEvent(t.log, sid, { type: 'session.status_idle', session_thread_id: 'sthr_child', stop_reason: { type: 'end_turn' } })
    expect(t.sessions.retrieve(sid).status).toBe('running')
    await t.log.append(sid, [{ type: 'session.status_rescheduled' }, { type: 'session.status_idle', stop_reason: { type: 'end_turn' } }])
    expect(t.sessions.retrieve(sid).status).toBe('idle')
    await emitEvent(t.log, sid, { type: 'session.status_terminated' })
    expect(t.sessions.retrieve(sid).status).toBe('terminated')
    expect(t.sessions.list({ statuses: ['terminated'] }).data.map((s) => s.id)).toEqual([sid])
  })

  it('sums model usage over span.model_request_end events', async () => {
    const sid = await t.newSession()
    const usage = (i: number, o: number, r: number, c: number) => ({
      type: 'span.model_request_end',
      model_request_start_id: 'sevt_x',
      is_error: false,
      model_usage: { input_tokens: i, output_tokens: o, cache_read_input_tokens: r, cache_creation_input_tokens: c },
    })
    await t.log.append(sid, [usage(10, 5, 1, 2), message('x'), usage(7, 3, 0, 4)])
    await emitEvent(t.log, sid, usage(1, 1, 1, 1))
    expect(t.sessions.retrieve(sid).usage).toEqual({ input_tokens: 18, output_tokens: 9, cache_read_input_tokens: 2, cache_creation: { ephemeral_5m_input_tokens: 7 } })
  })

  it("moves updated_at to the last event's processed_at", async () => {
    let now = Date.parse('2026-03-01T00:00:00.000Z')
    const s = memoryStores(() => new Date(now))
    const sid = await s.newSession()
    now += 60_000
    await emitEvent(s.log, sid, message('later'))
    expect(s.sessions.retrieve(sid).updated_at).toBe('2026-03-01T00:01:00.000Z')
    expect(s.sessions.list({}).data[0].updated_at).toBe('2026-03-01T00:01:00.000Z')
    s.close()
  })
})
