import { afterEach, describe, expect, it } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openDatabase, type Db } from '../../../src/main/session/database'
import { SqliteEventLog } from '../../../src/main/session/sqlite-event-log'
import type { StoredEvent } from '../../../src/main/session/event-log'
import { AgentStore } from '../../../src/main/session/agent-store'
import { EnvironmentStore } from '../../../src/main/session/environment-store'
import { SessionStore } from '../../../src/main/session/session-store'
import { untilTrue } from '../../support/polling'

// A tail hears of what another process appends to the same file (`corral run` beside the
// desktop): two connections stand for the two processes, each with its own SqliteEventLog. The
// tail's log notices the other's commits by polling `PRAGMA data_version` while a tail is open.

let dir: string
let dbs: Db[] = []
let logs: SqliteEventLog[] = []
afterEach(() => {
  for (const log of logs) log.dispose()
  for (const db of dbs) db.close()
  rmSync(dir, { recursive: true, force: true })
})

const typeOf = (s: StoredEvent | undefined) => String(s?.event.type)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const until = (what: string, ok: () => boolean) => untilTrue(what, ok, 5_000, 10)

type Fsync = (fd: number, done: (err: NodeJS.ErrnoException | null) => void) => void

/** `fsync`: how the first process's log syncs its WAL (a test holds it to keep its commits off the disk). */
async function twoProcesses(pollMs = 20, fsync?: Fsync): Promise<{ sid: string; mine: SqliteEventLog; theirs: SqliteEventLog; newSession: () => Promise<string>; deleteSession: (id: string) => void }> {
  dir = mkdtempSync(join(tmpdir(), 'corral-foreign-tail-'))
  const path = join(dir, 'corral.db')
  dbs = [openDatabase({ path }), openDatabase({ path })]
  logs = dbs.map((db, i) => new SqliteEventLog(db, { foreignPollMs: pollMs, ...(i === 0 && fsync ? { fsync } : {}) }))
  const agents = new AgentStore(dbs[1])
  const environments = new EnvironmentStore(dbs[1])
  const sessions = new SessionStore(dbs[1], { log: logs[1], agents, environments })
  const agent = agents.create({ name: 'a', model: 'claude-sonnet-4-6' })
  const env = environments.create({ name: 'e' })
  const newSession = async () => (await sessions.create({ agent: agent.id, environment_id: env.id })).id
  const sid = await newSession()
  return { sid, mine: logs[0], theirs: logs[1], newSession, deleteSession: (id) => void sessions.delete(id) }
}

