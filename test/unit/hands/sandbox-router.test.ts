import { describe, expect, it } from 'vitest'
import { inputSize, SandboxToolRouter } from '../../../src/main/hands/sandbox-router'
import type { EnvironmentPackages, EnvironmentPackagesParams } from '../../../src/main/hands/sandbox'
import { FakeProvider } from '../../support/fake-sandbox'

const env = (config: Record<string, unknown> = { type: 'cloud' }) => ({ environmentId: 'env_1', config, resources: [{ type: 'file', file_id: 'f', content: 'x' }] })

describe('SandboxToolRouter', () => {
  it('creates no sandbox until the first toolset call, then reuses it for the session', async () => {
    const docker = new FakeProvider('docker', { ok: true })
    const resolved: string[] = []
    const router = new SandboxToolRouter({ providers: [docker], resolveEnvironment: (id) => (resolved.push(id), env()) })
    expect(docker.created).toHaveLength(0)
    await router.execute({ sessionId: 'sesn_1', toolUseId: 'toolu_1', name: 'bash', input: { command: 'ls' } })
    await router.execute({ sessionId: 'sesn_1', toolUseId: 'toolu_2', name: 'read', input: { file_path: 'x' } })
    expect(docker.created).toHaveLength(1)
    expect(resolved).toEqual(['sesn_1'])
    expect(docker.created[0].params).toMatchObject({ sessionId: 'sesn_1', environmentId: 'env_1', resources: [{ type: 'file' }] })
    expect(docker.created[0].calls.map((c) => c.toolUseId)).toEqual(['toolu_1', 'toolu_2'])
  })

  it('answers an unknown tool with an error naming it, without making a sandbox', async () => {
    const docker = new FakeProvider('docker', { ok: true })
    const router = new SandboxToolRouter({ providers: [docker], resolveEnvironment: () => env() })
    const r = await router.execute({ sessionId: 'sesn_1', toolUseId: 'toolu_1', name: 'computer', input: {} })
    expect(r).toMatchObject({ isError: true, content: expect.stringContaining('unknown tool "computer"') })
    expect(docker.created).toHaveLength(0)
  })

  it('answers a call that breaks its schema with an error naming the field and the rule, without making a sandbox', async () => {
    const docker = new FakeProvider('docker', { ok: true })
    const router = new SandboxToolRouter({ providers: [docker], resolveEnvironment: () => env() })
    const r = await router.execute({ sessionId: 'sesn_1', toolUseId: 'toolu_1', name: 'read', input: { file_path: 'a.txt', view_range: [1, 5] } })
    expect(r).toEqual({ isError: true, content: 'read: unknown field "view_range" (read takes file_path, offset, limit)' })
    const w = await router.execute({ sessionId: 'sesn_1', toolUseId: 'toolu_2', name: 'write', input: { content: 'x' } })
    expect(w).toEqual({ isError: true, content: 'write: file_path is required (a non-empty string)' })
    expect(docker.created).toHaveLength(0)
  })

  it('sends the sandbox exactly the validated fields of a call', async () => {
    const docker = new FakeProvider('docker', { ok: true })
    const router = new SandboxToolRouter({ providers: [docker], resolveEnvironment: () => env() })
    await router.execute({ sessionId: 'sesn_1', toolUseId: 'toolu_1', name: 'read', input: { file_path: 'a.txt', offset: 2, limit: 10 } })
    expect(docker.created[0].calls[0]).toMatchObject({ name: 'read', input: { file_path: 'a.txt', offset: 2, limit: 10 } })
  })

  it('answers a web_fetch in a session that may reach nothing with an error naming the networking policy, without making a sandbox', async () => {
    const docker = new FakeProvider('docker', { ok: true })
    const router = new SandboxToolRouter({ providers: [docker], resolveEnvironment: () => env() })
    const r = await router.execute({ sessionId: 'sesn_1', toolUseId: 'toolu_1', name: 'web_fetch', input: { url: 'https://example.com/' } })
    expect(r).toMatchObject({ isError: true, content: expect.stringContaining("refused by the environment's networking policy") })
    expect(docker.created).toHaveLength(0)
  })

  it('falls back to the next available backend and names why the first is not used when none is', async () => {
    const docker = new FakeProvider('docker', { ok: false, reason: 'the Docker engine is not answering' })
    const bwrap = new FakeProvider('bubblewrap', { ok: true })
    const router = new SandboxToolRouter({ providers: [docker, bwrap], resolveEnvironment: () => env(), availabilityTtlMs: 0 })
    expect((await router.execute({ sessionId: 'sesn_a', toolUseId: 't', name: 'bash', input: { command: 'ls' } })).content).toBe('bubblewrap:bash')
    bwrap.availability = { ok: false, reason: 'bwrap is not installed' }
    const r = await router.execute({ sessionId: 'sesn_b', toolUseId: 't', name: 'bash', input: { command: 'ls' } })
    expect(r.isError).toBe(true)
    expect(r.content).toContain('docker: the Docker engine is not answering')
    expect(r.content).toContain('bubblewrap: bwrap is not installed')
  })

  it('uses the backend the environment asks for and tries again after it was down', async () => {
    const docker = new FakeProvider('docker', { ok: false, reason: 'down' })
    const bwrap = new FakeProvider('bubblewrap', { ok: true })
    const router = new SandboxToolRouter({ providers: [docker, bwrap], resolveEnvironment: () => env({ type: 'cloud', corral: { backend: 'docker' } }), availabilityTtlMs: 0 })
    expect((await router.execute({ sessionId: 'sesn_1', toolUseId: 't1', name: 'bash', input: { command: 'ls' } })).isError).toBe(true)
    docker.availability = { ok: true }
    expect((await router.execute({ sessionId: 'sesn_1', toolUseId: 't2', name: 'bash', input: { command: 'ls' } })).content).toBe('docker:bash')
    expect(bwrap.created).toHaveLength(0)
  })

  it('refuses an input over the size limit before it reaches a sandbox', async () => {
    const docker = new FakeProvider('docker', { ok: true })
    const router = new SandboxToolRouter({ providers: [docker], resolveEnvironment: () => env(), maxInputBytes: 1000 })
    const r = await router.execute({ sessionId: 'sesn_1', toolUseId: 't', name: 'write', input: { file_path: 'a', content: 'x'.repeat(5000) } })
    expect(r).toMatchObject({ isError: true, content: expect.stringContaining('over the 1000-byte limit') })
    expect(docker.created).toHaveLength(0)
  })

  it('reports an invalid config.corral as an error naming the field', async () => {
    const router = new SandboxToolRouter({ providers: [new FakeProvider('docker', { ok: true })], resolveEnvironment: () => env({ type: 'cloud', corral: { memory_mb: -1 } }) })
    const r = await router.execute({ sessionId: 'sesn_1', toolUseId: 't', name: 'bash', input: { command: 'ls' } })
    expect(r).toMatchObject({ isError: true, content: expect.stringContaining('config.corral.memory_mb') })
  })

  it('recovers a finished call through the sandbox and reports unknown for other tools', async () => {
    const router = new SandboxToolRouter({ providers: [new FakeProvider('docker', { ok: true })], resolveEnvironment: () => env() })
    expect(await router.recover({ sessionId: 's', toolUseId: 'toolu_done', name: 'bash', input: {} })).toEqual({ state: 'finished', outcome: { content: 'was done', isError: false, exitCode: undefined, durationMs: undefined } })
    expect(await router.recover({ sessionId: 's', toolUseId: 'toolu_other', name: 'bash', input: {} })).toEqual({ state: 'unknown' })
    expect(await router.recover({ sessionId: 's', toolUseId: 'toolu_done', name: 'my_custom_tool', input: {} })).toEqual({ state: 'unknown' })
  })

  it('disposes the session sandbox on release, and removes the workspace of a session never run here from every available backend', async () => {
    const docker = new FakeProvider('docker', { ok: true })
    const bwrap = new FakeProvider('bubblewrap', { ok: true })
    const down = new FakeProvider('worker', { ok: false, reason: 'gone' })
    const resolved: string[] = []
    const router = new SandboxToolRouter({ providers: [docker, bwrap, down], resolveEnvironment: (id) => (resolved.push(id), env()) })
    await router.execute({ sessionId: 'sesn_1', toolUseId: 't', name: 'bash', input: { command: 'ls' } })
    await router.release('sesn_1')
    expect(docker.created[0].disposed).toEqual({})
    await router.release('sesn_2', { removeWorkspace: true })
    // the session may be deleted already: its environment is not asked for
    expect(resolved).toEqual(['sesn_1'])
    // released by its id on each available backend, with no throwaway sandbox made for it
    expect(docker.released).toEqual([{ sessionId: 'sesn_2', removeWorkspace: true }])
    expect(bwrap.released).toEqual([{ sessionId: 'sesn_2', removeWorkspace: true }])
    expect([docker.created.length, bwrap.created.length]).toEqual([1, 0])
    expect(down.created).toHaveLength(0)
    expect(down.released).toHaveLength(0)
    await router.release('sesn_3')
    expect(docker.created).toHaveLength(1)
    expect(docker.released).toHaveLength(1)
    await router.execute({ sessionId: 'sesn_1', toolUseId: 't2', name: 'bash', input: { command: 'ls' } })
    expect(docker.created).toHaveLength(2)
  })
})

