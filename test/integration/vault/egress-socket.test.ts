import { execFile, spawn } from 'node:child_process'
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, openSync, closeSync, rmSync, statSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { EgressCertificateAuthority } from '../../../src/main/vault/egress-ca'
import { EgressProxy, defaultEgressRuntimeDir, type EgressHandle } from '../../../src/main/vault/egress-proxy'
import { peerCredentialsReader } from '../../../src/main/vault/peer-credentials'
import { defaultImage } from '../../../src/main/hands/paths'
import { isCorralError } from '../../../src/shared/errors'
import { bwrapReq, dockerReq } from '../hands/support'
import { requirement } from '../../support/requirements'
import { echoServer, fakeDialer, fakeResolver } from './egress-helpers'

/*
 * Finding 7 of the red-team issue (the socket part): the egress socket must not be usable by
 * other local users. The runtime directory is 0700 (Corral's user only); every accepted
 * connection is checked by SO_PEERCRED (native/peercred): Corral's uid (which is also what the
 * host sees for a bubblewrap sandbox), or the Docker sandbox uid from inside a container.
 * Processes of other uids are real processes spawned with `uid`/`gid` (the tests run as root).
 */

const addon = requirement('peer-credentials addon (npm run build:native)', () => {
  const r = peerCredentialsReader()
  return 'read' in r ? undefined : r.unavailable
})
const asRoot = process.getuid?.() === 0
if (!asRoot) console.warn('[skip] egress socket peer tests need root (to spawn processes of other uids)')

/** A node program that sends one proxy request through the socket at argv[1]; prints STATUS n or ERR code. */
const CLIENT = `const http = require('http')
const r = http.request({ socketPath: process.argv[1], path: 'http://api.example.test/x', headers: { host: 'api.example.test' } }, (res) => { console.log('STATUS', res.statusCode); res.resume() })
r.on('error', (e) => console.log('ERR', e.code || e.message))
r.end()`

function run(cmd: string, args: string[], options: { uid?: number; gid?: number; fd?: number } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { uid: options.uid, gid: options.gid, cwd: '/', stdio: ['ignore', 'pipe', 'pipe', ...(options.fd === undefined ? [] : [options.fd])] })
    let out = ''
    child.stdout?.on('data', (c: Buffer) => (out += c.toString()))
    child.stderr?.on('data', (c: Buffer) => (out += c.toString()))
    child.on('error', reject)
    child.on('close', () => resolve(out.trim()))
  })
}

