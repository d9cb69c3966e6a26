import { describe, expect, it } from 'vitest'
import { fsync } from 'node:fs'
import type { StoredEvent } from '../../../src/main/session/event-log'
import { logFiles } from './log-files'

/**
 * The log's commit with its fsync off the event loop (session/log/wal-sync.ts), on a real SQLite
 * file: the WAL's fsync is held by the test where it needs to see the moment between the commit
 * and the disk (the real fs.fsync runs when released).
 */
const files = logFiles('corral-walsync-')

/** A held fsync: each call waits until the test releases it (then the real fsync runs) or fails it. */
function heldFsync() {
  const calls: { fd: number; done: (err: NodeJS.ErrnoException | null) => void }[] = []
  return {
    calls,
    fn: (fd: number, done: (err: NodeJS.ErrnoException | null) => void) => void calls.push({ fd, done }),
    release(i = 0) {
      const c = calls[i]
      fsync(c.fd, c.done)
    },
    fail(i: number, err: NodeJS.ErrnoException) {
      calls[i].done(err)
    },
  }
}

function setup(fsyncFn?: (fd: number, done: (err: NodeJS.ErrnoException | null) => void) => void) {
  // the session is created through a log of its own (real fsync), then the log under test takes over
  return files.open(fsyncFn ? { fsync: fsyncFn } : {})
}

const tick = () => new Promise((r) => setImmediate(r))

