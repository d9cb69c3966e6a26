import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { EgressCertificateAuthority } from '../../../src/main/vault/egress-ca'
import { EgressProxy, type EgressHandle } from '../../../src/main/vault/egress-proxy'
import { fakeDialer, fakeResolver, upstreamPki } from './egress-helpers'
import { gitHttpServer, seedBareRepository } from './git-http-server'

const run = promisify(execFile)
const TOKEN = 'ghp_canaryGitToken0000000000000000000000'
const REPO_URL = 'https://git.example.test/acme/widgets.git'

function filesContaining(dir: string, needle: string): string[] {
  const hits: string[] = []
  for (const f of readdirSync(dir, { recursive: true }) as string[]) {
    const p = join(dir, f)
    if (statSync(p).isFile() && readFileSync(p, 'latin1').includes(needle)) hits.push(f)
  }
  return hits
}

async function startBridge(handle: EgressHandle): Promise<{ port: number; child: ChildProcess }> {
  const child = spawn(process.execPath, [join(handle.dir, 'bridge.js'), handle.socketPath, '0'], { stdio: ['ignore', 'pipe', 'inherit'] })
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      const m = /127\.0\.0\.1:(\d+)/.exec(d.toString())
      if (m) resolve(Number(m[1]))
    })
    child.on('exit', (code) => reject(new Error(`bridge exited ${code}`)))
  })
  return { port, child }
}

describe('git clone, push and pull through the egress proxy', () => {
  let root: string
  let server: Awaited<ReturnType<typeof gitHttpServer>>
  let proxy: EgressProxy
  let handle: EgressHandle
  let bridge: { port: number; child: ChildProcess }
  const pki = upstreamPki(['git.example.test'])
  const logs: string[] = []
  let gitEnv: NodeJS.ProcessEnv
  const git = (args: string[], cwd?: string) => run('git', args, { cwd, env: gitEnv })

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'corral-git-'))
    const { projectRoot: project } = await seedBareRepository(root)

    server = await gitHttpServer({ projectRoot: project, token: TOKEN, tls: { cert: pki.cert, key: pki.key } })
    proxy = new EgressProxy({
      runtimeDir: join(root, 'egress'),
      ca: EgressCertificateAuthority.generate(),
      resolver: fakeResolver({ 'git.example.test': ['203.0.113.20'] }),
      dialer: fakeDialer({ '203.0.113.20:443': server.port }),
      upstreamCa: [pki.caPem],
      log: (l) => logs.push(l),
    })
    // No general networking: the repository alone is reachable.
    handle = await proxy.open({ sessionId: 'sesn_git', policy: { networking: { type: 'none' }, credentials: [], repositories: [{ url: REPO_URL, token: async () => TOKEN }] } })
    bridge = await startBridge(handle)
    gitEnv = {
      PATH: process.env.PATH,
      HOME: root,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_TERMINAL_PROMPT: '0',
      GIT_AUTHOR_NAME: 'agent',
      GIT_AUTHOR_EMAIL: 'agent@sandbox',
      GIT_COMMITTER_NAME: 'agent',
      GIT_COMMITTER_EMAIL: 'agent@sandbox',
      HTTPS_PROXY: `http://127.0.0.1:${bridge.port}`,
      GIT_SSL_CAINFO: join(handle.dir, 'ca-bundle.pem'),
      GIT_TRACE_CURL: '1',
      GIT_TRACE_CURL_NO_DATA: '1',
    }
  })

  afterAll(async () => {
    bridge?.child.kill()
    await proxy?.dispose()
    await server?.close()
    rmSync(root, { recursive: true, force: true })
  })

  it('clones, pushes and pulls with the token added by the proxy, and git never sees it', async () => {
    const a = join(root, 'work-a')
    const b = join(root, 'work-b')
    const clone = await git(['clone', '-q', REPO_URL, a])
    expect(readFileSync(join(a, 'README.md'), 'utf8')).toBe('widgets\n')
    writeFileSync(join(a, 'CHANGE.md'), 'from the sandbox\n')
    await git(['add', '.'], a)
    await git(['commit', '-q', '-m', 'agent change'], a)
    const push = await git(['push', '-q', 'origin', 'main'], a)
    const clone2 = await git(['clone', '-q', REPO_URL, b])
    expect(readFileSync(join(b, 'CHANGE.md'), 'utf8')).toBe('from the sandbox\n')
    writeFileSync(join(b, 'SECOND.md'), 'two\n')
    await git(['add', '.'], b)
    await git(['commit', '-q', '-m', 'second'], b)
    await git(['push', '-q', 'origin', 'main'], b)
    const pull = await git(['pull', '-q', '--ff-only'], a)
    expect(readFileSync(join(a, 'SECOND.md'), 'utf8')).toBe('two\n')

    // The server saw the token on every request; git's own trace of its HTTP traffic never did.
    expect(server.authSeen.length).toBeGreaterThan(4)
    expect(new Set(server.authSeen)).toEqual(new Set([`Basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`]))
    const traces = [clone, push, clone2, pull].map((r) => r.stdout + r.stderr).join('\n')
    expect(traces).toMatch(/CONNECT git\.example\.test:443/)
    expect(traces).not.toContain(TOKEN)
    expect(traces).not.toContain(Buffer.from(`x-access-token:${TOKEN}`).toString('base64'))
    expect(filesContaining(a, TOKEN)).toEqual([])
    expect(filesContaining(b, TOKEN)).toEqual([])
    expect(readFileSync(join(a, '.git', 'config'), 'utf8')).toContain(REPO_URL)
    expect(logs.join('\n')).not.toContain(TOKEN)
  })

  it('refuses another repository path on the same host when networking is none', async () => {
    const err = await git(['ls-remote', 'https://git.example.test/acme/secret-other.git']).catch((e: { stderr: string }) => e)
    expect((err as { stderr: string }).stderr).toMatch(/403/)
    expect(logs.some((l) => l.includes('refused: not an allowed host or repository path'))).toBe(true)
  })

  it('gives a session without the repository no way to it', async () => {
    const other = await proxy.open({ sessionId: 'sesn_other', policy: { networking: { type: 'none' }, credentials: [], repositories: [] } })
    const b2 = await startBridge(other)
    try {
      const err = await run('git', ['ls-remote', REPO_URL], { env: { ...gitEnv, HTTPS_PROXY: `http://127.0.0.1:${b2.port}` } }).catch((e: { stderr: string }) => e)
      expect((err as { stderr: string }).stderr).toMatch(/CONNECT tunnel failed, response 403|403/)
    } finally {
      b2.child.kill()
      await other.close()
    }
  })
})
