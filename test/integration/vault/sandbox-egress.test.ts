import { execFile } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import Docker from 'dockerode'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { containerSpec } from '../../../src/main/hands/docker/docker-sandbox'
import { bwrapArgs } from '../../../src/main/hands/bubblewrap/bubblewrap-sandbox'
import { defaultImage, runnerPath } from '../../../src/main/hands/paths'
import { sandboxSettings } from '../../../src/main/hands/settings'
import { EgressCertificateAuthority } from '../../../src/main/vault/egress-ca'
import { EgressProxy, placeholderFor, type EgressHandle } from '../../../src/main/vault/egress-proxy'
import { bwrapReq, dockerReq } from '../hands/support'
import { requirement } from '../../support/requirements'
import { echoServer, fakeDialer, fakeResolver, upstreamPki } from './egress-helpers'
import { gitHttpServer } from './git-http-server'

/*
 * Allowed egress from inside real sandboxes, with the hardening of the hands' own backends
 * (their exported containerSpec / bwrapArgs) plus the egress mount, the proxy environment and
 * the bridge. The providers do not yet take an egress option, so this suite builds the sandbox
 * from those functions; the red-team suite covers the providers themselves (no network).
 */

const run = promisify(execFile)
const SECRET = 'canary-sandbox-egress-SECRET-5b2e'
const GIT_TOKEN = 'ghp_canarySandboxGit00000000000000000000'
const pki = upstreamPki(['api.example.test', 'other.example.test', 'git.example.test'])

/** Runs one shell command in the sandbox; resolves with its combined output. */
type Shell = (command: string) => Promise<string>

interface Target {
  shell: Shell
  stop(): Promise<void>
}

async function waitForBridge(shell: Shell): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const out = await shell(`python3 -c "import socket; socket.create_connection(('127.0.0.1', 3128), 1); print('UP')" 2>&1 || true`)
    if (out.includes('UP')) return
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error('the egress bridge did not come up in the sandbox')
}

async function dockerTarget(handle: EgressHandle): Promise<Target> {
  const docker = new Docker()
  const spec = containerSpec({ image: defaultImage(), settings: sandboxSettings({}), volume: `corral-test-egress-${process.pid}-${Date.now()}`, labels: { 'corral.test': 'vault-egress' }, bindRunner: false })
  spec.Cmd = ['sleep', 'infinity']
  spec.OpenStdin = false
  spec.AttachStdin = false
  spec.Env = [...(spec.Env ?? []), ...Object.entries(handle.env).map(([k, v]) => `${k}=${v}`)]
  spec.HostConfig!.Mounts = [...(spec.HostConfig!.Mounts ?? []), { Type: 'bind', Source: handle.dir, Target: handle.sandboxDir, ReadOnly: true }]
  const container = await docker.createContainer(spec)
  await container.start()
  const id = container.id
  await run('docker', ['exec', '-d', id, ...handle.bridgeCommand])
  const shell: Shell = async (command) => {
    const r = await run('docker', ['exec', id, 'bash', '-c', command], { maxBuffer: 16 * 1024 * 1024 }).catch((e: { stdout: string; stderr: string }) => e)
    return `${r.stdout}${r.stderr}`
  }
  await waitForBridge(shell)
  return {
    shell,
    stop: async () => {
      await container.remove({ force: true, v: true }).catch(() => {})
      await docker.getVolume(spec.HostConfig!.Mounts![0]!.Source!).remove().catch(() => {})
    },
  }
}

async function bubblewrapTarget(handle: EgressHandle, dir: string): Promise<Target> {
  const sessionDir = join(dir, 'bwrap-session')
  mkdirSync(join(sessionDir, 'workspace'), { recursive: true })
  mkdirSync(join(sessionDir, 'etc'), { recursive: true })
  writeFileSync(join(sessionDir, 'etc/passwd'), 'corral:x:1000:1000::/home/corral:/bin/bash\n')
  writeFileSync(join(sessionDir, 'etc/group'), 'corral:x:1000:\n')
  const base = bwrapArgs({ sessionDir, settings: sandboxSettings({}), runner: runnerPath() })
  // Their command line ends with `<node> /opt/corral/runner.js`; keep every flag before it, add the egress mount and env.
  if (base.at(-1) !== '/opt/corral/runner.js') throw new Error(`bwrapArgs no longer ends with the runner: ${base.slice(-3).join(' ')}`)
  const flags = base.slice(0, -2)
  const egress = ['--ro-bind', handle.dir, handle.sandboxDir, ...Object.entries(handle.env).flatMap(([k, v]) => ['--setenv', k, v])]
  const shell: Shell = async (command) => {
    // One bwrap per command, as a fresh process tree; the bridge runs beside the command.
    const script = `${handle.bridgeCommand.join(' ')} >/dev/null 2>&1 & for i in $(seq 100); do python3 -c "import socket; socket.create_connection(('127.0.0.1', 3128), 1)" 2>/dev/null && break; sleep 0.05; done; ${command}`
    const r = await run('bwrap', [...flags, ...egress, 'bash', '-c', script], { env: { PATH: process.env.PATH }, maxBuffer: 16 * 1024 * 1024 }).catch((e: { stdout: string; stderr: string }) => e)
    return `${r.stdout}${r.stderr}`
  }
  return { shell, stop: async () => {} }
}

