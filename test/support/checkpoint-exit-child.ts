/**
 * A process that appends back to back until the log's checkpoint worker has run three times (the
 * appends wait on it while it holds a commit, and nothing else keeps the process alive), prints `checkpointed`,
 * and then simply ends its work without disposing the log: it must exit by itself (the worker
 * thread may not keep it alive). Usage: node --import tsx checkpoint-exit-child.ts <database path>
 */
import { openStoresAt } from '../../src/main/session/stores'
import { SqliteEventLog } from '../../src/main/session/sqlite-event-log'

async function main(): Promise<void> {
  const stores = openStoresAt(process.argv[2])
  const agent = stores.agents.create({ name: 'a', model: 'claude-sonnet-4-6' })
  const env = stores.environments.create({ name: 'e' })
  const session = await stores.sessions.create({ agent: agent.id, environment_id: env.id })
  let checkpointed = false
  const log = new SqliteEventLog(stores.db, { checkpoint: { minFrames: 8, restartFrames: 64, pollMs: 5, onCheckpoint: () => (checkpointed = true) } })
  const text = 'x'.repeat(4000)
  // back to back, nothing else alive in the process: past restartFrames the log holds a commit
  // while the worker copies, and only the worker keeps the process going until it answers
  let held = 0
  for (let i = 0; i < 3000 && held < 3; i++) {
    await log.append(session.id, [{ type: 'agent.message', content: [{ type: 'text', text }] }] as never)
    if (checkpointed) held++, (checkpointed = false)
  }
  process.stdout.write(held >= 3 ? 'checkpointed\n' : 'never checkpointed\n')
}

void main()