describe('the log commit with its fsync off the event loop', () => {
  it('resolves an append, shows its events to reads and tells subscribers only once the WAL fsync has returned', async () => {
    const held = heldFsync()
    const { log, sid } = await setup(held.fn)
    const told: StoredEvent[] = []
    log.subscribeAll((s) => told.push(s))
    let resolved = false
    const p = log.append(sid, [{ type: 'agent.message', content: [{ type: 'text', text: 'one' }] }]).then((r) => ((resolved = true), r))
    await tick()
    await tick()
    // committed (the group transaction ran), the fsync asked for, nothing acknowledged or shown
    expect(held.calls).toHaveLength(1)
    expect(resolved).toBe(false)
    expect(told).toEqual([])
    expect(log.read(sid).map((r) => r.event.type)).toEqual([])
    expect(log.lastSeq(sid)).toBe(0)
    held.release()
    const [stored] = await p
    expect(told.map((s) => s.seq)).toEqual([stored.seq])
    expect(log.read(sid).map((r) => r.event.id)).toEqual([stored.event.id])
    expect(log.get(stored.event.id)?.seq).toBe(stored.seq)
    expect(log.lastSeq(sid)).toBe(stored.seq)
  })

  it("resolves a `committed` append at its commit: a brain's includeUnsynced read and lastSeq show it, other reads and subscribers only once the fsync returned", async () => {
    const held = heldFsync()
    const { log, sid } = await setup(held.fn)
    const told: StoredEvent[] = []
    log.subscribeAll((s) => told.push(s))
    const durable = log.append(sid, [{ type: 'agent.message', content: [{ type: 'text', text: 'durable' }] }])
    const [committed] = await log.append(sid, [{ type: 'agent.message', content: [{ type: 'text', text: 'committed' }] }], { committed: true })
    // both in one group, its fsync held: the committed append resolved, the other did not
    expect(held.calls).toHaveLength(1)
    expect(committed.seq).toBe(2)
    expect(log.read(sid, { includeUnsynced: true }).map((r) => r.seq)).toEqual([1, 2])
    expect(log.read(sid, { includeUnsynced: true, threadId: null, types: ['agent.message'], after: 1 }).map((r) => r.event.id)).toEqual([committed.event.id])
    expect(log.lastSeq(sid, { includeUnsynced: true })).toBe(2)
    expect(log.read(sid)).toEqual([])
    expect(log.lastSeq(sid)).toBe(0)
    expect(told).toEqual([])
    let durableDone = false
    void durable.then(() => (durableDone = true))
    await tick()
    expect(durableDone).toBe(false)
    held.release()
    await durable
    expect(told.map((t) => t.seq)).toEqual([1, 2])
    expect(log.read(sid).map((r) => r.seq)).toEqual([1, 2])
  })

  it('runs at most two fsyncs at once: a group committed while one runs starts the second, later ones share the next, and whichever returns first settles what it covers, in order', async () => {
    const held = heldFsync()
    const { log, sid } = await setup(held.fn)
    const order: number[] = []
    const append = () => log.append(sid, [{ type: 'agent.message', content: [] }]).then((r) => (order.push(r[0].seq), r))
    const first = append()
    await tick()
    await tick()
    expect(held.calls).toHaveLength(1)
    // committed while the first runs: its own fsync starts at once (it does not wait for the first)
    const second = append()
    await tick()
    await tick()
    expect(held.calls).toHaveLength(2)
    // two running: these two groups wait, and share the next one
    const third = append()
    await tick()
    const fourth = append()
    await tick()
    await tick()
    expect(held.calls).toHaveLength(2)
    // the second returns first: it covers the first group too, both resolve, in order
    held.release(1)
    await Promise.all([first, second])
    expect(order).toEqual([1, 2])
    await tick()
    expect(held.calls).toHaveLength(3)
    // the first returning now settles nothing more; the third covers groups 3 and 4
    held.release(0)
    await tick()
    expect(order).toEqual([1, 2])
    held.release(2)
    await Promise.all([third, fourth])
    expect(order).toEqual([1, 2, 3, 4])
    expect(held.calls).toHaveLength(3)
    expect(log.read(sid).map((r) => r.seq)).toEqual([1, 2, 3, 4])
  })

  it('tells a subscriber of an event it can read back from the log at once', async () => {
    const { log, sid } = await setup()
    const seen: (string | undefined)[] = []
    log.subscribeAll((s) => seen.push(log.read(s.sessionId, { after: s.seq - 1, limit: 1 })[0]?.event.id))
    const [stored] = await log.append(sid, [{ type: 'agent.message', content: [] }])
    expect(seen).toEqual([stored.event.id])
  })

  it('rejects the appends waiting on a failed fsync with an error that names it, and commits later appends with synchronous=FULL', async () => {
    const held = heldFsync()
    const { log, sid } = await setup(held.fn)
    const p = log.append(sid, [{ type: 'agent.message', content: [] }])
    await tick()
    await tick()
    held.fail(0, Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' }))
    await expect(p).rejects.toThrow(/could not be flushed to disk \(fsync of the WAL: EIO/)
    // no fsync of its own any more: the commit itself syncs
    const [later] = await log.append(sid, [{ type: 'agent.message', content: [] }])
    expect(held.calls).toHaveLength(1)
    expect(later.seq).toBe(2)
    expect(log.read(sid).map((r) => r.seq)).toEqual([1, 2])
  })

  it('a synchronous append (its own FULL commit) first settles the groups still waiting for their fsync, in seq order', async () => {
    const held = heldFsync()
    const { log, sid } = await setup(held.fn)
    const told: number[] = []
    log.subscribeAll((s) => told.push(s.seq))
    const p = log.append(sid, [{ type: 'agent.message', content: [] }])
    await tick()
    await tick()
    log.appendSync(sid, [{ type: 'agent.message', content: [] }])
    expect(told).toEqual([1, 2])
    expect((await p)[0].seq).toBe(1)
    held.release(0)
    await log.drain()
    expect(told).toEqual([1, 2])
  })

  it('drain() waits until the groups committed are on disk', async () => {
    const held = heldFsync()
    const { log, sid } = await setup(held.fn)
    let acked = false
    void log.append(sid, [{ type: 'agent.message', content: [] }]).then(() => (acked = true))
    let drained = false
    const d = log.drain().then(() => (drained = true))
    await tick()
    await tick()
    expect(drained).toBe(false)
    held.release(0)
    await d
    expect(acked).toBe(true)
  })

  it('tells subscribeCommitted of an append at its commit, in commit order, before the fsync returns (subscribeAll only after)', async () => {
    const held = heldFsync()
    const { log, sid } = await setup(held.fn)
    const atCommit: { seq: number; readable: number[] }[] = []
    const onDisk: number[] = []
    // what a listener at the commit reads: the event, with includeUnsynced only
    log.subscribeCommitted((s) => atCommit.push({ seq: s.seq, readable: log.read(sid, { includeUnsynced: true }).map((r) => r.seq).concat(log.read(sid).map((r) => -r.seq)) }))
    log.subscribeAll((s) => onDisk.push(s.seq))
    const first = log.append(sid, [{ type: 'agent.message', content: [] }, { type: 'agent.message', content: [] }])
    await tick()
    expect(held.calls).toHaveLength(1)
    expect(atCommit).toEqual([
      { seq: 1, readable: [1, 2] },
      { seq: 2, readable: [1, 2] },
    ])
    expect(onDisk).toEqual([])
    // a listener that throws takes nothing down
    log.subscribeCommitted(() => {
      throw new Error('a listener bug')
    })
    const second = log.append(sid, [{ type: 'agent.message', content: [] }])
    await tick()
    expect(atCommit.map((c) => c.seq)).toEqual([1, 2, 3])
    held.release(0)
    held.release(1)
    await Promise.all([first, second])
    expect(onDisk).toEqual([1, 2, 3])
  })

  it('commits a group as soon as the task that appended is done, with every append its promise chains made, before the callbacks already waiting', async () => {
    const held = heldFsync()
    const { log, sid } = await setup(held.fn)
    const msg = (text: string) => [{ type: 'agent.message', content: [{ type: 'text', text }] }]
    const order: string[] = []
    log.subscribeCommitted((s) => order.push(`commit ${(s.event as { content: { text: string }[] }).content[0].text}`))
    // as when the responses of many threads arrive in one poll of the loop: the next one's callback is already waiting
    const waiting = new Promise<void>((resolve) => setImmediate(() => (order.push('next callback'), resolve())))
    const one = log.append(sid, msg('one'))
    const two = Promise.resolve().then(() => log.append(sid, msg('two')))
    await waiting
    expect(order).toEqual(['commit one', 'commit two', 'next callback'])
    // one group: one fsync for both
    expect(held.calls).toHaveLength(1)
    held.release()
    await Promise.all([one, two])
  })

  it('commits a lazy append with the next group another append makes, or in the check phase at the latest', async () => {
    const held = heldFsync()
    const { log, sid } = await setup(held.fn)
    const msg = (text: string) => [{ type: 'agent.message', content: [{ type: 'text', text }] }]
    const order: string[] = []
    log.subscribeCommitted((s) => order.push((s.event as { content: { text: string }[] }).content[0].text))
    const afterTask = () => new Promise<void>((r) => process.nextTick(r))
    const lazy = log.append(sid, msg('lazy'), { committed: true, lazy: true })
    await afterTask()
    await afterTask()
    // a task later it waits still (an append that is not lazy would have committed)
    expect(order).toEqual([])
    const now = log.append(sid, msg('now'), { committed: true })
    await Promise.all([lazy, now])
    // one group: both in one commit, one fsync
    expect(order).toEqual(['lazy', 'now'])
    expect(held.calls).toHaveLength(1)
    // alone, it commits in the check phase
    const alone = log.append(sid, msg('alone'), { committed: true, lazy: true })
    await tick()
    expect(order).toEqual(['lazy', 'now', 'alone'])
    await alone
    held.release(0)
    held.release(1)
    await log.whenSynced()
  })

  it("commits what a commit's listener appends in answer right behind it, in the same turn of the event loop, up to a bound", async () => {
    const { log, sid } = await setup()
    const order: string[] = []
    let chained = 0
    // each commit of a 'chain' message makes its listener append the next: a reaction to a commit (a run's driver starting its next thread)
    log.subscribeCommitted((s) => {
      const text = (s.event as { content?: { text?: string }[] }).content?.[0]?.text
      order.push(`commit ${text}`)
      if (text === 'first') setImmediate(() => order.push('next turn'))
      if (text?.startsWith('chain') && chained < 10) void log.append(sid, [{ type: 'agent.message', content: [{ type: 'text', text: `chain ${++chained}` }] }], { committed: true })
    })
    await log.append(sid, [{ type: 'agent.message', content: [{ type: 'text', text: 'first' }] }, { type: 'agent.message', content: [{ type: 'text', text: 'chain 0' }] }], { committed: true })
    for (let i = 0; i < 6; i++) await tick()
    // the first group and three answers to it commit before the next turn; the rest, one group per turn after it
    expect(order.slice(0, 7)).toEqual(['commit first', 'commit chain 0', 'commit chain 1', 'commit chain 2', 'commit chain 3', 'next turn', 'commit chain 4'])
    expect(order).toContain('commit chain 10')
    await log.whenSynced()
    expect(log.read(sid, { types: ['agent.message'], limit: 100 }).map((r) => (r.event as { content: { text: string }[] }).content[0].text)).toEqual(['first', ...Array.from({ length: 11 }, (_, i) => `chain ${i}`)])
  })

  it('whenSynced() resolves once everything committed before it is on disk, and rejects as a durable append would when its fsync failed', async () => {
    const held = heldFsync()
    const { log, sid } = await setup(held.fn)
    // nothing waits for the disk: at once
    await log.whenSynced()
    await log.append(sid, [{ type: 'agent.message', content: [] }], { committed: true })
    let synced = false
    const w = log.whenSynced().then(() => (synced = true))
    // a group committed after the call is not waited for
    await log.append(sid, [{ type: 'agent.message', content: [] }], { committed: true })
    expect(held.calls).toHaveLength(2)
    await tick()
    expect(synced).toBe(false)
    held.release(0)
    await w
    expect(synced).toBe(true)
    let late = false
    const w2 = log.whenSynced().then(() => (late = true))
    await tick()
    expect(late).toBe(false)
    held.fail(1, Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' }))
    await expect(w2).rejects.toThrow(/could not be flushed to disk.*EIO/)
  })
})