const py = (code: string) => `python3 - <<'PY'\nimport os, urllib.request, urllib.error\n${code}\nPY`
const fetchPy = (url: string, headers = '{}', proxy = true, cafile?: string) =>
  py(`import ssl
handlers = [${proxy ? '' : 'urllib.request.ProxyHandler({})'}]
${cafile ? `handlers.append(urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=${JSON.stringify(cafile)})))` : ''}
opener = urllib.request.build_opener(*[h for h in handlers if h])
try:
    r = opener.open(urllib.request.Request(${JSON.stringify(url)}, headers=${headers}), timeout=10)
    print('STATUS', r.status)
    print(r.read().decode())
except urllib.error.HTTPError as e:
    print('HTTPERROR', e.code, e.read().decode())
except Exception as e:
    print('ERR', type(e).__name__, e)`)

function describeSandboxEgress(backend: 'docker' | 'bubblewrap', ready: boolean, make: (h: EgressHandle, dir: string) => Promise<Target>): void {
  describe.skipIf(!ready)(`allowed egress from a ${backend} sandbox through the proxy`, () => {
    const dir = mkdtempSync(join(tmpdir(), `corral-sbx-egress-${backend}-`))
    let https: Awaited<ReturnType<typeof echoServer>>
    let git: Awaited<ReturnType<typeof gitHttpServer>>
    let proxy: EgressProxy
    let handle: EgressHandle
    let target: Target
    const logs: string[] = []
    const outputs: string[] = []
    const sh = async (c: string) => {
      const out = await target.shell(c)
      outputs.push(out)
      return out
    }

    beforeAll(async () => {
      const project = join(dir, 'srv')
      const bare = join(project, 'acme', 'widgets.git')
      mkdirSync(bare, { recursive: true })
      const genv = { ...process.env, HOME: dir, GIT_CONFIG_NOSYSTEM: '1', GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@x', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@x' }
      await run('git', ['init', '-q', '--bare', '-b', 'main', bare], { env: genv })
      await run('git', ['config', 'http.receivepack', 'true'], { cwd: bare, env: genv })
      const seed = join(dir, 'seed')
      await run('git', ['init', '-q', '-b', 'main', seed], { env: genv })
      writeFileSync(join(seed, 'README.md'), 'widgets\n')
      await run('git', ['add', '.'], { cwd: seed, env: genv })
      await run('git', ['commit', '-q', '-m', 'seed'], { cwd: seed, env: genv })
      await run('git', ['push', '-q', bare, 'main'], { cwd: seed, env: genv })

      https = await echoServer({ cert: pki.cert, key: pki.key })
      git = await gitHttpServer({ projectRoot: project, token: GIT_TOKEN, tls: { cert: pki.cert, key: pki.key } })
      proxy = new EgressProxy({
        runtimeDir: join(dir, 'egress'),
        ca: EgressCertificateAuthority.generate(),
        resolver: fakeResolver({ 'api.example.test': ['203.0.113.10'], 'other.example.test': ['203.0.113.11'], 'git.example.test': ['203.0.113.20'], 'rebind.example.test': ['127.0.0.1'] }),
        dialer: fakeDialer({ '203.0.113.10:443': https.port, '203.0.113.11:443': https.port, '203.0.113.20:443': git.port }),
        upstreamCa: [pki.caPem],
        log: (l) => logs.push(l),
      })
      handle = await proxy.open({
        sessionId: `sesn_egress_${backend}`,
        policy: {
          networking: { type: 'limited', allowedHosts: ['api.example.test', 'other.example.test', 'rebind.example.test', '169.254.169.254'] },
          credentials: [{ credentialId: 'vcrd_sbx', secretName: 'API_TOKEN', hosts: ['api.example.test'], header: true, body: false, secret: async () => SECRET }],
          repositories: [{ url: 'https://git.example.test/acme/widgets.git', token: async () => GIT_TOKEN }],
        },
      })
      target = await make(handle, dir)
    }, 120_000)

    afterAll(async () => {
      await target?.stop()
      await proxy?.dispose()
      await https?.close()
      await git?.close()
      rmSync(dir, { recursive: true, force: true })
    })

    it('sees only a placeholder in its environment', async () => {
      expect(await sh('echo "API_TOKEN=$API_TOKEN"')).toContain(`API_TOKEN=${placeholderFor('vcrd_sbx')}`)
    })

    it('calls an allowed host over HTTPS with the credential injected by the proxy, and never sees it', async () => {
      const out = await sh(fetchPy('https://api.example.test/v1/data', `{'Authorization': 'Bearer ' + os.environ['API_TOKEN']}`))
      expect(out).toMatch(/STATUS 200/)
      expect(https.seen.at(-1)!.headers.authorization).toBe(`Bearer ${SECRET}`)
      expect(out).not.toContain(SECRET)
    })

    it('sends the placeholder, not the secret, to an allowed host the credential does not name, through a blind tunnel', async () => {
      // The tunnel is blind: the sandbox checks the upstream's own certificate (its CA, written in for this test).
      const out = await sh(`cat > /tmp/upstream-ca.pem <<'PEM'\n${pki.caPem}PEM\n` + fetchPy('https://other.example.test/x', `{'Authorization': 'Bearer ' + os.environ['API_TOKEN']}`, true, '/tmp/upstream-ca.pem'))
      expect(out).toMatch(/STATUS 200/)
      expect(https.seen.at(-1)!.headers.authorization).toBe(`Bearer ${placeholderFor('vcrd_sbx')}`)
    })

    it.each([
      ['https://not-allowed.example.test/', /403/],
      ['http://169.254.169.254/latest/meta-data/', /HTTPERROR 403.*link-local/],
      ['https://rebind.example.test/', /403/],
    ])('is refused by the proxy for %s', async (url, why) => {
      expect(await sh(fetchPy(url))).toMatch(why)
    })

    it('cannot go around the proxy: no route to any address, not even the upstream the proxy uses', async () => {
      const out = await sh(fetchPy('https://203.0.113.10/', '{}', false))
      expect(out).toMatch(/ERR URLError .*(Network is unreachable|Connection refused|No route)/)
    })

    it('clones and pushes its repository with the token kept in the proxy', async () => {
      const out = await sh('cd /tmp && git clone -q https://git.example.test/acme/widgets.git w 2>&1 && cd w && echo sandbox > S.md && git add S.md && git -c user.name=a -c user.email=a@b commit -qm s && git push -q origin main 2>&1 && echo PUSHED; grep -rl "ghp_" /tmp/w/.git 2>/dev/null; true')
      expect(out).toContain('PUSHED')
      expect(git.authSeen.length).toBeGreaterThan(2)
      expect(out).not.toContain(GIT_TOKEN)
    })

    it('holds no secret and no CA private key in the mounted egress directory', async () => {
      const out = await sh(`ls ${handle.sandboxDir}; grep -l "PRIVATE KEY" ${handle.sandboxDir}/* 2>/dev/null; echo END`)
      expect(out).toMatch(/bridge\.js[\s\S]*ca-bundle\.pem[\s\S]*proxy\.sock/)
      expect(out.trim().endsWith('END')).toBe(true)
      // grep -l would print the path of any file holding a private key
      expect(out).not.toContain(`${handle.sandboxDir}/`)
    })

    it('never shows the secret in any output, nor the proxy in its log', () => {
      const all = outputs.join('\n')
      expect(all).not.toContain(SECRET)
      expect(all).not.toContain(GIT_TOKEN)
      expect(logs.join('\n')).not.toMatch(/canary|ghp_/)
    })
  })
}

describeSandboxEgress('docker', dockerReq().ok, (h) => dockerTarget(h))
// Inside bubblewrap the programs are the host's own (/usr is bound read-only): python3 and git must be installed.
const hostPython = requirement('python3 in /usr/bin (for the bubblewrap egress tests)', () => (existsSync('/usr/bin/python3') ? undefined : 'no /usr/bin/python3 (apt-get install python3)'))
describeSandboxEgress('bubblewrap', bwrapReq().ok && hostPython.ok, (h, dir) => bubblewrapTarget(h, dir))