describe("a tail and another process's appends to the same file", () => {
  it('hears every event the other process appends, once each and in seq order, beside its own process’s appends', async () => {
    const { sid, mine, theirs } = await twoProcesses()
    const heard: StoredEvent[] = []
    const stop = mine.tail(sid, 0, (s) => heard.push(s))
    for (let round = 0; round < 20; round++) {
      await theirs.append(sid, [{ type: 'x', round }, { type: 'x', round }])
      if (round % 3 === 0) await mine.append(sid, [{ type: 'mine', round }])
      if (round % 5 === 0) await sleep(30)
    }
    const last = theirs.lastSeq(sid)
    await until('the tail to hear the last event', () => heard.at(-1)?.seq === last)
    await sleep(100) // nothing more (no second delivery at a later poll)
    expect(heard.map((s) => s.seq)).toEqual(Array.from({ length: last }, (_, i) => i + 1))
    expect(heard.map((s) => s.event.id)).toEqual(theirs.read(sid, { limit: 1000 }).map((s) => s.event.id))
    expect(heard.filter((s) => typeOf(s) === 'x')).toHaveLength(40)
    expect(heard.filter((s) => typeOf(s) === 'mine')).toHaveLength(7)
    stop()
  })

  it('hears only what comes after its start point, also for a tail opened while the other process writes; a closed tail hears nothing more', async () => {
    const { sid, mine, theirs } = await twoProcesses()
    await theirs.append(sid, [{ type: 'before' }])
    const from = theirs.lastSeq(sid)
    const first: StoredEvent[] = []
    const stopFirst = mine.tail(sid, from, (s) => first.push(s))
    await theirs.append(sid, [{ type: 'one' }])
    const second: StoredEvent[] = []
    const stopSecond = mine.tail(sid, 0, (s) => second.push(s))
    await theirs.append(sid, [{ type: 'two' }])
    const last = theirs.lastSeq(sid)
    await until('both tails to hear the last event', () => first.at(-1)?.seq === last && second.at(-1)?.seq === last)
    expect(first.map(typeOf)).toEqual(['one', 'two'])
    expect(second.map((s) => s.seq)).toEqual(Array.from({ length: last }, (_, i) => i + 1))
    stopFirst()
    await theirs.append(sid, [{ type: 'three' }])
    await until('the open tail to hear it', () => typeOf(second.at(-1)) === 'three')
    await sleep(60)
    expect(first.map(typeOf)).toEqual(['one', 'two'])
    stopSecond()
  })

  it('goes on telling the other tails when the other process deletes a tailed session', async () => {
    const { sid, mine, theirs, newSession, deleteSession } = await twoProcesses()
    const other = await newSession()
    const gone: StoredEvent[] = []
    const kept: StoredEvent[] = []
    const stopGone = mine.tail(sid, 0, (s) => gone.push(s))
    const stopKept = mine.tail(other, 0, (s) => kept.push(s))
    deleteSession(sid)
    await theirs.append(other, [{ type: 'after the delete' }])
    await until('the other tail to hear it', () => typeOf(kept.at(-1)) === 'after the delete')
    expect(gone).toEqual([])
    stopGone()
    stopKept()
  })

  it("tells a tail what the other process appended behind this process's own events still on their way to disk, once they are on it", async () => {
    const held: ((err: null) => void)[] = []
    const { sid, mine, theirs } = await twoProcesses(20, (_fd, done) => void held.push(done))
    const heard: StoredEvent[] = []
    const stop = mine.tail(sid, 0, (s) => heard.push(s))
    const before = heard.length
    const own = mine.append(sid, [{ type: 'mine' }])
    await until('its fsync to be asked for', () => held.length === 1)
    await theirs.append(sid, [{ type: 'theirs' }])
    // several polls while the other process's event sits behind this one's, not on disk yet
    await sleep(120)
    expect(heard.slice(before).map(typeOf)).toEqual([])
    held.shift()!(null)
    await own
    await until("the other process's event", () => typeOf(heard.at(-1)) === 'theirs')
    expect(heard.slice(before).map(typeOf)).toEqual(['mine', 'theirs'])
    stop()
  })

  it("does not look for another process's events with foreignPollMs 0: a tail then hears its own process only", async () => {
    const { sid, mine, theirs } = await twoProcesses(0)
    const heard: StoredEvent[] = []
    const stop = mine.tail(sid, 0, (s) => heard.push(s))
    const before = heard.length
    await theirs.append(sid, [{ type: 'x' }])
    await sleep(150)
    expect(heard).toHaveLength(before)
    await mine.append(sid, [{ type: 'mine' }])
    await until('its own event', () => typeOf(heard.at(-1)) === 'mine')
    stop()
  })
})

describe("subscribers to commits and another process's appends (hearForeign: the sessions whose brains run here)", () => {
  it('hear, for a heard session only and until the disposer runs, what the other process appends, once each and in seq order beside their own', async () => {
    const { sid, mine, theirs, newSession } = await twoProcesses()
    const unheard = await newSession()
    const heard: StoredEvent[] = []
    const off = mine.subscribeCommitted((s) => heard.push(s))
    const stop = mine.hearForeign(sid)
    const from = mine.lastSeq(sid)
    for (let round = 0; round < 12; round++) {
      await theirs.append(sid, [{ type: 'x', round }])
      await theirs.append(unheard, [{ type: 'elsewhere', round }])
      // an own append right behind a foreign one the poll has not seen: the foreign one is heard first
      if (round % 4 === 1) await mine.append(sid, [{ type: 'mine', round }])
      if (round % 5 === 0) await sleep(40)
    }
    const last = theirs.lastSeq(sid)
    await until('the last event to be heard', () => heard.at(-1)?.seq === last)
    await sleep(80)
    expect(heard.every((s) => s.sessionId === sid)).toBe(true)
    expect(heard.map((s) => s.seq)).toEqual(Array.from({ length: last - from }, (_, i) => from + i + 1))
    expect(heard.filter((s) => typeOf(s) === 'x')).toHaveLength(12)
    expect(heard.filter((s) => typeOf(s) === 'mine')).toHaveLength(3)
    stop()
    await theirs.append(sid, [{ type: 'after' }])
    await sleep(80)
    expect(heard.map(typeOf)).not.toContain('after')
    // its own appends are heard as ever
    await mine.append(sid, [{ type: 'mine again' }])
    expect(typeOf(heard.at(-1))).toBe('mine again')
    off()
  })
})
