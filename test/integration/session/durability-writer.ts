/**
 * Child process for durability.test.ts: opens the database at argv[2], makes sure there are
 * SESSIONS sessions, then has WRITERS concurrent writers append through the group-committed log
 * forever. After each append resolves (= committed, and its WAL fsynced: log/wal-sync.ts) it prints
 * `ack <sessionId> <seq> <eventId>` per event. Stdout is a pipe, which Node writes synchronously
 * on Linux, so a printed ack has left the process before any later kill.
 */
import { openStoresAt } from '../../../src/main/session/stores'

const SESSIONS = 4
const WRITERS = 8

async function main(): Promise<void> {
  const { db, log, agents, environments, sessions } = openStoresAt(process.argv[2])
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
