import { afterEach, describe, expect, it } from 'vitest'
import { openDatabase, type Db } from '../../../src/main/session/database'
import type { SessionResourceSecrets } from '../../../src/main/session/session-store'
import { openStores } from '../../../src/main/session/stores'
import { keychainAccount } from '../../../src/main/vault/keychain'
import { MemoryKeychain } from '../../../src/main/vault/memory-keychain'
import { KeychainResourceSecrets } from '../../../src/main/vault/vault-services'
import { CorralError } from '../../../src/shared/errors'

const TOKEN = 'ghp_unitResourceToken000000000000000000000'

function stores(resourceSecrets?: SessionResourceSecrets) {
  const { db, log, agents, environments, sessions } = openStores(openDatabase({ path: ':memory:' }), { sessionHooks: { resourceSecrets } })
  const agent = agents.create({ name: 'a', model: 'claude-sonnet-4-6' })
  const env = environments.create({ name: 'e' })
  return { db, log, sessions, agentId: agent.id, envId: env.id }
}

let open: Db[] = []
afterEach(() => {
  for (const db of open) db.close()
  open = []
})

/** Every row of every table, as text: what SQLite holds. */
function everything(db: Db): string {
  const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all() as string[]
  return tables.map((t) => JSON.stringify(db.prepare(`SELECT * FROM "${t}"`).all())).join('\n')
}

describe('session resource secrets', () => {
  it('keeps a repository authorization_token in the keychain under the resource account, and nowhere in the database, the log or the session', async () => {
    const keychain = new MemoryKeychain()
    const s = stores(new KeychainResourceSecrets(keychain))
    open.push(s.db)
    const session = await s.sessions.create({
      agent: s.agentId,
      environment_id: s.envId,
      resources: [{ type: 'github_repository', url: 'https://git.example.test/acme/widgets.git', authorization_token: TOKEN, mount_path: 'w' }],
      initial_events: [{ type: 'user.message', content: [{ type: 'text', text: 'hi' }] }],
    } as never)
    const resourceId = (session.resources[0] as { id: string }).id
    expect(resourceId).toMatch(/^sesrsc_/)
    expect(await keychain.get(keychainAccount.sessionResource(session.id, resourceId, 'authorization_token'))).toBe(TOKEN)
    expect(session.resources[0]).toMatchObject({ type: 'github_repository', url: 'https://git.example.test/acme/widgets.git', mount_path: 'w' })
    expect(JSON.stringify(session)).not.toContain(TOKEN)
    expect(JSON.stringify(s.sessions.retrieve(session.id))).not.toContain(TOKEN)
    expect(JSON.stringify(s.sessions.list({ limit: 10 } as never))).not.toContain(TOKEN)
    expect(JSON.stringify(s.log.read(session.id, { after: 0, limit: 100 }))).not.toContain(TOKEN)
    await s.log.drain()
    expect(everything(s.db)).toContain(resourceId)
    expect(everything(s.db)).not.toContain(TOKEN)
  })

  it('deletes the token from the keychain with the session', async () => {
    const keychain = new MemoryKeychain()
    const deletes: Promise<void>[] = []
    const sink = new KeychainResourceSecrets(keychain)
    const s = stores({ put: (...a) => sink.put(...a), delete: (id, ids) => void deletes.push(sink.delete(id, ids)) })
    open.push(s.db)
    const session = await s.sessions.create({ agent: s.agentId, environment_id: s.envId, resources: [{ type: 'github_repository', url: 'https://git.example.test/a/b', authorization_token: TOKEN }] } as never)
    const account = keychainAccount.sessionResource(session.id, (session.resources[0] as { id: string }).id, 'authorization_token')
    s.sessions.delete(session.id)
    await Promise.all(deletes)
    expect(await keychain.get(account)).toBeUndefined()
  })

  it('refuses a resource that carries a token when there is no keychain, naming the field, and creates nothing', async () => {
    const s = stores()
    open.push(s.db)
    const err = await s.sessions
      .create({ agent: s.agentId, environment_id: s.envId, resources: [{ type: 'github_repository', url: 'https://git.example.test/a/public' }, { type: 'github_repository', url: 'https://git.example.test/a/private', authorization_token: TOKEN }] } as never)
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(CorralError)
    expect(err).toMatchObject({ code: 'invalid_request_error', message: expect.stringMatching(/^resources\[1\]\.authorization_token: .*keychain is unavailable/) })
    expect((err as Error).message).not.toContain(TOKEN)
    expect(s.sessions.list({ limit: 10 } as never).data).toEqual([])
    // a public repository without a token needs no keychain
    const ok = await s.sessions.create({ agent: s.agentId, environment_id: s.envId, resources: [{ type: 'github_repository', url: 'https://git.example.test/a/public' }] } as never)
    expect(ok.resources).toHaveLength(1)
  })

  it('leaves no session and no token behind when the keychain refuses the second token or the request fails later', async () => {
    const keychain = new MemoryKeychain()
    const sink = new KeychainResourceSecrets(keychain)
    const deletes: Promise<void>[] = []
    let puts = 0
    const s = stores({
      put: async (...a) => {
        if (++puts === 2) throw new CorralError('keychain_error', 'the keychain could not store it')
        await sink.put(...a)
      },
      delete: (id, ids) => void deletes.push(sink.delete(id, ids)),
    })
    open.push(s.db)
    const two = [
      { type: 'github_repository', url: 'https://git.example.test/a/one', authorization_token: `${TOKEN}1` },
      { type: 'github_repository', url: 'https://git.example.test/a/two', authorization_token: `${TOKEN}2` },
    ]
    await expect(s.sessions.create({ agent: s.agentId, environment_id: s.envId, resources: two } as never)).rejects.toMatchObject({ code: 'keychain_error' })
    await expect(s.sessions.create({ agent: 'agent_missing', environment_id: s.envId, resources: two.slice(0, 1) } as never)).rejects.toMatchObject({ code: 'invalid_request_error' })
    await Promise.all(deletes)
    expect(deletes).toHaveLength(2)
    expect(s.sessions.list({ limit: 10 } as never).data).toEqual([])
    for (const suffix of ['1', '2']) expect(everything(s.db)).not.toContain(`${TOKEN}${suffix}`)
    expect((keychain as unknown as { secrets: Map<string, string> }).secrets.size).toBe(0)
  })
})
