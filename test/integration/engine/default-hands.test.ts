import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import Docker from 'dockerode'
import { afterAll, describe, expect, it } from 'vitest'
import { Engine } from '../../../src/main/engine'
import { dockerScopeFor } from '../../../src/main/engine-hands'
import { DockerSandboxProvider } from '../../../src/main/hands'
import { bubblewrapKey } from '../../../src/main/hands/bubblewrap/bubblewrap-sandbox'
import { keychainError, type Keychain } from '../../../src/main/vault/keychain'
import { callTool, say, ScriptedModelServer, toolResultsOf } from '../../support/model-server'
import { bwrapReq, dockerLeftovers, dockerReq } from '../hands/support'
import { bashResult, runBashSession } from './support'

/*
 * The engine's default hands: opened without a toolRouter, the engine builds the sandbox router
 * itself. A bash call of a session runs end to end (SDK → API → harness → scripted model →
 * sandbox → log), and archiving the session leaves nothing of it behind.
 */

const COMMAND = 'echo "hello from $((6 * 7))"; id -u; pwd'

async function bashOnce(): Promise<ScriptedModelServer> {
  return ScriptedModelServer.start((req) => (toolResultsOf(req).length === 0 ? callTool('bash', { command: COMMAND }, 'Running it.') : say('Done.')))
}

