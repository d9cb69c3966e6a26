import { describe, expect, it } from 'vitest'
import { SANDBOX_DEFAULTS, runnerEnv, sandboxSettings } from '../../../src/main/hands/settings'
import { checkRepositoryUrl, mountPath, placeResources } from '../../../src/main/hands/runner/resources'
import { containerSpec } from '../../../src/main/hands/docker/container-spec'
import { sessionKey } from '../../../src/main/hands/docker/containers'
import { bwrapArgs } from '../../../src/main/hands/bubblewrap/bubblewrap-sandbox'

describe('sandboxSettings', () => {
  it('runs a plain cloud config (what the official SDK sends) with the defaults', () => {
    const s = sandboxSettings({ type: 'cloud', networking: { type: 'unrestricted' }, packages: null })
    expect(s).toMatchObject({ ...SANDBOX_DEFAULTS, networking: 'unrestricted', extraRoots: ['/mnt/session'] })
    expect(s.backend).toBeUndefined()
  })

  it('reads Corral\'s additions under config.corral', () => {
    const s = sandboxSettings({ type: 'cloud', corral: { backend: 'docker', runtime: 'runsc', memory_mb: 512, cpus: 0.5, pids: 64, pool_size: 0, extra_roots: ['/tmp'] } })
    expect(s).toMatchObject({ backend: 'docker', runtime: 'runsc', memoryMb: 512, cpus: 0.5, pids: 64, poolSize: 0, extraRoots: ['/mnt/session', '/tmp'] })
    expect(runnerEnv(s)).toMatchObject({ CORRAL_WORKSPACE: '/workspace', CORRAL_ROOTS: '/mnt/session:/tmp:/mnt/skills:/mnt/memory' })
  })

  it('reads what the API schema accepts for config.corral: backend auto and warm_pool', () => {
    expect(sandboxSettings({ type: 'cloud', corral: { backend: 'auto', warm_pool: 3 } })).toMatchObject({ backend: undefined, poolSize: 3 })
    expect(sandboxSettings({ type: 'cloud', corral: { warm_pool: 3, pool_size: 0 } }).poolSize).toBe(0)
    expect(() => sandboxSettings({ corral: { warm_pool: 99 } })).toThrow(/config\.corral\.warm_pool/)
  })

  it('rejects a bad addition with the field and the rule', () => {
    expect(() => sandboxSettings({ corral: { pids: 3 } })).toThrow(/config\.corral\.pids/)
    expect(() => sandboxSettings({ corral: { runtime: 'runsc --privileged' } })).toThrow(/config\.corral\.runtime: a runtime name/)
    expect(() => sandboxSettings({ corral: { surprise: true } })).toThrow(/config\.corral/)
  })
})

describe('session resources', () => {
  it('keeps mount paths inside /workspace or /mnt/session', () => {
    expect(mountPath({ mount_path: 'repo' }, '/workspace/x')).toBe('/workspace/repo')
    expect(mountPath({}, '/mnt/session/uploads/f')).toBe('/mnt/session/uploads/f')
    expect(() => mountPath({ mount_path: '../etc' }, '/workspace/x')).toThrow(/must be a path inside/)
    expect(() => mountPath({ mount_path: '/workspace' }, '/workspace/x')).toThrow(/must be a path inside/)
  })

  it('accepts repository URLs and local paths but not option-like or ext:: ones', () => {
    expect(checkRepositoryUrl('https://github.com/a/b.git')).toBe('https://github.com/a/b.git')
    expect(checkRepositoryUrl('/srv/repo')).toBe('/srv/repo')
    expect(() => checkRepositoryUrl('--upload-pack=evil')).toThrow(/must be an https/)
    expect(() => checkRepositoryUrl('ext::sh -c evil')).toThrow(/must be an https/)
  })

  it('places a file resource through the runner and skips kinds that are not the hands\' business', async () => {
    const placed: { path: string; contentBase64?: string }[] = []
    await placeResources(
      { exists: async () => false, place: async (p) => (placed.push(p), { existed: false }) },
      { resources: [{ type: 'file', file_id: 'file_9', content: 'hi' }, { type: 'memory_store', memory_store_id: 'memstore_1' }] },
    )
    expect(placed).toEqual([{ path: '/mnt/session/uploads/file_9', contentBase64: Buffer.from('hi').toString('base64') }])
  })
})

describe('sandbox command lines', () => {
  const settings = sandboxSettings({ corral: { memory_mb: 256, pids: 100, cpus: 1.5, runtime: 'runsc' } })

  it('locks a Docker container down', () => {
    const spec = containerSpec({ image: 'img', settings, volume: 'vol', name: 'n', labels: { 'corral.session': 's' }, bindRunner: false })
    // Root holding only the right to become uid 1000, which the runner does as its first act.
    expect(spec).toMatchObject({ User: '0:0', NetworkDisabled: true, Labels: { 'corral.managed': '1', 'corral.session': 's' } })
    expect(spec.Env).toContain('CORRAL_RUNNER_USER=1000:1000')
    expect(spec.HostConfig).toMatchObject({ NetworkMode: 'none', CapDrop: ['ALL'], CapAdd: ['SETUID', 'SETGID'], SecurityOpt: ['no-new-privileges'], ReadonlyRootfs: true, Init: true, PidsLimit: 100, Memory: 256 * 2 ** 20, MemorySwap: 256 * 2 ** 20, NanoCpus: 1.5e9, Runtime: 'runsc' })
    expect(spec.HostConfig?.Mounts).toEqual([{ Type: 'volume', Source: 'vol', Target: '/workspace' }])
  })

  it('names containers after safe session ids and hashes unsafe ones', () => {
    expect(sessionKey('sesn_01ABC')).toBe('sesn_01ABC')
    expect(sessionKey('../../x')).toMatch(/^h[0-9a-f]{32}$/)
  })

  it('runs bubblewrap with no network, uid 1000, no capabilities and a scrubbed environment', () => {
    const args = bwrapArgs({ sessionDir: '/data/s', settings, runner: '/r/runner.js' })
    const line = args.join(' ')
    for (const flag of ['--unshare-all', '--die-with-parent', '--uid 1000', '--gid 1000', '--cap-drop ALL', '--clearenv', '--bind /data/s/workspace /workspace']) expect(line).toContain(flag)
    expect(line).not.toMatch(/--share-net|--bind \/ /)
  })
})
