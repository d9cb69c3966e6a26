import { afterEach, describe, expect, it } from 'vitest'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { Engine } from '../../../src/main/engine'
import { defaultImage } from '../../../src/main/hands'
import { ScriptedModelServer, say, type RecordedRequest, type ScriptStep } from '../../support/model-server'
import { dockerProbe, requirement } from '../../support/requirements'
import { waitForIdle } from '../engine/support'

const docker = requirement('docker', dockerProbe)
const cleanups: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

/** An engine with its own hands; `dockerHost` points its Docker client somewhere (a socket with nothing behind it). */
async function open(opts: { dockerHost?: string; modelUrl?: string } = {}) {
  const saved = process.env.DOCKER_HOST
  if (opts.dockerHost) process.env.DOCKER_HOST = opts.dockerHost
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-sandbox-status-'))
  let engine: Engine
  try {
    engine = Engine.open({ dataDir, token: 'tok', env: opts.modelUrl ? { ANTHROPIC_BASE_URL: opts.modelUrl, ANTHROPIC_API_KEY: 'sk-test-0000' } : {} })
  } finally {
    if (saved === undefined) delete process.env.DOCKER_HOST
    else process.env.DOCKER_HOST = saved
  }
  const server = await engine.listen(0)
  cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }), () => engine.close())
  const client = new Anthropic({ baseURL: server.url, apiKey: 'tok', maxRetries: 0 })
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(server.url + path, { method, headers: { authorization: 'Bearer tok', 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) })
    return { status: res.status, body: (await res.json()) as Record<string, any> }
  }
  return { engine, client, call }
}

const NO_DOCKER = 'unix:///nonexistent/corral-test-docker.sock'

describe('sandbox availability (GET /v1/corral/sandbox)', () => {
  it('says Docker is down with the reason and the fix for this platform (no repository script) when nothing answers at DOCKER_HOST', async () => {
    const { call } = await open({ dockerHost: NO_DOCKER })
    const r = await call('GET', '/v1/corral/sandbox')
    expect(r.status).toBe(200)
    expect(r.body.docker).toMatchObject({ ok: false, image_present: null, image: defaultImage() })
    expect(r.body.docker.reason).toContain('/nonexistent/corral-test-docker.sock')
    if (process.platform === 'linux') expect(r.body.fix).toContain('apt-get install docker.io')
    expect(r.body.fix).not.toContain('scripts/')
    expect(r.body.backends.map((b: { backend: string }) => b.backend)).toEqual(expect.arrayContaining(['docker', 'bubblewrap']))
  })

  it.skipIf(!docker.ok)('says the image is missing, and the fix is to build it, when Docker answers without it', async () => {
    const saved = process.env.CORRAL_SANDBOX_IMAGE_REPO
    process.env.CORRAL_SANDBOX_IMAGE_REPO = 'corral-test-absent'
    cleanups.push(() => {
      if (saved === undefined) delete process.env.CORRAL_SANDBOX_IMAGE_REPO
      else process.env.CORRAL_SANDBOX_IMAGE_REPO = saved
    })
    const { call } = await open()
    const r = await call('GET', '/v1/corral/sandbox')
    expect(r.body.docker).toMatchObject({ ok: false, image_present: false })
    expect(r.body.docker.image).toMatch(/^corral-test-absent:[0-9a-f]{12}$/)
    expect(r.body.fix).toContain('Build the image')
    expect(r.body.image_build).toMatchObject({ state: 'idle' })
  })
})

