import { afterEach, describe, expect, it } from 'vitest'
import type { RawEventInput as EventInput, StoredEvent } from '../../../src/main/session/event-log'
import { SqliteEventLog, type SqliteEventReadParams } from '../../../src/main/session/sqlite-event-log'
import { mulberry32 } from '../../support/random'
import { memoryStores, message, type Stores } from './fixtures'

let t: Stores | undefined
afterEach(() => t?.close())

/** The listed events of a type, as [seq, type_mark]. */
const listed = (s: Stores, type: string) =>
  (s.db.prepare('SELECT seq, type_mark FROM events WHERE type = ? AND type_mark IS NOT 0 ORDER BY seq').all(type) as { seq: number; type_mark: number }[]).map((r) => [
    r.seq,
    r.type_mark,
  ])
const LISTED = 2
const FOLLOWED = 1

describe('the type index', () => {
  it('lists only the first two events of a dense type in each block of 64 seqs, the second as followed, and every event of any other type', async () => {
    t = memoryStores()
    const sid = await t.newSession()
    t.log.appendSync(sid, Array.from({ length: 100 }, (_, i) => message(`m${i}`)))
    t.log.appendSync(sid, [{ type: 'user.message', content: [] }, message('m100'), { type: 'user.message', content: [] }])
    for (let i = 0; i < 40; i++) await t.log.append(sid, [{ type: 'agent.tool_use', name: 'bash', input: {} }])
    // seqs 1..100 are messages: blocks [0,63], [64,127], ...
    expect(listed(t, 'agent.message')).toEqual([
      [1, LISTED],
      [2, FOLLOWED],
      [64, LISTED],
      [65, FOLLOWED],
    ])
    expect(listed(t, 'user.message')).toEqual([
      [101, LISTED],
      [103, LISTED],
    ])
    expect(listed(t, 'agent.tool_use')).toEqual([
      [104, LISTED],
      [105, FOLLOWED],
      [128, LISTED],
      [129, FOLLOWED],
    ])
    expect(t.log.read(sid, { types: ['agent.message'], after: 90, limit: 20 }).map((s) => s.seq)).toEqual([91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 102])
  })

  it('keeps id, type and processed_at out of the stored JSON and puts them back on every read', async () => {
    t = memoryStores(() => new Date('2026-05-01T10:00:00.000Z'))
    const sid = await t.newSession()
    const [stored] = await t.log.append(sid, [{ id: 'sevt_PREVIEW000000000000000001', type: 'agent.message', content: [{ type: 'text', text: 'hi' }] }])
    const row = t.db.prepare('SELECT data FROM events WHERE id = ?').get(stored.event.id) as { data: string }
    expect(JSON.parse(row.data)).toEqual({ content: [{ type: 'text', text: 'hi' }] })
    const expected = { type: 'agent.message', content: [{ type: 'text', text: 'hi' }], id: 'sevt_PREVIEW000000000000000001', processed_at: '2026-05-01T10:00:00.000Z' }
    expect(stored.event).toEqual(expected)
    for (const read of [t.log.read(sid)[0].event, t.log.read(sid, { types: ['agent.message'] })[0].event, t.log.get(stored.event.id)?.event]) {
      expect(read).toEqual(expected)
      // Same keys in the same order as the append handed back (JSON output is identical).
      expect(JSON.stringify(read)).toBe(JSON.stringify(stored.event))
    }
  })

  it('leaves no mark behind from an append that rolled back, so a later event of its type is still found', async () => {
    t = memoryStores()
    const sid = await t.newSession()
    const first = await t.log.append(sid, [{ id: 'sevt_TAKEN00000000000000000001', type: 'user.message', content: [] }, message('marked')])
    // One group: the first append writes the block's first two tool_uses (next to the message's),
    // then fails on a duplicate id and rolls back; the second append's tool_use must be listed in their place.
    const failing = t.log.append(sid, [{ type: 'agent.tool_use', name: 'a1', input: {} }, { type: 'agent.tool_use', name: 'a2', input: {} }, { id: first[0].event.id, type: 'x' }])
    const kept = t.log.append(sid, [{ type: 'agent.tool_use', name: 'b', input: {} }])
    const refused = t.log.append(sid, [{ type: 'agent.tool_use', name: 'c', input: {} }], {
      precheck: () => {
        throw new Error('refused')
      },
    })
    await expect(failing).rejects.toMatchObject({ code: 'api_error' })
    await expect(refused).rejects.toThrow('refused')
    await kept
    await t.log.append(sid, [{ type: 'agent.tool_use', name: 'd', input: {} }])
    expect(listed(t, 'agent.tool_use')).toEqual([
      [3, LISTED],
      [4, FOLLOWED],
    ])
    const names = (rows: StoredEvent[]) => rows.map((r) => (r.event as unknown as { name: string }).name)
    expect(names(t.log.read(sid, { types: ['agent.tool_use'] }))).toEqual(['b', 'd'])
    expect(names(t.log.read(sid, { types: ['agent.tool_use'], after: 3 }))).toEqual(['d'])
  })

  it('finds the unlisted events after a first event marked followed, as events were briefly written', async () => {
    t = memoryStores()
    const sid = await t.newSession()
    const rid = (t.db.prepare('SELECT rid FROM sessions WHERE id = ?').get(sid) as { rid: number }).rid
    const insert = t.db.prepare(
      "INSERT INTO events (session_rid, seq, id, thread_id, type, processed_at, data, type_mark) VALUES (?, ?, ?, NULL, ?, '2026-05-01T00:00:00.000Z', '{}', ?)",
    )
    // One message per 100 seqs: the first of its block marked FOLLOWED, the next one unlisted.
    for (let seq = 1; seq <= 1000; seq++) {
      const message = seq % 100 === 10 || seq % 100 === 20
      insert.run(rid, seq, `sevt_OLDMARKS${String(seq).padStart(18, '0')}`, message ? 'agent.message' : 'x', message ? (seq % 100 === 10 ? FOLLOWED : 0) : LISTED)
    }
    const want = Array.from({ length: 10 }, (_, i) => [i * 100 + 10, i * 100 + 20]).flat()
    expect(t.log.read(sid, { types: ['agent.message'] }).map((s) => s.seq)).toEqual(want)
    expect(t.log.read(sid, { types: ['agent.message'], order: 'desc', before: 515, limit: 3 }).map((s) => s.seq)).toEqual([510, 420, 410])
  })

  it("reads the unlisted events of a block through the last listed event a round reaches, whichever process listed which", async () => {
    t = memoryStores()
    const sid = await t.newSession()
    // Three logs on one database stand for three processes, each listing its own first two.
    const [a, b, c] = [t.log, new SqliteEventLog(t.db), new SqliteEventLog(t.db)]
    const tr = (n: number, thread?: string) => ({ type: 'agent.tool_result', n, ...(thread ? { session_thread_id: thread } : {}) })
    const filler = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => ({ type: 'x', n: from + i }))
    c.appendSync(sid, [{ type: 'x', n: 1 }, tr(2)]) // seq 2: listed by c
    a.appendSync(sid, filler(3, 704))
    // Block [704, 767]: a lists 705 and 706 (followed), b lists 707, a's 708-710 are unlisted.
    a.appendSync(sid, [tr(705), tr(706)])
    b.appendSync(sid, [tr(707)])
    a.appendSync(sid, [tr(708, 'sthr_z'), tr(709), tr(710, 'sthr_z')])
    a.appendSync(sid, filler(711, 1400))
    c.appendSync(sid, [tr(1401)])
    expect(listed(t, 'agent.tool_result')).toEqual([
      [2, LISTED],
      [705, LISTED],
      [706, FOLLOWED],
      [707, LISTED],
      [1401, LISTED],
    ])
    const seqs = (p: SqliteEventReadParams) => t!.log.read(sid, { types: ['agent.tool_result'], ...p }).map((s) => s.seq)
    // With limit 1 a round takes two listed events: ascending 2 and 705 (not 706, which 708 follows).
    expect(seqs({ threadId: 'sthr_z', limit: 1 })).toEqual([708])
    expect(seqs({ threadId: 'sthr_z' })).toEqual([708, 710])
    // Descending, 1401 and 707: 708-710 lie after 707 but follow 706.
    expect(seqs({ threadId: 'sthr_z', order: 'desc', limit: 1 })).toEqual([710])
    expect(seqs({ order: 'desc', limit: 4 })).toEqual([1401, 710, 709, 708])
    expect(seqs({ after: 704, before: 1401 })).toEqual([705, 706, 707, 708, 709, 710])
  })

  it('reads every combination of types, bounds, order, thread and time as a filter over the whole log would', async () => {
    const rand = mulberry32(20260502)
    let now = Date.parse('2026-05-01T00:00:00.000Z')
    t = memoryStores(() => new Date(now))
    const sid = await t.newSession()
    // A second log on the same database stands for another process: its memory of marks is its own.
    const other = new SqliteEventLog(t.db)
    const logs = [t.log, other]
    const weighted: [string, number][] = [
      ['agent.message', 25],
      ['agent.tool_use', 20],
      ['span.model_request_start', 20],
      ['agent.mcp_tool_use', 0.5],
      ['agent.thinking', 3],
      ['user.message', 5],
      ['session.error', 0.3],
      ['x.custom', 10],
    ]
    const total = weighted.reduce((a, [, w]) => a + w, 0)
    const pick = () => {
      let r = rand() * total
      for (const [type, w] of weighted) if ((r -= w) < 0) return type
      return 'x.custom'
    }
    const all: StoredEvent[] = []
    let n = 0
    while (all.length < 4000) {
      now += 1000
      const size = 1 + Math.floor(rand() * (rand() < 0.2 ? 80 : 4))
      const events: EventInput[] = Array.from({ length: size }, () => {
        const u = rand()
        return { type: pick(), n: n++, ...(u < 0.15 ? { session_thread_id: 'sthr_a' } : u < 0.2 ? { session_thread_id: 'sthr_b' } : {}) }
      })
      const log = logs[Math.floor(rand() * 2)]
      // Now and then a burst of a type that is otherwise absent: a few blocks with many of it.
      if (rand() < 0.01) events.push(...Array.from({ length: 2 + Math.floor(rand() * 5) }, () => ({ type: 'agent.tool_result', n: n++, ...(rand() < 0.3 ? { session_thread_id: 'sthr_a' } : {}) })))
      if (rand() < 0.3) all.push(...log.appendSync(sid, events))
      else if (rand() < 0.1) {
        // A group where one append rolls back: its events (and any marks) must leave no trace.
        const bad = log.append(sid, events, {
          precheck: () => {
            throw new Error('no')
          },
        })
        const good = log.append(sid, [{ type: pick(), n: n++ }])
        await expect(bad).rejects.toThrow('no')
        all.push(...(await good))
      } else all.push(...(await log.append(sid, events)))
    }
    all.sort((a, b) => a.seq - b.seq)
    expect(all.map((s) => s.seq)).toEqual(all.map((_, i) => i + 1))

    const types = [...weighted.map(([type]) => type), 'agent.tool_result', 'nothing']
    const reference = (p: SqliteEventReadParams) => {
      const limit = Math.min(Math.max(p.limit ?? 100, 1), 1000)
      let rows = all.filter(
        (s) =>
          (p.after === undefined || s.seq > p.after) &&
          (p.before === undefined || s.seq < p.before) &&
          (!p.types?.length || p.types.includes(s.event.type)) &&
          (p.threadId === undefined || (s.event.session_thread_id ?? null) === p.threadId) &&
          (p.processedAt?.gte === undefined || s.event.processed_at >= p.processedAt.gte) &&
          (p.processedAt?.lt === undefined || s.event.processed_at < p.processedAt.lt),
      )
      if (p.order === 'desc') rows = rows.reverse()
      return rows.slice(0, limit)
    }
    const seqAt = () => Math.floor(rand() * (all.length + 40)) - 20
    const timeAt = () => new Date(Date.parse('2026-05-01T00:00:00.000Z') + Math.floor(rand() * (now - Date.parse('2026-05-01T00:00:00.000Z')))).toISOString()
    for (let q = 0; q < 600; q++) {
      const p: SqliteEventReadParams = {
        order: rand() < 0.5 ? 'asc' : 'desc',
        limit: 1 + Math.floor(rand() * (rand() < 0.1 ? 400 : 120)),
        types: Array.from({ length: 1 + Math.floor(rand() * 3) }, () => types[Math.floor(rand() * types.length)]),
      }
      if (rand() < 0.6) p.after = seqAt()
      if (rand() < 0.4) p.before = seqAt()
      const th = rand()
      if (th < 0.15) p.threadId = null
      else if (th < 0.3) p.threadId = 'sthr_a'
      if (rand() < 0.1) p.processedAt = { gte: timeAt(), ...(rand() < 0.5 ? { lt: timeAt() } : {}) }
      const got = t.log.read(sid, p)
      const want = reference(p)
      expect(got.map((s) => s.seq), JSON.stringify(p)).toEqual(want.map((s) => s.seq))
      expect(got).toEqual(want)
    }
  })
})
