/**
 * Child process for durability.test.ts: opens the database at argv[2], makes sure there are
 * SESSIONS sessions, then has WRITERS concurrent writers append through the group-committed log
 * forever. After each append resolves (= committed, and its WAL fsynced: log/wal-sync.ts) it prints
 * `ack <sessionId> <seq> <eventId>` per event. Stdout is a pipe, which Node writes synchronously
 * on Linux, so a printed ack has left the process before any later kill. With argv[3] `checkpoints`
 * the appends go through a log whose WAL checkpoints (log/wal-checkpoint.ts) start at a few frames,
 * so worker checkpoints and held group commits happen all through the run (`ckpt` printed per one).
 */
import { openStoresAt } from '../../../src/main/session/stores'
import { SqliteEventLog } from '../../../src/main/session/sqlite-event-log'

const SESSIONS = 4
const WRITERS = 8

async function main(): Promise<void> {
  const stores = openStoresAt(process.argv[2])
  const { db, agents, environments, sessions } = stores
  const log =
    process.argv[3] === 'checkpoints'
      ? new SqliteEventLog(db, { checkpoint: { minFrames: 8, restartFrames: 24, pollMs: 2, onCheckpoint: () => process.stdout.write('ckpt\n') } })
      : stores.log
  let ids = (db.prepare('SELECT id FROM sessions ORDER BY rid').all() as { id: string }[]).map((r) => r.id)
  if (ids.length < SESSIONS) {
    const agent = agents.create({ name: 'durable', model: 'claude-sonnet-4-6' })
    const env = environments.create({ name: 'durable' })
    for (let i = ids.length; i < SESSIONS; i++) await sessions.create({ agent: agent.id, environment_id: env.id })
    ids = (db.prepare('SELECT id FROM sessions ORDER BY rid').all() as { id: string }[]).map((r) => r.id)
  }
  process.stdout.write('ready\n')
  let n = 0
  const writer = async (w: number) => {
    for (;;) {
      const sid = ids[(w + n) % ids.length]
      const count = 1 + (n++ % 3)
      const events = Array.from({ length: count }, (_, k) => ({ type: 'agent.message', content: [{ type: 'text', text: `w${w} n${n} k${k}` }] }))
      const stored = await log.append(sid, events)
      process.stdout.write(stored.map((s) => `ack ${s.sessionId} ${s.seq} ${s.event.id}\n`).join(''))
    }
  }
  await Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(w)))
}

main().catch((err) => {
  process.stderr.write(`writer failed: ${(err as Error).stack}\n`)
  process.exit(1)
})
