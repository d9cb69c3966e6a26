import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Engine } from '../../../src/main/engine'
import type { LoggedEvent } from '../../../src/main/session/event-log'
import { keychainAccount } from '../../../src/main/vault/keychain'
import { KeyringKeychain } from '../../../src/main/vault/keyring-keychain'
import { callTool, say, ScriptedModelServer, toolResultsOf } from '../../support/model-server'
import { keychainProbe, requirement } from '../../support/requirements'
import { bwrapReq, dockerReq } from '../hands/support'
import { fakeDialer, fakeResolver, upstreamPki } from './egress-helpers'
import { gitHttpServer, seedBareRepository } from './git-http-server'

/*
 * A session's github_repository with an authorization_token, created through the API: the token
 * goes to the keychain (never SQLite, an event or a response), the repository is cloned at
 * provision inside the sandbox through the egress proxy (which adds the token), and deleting
 * the session deletes the token.
 */

const TOKEN = `ghp_sessionResourceCanary${Date.now()}`
const REPO_URL = 'https://git.example.test/acme/widgets.git'
const keychainReq = requirement('keychain', keychainProbe)

function filesUnder(dir: string): string[] {
  return (readdirSync(dir, { recursive: true }) as string[]).map((f) => join(dir, f)).filter((p) => {
    try {
      return statSync(p).isFile()
    } catch {
      return false
    }
  })
}

function describeCredentialedClone(backend: 'docker' | 'bubblewrap', ready: boolean): void {
  describe.skipIf(!ready || !keychainReq.ok)(`a credentialed repository on ${backend}`, () => {
    const root = mkdtempSync(join(tmpdir(), `corral-restoken-${backend}-`))
    const dataDir = join(root, 'data')
    const keychain = new KeyringKeychain({ service: `corral-test-restoken-${backend}-${process.pid}-${Date.now()}` })
    const pki = upstreamPki(['git.example.test'])
    const responses: unknown[] = []
    let git: Awaited<ReturnType<typeof gitHttpServer>>
    let model: ScriptedModelServer
    let engine: Engine
    let client: Anthropic
    let sessionId: string
    let account: string
    let events: LoggedEvent[] = []

    beforeAll(async () => {
      const { projectRoot: project } = await seedBareRepository(root, 'private widgets\n')
      git = await gitHttpServer({ projectRoot: project, token: TOKEN, tls: { cert: pki.cert, key: pki.key } })
      model = await ScriptedModelServer.start((req) =>
        toolResultsOf(req).length === 0 ? callTool('bash', { command: 'cat /workspace/widgets/README.md; git -C /workspace/widgets log --oneline | wc -l; env | grep -c ghp_; true' }) : say('Read it.'),
      )
      engine = await Engine.openWithKeychain({
        dataDir,
        keychain,
        token: 'test-token',
        env: { PATH: process.env.PATH, ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k' },
        egress: {
          egressRuntimeDir: join(root, 'egress'),
          resolver: fakeResolver({ 'git.example.test': ['203.0.113.20'] }),
          dialer: fakeDialer({ '203.0.113.20:443': git.port }),
          upstreamCa: [pki.caPem],
        },
        harness: { backoffBaseMs: 5, backoffMaxMs: 40 },
        log: () => {},
      })
      client = new Anthropic({ baseURL: (await engine.listen(0)).url, apiKey: 'test-token', maxRetries: 0 })
      const agent = await client.beta.agents.create({ name: 'cloner', model: 'claude-sonnet-5-5', tools: [{ type: 'agent_toolset_20260401' }] })
      // networking none: the sandbox reaches the repository alone, through the proxy
      const environment = await client.beta.environments.create({ name: 'private repo', config: { type: 'cloud', corral: { backend, warm_pool: 0 } } as unknown as Anthropic.Beta.BetaCloudConfigParams })
      const session = await client.beta.sessions.create({ agent: agent.id, environment_id: environment.id, resources: [{ type: 'github_repository', url: REPO_URL, authorization_token: TOKEN, mount_path: 'widgets' }] })
      responses.push(session)
      sessionId = session.id
      account = keychainAccount.sessionResource(sessionId, (session.resources[0] as { id: string }).id, 'authorization_token')
      await client.beta.sessions.events.send(sessionId, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'read the README' }] }] })
      const deadline = Date.now() + 60_000
      for (;;) {
        events = engine.services.log.read(sessionId, { after: 0, limit: 1000 }).map((r) => r.event)
        if (events.some((e) => e.type === 'session.status_idle' && (e as unknown as { stop_reason: { type: string } }).stop_reason.type === 'end_turn')) break
        if (Date.now() > deadline) throw new Error(`the session did not finish: ${events.map((e) => e.type).join(', ')}`)
        await new Promise((r) => setTimeout(r, 25))
      }
      responses.push(await client.beta.sessions.retrieve(sessionId), await client.beta.sessions.list(), await client.beta.sessions.events.list(sessionId))
    }, 120_000)

    afterAll(async () => {
      await engine?.close()
      await model?.close()
      await git?.close()
      await keychain.delete(account).catch(() => false)
      await keychain.delete(keychainAccount.egressCaKey).catch(() => false)
      rmSync(root, { recursive: true, force: true })
    })

    it('keeps the token in the keychain under the session resource account', async () => {
      expect(await keychain.get(account)).toBe(TOKEN)
    })

    it('clones the repository at provision through the proxy, which adds the token; the sandbox never sees it', () => {
      const result = events.find((e) => e.type === 'agent.tool_result') as unknown as { content: { text: string }[]; is_error: boolean }
      expect(result.is_error).toBe(false)
      expect(result.content.map((c) => c.text).join('')).toBe('private widgets\n1\n0')
      expect(git.authSeen).toContain(`Basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`)
    })

    it('puts the token in no event, no API response and no file of the data directory', async () => {
      expect(JSON.stringify(events)).not.toContain(TOKEN)
      expect(JSON.stringify(responses)).not.toContain(TOKEN)
      await engine.stores.log.drain()
      for (const f of filesUnder(dataDir)) expect(readFileSync(f, 'latin1').includes(TOKEN), f).toBe(false)
    })

    it('deletes the token from the keychain with the session', async () => {
      await client.beta.sessions.delete(sessionId)
      await engine.handsSettled()
      expect(await keychain.get(account)).toBeUndefined()
    })
  })
}

