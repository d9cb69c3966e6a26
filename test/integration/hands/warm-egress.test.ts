import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Docker from 'dockerode'
import { afterAll, describe, expect, it } from 'vitest'
import { containerName } from '../../../src/main/hands/docker/containers'
import { DockerSandboxProvider } from '../../../src/main/hands/docker/provider'
import { EgressCertificateAuthority } from '../../../src/main/vault/egress-ca'
import { EgressProxy, placeholderFor, SANDBOX_EGRESS_DIR, type EgressHandle, type EgressPolicy } from '../../../src/main/vault/egress-proxy'
import { echoServer, fakeDialer, fakeResolver, fetchPy } from '../vault/egress-helpers'
import { dockerReq } from './support'

/*
 * A warm container is created before its session is known: it mounts an egress directory
 * reserved from the proxy, and the session's egress opens in that directory when the session
 * claims the container (the runner then gets the env and starts the bridge).
 */

const docker = dockerReq()
describe.skipIf(!docker.ok)('Docker sandboxes and their session egress: warm claims and re-attaches', () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-warm-egress-'))
  const runtimeDir = join(dir, 'egress')
  const scope = `test-warm-egress-${process.pid}`
  const api = new Docker()
  let upstream: Awaited<ReturnType<typeof echoServer>>
  let proxy: EgressProxy
  let provider: DockerSandboxProvider
  afterAll(async () => {
    await provider?.dispose()
    await proxy?.dispose()
    await upstream?.close()
    for (const c of await api.listContainers({ all: true, filters: { label: [`corral.managed=${scope}`] } })) await api.getContainer(c.Id).remove({ force: true }).catch(() => {})
    const { Volumes } = await api.listVolumes({ filters: { label: [`corral.managed=${scope}`] } })
    for (const v of Volumes ?? []) await api.getVolume(v.Name).remove().catch(() => {})
    rmSync(dir, { recursive: true, force: true })
  })

  it('opens the session egress in the directory the warm container mounts, and removes unclaimed reserved directories with the pool', async () => {
    upstream = await echoServer()
    proxy = new EgressProxy({
      runtimeDir,
      ca: EgressCertificateAuthority.generate(),
      resolver: fakeResolver({ 'api.example.test': ['203.0.113.10'] }),
      dialer: fakeDialer({ '203.0.113.10:80': upstream.port }),
    })
    const reserved: string[] = []
    provider = new DockerSandboxProvider({
      scope,
      reserveEgressDir: async () => {
        const d = proxy.reserveDir()
        reserved.push(d)
        return { dir: d, sandboxDir: SANDBOX_EGRESS_DIR }
      },
    })
    const config = { type: 'cloud', corral: { pool_size: 1 } }
    expect(await provider.warm({ environmentId: 'env_warm', config })).toBe(1)
    const [warm] = await api.listContainers({ filters: { label: [`corral.managed=${scope}`, 'corral.pool'] } })
    expect(warm).toBeDefined()
    expect(reserved).toHaveLength(1)

    const sessionId = `sesn_warm_${process.pid}`
    const policy: EgressPolicy = {
      networking: { type: 'limited', allowedHosts: ['api.example.test'] },
      credentials: [{ credentialId: 'vcrd_warm', secretName: 'API_TOKEN', hosts: ['api.example.test'], header: true, body: false, plainHttpHosts: ['api.example.test:80'], secret: async () => 'canary-warm-secret' }],
      repositories: [],
    }
    let handle: EgressHandle | undefined
    const openedIn: (string | undefined)[] = []
    const sandbox = provider.create({
      sessionId,
      environmentId: 'env_warm',
      config,
      egress: {
        open: async (d) => {
          openedIn.push(d)
          return (handle ??= await proxy.open({ sessionId, policy, dir: d }))
        },
        release: async () => handle?.close(),
      },
    })
    const r = await sandbox.execute({ toolUseId: 'toolu_warm_1', name: 'bash', input: { command: `echo "token=$API_TOKEN"; ${fetchPy('http://api.example.test/warm', "{'Authorization': 'Bearer ' + os.environ['API_TOKEN']}")}` } })
    expect(openedIn).toEqual([reserved[0]])
    expect(handle!.dir).toBe(reserved[0])
    expect(r.content).toContain(`token=${placeholderFor('vcrd_warm')}`)
    expect(r.content).toMatch(/STATUS 200/)
    expect(upstream.seen.at(-1)!.headers.authorization).toBe('Bearer canary-warm-secret')
    expect(r.content).not.toContain('canary-warm-secret')
    // The session runs in the container that was warm.
    expect((await api.getContainer(containerName(sessionId)).inspect()).Id).toBe(warm!.Id)

    // The pool refilled with a fresh reserved directory; disposing it removes that directory.
    await provider.warm({ environmentId: 'env_warm', config })
    expect(reserved).toHaveLength(2)
    expect(existsSync(reserved[1]!)).toBe(true)
    await sandbox.dispose({ removeWorkspace: true })
    expect(existsSync(reserved[0]!)).toBe(false)
    await provider.dispose()
    expect(existsSync(reserved[1]!)).toBe(false)
    expect(readdirSync(runtimeDir)).toEqual([])
  }, 90_000)

  it("replaces a session container that mounts an earlier process's egress directory, keeping the workspace", async () => {
    const sessionId = `sesn_reattach_${process.pid}`
    const policy: EgressPolicy = { networking: { type: 'limited', allowedHosts: ['api.example.test'] }, credentials: [], repositories: [] }
    const config = { type: 'cloud', corral: { pool_size: 0 } }
    // The first process: its proxy's directory is mounted; it dies without releasing anything.
    const first = await proxy.open({ sessionId, policy })
    const before = new DockerSandboxProvider({ scope }).create({ sessionId, environmentId: 'env_re', config, egress: { open: async () => first, release: async () => {} } })
    expect((await before.execute({ toolUseId: 'toolu_re_1', name: 'bash', input: { command: `echo kept > /workspace/note; ${fetchPy('http://api.example.test/first')}` } })).content).toMatch(/STATUS 200/)
    const oldId = (await api.getContainer(containerName(sessionId)).inspect()).Id
    await first.close()

    // The next process opens the session's egress in a new directory.
    let second: EgressHandle | undefined
    const after = new DockerSandboxProvider({ scope }).create({
      sessionId,
      environmentId: 'env_re',
      config,
      egress: { open: async () => (second ??= await proxy.open({ sessionId, policy })), release: async () => second?.close() },
    })
    const r = await after.execute({ toolUseId: 'toolu_re_2', name: 'bash', input: { command: `cat /workspace/note; ${fetchPy('http://api.example.test/second')}` } })
    expect(r.content).toMatch(/^kept\n[\s\S]*STATUS 200/)
    const info = await api.getContainer(containerName(sessionId)).inspect()
    expect(info.Id).not.toBe(oldId)
    expect(info.Mounts.find((m) => m.Destination === SANDBOX_EGRESS_DIR)?.Source).toBe(second!.dir)
    await after.dispose({ removeWorkspace: true })
    await (before as unknown as { dispose(): Promise<void> }).dispose().catch(() => {})
  }, 90_000)
})