describe('SandboxToolRouter lifecycle', () => {
  it('sweeps every available backend at start-up and disposes sandboxes and providers at shutdown', async () => {
    const docker = new FakeProvider('docker', { ok: true })
    const bwrap = new FakeProvider('bubblewrap', { ok: false, reason: 'no bwrap' })
    const router = new SandboxToolRouter({ providers: [docker, bwrap], resolveEnvironment: () => env() })
    expect(await router.sweep(new Set(['sesn_keep']))).toBe(2)
    expect(docker.swept).toEqual(new Set(['sesn_keep']))
    expect(bwrap.swept).toBeUndefined()
    await router.execute({ sessionId: 'sesn_1', toolUseId: 't', name: 'bash', input: { command: 'ls' } })
    await router.dispose()
    expect(docker.created[0].disposed).toEqual({})
    expect([docker.disposed, bwrap.disposed]).toEqual([true, true])
  })
})

describe('inputSize', () => {
  it('measures a 100 MB string by its length and counts UTF-8 bytes of small ones', () => {
    expect(inputSize({ content: 'x'.repeat(100 * 1024 * 1024) }, 8 * 1024 * 1024)).toBeGreaterThan(100 * 1024 * 1024)
    expect(inputSize({ a: 'é' }, 1000)).toBe(1 + 4 + 2 + 2)
  })
})

