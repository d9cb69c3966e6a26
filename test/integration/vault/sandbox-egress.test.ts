import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { EgressCertificateAuthority } from '../../../src/main/vault/egress-ca'
import { EgressProxy, placeholderFor, type EgressHandle } from '../../../src/main/vault/egress-proxy'
import { BubblewrapSandboxProvider, DockerSandboxProvider } from '../../../src/main/hands'
import type { Sandbox, SandboxProvider } from '../../../src/main/hands/sandbox'
import { bwrapReq, dockerReq } from '../hands/support'
import { requirement } from '../../support/requirements'
import { echoServer, fakeDialer, fakeResolver, fetchPy, upstreamPki } from './egress-helpers'
import { gitHttpServer, seedBareRepository } from './git-http-server'

/*
 * Allowed egress from inside real sandboxes: the hands' own providers (Docker, bubblewrap) and
 * runner, given the session's egress (the proxy's directory mounted read-only, its env, the
 * bridge started by the runner). The sandboxes keep no network of their own. The session's
 * repository is cloned at provision inside the sandbox, through the proxy, which adds its token.
 */

const SECRET = 'canary-sandbox-egress-SECRET-5b2e'
const GIT_TOKEN = 'ghp_canarySandboxGit00000000000000000000'
const pki = upstreamPki(['api.example.test', 'other.example.test', 'git.example.test'])

function describeSandboxEgress(backend: 'docker' | 'bubblewrap', ready: boolean, makeProvider: (dir: string) => SandboxProvider): void {
  describe.skipIf(!ready)(`allowed egress from a ${backend} sandbox through the proxy`, () => {
    const dir = mkdtempSync(join(tmpdir(), `corral-sbx-egress-${backend}-`))
    let https: Awaited<ReturnType<typeof echoServer>>
    let git: Awaited<ReturnType<typeof gitHttpServer>>
    let proxy: EgressProxy
    let handle: EgressHandle
    let provider: SandboxProvider
    let sandbox: Sandbox
    let released = 0
    let calls = 0
    const logs: string[] = []
    const outputs: string[] = []
    const sh = async (c: string) => {
      const r = await sandbox.execute({ toolUseId: `toolu_egress_${backend}_${++calls}`, name: 'bash', input: { command: c } })
      outputs.push(r.content)
      return r.content
    }

    beforeAll(async () => {
      const { projectRoot: project } = await seedBareRepository(dir)

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
      provider = makeProvider(dir)
      sandbox = provider.create({
        sessionId: `sesn_egress_${backend}_${process.pid}`,
        environmentId: 'env_egress',
        config: { type: 'cloud', corral: { pool_size: 0 } },
        resources: [{ type: 'github_repository', url: 'https://git.example.test/acme/widgets.git', mount_path: 'widgets' }],
        egress: {
          open: async () => handle,
          release: async () => {
            released++
          },
        },
      })
      await sandbox.provision()
    }, 120_000)

    afterAll(async () => {
      await sandbox?.dispose({ removeWorkspace: true })
      await provider?.dispose()
      await proxy?.dispose()
      await https?.close()
      await git?.close()
      rmSync(dir, { recursive: true, force: true })
    })

    it('clones the session repository at provision inside the sandbox, through the proxy, with the token kept in the proxy', async () => {
      const out = await sh('cat /workspace/widgets/README.md; git -C /workspace/widgets remote get-url origin; git -C /workspace/widgets config --list; grep -rl "ghp_" /workspace/widgets/.git 2>/dev/null; true')
      expect(out).toMatch(/^widgets\nhttps:\/\/git\.example\.test\/acme\/widgets\.git\n/)
      expect(out).not.toContain(GIT_TOKEN)
      expect(git.authSeen.filter((a) => a.startsWith('Basic ')).length).toBeGreaterThan(0)
    })

    it('keeps its own network off: only loopback, and the proxy variables point at the bridge', async () => {
      const out = await sh(`awk -F: 'NR>2{gsub(/ /,"",$1); print $1}' /proc/net/dev; echo "HTTPS_PROXY=$HTTPS_PROXY"`)
      expect(out.split('\n').filter((l) => l && !l.startsWith('HTTPS_PROXY'))).toEqual(['lo'])
      expect(out).toContain('HTTPS_PROXY=http://127.0.0.1:3128')
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

    it('keeps the bridge in the runner: a fresh shell, an interrupted command and a kill of every other process leave it up', async () => {
      await sandbox.execute({ toolUseId: `toolu_egress_${backend}_restart`, name: 'bash', input: { restart: true } })
      const timedOut = await sandbox.execute({ toolUseId: `toolu_egress_${backend}_timeout`, name: 'bash', input: { command: 'sleep 30', timeout: 300 } })
      expect(timedOut.isError).toBe(true)
      // every process of the sandbox user but the runner itself
      const killed = await sh('n=0; for p in $(pgrep -u "$(id -u)"); do case "$p" in "$$"|"$PPID"|1) continue;; esac; kill -9 "$p" 2>/dev/null && n=$((n+1)); done; grep -l runner.js /proc/$PPID/cmdline >/dev/null && echo "runner kept, $n killed"')
      expect(killed).toMatch(/^runner kept, \d+ killed/)
      expect(await sh(fetchPy('https://api.example.test/again'))).toMatch(/STATUS 200/)
      expect(await sh('echo "$API_TOKEN"')).toContain(placeholderFor('vcrd_sbx'))
      expect(released).toBe(0)
    })
  })
}

describeSandboxEgress('docker', dockerReq().ok, () => new DockerSandboxProvider({ scope: `test-egress-${process.pid}` }))
// Inside bubblewrap the programs are the host's own (/usr is bound read-only): python3 and git must be installed.
const hostPython = requirement('python3 in /usr/bin (for the bubblewrap egress tests)', () => (existsSync('/usr/bin/python3') ? undefined : 'no /usr/bin/python3 (apt-get install python3)'))
describeSandboxEgress('bubblewrap', bwrapReq().ok && hostPython.ok, (dir) => new BubblewrapSandboxProvider({ dataDir: join(dir, 'bwrap') }))
