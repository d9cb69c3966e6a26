import { openDatabase } from '../../../src/main/session/database'
import { openStores, type Stores as OpenStores } from '../../../src/main/session/stores'

export interface Stores extends OpenStores {
  /** Creates an agent + environment + session and returns the session id. */
  newSession(): Promise<string>
}

/** The session stores on an in-memory database (unit tests touch no disk). */
export function memoryStores(clock?: () => Date): Stores {
  const stores = openStores(openDatabase({ path: ':memory:' }), { clock })
  const agent = stores.agents.create({ name: 'tester', model: 'claude-sonnet-4-6' })
  const env = stores.environments.create({ name: 'env' })
  return {
    ...stores,
    newSession: async () => (await stores.sessions.create({ agent: agent.id, environment_id: env.id })).id,
  }
}

export const message = (text: string) => ({ type: 'agent.message', content: [{ type: 'text', text }] })