describe('SandboxToolRouter: environment packages', () => {
  /** A backend whose installs the test finishes by hand. */
  class PackagingProvider extends FakeProvider {
    cached = false
    installs: { resolve: () => void; reject: (e: Error) => void }[] = []
    /** What the package work was asked with: environments, never a session. */
    asked: EnvironmentPackagesParams[] = []
    readonly packages: EnvironmentPackages = {
      ready: async (params) => {
        this.asked.push(params)
        return this.cached
      },
      prepare: (params) => {
        this.asked.push(params)
        params.packageProgress?.({ kind: 'start', summary: 'npm: left-pad' })
        params.packageProgress?.({ kind: 'line', line: 'npm: installing 1 package(s)' })
        return new Promise<void>((resolve, reject) => this.installs.push({ resolve, reject })).then(
          () => {
            this.cached = true
            params.packageProgress?.({ kind: 'ready' })
          },
          (e: Error) => {
            params.packageProgress?.({ kind: 'failed', message: e.message })
            throw e
          },
        )
      },
    }
  }
  const config = (npm: string[]) => ({ type: 'cloud', packages: { npm } })

  it('goes missing → installing → ready, and shows a failure until the list changes', async () => {
    const docker = new PackagingProvider('docker', { ok: true })
    let cfg: Record<string, unknown> = config(['left-pad'])
    const router = new SandboxToolRouter({ providers: [docker], resolveEnvironment: () => env(cfg), resolveEnvironmentById: (id) => ({ environmentId: id, config: cfg }) })
    expect(await router.packageStatus('env_1')).toMatchObject({ state: 'missing', backend: 'docker', summary: 'npm: left-pad' })
    const started = await router.preparePackages('env_1')
    expect(started).toMatchObject({ state: 'installing', progress: ['npm: installing 1 package(s)'], started_at: expect.any(String) })
    docker.installs[0]!.resolve()
    await new Promise((r) => setTimeout(r, 0))
    expect(await router.packageStatus('env_1')).toMatchObject({ state: 'ready', finished_at: expect.any(String) })

    docker.cached = false
    await router.preparePackages('env_1')
    docker.installs[1]!.reject(new Error('packages.npm: npm install failed'))
    await new Promise((r) => setTimeout(r, 0))
    expect(await router.packageStatus('env_1')).toMatchObject({ state: 'failed', error: 'packages.npm: npm install failed' })
    cfg = config(['left-pad', 'right-pad'])
    expect(await router.packageStatus('env_1')).toMatchObject({ state: 'missing', summary: 'npm: left-pad right-pad' })
    // environment-wide work is asked about an environment, not a made-up session
    expect(docker.asked.length).toBeGreaterThan(0)
    expect(docker.asked.every((p) => p.environmentId === 'env_1' && !('sessionId' in p))).toBe(true)
    expect(docker.created).toHaveLength(0)
  })

  it('says none for an environment without packages or a self-hosted one, without asking a backend', async () => {
    const down = new PackagingProvider('docker', { ok: false, reason: 'no engine' })
    let cfg: Record<string, unknown> = { type: 'cloud' }
    const router = new SandboxToolRouter({ providers: [down], resolveEnvironment: () => env(cfg), resolveEnvironmentById: (id) => ({ environmentId: id, config: cfg }) })
    expect((await router.packageStatus('env_1')).state).toBe('none')
    cfg = { type: 'self_hosted' }
    expect((await router.preparePackages('env_1')).state).toBe('none')
    cfg = config(['x'])
    await expect(router.packageStatus('env_1')).rejects.toThrow(/no sandbox backend is available \(docker: no engine\)/)
  })
})