function openEngine(dataDir: string, model: ScriptedModelServer, settings?: Record<string, unknown>): Engine {
  if (settings) writeFileSync(join(dataDir, 'settings.json'), JSON.stringify(settings))
  return Engine.open({ dataDir, token: 'test-token', env: { PATH: process.env.PATH, ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k' }, harness: { backoffBaseMs: 5, backoffMaxMs: 40 }, log: () => {} })
}

const docker = dockerReq()
describe.skipIf(!docker.ok)('engine default hands on Docker', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-hands-docker-'))
  const dockerApi = new Docker()
  const scope = dockerScopeFor(dataDir)
  const engines: Engine[] = []
  let model: ScriptedModelServer
  afterAll(async () => {
    for (const e of engines) await e.close()
    await model?.close()
    for (const c of await dockerApi.listContainers({ all: true, filters: { label: [`corral.managed=${scope}`] } })) await dockerApi.getContainer(c.Id).remove({ force: true }).catch(() => {})
    rmSync(dataDir, { recursive: true, force: true })
  })

  const scoped = async () => (await dockerApi.listContainers({ all: true, filters: { label: [`corral.managed=${scope}`] } })).map((c) => c.Labels['corral.session'] ?? `pool:${c.Labels['corral.pool']}`)

  it('runs a bash call of a session in a container, sweeps leftovers at start-up and removes everything of the session when it is archived', async () => {
    model = await bashOnce()
    const first = openEngine(dataDir, model)
    engines.push(first)
    expect(first.hands).toBeDefined()
    const { sessionId, events } = await runBashSession(first, { type: 'cloud' })
    const r = bashResult(events)
    expect(r).toEqual({ text: expect.stringMatching(/^hello from 42\n1000\n\/workspace/), isError: false })
    expect(await scoped()).toContain(sessionId)

    // Closing disposes the hands: the session's container and the warm pool go.
    await first.close()
    expect(await scoped()).toEqual([])

    // What a crashed process leaves: the live session's container, and one of a session this
    // data directory no longer has (deleted while the process was down).
    const crashed = new DockerSandboxProvider({ scope })
    for (const id of [sessionId, 'sesn_gone_elsewhere']) await crashed.create({ sessionId: id, environmentId: 'env_x', config: { corral: { pool_size: 0 } } }).provision()
    await crashed.dispose()
    expect((await scoped()).sort()).toEqual(['sesn_gone_elsewhere', sessionId].sort())

    const second = openEngine(dataDir, model)
    engines.push(second)
    await second.handsSettled()
    expect(await scoped()).toEqual([sessionId])
    await dockerApi.getVolume('corral-ws-sesn_gone_elsewhere').remove().catch(() => {})

    const client = new Anthropic({ baseURL: (await second.listen(0)).url, apiKey: 'test-token', maxRetries: 0 })
    await client.beta.sessions.archive(sessionId)
    await second.handsSettled()
    expect(await dockerLeftovers(dockerApi, sessionId)).toEqual([])
    expect(await dockerApi.listContainers({ all: true, filters: { label: [`corral.session=${sessionId}`] } })).toEqual([])
  }, 120_000)
})

const bwrap = bwrapReq()
describe.skipIf(!bwrap.ok)('engine default hands on bubblewrap', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-hands-bwrap-'))
  let engine: Engine | undefined
  let model: ScriptedModelServer
  afterAll(async () => {
    await engine?.close()
    await model?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  it("runs a bash call where the settings prefer bubblewrap, with the workspace under the data directory, and deletes it with the session", async () => {
    model = await bashOnce()
    engine = openEngine(dataDir, model, { sandboxBackend: 'bubblewrap' })
    const { sessionId, client, events } = await runBashSession(engine, { type: 'cloud' })
    expect(bashResult(events)).toEqual({ text: expect.stringMatching(/^hello from 42\n1000\n\/workspace/), isError: false })
    const workspace = join(dataDir, 'sandboxes', bubblewrapKey(sessionId), 'workspace')
    expect(existsSync(join(workspace, '.corral'))).toBe(true)
    await client.beta.sessions.delete(sessionId)
    await engine.handsSettled()
    expect(existsSync(join(dataDir, 'sandboxes', bubblewrapKey(sessionId)))).toBe(false)
  }, 60_000)

  it('runs the tools without network, and says why in the log, when the environment asks for network but the keychain cannot be read', async () => {
    const m = await ScriptedModelServer.start((req) => (toolResultsOf(req).length === 0 ? callTool('bash', { command: 'echo "proxy=[$HTTPS_PROXY]"; ls /run/corral-egress 2>&1 | head -1' }) : say('Done.')))
    const logs: string[] = []
    // What an OS keychain without a session bus answers: every call refused.
    const refusing: Keychain = {
      backend: 'keyring',
      set: async (account) => Promise.reject(keychainError('store', account, new Error('no session bus'))),
      get: async (account) => Promise.reject(keychainError('read', account, new Error('no session bus'))),
      delete: async (account) => Promise.reject(keychainError('delete', account, new Error('no session bus'))),
    }
    const dir = mkdtempSync(join(tmpdir(), 'corral-hands-nokeychain-'))
    const e = Engine.open({ dataDir: dir, token: 'test-token', keychain: refusing, env: { PATH: process.env.PATH, ANTHROPIC_BASE_URL: m.url, ANTHROPIC_API_KEY: 'k' }, harness: { backoffBaseMs: 5 }, log: (l) => logs.push(l) })
    try {
      const { events } = await runBashSession(e, { type: 'cloud', networking: { type: 'unrestricted' }, corral: { backend: 'bubblewrap' } })
      expect(bashResult(events)).toEqual({ text: expect.stringMatching(/^proxy=\[\]\nls: cannot access/), isError: false })
      expect(logs.join('\n')).toMatch(/gets no network: the keychain could not read egress-ca-private-key/)
    } finally {
      await e.close()
      await m.close()
      rmSync(dir, { recursive: true, force: true })
    }
  }, 30_000)

  it('answers sandbox tools with an error naming what is missing when the default hands are turned off', async () => {
    const m = await bashOnce()
    const off = Engine.open({ dataDir: mkdtempSync(join(tmpdir(), 'corral-hands-off-')), token: 'test-token', env: { ANTHROPIC_BASE_URL: m.url, ANTHROPIC_API_KEY: 'k' }, defaultHands: false, harness: { backoffBaseMs: 5 }, log: () => {} })
    try {
      expect(off.hands).toBeUndefined()
      const { events } = await runBashSession(off, { type: 'cloud' })
      expect(bashResult(events)).toEqual({ text: expect.stringContaining('no sandbox backend is configured'), isError: true })
    } finally {
      await off.close()
      await m.close()
    }
  }, 30_000)
})
