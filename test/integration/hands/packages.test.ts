import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Docker from 'dockerode'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BubblewrapSandboxProvider } from '../../../src/main/hands/bubblewrap/bubblewrap-sandbox'
import { DockerSandboxProvider } from '../../../src/main/hands/docker/provider'
import { INSTALL_NAME_PREFIX, PACKAGES_LABEL } from '../../../src/main/hands/docker/package-image'
import type { PackageEgressOpener } from '../../../src/main/hands/packages/install'
import { EgressCertificateAuthority } from '../../../src/main/vault/egress-ca'
import { EgressProxy, type EgressHandle } from '../../../src/main/vault/egress-proxy'
import { packageEgressPolicy } from '../../../src/main/vault/vault-services'
import { fakeDialer, fakeResolver } from '../vault/egress-helpers'
import { MIRROR_OUTPUT, packageMirror, type PackageMirror } from './package-mirror'
import { bwrapReq, dockerReq } from './support'

/*
 * An environment's `packages` are installed by real apt, pip and npm inside a root setup
 * container with no network, through Corral's egress proxy (a registries-only policy), from a
 * local mirror the test's resolver and dialer stand in for; the result is committed as the
 * environment's image, and the next sandbox starts from it without installing again.
 */

const docker = dockerReq()
const MIRROR_ADDRESS = '203.0.113.50'

