import { openDatabase, type Db } from '../../../src/main/session/database'
import { SqliteEventLog } from '../../../src/main/session/sqlite-event-log'
import { AgentStore } from '../../../src/main/session/agent-store'
import { EnvironmentStore } from '../../../src/main/session/environment-store'
import { SessionStore } from '../../../src/main/session/session-store'
import { ThreadStore } from '../../../src/main/session/thread-store'

export interface Stores {
  db: Db
  log: SqliteEventLog
  agents: AgentStore
  environments: EnvironmentStore
  sessions: SessionStore
  threads: ThreadStore
  /** Creates an agent + environment + session and returns the session id. */
  newSession(): Promise<string>
  close(): void
}

/** The session stores on an in-memory database (unit tests touch no disk). */
export function memoryStores(clock?: () => Date): Stores {
  const db = openDatabase({ path: ':memory:' })
  const log = new SqliteEventLog(db, clock ? { clock } : {})
  const agents = new AgentStore(db, { clock })
  const environments = new EnvironmentStore(db, clock)
  const sessions = new SessionStore(db, log, agents, environments, clock)
  const threads = new ThreadStore(log, sessions, clock)
  const agent = agents.create({ name: 'tester', model: 'claude-sonnet-4-6' })
  const env = environments.create({ name: 'env' })
  return {
    db,
    log,
    agents,
    environments,
    sessions,
    threads,
    newSession: async () => (await sessions.create({ agent: agent.id, environment_id: env.id })).id,
    close: () => db.close(),
  }
}

export const message = (text: string) => ({ type: 'agent.message', content: [{ type: 'text', text }] })
