import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import Docker from 'dockerode'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Engine } from '../../../src/main/engine'
import { PACKAGES_LABEL } from '../../../src/main/hands/docker/package-image'
import { keychainAccount } from '../../../src/main/vault/keychain'
import { KeyringKeychain } from '../../../src/main/vault/keyring-keychain'
import { callTool, say, ScriptedModelServer, toolResultsOf } from '../../support/model-server'
import { keychainProbe, requirement } from '../../support/requirements'
import { MIRROR_OUTPUT, packageMirror, type PackageMirror } from '../hands/package-mirror'
import { dockerReq, removeScopeContainers } from '../hands/support'
import { fakeDialer, fakeResolver } from '../vault/egress-helpers'
import { bashResult, runBashSession, waitForIdle } from './support'

/*
 * Packages end to end: an environment created through the official SDK lists npm and pip
 * packages (from a local mirror); the engine's own hands and vault install them at the session's
 * first tool call, and the model's bash call uses them, while the session itself (networking
 * none) has no way out.
 */

const docker = dockerReq()
const keychainReq = requirement('keychain', keychainProbe)

describe.skipIf(!docker.ok || !keychainReq.ok)('engine: environment packages through the default hands and the vault', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-engine-packages-'))
  const keychain = new KeyringKeychain({ service: `corral-test-packages-${process.pid}-${Date.now()}` })
  const api = new Docker()
  const logs: string[] = []
  let mirror: PackageMirror
  let model: ScriptedModelServer
  let engine: Engine
  let imagesBefore: Set<string>
  const envImages = async () => new Set((await api.listImages({ filters: { label: [PACKAGES_LABEL] } })).map((i) => i.Id))

  beforeAll(async () => {
    imagesBefore = await envImages()
    mirror = await packageMirror({ npm: 'npm.mirror.test', pip: 'pypi.mirror.test', apt: 'apt.mirror.test' })
    model = await ScriptedModelServer.start((req) =>
      toolResultsOf(req).length === 0 ? callTool('bash', { command: 'corral-greet; python3 -c "import corral_pyhello; print(corral_pyhello.hello())"; echo proxies: $(env | grep -ci _proxy)' }) : say('Done.'),
    )
    engine = await Engine.openWithKeychain({
      dataDir,
      keychain,
      token: 'test-token',
      env: { PATH: process.env.PATH, ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k' },
      egress: {
        egressRuntimeDir: join(dataDir, 'egress'),
        resolver: fakeResolver({ 'npm.mirror.test': ['203.0.113.60'], 'pypi.mirror.test': ['203.0.113.60'] }),
        dialer: fakeDialer({ '203.0.113.60:80': mirror.port }),
      },
      harness: { backoffBaseMs: 5, backoffMaxMs: 40 },
      log: (line) => logs.push(line),
    })
  })

  afterAll(async () => {
    await engine?.close()
    await model?.close()
    await mirror?.close()
    await removeScopeContainers(api, dataDir)
    for (const id of await envImages()) if (!imagesBefore.has(id)) await api.getImage(id).remove({ force: true }).catch(() => {})
    await keychain.delete(keychainAccount.egressCaKey).catch(() => false)
    rmSync(dataDir, { recursive: true, force: true })
  })

  it("installs the environment's packages at the session's first tool call; the model's command uses them; the session stays offline", async () => {
    const { events } = await runBashSession(engine, {
      type: 'cloud',
      packages: { type: 'packages', npm: ['corral-greet'], pip: ['corral-pyhello'] },
      corral: { backend: 'docker', pool_size: 0, package_sources: { npm: 'http://npm.mirror.test/npm/', pip: 'http://pypi.mirror.test/simple/' } },
    })
    const r = bashResult(events)
    expect(r.isError, r.text).toBe(false)
    expect(r.text).toContain(MIRROR_OUTPUT.npm)
    expect(r.text).toContain(MIRROR_OUTPUT.pip)
    expect(r.text).toContain('proxies: 0')
    expect(mirror.requests).toContain('GET /npm/corral-greet')
    expect(logs.some((l) => /packages for env_\w+ .*: built in/.test(l)), logs.join('\n')).toBe(true)
  }, 300_000)

  it('shows where an environment\'s packages stand and installs them ahead of a session on request (Corral addition)', async () => {
    const { url } = await engine.listen(0)
    const call = async (method: string, path: string) => {
      const r = await fetch(`${url}${path}`, { method, headers: { authorization: 'Bearer test-token' } })
      return { status: r.status, body: (await r.json()) as Record<string, unknown> & { state: string; progress: string[]; error?: string } }
    }
    const client = new Anthropic({ baseURL: url, apiKey: 'test-token', maxRetries: 0 })
    const corral = { backend: 'docker', pool_size: 0, package_sources: { pip: 'http://pypi.mirror.test/simple/' } }
    const env = await client.beta.environments.create({ name: 'prepared', config: { type: 'cloud', packages: { type: 'packages', pip: ['corral-pyhello'] }, corral } as unknown as Anthropic.Beta.BetaCloudConfigParams })
    expect((await call('GET', `/v1/corral/environments/${env.id}/packages`)).body).toMatchObject({ environment_id: env.id, state: 'missing', backend: 'docker', summary: 'pip: corral-pyhello' })

    const started = await call('POST', `/v1/corral/environments/${env.id}/packages/prepare`)
    expect(started.status).toBe(202)
    expect(['installing', 'ready']).toContain(started.body.state)
    let status = started.body
    for (const deadline = Date.now() + 120_000; status.state === 'installing' && Date.now() < deadline; ) {
      await new Promise((r) => setTimeout(r, 100))
      status = (await call('GET', `/v1/corral/environments/${env.id}/packages`)).body
    }
    expect(status.state, JSON.stringify(status)).toBe('ready')
    expect(status.progress).toEqual(expect.arrayContaining(['pip: installing 1 package(s)', 'done']))
    expect(status.finished_at).toEqual(expect.any(String))

    // The session's first tool call finds the image: nothing is fetched again.
    const requests = mirror.requests.length
    const agent = await client.beta.agents.create({ name: 'p', model: 'claude-sonnet-5-5', tools: [{ type: 'agent_toolset_20260401' }] })
    const session = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id })
    await client.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'run it' }] }] })
    const r = bashResult(await waitForIdle(engine, session.id))
    expect(r.text).toContain(MIRROR_OUTPUT.pip)
    expect(mirror.requests.length).toBe(requests)

    // A failed install is in the status, with the package manager's words; the next prepare tries again.
    const bad = await client.beta.environments.create({ name: 'bad', config: { type: 'cloud', packages: { type: 'packages', pip: ['corral-no-such-package'] }, corral } as unknown as Anthropic.Beta.BetaCloudConfigParams })
    status = (await call('POST', `/v1/corral/environments/${bad.id}/packages/prepare`)).body
    for (const deadline = Date.now() + 120_000; status.state === 'installing' && Date.now() < deadline; ) {
      await new Promise((r) => setTimeout(r, 100))
      status = (await call('GET', `/v1/corral/environments/${bad.id}/packages`)).body
    }
    expect(status.state).toBe('failed')
    expect(status.error).toContain('packages.pip: pip install failed')

    // No packages, a self-hosted environment, an unknown id.
    const plain = await client.beta.environments.create({ name: 'plain', config: { type: 'cloud' } })
    expect((await call('GET', `/v1/corral/environments/${plain.id}/packages`)).body.state).toBe('none')
    const worker = await client.beta.environments.create({ name: 'worker', config: { type: 'self_hosted' } as unknown as Anthropic.Beta.BetaCloudConfigParams })
    expect((await call('POST', `/v1/corral/environments/${worker.id}/packages/prepare`)).body.state).toBe('none')
    const missing = await call('GET', '/v1/corral/environments/env_nope/packages')
    expect(missing.status).toBe(404)
    expect(missing.body).toMatchObject({ type: 'error', error: { type: 'not_found_error' } })
  }, 300_000)

  it('refuses a package spec that would be read as an option, naming the field, and creates nothing', async () => {
    const client = new Anthropic({ baseURL: (await engine.listen(0)).url, apiKey: 'test-token', maxRetries: 0 })
    const before = (await client.beta.environments.list()).data.length
    const err = await client.beta.environments
      .create({ name: 'bad', config: { type: 'cloud', packages: { type: 'packages', pip: ['--index-url=http://elsewhere/'] } } as unknown as Anthropic.Beta.BetaCloudConfigParams })
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(Anthropic.BadRequestError)
    expect((err as Error).message).toContain('config.packages.pip')
    expect((await client.beta.environments.list()).data.length).toBe(before)
  })
})
