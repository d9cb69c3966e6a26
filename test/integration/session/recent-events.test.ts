import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { openDatabase } from '../../../src/main/session/database'
import { LogReader, type SqliteEventReadParams } from '../../../src/main/session/log/read'
import { openStores, type Stores } from '../../../src/main/session/stores'

// The log's window of recent rows (src/main/session/log/recent.ts) answers reads of working
// sessions without SQLite. These tests hold every such read against the same read through SQL
// (a LogReader without the window, on the same connection), and show that a commit by another
// connection (another process on the same file) is never hidden by it.

const dirs: string[] = []
const open: Stores[] = []
afterEach(() => {
  for (const s of open.splice(0)) s.close()
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})

function fileStores(dir: string): Stores {
  const s = openStores(openDatabase({ path: join(dir, 'corral.db') }))
  open.push(s)
  return s
}

async function newSession(s: Stores): Promise<{ id: string; threads: string[] }> {
  const agent = s.agents.create({ name: 'tester', model: 'claude-sonnet-4-6' })
  const env = s.environments.create({ name: 'env' })
  const id = (await s.sessions.create({ agent: agent.id, environment_id: env.id })).id
  return { id, threads: [`sthr_${id.slice(5)}a`, `sthr_${id.slice(5)}b`] }
}

/** A deterministic mix: primary and thread events, dense and listed types, thread creations, cross-posted confirmations. */
function batch(i: number, threads: string[]): Record<string, unknown>[] {
  const tid = threads[i % threads.length]
  const text = (t: string) => [{ type: 'text', text: `${t} ${i}` }]
  switch (i % 7) {
    case 0:
      return [{ type: 'session.thread_created', session_thread_id: tid, agent_name: 'w' }, { type: 'agent.message', session_thread_id: tid, content: text('hello') }]
    case 1:
      return [{ type: 'agent.message', content: text('primary') }, { type: 'agent.thinking' }]
    case 2:
      return [{ type: 'span.model_request_start', session_thread_id: tid }, { type: 'span.model_request_end', session_thread_id: tid, is_error: false, model_usage: { input_tokens: i, output_tokens: 1 } }]
    case 3:
      return [{ type: 'agent.tool_use', session_thread_id: tid, name: 'bash', input: { command: `echo ${i}` }, evaluated_permission: 'ask' }]
    case 4:
      return [{ type: 'user.message', content: text('more') }]
    case 5:
      return [{ type: 'session.thread_status_idle', session_thread_id: tid, agent_name: 'w', stop_reason: { type: 'end_turn' } }, { type: 'agent.thread_message_received', from_session_thread_id: tid, content: text('report') }]
    default:
      return [{ type: 'agent.message', session_thread_id: tid, content: text('on') }, { type: 'user.interrupt' }]
  }
}

/** Reads of every shape the log serves (thread, stream, types, order, bounds, time), around `last`. */
function readShapes(last: number, threads: string[], at: string): SqliteEventReadParams[] {
  const shapes: SqliteEventReadParams[] = []
  const afters = [undefined, 0, 1, Math.floor(last / 3), last - 40, last - 5, last - 1, last, last + 3]
  for (const after of afters)
    for (const filter of [
      {},
      { threadId: null },
      { threadId: threads[0] },
      { threadId: threads[1] },
      { streamOf: null },
      { streamOf: threads[0] },
      { types: ['agent.message'] },
      { types: ['user.interrupt', 'session.updated'] },
      { types: ['agent.message', 'user.interrupt', 'agent.message'] },
      { types: ['session.thread_created', 'session.thread_status_idle', 'span.model_request_end', 'agent.thread_message_received'] },
      { types: ['agent.tool_use'], threadId: threads[1] },
    ] satisfies SqliteEventReadParams[])
      for (const more of [{}, { limit: 3 }, { order: 'desc' as const }, { order: 'desc' as const, limit: 7 }, { before: last - 10 }, { processedAt: { lte: at } }])
        shapes.push({ ...(after === undefined ? {} : { after: Math.max(0, after) }), ...filter, ...more })
  return shapes
}