describe.skipIf(!docker.ok)('environment packages: installed at provision through the egress proxy, cached as an image', () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-packages-'))
  const scope = `test-packages-${process.pid}`
  const api = new Docker()
  const logs: string[] = []
  const opened: { hosts: readonly string[]; handle: EgressHandle }[] = []
  let mirror: PackageMirror
  let proxy: EgressProxy
  let provider: DockerSandboxProvider
  let imagesBefore: Set<string>

  const openEgress: PackageEgressOpener = async (hosts) => {
    const handle = await proxy.open({ sessionId: `packages-test-${opened.length}`, policy: packageEgressPolicy(hosts) })
    opened.push({ hosts, handle })
    return handle
  }
  const sources = {
    apt: ['deb [trusted=yes] http://apt.mirror.test/apt ./'],
    npm: 'http://npm.mirror.test/npm/',
    pip: 'http://pypi.mirror.test/simple/',
  }
  const config = (packages: Record<string, string[]>) => ({ type: 'cloud', packages, corral: { pool_size: 0, package_sources: sources } })
  const bash = (command: string) => ({ toolUseId: `tu_${Math.random().toString(36).slice(2)}`, name: 'bash', input: { command } })
  const setupContainers = async () => (await api.listContainers({ all: true, filters: { label: [`corral.managed=${scope}`] } })).flatMap((c) => c.Names).filter((n) => n.startsWith(`/${INSTALL_NAME_PREFIX}`))
  const envImages = async () => new Set((await api.listImages({ filters: { label: [PACKAGES_LABEL] } })).map((i) => i.Id))

  beforeAll(async () => {
    mirror = await packageMirror({ npm: 'npm.mirror.test', pip: 'pypi.mirror.test', apt: 'apt.mirror.test' })
    proxy = new EgressProxy({
      runtimeDir: join(dir, 'egress'),
      ca: EgressCertificateAuthority.generate(),
      resolver: fakeResolver({ 'npm.mirror.test': [MIRROR_ADDRESS], 'pypi.mirror.test': [MIRROR_ADDRESS], 'apt.mirror.test': [MIRROR_ADDRESS] }),
      dialer: fakeDialer({ [`${MIRROR_ADDRESS}:80`]: mirror.port }),
    })
    provider = new DockerSandboxProvider({ scope, log: (m) => logs.push(m) })
    imagesBefore = await envImages()
  })

  afterAll(async () => {
    await provider?.dispose()
    await proxy?.dispose()
    await mirror?.close()
    for (const c of await api.listContainers({ all: true, filters: { label: [`corral.managed=${scope}`] } })) await api.getContainer(c.Id).remove({ force: true }).catch(() => {})
    const { Volumes } = await api.listVolumes({ filters: { label: [`corral.managed=${scope}`] } })
    for (const v of Volumes ?? []) await api.getVolume(v.Name).remove().catch(() => {})
    // The images this file built (a later run must build them again to test the install).
    for (const id of await envImages()) if (!imagesBefore.has(id)) await api.getImage(id).remove({ force: true }).catch(() => {})
    rmSync(dir, { recursive: true, force: true })
  })

  const full = config({ apt: ['corral-hello'], pip: ['corral-pyhello'], npm: ['corral-greet'] })
  const check = 'corral-hello && corral-greet && python3 -c "import corral_pyhello; print(corral_pyhello.hello())" && id -u'

  it('installs apt, pip and npm packages at the first provision, through a registries-only egress, and commits them', async () => {
    const sandbox = provider.create({ sessionId: `sesn_pk1_${process.pid}`, environmentId: 'env_pk', config: full, packageEgress: openEgress })
    const r = await sandbox.execute(bash(check))
    expect(r.isError, r.content).toBe(false)
    for (const line of Object.values(MIRROR_OUTPUT)) expect(r.content).toContain(line)
    expect(r.content).toContain('1000') // sessions still run as the sandbox user, not the installer's root

    // Real package managers fetched from the mirror, through the proxy.
    expect(mirror.requests).toEqual(expect.arrayContaining(['GET /npm/corral-greet', 'GET /npm/corral-greet/-/corral-greet-1.0.0.tgz', 'GET /simple/corral-pyhello/', 'GET /apt/Packages', 'GET /apt/corral-hello_1.0_all.deb']))
    expect(mirror.requests.some((q) => q.startsWith('GET /files/corral_pyhello-1.0-py3-none-any.whl'))).toBe(true)
    // One install egress, allowed the mirrors, closed once the install ended.
    expect(opened).toHaveLength(1)
    expect([...opened[0]!.hosts].sort()).toEqual(['apt.mirror.test', 'npm.mirror.test', 'pypi.mirror.test'])
    expect(existsSync(opened[0]!.handle.socketPath)).toBe(false)
    // Progress, step by step, in the provider's log.
    const progress = logs.filter((l) => l.startsWith('packages for env_pk'))
    for (const step of ['apt: updating the package lists', 'apt: installing 1 package(s)', 'pip: installing 1 package(s)', 'npm: installing 1 package(s)', 'built in']) {
      expect(progress.some((l) => l.includes(step)), `${step} in ${progress.join('\n')}`).toBe(true)
    }
    // The image: one new corral-env image, labelled with its key, no setup container left.
    const built = [...(await envImages())].filter((id) => !imagesBefore.has(id))
    expect(built).toHaveLength(1)
    expect(await setupContainers()).toEqual([])

    // The install's egress was never the session's: this session (networking none) reaches nothing,
    // and nothing an install left can regain privileges.
    const inside = await sandbox.execute(bash('env | grep -ci proxy; ls -A /run/corral-egress 2>/dev/null | wc -l; find / -xdev -perm /6000 -type f 2>/dev/null | wc -l'))
    expect(inside.content.split('\n').map((l) => l.trim()).filter(Boolean)).toEqual(['0', '0', '0'])
    await sandbox.dispose({ removeWorkspace: true })
  }, 300_000)

  it('starts the next sandbox of the environment from the cached image: no install, no request to a registry', async () => {
    const requests = mirror.requests.length
    const started = Date.now()
    const sandbox = provider.create({ sessionId: `sesn_pk2_${process.pid}`, environmentId: 'env_pk', config: full, packageEgress: openEgress })
    const r = await sandbox.execute(bash(check))
    const ms = Date.now() - started
    expect(r.isError, r.content).toBe(false)
    for (const line of Object.values(MIRROR_OUTPUT)) expect(r.content).toContain(line)
    expect(mirror.requests.length).toBe(requests)
    expect(opened).toHaveLength(1)
    console.info(`[packages] second sandbox of the environment ready and answered in ${ms} ms (cache hit)`)
    await sandbox.dispose({ removeWorkspace: true })
  }, 120_000)

  it('installs once when several sessions of a new package list provision at the same time', async () => {
    const cfg = config({ npm: ['corral-greet'] })
    const sandboxes = [1, 2, 3].map((i) => provider.create({ sessionId: `sesn_pk3${i}_${process.pid}`, environmentId: 'env_pk_npm', config: cfg, packageEgress: openEgress }))
    const before = opened.length
    const results = await Promise.all(sandboxes.map((s) => s.execute(bash('corral-greet'))))
    for (const r of results) expect(r.content.trim(), r.content).toBe(MIRROR_OUTPUT.npm)
    expect(opened.length - before).toBe(1)
    await Promise.all(sandboxes.map((s) => s.dispose({ removeWorkspace: true })))
  }, 300_000)

  it("fails provision with the package manager's own words when a package does not exist, and caches nothing", async () => {
    const images = await envImages()
    const sandbox = provider.create({ sessionId: `sesn_pk4_${process.pid}`, environmentId: 'env_pk_bad', config: config({ npm: ['corral-no-such-package'] }), packageEgress: openEgress })
    const r = await sandbox.execute(bash('true'))
    expect(r.isError).toBe(true)
    expect(r.content).toContain('installing the packages of environment env_pk_bad failed: packages.npm: npm install failed')
    expect(r.content).toMatch(/404|Not Found/i)
    expect(await envImages()).toEqual(images)
    expect(existsSync(opened.at(-1)!.handle.socketPath)).toBe(false)
    expect(await setupContainers()).toEqual([])
    await sandbox.dispose({ removeWorkspace: true })
  }, 300_000)

  it('says why when packages are listed but there is no egress to install them through', async () => {
    const sandbox = provider.create({ sessionId: `sesn_pk5_${process.pid}`, environmentId: 'env_pk_noegress', config: config({ pip: ['corral-pyhello', 'other'] }) })
    const r = await sandbox.execute(bash('true'))
    expect(r.isError).toBe(true)
    expect(r.content).toContain('installing the packages of environment env_pk_noegress failed: this Corral has no egress proxy to install them through (pip: corral-pyhello other; the proxy needs the OS keychain')
    await sandbox.dispose({ removeWorkspace: true })
  }, 60_000)
})