describeCredentialedClone('docker', dockerReq().ok)
describeCredentialedClone('bubblewrap', bwrapReq().ok)

describe('a credentialed repository without a keychain', () => {
  it('is refused with a 400 that names the field and says the keychain is unavailable', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'corral-restoken-nokeychain-'))
    const engine = Engine.open({ dataDir, token: 'test-token', env: {}, defaultHands: false, log: () => {} })
    try {
      const client = new Anthropic({ baseURL: (await engine.listen(0)).url, apiKey: 'test-token', maxRetries: 0 })
      const agent = await client.beta.agents.create({ name: 'a', model: 'claude-sonnet-5-5' })
      const environment = await client.beta.environments.create({ name: 'e', config: { type: 'cloud' } })
      const err = await client.beta.sessions
        .create({ agent: agent.id, environment_id: environment.id, resources: [{ type: 'github_repository', url: REPO_URL, authorization_token: TOKEN }] })
        .catch((e: unknown) => e)
      expect(err).toBeInstanceOf(Anthropic.BadRequestError)
      expect((err as Error).message).toMatch(/resources\[0\]\.authorization_token: .*keychain is unavailable/)
      expect((err as Error).message).not.toContain(TOKEN)
      expect((await client.beta.sessions.list()).data).toEqual([])
    } finally {
      await engine.close()
      rmSync(dataDir, { recursive: true, force: true })
    }
  })
})