describe('the log window of recent rows', () => {
  it('answers every read shape exactly as the SQL read does, while and after the window holds the tail', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'corral-recent-'))
    dirs.push(dir)
    const s = fileStores(dir)
    const { id, threads } = await newSession(s)
    const other = await newSession(s)
    const sql = new LogReader(s.db)
    // more rows than a window keeps (2,048 per session), appended in groups and one by one
    for (let i = 0; i < 1400; i++) {
      await Promise.all([s.log.append(id, batch(i, threads) as never), s.log.append(other.id, batch(i + 3, other.threads) as never)])
      if (i % 50 === 0) s.log.appendSync(id, batch(i + 1, threads) as never)
    }
    const last = s.log.lastSeq(id)
    expect(last).toBeGreaterThan(2048)
    const at = s.log.read(id, { after: last - 30, limit: 1 })[0].event.processed_at
    let compared = 0
    for (const sid of [id, other.id]) {
      const th = sid === id ? threads : other.threads
      for (const params of [...readShapes(s.log.lastSeq(sid), th, at), ...readShapes(900, th, at), ...readShapes(60, th, at)]) {
        expect(s.log.read(sid, params), JSON.stringify(params)).toEqual(sql.read(sid, params))
        compared++
      }
    }
    expect(compared).toBeGreaterThan(3000)
  })

  it('never hides what another connection committed to the same file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'corral-recent-'))
    dirs.push(dir)
    const a = fileStores(dir)
    const { id, threads } = await newSession(a)
    for (let i = 0; i < 20; i++) await a.log.append(id, batch(i, threads) as never)
    const tip = a.log.lastSeq(id)
    // the window answers this one (all of it is recent)
    expect(a.log.read(id, { after: tip - 3 }).map((e) => e.seq)).toEqual([tip - 2, tip - 1, tip])
    // another process appends to the same session
    const b = fileStores(dir)
    const [theirs] = await b.log.append(id, [{ type: 'user.message', content: [{ type: 'text', text: 'from the other process' }] }] as never)
    expect(theirs.seq).toBe(tip + 1)
    expect(a.log.lastSeq(id)).toBe(tip + 1)
    const seen = a.log.read(id, { after: tip - 3 })
    expect(seen.map((e) => e.seq)).toEqual([tip - 2, tip - 1, tip, tip + 1])
    expect(seen.at(-1)?.event.id).toBe(theirs.event.id)
    expect(a.log.read(id, { after: 0, threadId: null, order: 'desc', limit: 1 })[0].event.id).toBe(theirs.event.id)
    // and this process's next append continues after it, its window again in use
    const [mine] = await a.log.append(id, [{ type: 'agent.message', content: [{ type: 'text', text: 'after' }] }] as never)
    expect(mine.seq).toBe(tip + 2)
    expect(a.log.read(id, { after: tip }).map((e) => e.event.id)).toEqual([theirs.event.id, mine.event.id])
    expect(a.log.read(id, { after: tip })).toEqual(new LogReader(a.db).read(id, { after: tip }))
    expect(a.log.lastSeq(id)).toBe(tip + 2)
    // the other process deletes the session: this one no longer finds it (its row id is forgotten too)
    b.sessions.delete(id)
    await Promise.resolve()
    expect(() => a.log.read(id, { after: 0 })).toThrow(/not found|No session/i)
    expect(() => a.log.lastSeq(id)).toThrow(/not found|No session/i)
  })

  it('forgets nothing a deleted session leaves: its reads are not_found, a new session starts its own window', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'corral-recent-'))
    dirs.push(dir)
    const s = fileStores(dir)
    const first = await newSession(s)
    for (let i = 0; i < 5; i++) await s.log.append(first.id, batch(i, first.threads) as never)
    s.sessions.delete(first.id)
    expect(() => s.log.read(first.id, { after: 0 })).toThrow(/not found|No session/i)
    const second = await newSession(s)
    await s.log.append(second.id, batch(1, second.threads) as never)
    expect(s.log.read(second.id, { after: 0 })).toEqual(new LogReader(s.db).read(second.id, { after: 0 }))
  })
})