const bwrap = bwrapReq()
describe.skipIf(!bwrap.ok)('environment packages on bubblewrap: a per-environment prefix, installed once by the host toolchain inside bwrap', () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-packages-bwrap-'))
  const logs: string[] = []
  const opened: EgressHandle[] = []
  let mirror: PackageMirror
  let proxy: EgressProxy
  let provider: BubblewrapSandboxProvider
  const openEgress: PackageEgressOpener = async (hosts) => {
    const handle = await proxy.open({ sessionId: `packages-bwrap-${opened.length}`, policy: packageEgressPolicy(hosts) })
    opened.push(handle)
    return handle
  }
  const config = (packages: Record<string, string[]>) => ({ type: 'cloud', packages, corral: { backend: 'bubblewrap', package_sources: { npm: 'http://npm.mirror.test/npm/', pip: 'http://pypi.mirror.test/simple/' } } })
  const bash = (command: string) => ({ toolUseId: `tu_${Math.random().toString(36).slice(2)}`, name: 'bash', input: { command } })

  beforeAll(async () => {
    mirror = await packageMirror({ npm: 'npm.mirror.test', pip: 'pypi.mirror.test', apt: 'apt.mirror.test' })
    proxy = new EgressProxy({
      runtimeDir: join(dir, 'egress'),
      ca: EgressCertificateAuthority.generate(),
      resolver: fakeResolver({ 'npm.mirror.test': [MIRROR_ADDRESS], 'pypi.mirror.test': [MIRROR_ADDRESS] }),
      dialer: fakeDialer({ [`${MIRROR_ADDRESS}:80`]: mirror.port }),
    })
    provider = new BubblewrapSandboxProvider({ dataDir: join(dir, 'sandboxes'), log: (m) => logs.push(m) })
  })
  afterAll(async () => {
    await provider?.dispose()
    await proxy?.dispose()
    await mirror?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('installs npm and pip packages into the environment prefix once; the next sandbox reuses it read-only', async () => {
    const cfg = config({ npm: ['corral-greet'], pip: ['corral-pyhello'] })
    const check = 'corral-greet && python3 -c "import corral_pyhello; print(corral_pyhello.hello())" && id -u'
    const first = provider.create({ sessionId: `sesn_pkb1_${process.pid}`, environmentId: 'env_pkb', config: cfg, packageEgress: openEgress })
    // the first call waits for the install, and its live output says so (Corral's status lines)
    const status: string[] = []
    const r1 = await first.execute({ ...bash(check), onOutput: (chunk: string, stream?: string) => void (stream === 'status' && status.push(chunk)) })
    expect(r1.isError, r1.content).toBe(false)
    expect(status.some((l) => /^\[corral\] installing the environment's packages first \(.*npm.*\): once per environment/.test(l)), status.join('')).toBe(true)
    expect(status).toContain("[corral] the environment's packages are installed\n")
    expect(r1.content).toContain(MIRROR_OUTPUT.npm)
    expect(r1.content).toContain(MIRROR_OUTPUT.pip)
    expect(opened).toHaveLength(1)
    expect(existsSync(opened[0]!.socketPath)).toBe(false)
    expect(logs.some((l) => l.includes('npm: installing 1 package(s)'))).toBe(true)
    const requests = mirror.requests.length

    const second = provider.create({ sessionId: `sesn_pkb2_${process.pid}`, environmentId: 'env_pkb', config: cfg, packageEgress: openEgress })
    const status2: string[] = []
    const r2 = await second.execute({ ...bash(`${check}; touch /opt/corral/env/x 2>&1 | grep -c 'Read-only'`), onOutput: (chunk: string, stream?: string) => void (stream === 'status' && status2.push(chunk)) })
    expect(r2.isError, r2.content).toBe(false)
    expect(status2.some((l) => l.includes('installing'))).toBe(false)
    expect(r2.content).toContain(MIRROR_OUTPUT.pip)
    expect(r2.content.trim().split('\n').at(-1)).toBe('1') // the cache is read-only to sessions
    expect(mirror.requests.length).toBe(requests)
    expect(opened).toHaveLength(1)
    await Promise.all([first.dispose({ removeWorkspace: true }), second.dispose({ removeWorkspace: true })])
  }, 300_000)

  it('refuses apt packages with a message that names the docker backend, and leaves no partial prefix after a failed install', async () => {
    const apt = provider.create({ sessionId: `sesn_pkb3_${process.pid}`, environmentId: 'env_pkb_apt', config: config({ apt: ['jq'] }), packageEgress: openEgress })
    const r = await apt.execute(bash('true'))
    expect(r.isError).toBe(true)
    expect(r.content).toContain('apt needs a root filesystem of its own')
    expect(r.content).toContain('docker backend')

    const bad = provider.create({ sessionId: `sesn_pkb4_${process.pid}`, environmentId: 'env_pkb_bad', config: config({ pip: ['corral-no-such-package'] }), packageEgress: openEgress })
    const b = await bad.execute(bash('true'))
    expect(b.isError).toBe(true)
    expect(b.content).toContain('packages.pip: pip install failed')
    expect(readdirSync(join(dir, 'sandboxes', '.packages')).filter((n) => n.includes('install'))).toEqual([])
    await Promise.all([apt.dispose({ removeWorkspace: true }), bad.dispose({ removeWorkspace: true })])
  }, 300_000)
})