describe.skipIf(!docker.ok)('an environment’s image is checked on save', () => {
  it('refuses an image the local Docker engine does not have with a 400 naming config.corral.image, and creates nothing', async () => {
    const { client } = await open()
    const err = await client.beta.environments
      .create({ name: 'bad image', config: { type: 'cloud', corral: { image: 'corral-test-no-such-image:1' } } as unknown as Anthropic.Beta.BetaCloudConfigParams })
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(Anthropic.BadRequestError)
    expect((err as Error).message).toContain('config.corral.image')
    expect((err as Error).message).toContain('corral-test-no-such-image:1')
    expect((await client.beta.environments.list()).data).toEqual([])
  })

  it('refuses the same on update and keeps the environment as it was; accepts an image that is there', async () => {
    const { client } = await open()
    // an image of its own (empty, imported in a moment): other runs may rebuild the default one meanwhile
    const present = `corral-test-present:${process.pid}`
    execFileSync('sh', ['-c', `tar -cf - -T /dev/null | docker import - ${present}`], { stdio: 'ignore' })
    cleanups.push(() => void execFileSync('docker', ['image', 'rm', present], { stdio: 'ignore' }))
    const env = await client.beta.environments.create({ name: 'ok', config: { type: 'cloud', corral: { image: present } } as unknown as Anthropic.Beta.BetaCloudConfigParams })
    const err = await client.beta.environments
      .update(env.id, { config: { type: 'cloud', corral: { image: 'corral-test-no-such-image:2' } } as unknown as Anthropic.Beta.BetaCloudConfigParams })
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(Anthropic.BadRequestError)
    expect((err as Error).message).toContain('config.corral.image')
    const again = await client.beta.environments.retrieve(env.id)
    expect((again.config as unknown as { corral: { image: string } }).corral.image).toBe(present)
  })

  it('refuses an image reference that is not one with a 400 naming the field', async () => {
    const { client } = await open()
    const err = await client.beta.environments.create({ name: 'x', config: { type: 'cloud', corral: { image: 'Not An Image' } } as unknown as Anthropic.Beta.BetaCloudConfigParams }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(Anthropic.BadRequestError)
    expect((err as Error).message).toContain('config.corral.image')
  })
})

describe('a call that cannot get a sandbox is not put to the user for approval', () => {
  it('fails an always_ask bash call at once with the reason when no backend can serve the session, and the turn ends without requires_action', async () => {
    // The model calls bash with the field names of the offered schema, then answers.
    const responder = (req: RecordedRequest): ScriptStep => {
      const hasResult = req.body.messages.some((m) => Array.isArray(m.content) && m.content.some((b) => b.type === 'tool_result'))
      if (hasResult) return say('no sandbox here')
      const bash = req.body.tools?.find((t) => t.name === 'bash') as { input_schema?: { properties?: Record<string, unknown> } } | undefined
      const field = Object.keys(bash?.input_schema?.properties ?? { command: 1 })[0]
      return { kind: 'message', blocks: [{ type: 'tool_use', name: 'bash', input: { [field]: 'echo hi' } }], stopReason: 'tool_use' }
    }
    const model = await ScriptedModelServer.start(responder)
    cleanups.push(() => model.close())
    const { engine, client } = await open({ dockerHost: NO_DOCKER, modelUrl: model.url })
    const agent = await client.beta.agents.create({
      name: 'asks',
      model: 'claude-sonnet-4-6',
      tools: [{ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_ask' } } }],
    })
    // Docker only: with nothing at DOCKER_HOST no backend can serve this environment.
    const env = await client.beta.environments.create({ name: 'docker only', config: { type: 'cloud', corral: { backend: 'docker' } } as unknown as Anthropic.Beta.BetaCloudConfigParams })
    const session = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id })
    await client.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'run it' }] }] })
    const events = (await waitForIdle(engine, session.id)) as unknown as Record<string, any>[]
    const use = events.find((e) => e.type === 'agent.tool_use')!
    expect(use).toMatchObject({ name: 'bash', evaluated_permission: 'ask' })
    const result = events.find((e) => e.type === 'agent.tool_result')!
    expect(result).toMatchObject({ tool_use_id: use.id, is_error: true })
    expect(result.content[0].text).toContain('no sandbox can run it here')
    expect(result.content[0].text).toContain('docker')
    expect(events.some((e) => e.type === 'session.status_idle' && e.stop_reason?.type === 'requires_action')).toBe(false)
    expect(events.some((e) => e.type === 'user.tool_confirmation')).toBe(false)
  })
})