describe.skipIf(!addon.ok)('the egress socket: only Corral’s user and its sandboxes may connect', () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-egress-socket-'))
  const logs: string[] = []
  let upstream: Awaited<ReturnType<typeof echoServer>>
  let proxy: EgressProxy
  let handle: EgressHandle

  beforeAll(async () => {
    // Everything above the runtime directory is traversable, as /tmp is: only its own mode counts.
    mkdirSync(join(dir, 'runtime'), { mode: 0o755 })
    chmodSync(dir, 0o755)
    chmodSync(join(dir, 'runtime'), 0o755)
    upstream = await echoServer()
    proxy = new EgressProxy({
      runtimeDir: join(dir, 'runtime', 'egress'),
      ca: EgressCertificateAuthority.generate(),
      resolver: fakeResolver({ 'api.example.test': ['203.0.113.10'] }),
      dialer: fakeDialer({ '203.0.113.10:80': upstream.port }),
      log: (l) => logs.push(l),
    })
    handle = await proxy.open({ sessionId: 'sesn_socket', policy: { networking: { type: 'limited', allowedHosts: ['api.example.test'] }, credentials: [], repositories: [] } })
  })

  afterAll(async () => {
    await proxy?.dispose()
    await upstream?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  /** Runs CLIENT as another uid that holds a descriptor of the session directory: the path /proc/self/fd/3 skips the 0700 parent, as a leaked descriptor or a mount would. */
  const viaDirectoryFd = async (uid: number) => {
    const fd = openSync(handle.dir, 'r')
    try {
      return await run(process.execPath, ['-e', CLIENT, '/proc/self/fd/3/proxy.sock'], { uid, gid: uid, fd })
    } finally {
      closeSync(fd)
    }
  }

  it('keeps the runtime directory 0700 and owned by Corral’s user; the session directory and socket are for the sandbox’s mount', () => {
    const runtime = statSync(join(dir, 'runtime', 'egress'))
    expect(runtime.mode & 0o777).toBe(0o700)
    expect(runtime.uid).toBe(process.getuid!())
    expect(statSync(handle.dir).mode & 0o777).toBe(0o755)
    expect(lstatSync(handle.socketPath).isSocket()).toBe(true)
    expect(statSync(handle.socketPath).mode & 0o777).toBe(0o666)
  })

  it('makes its default runtime directory 0700 under the temp dir when XDG_RUNTIME_DIR is not set', () => {
    const made = defaultEgressRuntimeDir({})
    try {
      expect(made.startsWith(tmpdir())).toBe(true)
      expect(statSync(made).mode & 0o777).toBe(0o700)
    } finally {
      rmSync(made, { recursive: true, force: true })
    }
  })

  it('refuses a runtime directory that is a symlink, with a sandbox_error naming it', async () => {
    const real = join(dir, 'elsewhere')
    mkdirSync(real)
    symlinkSync(real, join(dir, 'linked'))
    const p = new EgressProxy({ runtimeDir: join(dir, 'linked'), ca: EgressCertificateAuthority.generate() })
    const err = await p.open({ sessionId: 'sesn_linked', policy: { networking: { type: 'none' }, credentials: [], repositories: [] } }).catch((e: unknown) => e)
    expect(isCorralError(err) && err.code === 'sandbox_error' && err.message.includes(join(dir, 'linked'))).toBe(true)
    await p.dispose()
  })

  it('answers a process of Corral’s own uid', async () => {
    expect(await run(process.execPath, ['-e', CLIENT, handle.socketPath])).toBe('STATUS 200')
  })

  it.skipIf(!asRoot)('does not let a process of another uid reach the socket by its path', async () => {
    expect(await run(process.execPath, ['-e', CLIENT, handle.socketPath], { uid: 1234, gid: 1234 })).toBe('ERR EACCES')
  })

  it.skipIf(!asRoot)('refuses a connection from a process of another uid that reaches the socket anyway, before reading a byte', async () => {
    const seen = upstream.seen.length
    const out = await viaDirectoryFd(1234)
    expect(out).toMatch(/^ERR (ECONNRESET|EPIPE|socket hang up)/)
    expect(upstream.seen.length).toBe(seen)
    expect(logs.some((l) => l.includes("egress sesn_socket refused a connection: uid 1234") && l.includes("neither Corral's user"))).toBe(true)
  })

  it.skipIf(!asRoot)('refuses the Docker sandbox uid from a host process that is not in a container', async () => {
    const out = await viaDirectoryFd(1000)
    expect(out).toMatch(/^ERR (ECONNRESET|EPIPE|socket hang up)/)
    expect(logs.some((l) => l.includes('refused a connection: uid 1000') && l.includes('not in a Docker container'))).toBe(true)
  })

  const bwrap = bwrapReq()
  it.skipIf(!bwrap.ok)('answers a bubblewrap sandbox running as uid 1000 in its user namespace (the host sees Corral’s uid)', async () => {
    const out = await run('bwrap', ['--unshare-all', '--die-with-parent', '--uid', '1000', '--gid', '1000', '--cap-drop', 'ALL', '--ro-bind', '/', '/', '--tmpfs', '/run', '--ro-bind', handle.dir, '/run/corral-egress', '--dev', '/dev', '--proc', '/proc', process.execPath, '-e', CLIENT, '/run/corral-egress/proxy.sock'])
    expect(out).toBe('STATUS 200')
  })

  const docker = dockerReq()
  it.skipIf(!docker.ok)('answers a Docker sandbox (uid 1000 inside a container) through its mount of the session directory', async () => {
    const out = await new Promise<string>((resolve) =>
      execFile('docker', ['run', '--rm', '--network', 'none', '--user', '1000:1000', '--cap-drop', 'ALL', '-v', `${handle.dir}:/run/corral-egress:ro`, defaultImage(), 'node', '-e', CLIENT, '/run/corral-egress/proxy.sock'], { timeout: 60_000 }, (_err, stdout, stderr) => resolve(`${stdout}${stderr}`.trim())),
    )
    expect(out).toBe('STATUS 200')
  })
})
