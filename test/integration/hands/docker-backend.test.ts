import { execFileSync } from 'node:child_process'
import { createServer, type Server, connect } from 'node:net'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Docker from 'dockerode'
import { afterAll, describe, expect, it } from 'vitest'
import { containerName } from '../../../src/main/hands/docker/containers'
import { DockerSandboxProvider } from '../../../src/main/hands/docker/provider'
import { SandboxToolRouter } from '../../../src/main/hands/sandbox-router'
import { sandboxSettings } from '../../../src/main/hands/settings'
import { requirement } from '../../support/requirements'
import { dockerLeftovers, dockerReq, liveContainer, runscProbe } from './support'

const docker = dockerReq()
const client = new Docker()
let seq = 0
const sid = (p: string) => `sesn_${p}${Date.now().toString(36)}${(seq++).toString(36)}`
const config = (extra: Record<string, unknown> = {}) => ({ type: 'cloud', corral: { pool_size: 0, memory_mb: 256, pids: 128, cpus: 1, ...extra } })

describe.skipIf(!docker.ok)('DockerSandboxProvider', () => {
  const provider = new DockerSandboxProvider({ docker: client })
  afterAll(() => provider.dispose())

  it('runs the container locked down: no network, no capabilities, read-only root, limits, init, session label', async () => {
    const sessionId = sid('lock')
    const sandbox = provider.create({ sessionId, environmentId: 'env_lock', config: config() })
    try {
      const r = await sandbox.execute({ toolUseId: 'toolu_1', name: 'bash', input: { command: 'grep CapEff /proc/self/status; touch /etc/x 2>&1; touch /workspace/ok && echo ws-ok; cat /proc/1/comm' } })
      expect(r.content).toContain('CapEff:\t0000000000000000')
      expect(r.content).toContain('Read-only file system')
      expect(r.content).toContain('ws-ok')
      expect(r.content).toContain('docker-init')
      const info = await liveContainer(sandbox).inspect()
      expect(info.HostConfig).toMatchObject({ NetworkMode: 'none', CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges'], ReadonlyRootfs: true, Init: true, PidsLimit: 128, Memory: 256 * 2 ** 20, NanoCpus: 1e9 })
      expect(info.Config.User).toBe('0:0')
      expect(info.HostConfig.CapAdd).toEqual(['SETUID', 'SETGID'])
      expect(info.Config.Labels['corral.session']).toBe(sessionId)
    } finally {
      await sandbox.dispose({ removeWorkspace: true })
    }
  })

  // Red-team issue #15, finding 9: the agent ran as the runner's uid and could write lines onto the
  // runner's output through /proc/1/fd/1 (init) or /proc/<runner>/fd/1, or reach into its memory.
  it("runs the agent as uid 1000 with no capability, and leaves it no way onto the runner's output or into its memory", async () => {
    const sandbox = provider.create({ sessionId: sid('trust'), environmentId: 'env_trust', config: config() })
    try {
      const probe = [
        'id -u; grep CapEff /proc/self/status',
        'runner=$(pgrep -f /opt/corral/runner.js | head -1)',
        'ls /proc/$runner/fd >/dev/null 2>&1 && echo runner-fd-open || echo runner-fd-denied',
        'head -c1 /proc/$runner/mem >/dev/null 2>&1 && echo runner-mem-open || echo runner-mem-denied',
        `python3 -c "import os; os.open('/proc/1/fd/1', os.O_WRONLY)" 2>/dev/null && echo init-fd-open || echo init-fd-denied`,
        `R=$runner python3 -c "import os; os.open('/proc/'+os.environ['R']+'/fd/1', os.O_WRONLY)" 2>/dev/null && echo runner-out-open || echo runner-out-denied`,
      ].join('\n')
      const r = await sandbox.execute({ toolUseId: 'toolu_trust', name: 'bash', input: { command: probe } })
      expect(r.isError).toBe(false)
      expect(r.content.split('\n')).toEqual(['1000', 'CapEff:\t0000000000000000', 'runner-fd-denied', 'runner-mem-denied', 'init-fd-denied', 'runner-out-denied'])
      // The runner still works, as uid 1000: what it writes belongs to the sandbox user.
      await sandbox.execute({ toolUseId: 'toolu_trust_w', name: 'write', input: { file_path: '/workspace/w.txt', content: 'x' } })
      const owner = await sandbox.execute({ toolUseId: 'toolu_trust_o', name: 'bash', input: { command: 'stat -c %u:%g /workspace/w.txt' } })
      expect(owner.content).toBe('1000:1000')
    } finally {
      await sandbox.dispose({ removeWorkspace: true })
    }
  })

  it('says the call hit the memory limit (OOM) and keeps the sandbox usable', async () => {
    const sandbox = provider.create({ sessionId: sid('oom'), environmentId: 'env_oom', config: config({ memory_mb: 128 }) })
    try {
      const started = Date.now()
      const r = await sandbox.execute({ toolUseId: 'toolu_m', name: 'bash', input: { command: 'python3 -c "b = []\nwhile True: b.append(bytearray(8 << 20))"', timeout: 30_000 } })
      expect(Date.now() - started).toBeLessThan(15_000)
      expect(r.isError).toBe(true)
      expect(r.content).toMatch(/out of memory|OOM/)
      expect(r.content).toContain('137')
      expect((await sandbox.execute({ toolUseId: 'toolu_n', name: 'bash', input: { command: 'echo alive' } })).content).toBe('alive')
    } finally {
      await sandbox.dispose({ removeWorkspace: true })
    }
  })

  it('contains a fork bomb within the pids limit: the timeout kills it, restart kills one left in the background', async () => {
    const sandbox = provider.create({ sessionId: sid('fork'), environmentId: 'env_fork', config: config({ pids: 64 }) })
    const count = async (id: string) => Number((await sandbox.execute({ toolUseId: id, name: 'bash', input: { command: 'ps -e --no-headers | wc -l', timeout: 20_000 } })).content.trim().split('\n').pop())
    try {
      const started = Date.now()
      const r = await sandbox.execute({ toolUseId: 'toolu_f', name: 'bash', input: { command: 'bomb() { bomb | bomb & }; bomb; sleep 5', timeout: 1500 } })
      expect(Date.now() - started).toBeLessThan(5000)
      expect(r.isError).toBe(true)
      expect(r.content).toContain('timed out after 1500 ms')
      expect(await count('toolu_g')).toBeLessThan(10)
      // A bomb left running in the background: the call returns, restart clears the sandbox.
      await sandbox.execute({ toolUseId: 'toolu_h', name: 'bash', input: { command: 'bomb() { bomb | bomb & }; bomb' } })
      expect((await sandbox.execute({ toolUseId: 'toolu_i', name: 'bash', input: { restart: true } })).isError).toBe(false)
      expect(await count('toolu_j')).toBeLessThan(10)
    } finally {
      await sandbox.dispose({ removeWorkspace: true })
    }
  })

  // How fast a pool hit is belongs to `npm run bench -- hands` (warm_pool_hit_provision); here:
  // that the session gets the container the pool had started, not a new one.
  it('hands the warm container the pool started to a new session and refills the pool', async () => {
    const cfg = config({ pool_size: 1 })
    const environmentId = `env_pool${Date.now().toString(36)}`
    const ofEnvironment = async () => (await client.listContainers({ all: true, filters: { label: [`corral.environment=${environmentId}`] } })).map((c) => c.Id)
    expect(await provider.warm({ environmentId, config: cfg })).toBe(1)
    const pooled = await ofEnvironment()
    expect(pooled).toHaveLength(1)
    const sessionId = sid('pool')
    const sandbox = provider.create({ sessionId, environmentId, config: cfg })
    try {
      await sandbox.provision()
      expect(liveContainer(sandbox).id).toBe(pooled[0])
      expect((await sandbox.execute({ toolUseId: 'toolu_p', name: 'write', input: { file_path: 'kept', content: 'pooled' } })).isError).toBe(false)
      // A replacement container for this session mounts the pooled workspace. (docker kill returns
      // once the signal is sent: waited for until the container has exited, so the next call does
      // not race into the dying one, which is reported as a call whose outcome is lost.)
      const dying = liveContainer(sandbox)
      await dying.kill()
      await dying.wait()
      expect((await sandbox.execute({ toolUseId: 'toolu_q', name: 'bash', input: { command: 'cat kept' } })).content).toBe('pooled')
      expect((await client.getContainer(containerName(sessionId)).inspect()).State.Running).toBe(true)
    } finally {
      await sandbox.dispose({ removeWorkspace: true })
    }
    expect(await dockerLeftovers(client, sessionId)).toEqual([])
  })

  it('runs a user-named image with the runner mounted from the host', async () => {
    const custom = `corral-test-custom:${Date.now().toString(36)}`
    const [repo, tag] = custom.split(':')
    await client.getImage(provider.imageFor(sandboxSettings({}))).tag({ repo, tag })
    const sandbox = provider.create({ sessionId: sid('img'), environmentId: 'env_img', config: config({ image: custom }) })
    try {
      expect((await sandbox.execute({ toolUseId: 'toolu_i', name: 'bash', input: { command: 'grep -c /opt/corral/runner.js /proc/mounts' } })).content).toBe('1')
      expect((await liveContainer(sandbox).inspect()).Config.Image).toBe(custom)
      const missing = provider.create({ sessionId: sid('nimg'), environmentId: 'env_img', config: config({ image: 'corral-no-such-image:1' }) })
      const r = await missing.execute({ toolUseId: 'toolu_j', name: 'bash', input: { command: 'true' } })
      expect(r).toMatchObject({ isError: true, content: expect.stringContaining('corral-no-such-image:1 is not there') })
      await missing.dispose({ removeWorkspace: true })
    } finally {
      await sandbox.dispose({ removeWorkspace: true })
      await client.getImage(custom).remove().catch(() => undefined)
    }
  })

  it('leaves no warm container behind when disposed while the pool is still filling', async () => {
    const scope = `fill-${Date.now().toString(36)}`
    const p = new DockerSandboxProvider({ docker: client, scope })
    const sandbox = p.create({ sessionId: sid('fill'), environmentId: 'env_fill', config: config({ pool_size: 2 }) })
    await sandbox.execute({ toolUseId: 'toolu_1', name: 'bash', input: { command: 'true' } }) // a cold provision starts the refill
    await sandbox.dispose({ removeWorkspace: true })
    await p.dispose()
    expect(await client.listContainers({ all: true, filters: { label: [`corral.managed=${scope}`] } })).toEqual([])
    expect((await client.listVolumes({ filters: { label: [`corral.managed=${scope}`] } })).Volumes ?? []).toEqual([])
  })

  it('stops a warm container by itself when its host exits without disposing, and a sweep removes it', async () => {
    const scope = `orphan-${Date.now().toString(36)}`
    const out = execFileSync(process.execPath, [join(process.cwd(), 'node_modules/tsx/dist/cli.mjs'), join(__dirname, 'fixtures/warm-and-exit.ts'), scope], { encoding: 'utf8', timeout: 60_000 })
    expect(out).toContain('warm 1')
    const list = () => client.listContainers({ all: true, filters: { label: [`corral.managed=${scope}`] } })
    for (let i = 0; i < 50 && (await list()).some((c) => c.State === 'running'); i++) await new Promise((r) => setTimeout(r, 100))
    expect((await list()).map((c) => c.State)).toEqual(['exited'])
    expect(await new DockerSandboxProvider({ docker: client, scope }).sweep(new Set())).toBe(1)
    expect(await list()).toEqual([])
    expect((await client.listVolumes({ filters: { label: [`corral.managed=${scope}`] } })).Volumes ?? []).toEqual([])
  })

  it('re-attaches to a running container after a host restart and recovers a finished call', async () => {
    const sessionId = sid('re')
    const first = new DockerSandboxProvider({ docker: client })
    const a = first.create({ sessionId, environmentId: 'env_re', config: config() })
    await a.execute({ toolUseId: 'toolu_done', name: 'bash', input: { command: 'echo finished-before-crash' } })
    const id = (await liveContainer(a).inspect()).Id
    // A new host process: new provider, new sandbox object, same session.
    const second = new DockerSandboxProvider({ docker: client })
    const b = second.create({ sessionId, environmentId: 'env_re', config: config() })
    try {
      expect(await b.recover!('toolu_done')).toMatchObject({ state: 'finished', outcome: { content: 'finished-before-crash' } })
      expect((await liveContainer(b).inspect()).Id).toBe(id)
      // A call the old host started and never saw finish: running, and asking again joins it instead of running it twice.
      const old = a.execute({ toolUseId: 'toolu_slow', name: 'bash', input: { command: 'sleep 0.6; echo ran >> count; wc -l < count' } })
      await new Promise((r) => setTimeout(r, 150))
      expect(await b.recover!('toolu_slow')).toEqual({ state: 'running' })
      const joined = await b.execute({ toolUseId: 'toolu_slow', name: 'bash', input: { command: 'sleep 0.6; echo ran >> count; wc -l < count' } })
      expect(joined).toMatchObject({ isError: false, content: '1' })
      expect((await old).content).toBe('1')
    } finally {
      await b.dispose({ removeWorkspace: true })
      await first.dispose()
      await second.dispose()
    }
  })

  it('sweeps containers of sessions it is not told to keep', async () => {
    const keep = sid('keep')
    const drop = sid('drop')
    // A scope of its own: a sweep must not touch the sandboxes of test files running alongside.
    const scope = `sweep-${Date.now().toString(36)}`
    const p1 = new DockerSandboxProvider({ docker: client, scope })
    const k = p1.create({ sessionId: keep, environmentId: 'env_s', config: config() })
    const d = p1.create({ sessionId: drop, environmentId: 'env_s', config: config() })
    await Promise.all([k.provision(), d.provision()])
    const p2 = new DockerSandboxProvider({ docker: client, scope })
    const otherScope = new DockerSandboxProvider({ docker: client, scope: `${scope}-other` })
    try {
      expect(await otherScope.sweep(new Set())).toBe(0)
      expect(await p2.sweep(new Set([keep]))).toBe(1)
      await expect(client.getContainer(containerName(drop)).inspect()).rejects.toMatchObject({ statusCode: 404 })
      expect((await client.getContainer(containerName(keep)).inspect()).State.Running).toBe(true)
    } finally {
      await k.dispose({ removeWorkspace: true })
      await d.dispose({ removeWorkspace: true })
    }
  })

  it('gives a clear error while the Docker engine does not answer and works again once it does', async () => {
    // A socket proxy in front of the real engine stands in for dockerd going down and up.
    const dir = mkdtempSync(join(tmpdir(), 'corral-dsock-'))
    const sock = join(dir, 'docker.sock')
    let server: Server | undefined
    const sockets = new Set<{ destroy: () => void }>()
    const up = () =>
      new Promise<void>((resolve) => {
        server = createServer((c) => {
          const upstream = connect('/var/run/docker.sock')
          sockets.add(c)
          sockets.add(upstream)
          c.pipe(upstream).pipe(c)
          c.on('error', () => upstream.destroy())
          upstream.on('error', () => c.destroy())
        })
        server.listen(sock, resolve)
      })
    const down = () =>
      new Promise<void>((resolve) => {
        if (!server) return resolve()
        server.close(() => resolve())
        for (const s of sockets) s.destroy()
      })
    const flaky = new DockerSandboxProvider({ docker: new Docker({ socketPath: sock }) })
    const router = new SandboxToolRouter({ providers: [flaky], resolveEnvironment: () => ({ environmentId: 'env_down', config: config() }), availabilityTtlMs: 0 })
    const sessionId = sid('down')
    try {
      const r = await router.execute({ sessionId, toolUseId: 'toolu_1', name: 'bash', input: { command: 'echo hi' } })
      expect(r.isError).toBe(true)
      expect(r.content).toMatch(/Docker engine is not answering/)
      await up()
      expect(await router.execute({ sessionId, toolUseId: 'toolu_2', name: 'bash', input: { command: 'echo back > f; cat f' } })).toMatchObject({ isError: false, content: 'back' })
      // Down again under a live sandbox: the call fails clearly; once it is back, the same workspace serves.
      await down()
      const during = await router.execute({ sessionId, toolUseId: 'toolu_3', name: 'bash', input: { command: 'cat f' } })
      expect(during.isError).toBe(true)
      expect(during.content).toMatch(/Docker engine is not answering/)
      await up()
      expect(await router.execute({ sessionId, toolUseId: 'toolu_4', name: 'bash', input: { command: 'cat f' } })).toMatchObject({ isError: false, content: 'back' })
    } finally {
      await router.release(sessionId, { removeWorkspace: true })
      await down()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

const gvisor = docker.ok ? requirement('gVisor runsc runtime', runscProbe) : { ok: false }
describe.skipIf(!gvisor.ok)('DockerSandbox on gVisor (runsc)', () => {
  it('runs tool calls under the runsc runtime', async () => {
    const provider = new DockerSandboxProvider({ docker: client })
    const sandbox = provider.create({ sessionId: sid('gv'), environmentId: 'env_gv', config: config({ runtime: 'runsc' }) })
    try {
      const r = await sandbox.execute({ toolUseId: 'toolu_g', name: 'bash', input: { command: 'dmesg 2>/dev/null | head -1; echo x > f && cat f; id -u' } })
      expect(r.content).toMatch(/gVisor|Starting/)
      expect(r.content).toContain('x\n1000')
      expect((await liveContainer(sandbox).inspect()).HostConfig.Runtime).toBe('runsc')
      expect((await sandbox.execute({ toolUseId: 'toolu_h', name: 'read', input: { file_path: 'f' } })).content).toBe('     1\tx')
    } finally {
      await sandbox.dispose({ removeWorkspace: true })
      await provider.dispose()
    }
  })
})
