import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import https from 'node:https'
import type http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import tls from 'node:tls'
import { gunzipSync, gzipSync } from 'node:zlib'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BubblewrapSandboxProvider, DockerSandboxProvider } from '../../../src/main/hands'
import type { Sandbox, SandboxProvider } from '../../../src/main/hands/sandbox'
import { EgressCertificateAuthority } from '../../../src/main/vault/egress-ca'
import { EgressProxy, placeholderFor, type EgressHandle, type EgressPolicy } from '../../../src/main/vault/egress-proxy'
import { requirement } from '../../support/requirements'
import { bwrapReq, dockerReq } from '../hands/support'
import { echoServer, fakeDialer, fakeResolver, py, rawViaProxy, upstreamPki, viaProxy } from './egress-helpers'

/*
 * The red team against the egress proxy's request handling (issue #15, findings 2, 3, 5, 6):
 * requests a well-behaved client never sends, written byte for byte through the real proxy, and
 * the repository-path escape again from inside real sandboxes. Upstreams are local servers
 * behind the proxy's injected resolver and dialer.
 */

const SECRET = 'rtcanary-proxy-header-SECRET-91c4'
const BODY_SECRET = 'rtcanary-proxy-body-SECRET-3e7a'
const TOKEN = 'ghp_rtcanaryRepoToken000000000000000000'
const BASIC = Buffer.from(`x-access-token:${TOKEN}`).toString('base64')
const REPO = 'https://git.example.test/acme/widgets.git'
const pki = upstreamPki(['api.example.test', 'git.example.test', 'store.example.test', 'other.example.test', 'pipe.example.test'])
const PH = placeholderFor('vcrd_rt_header')
const BODY_PH = placeholderFor('vcrd_rt_body')

/** What came back on a raw connection: the status, the header block and the body (chunks joined). */
function parsed(raw: string): { status: number; head: string; body: string } {
  const end = raw.indexOf('\r\n\r\n')
  const head = raw.slice(0, end)
  let body = raw.slice(end + 4)
  if (/\r\ntransfer-encoding: chunked/i.test(head)) {
    let rest = body
    body = ''
    for (let size = parseInt(rest, 16); size > 0; size = parseInt(rest, 16)) {
      const start = rest.indexOf('\r\n') + 2
      body += rest.slice(start, start + size)
      rest = rest.slice(start + size + 2)
    }
  }
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1] ?? 0), head, body }
}

/**
 * A store that remembers what it is given and hands it back later (PUT/GET /store/<key>; with
 * `?chunked` without a length, in 5-byte pieces), and answers /gzip with a gzip body reflecting
 * the request's headers whatever the request accepts, /zstd with a coding the proxy cannot decode.
 */
async function storeServer() {
  const values = new Map<string, Buffer>()
  const server = https.createServer({ cert: pki.cert, key: pki.key }, (req: http.IncomingMessage, res: http.ServerResponse) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const path = req.url ?? '/'
      if (req.method === 'PUT') {
        values.set(path, Buffer.concat(chunks))
        return void res.writeHead(204).end()
      }
      if (path === '/gzip') return void res.writeHead(200, { 'content-encoding': 'gzip', 'content-type': 'application/json' }).end(gzipSync(JSON.stringify(req.headers)))
      if (path === '/zstd') return void res.writeHead(200, { 'content-encoding': 'zstd' }).end(Buffer.from('28b52ffd', 'hex'))
      const [key, query] = path.split('?')
      const v = values.get(key!)
      if (!v) return void res.writeHead(404).end('none')
      const headers = { 'content-type': 'application/octet-stream', 'x-stored': v.toString('utf8').slice(0, 200) }
      if (query !== 'chunked') return void res.writeHead(200, { ...headers, 'content-length': v.length }).end(v)
      res.writeHead(200, headers)
      // No length, the value in pieces of 5 bytes: the proxy must scrub a stream across chunks.
      for (let i = 0; i < v.length; i += 5) res.write(v.subarray(i, i + 5))
      res.end()
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return { port: (server.address() as AddressInfo).port, close: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))) }
}

/**
 * An HTTPS upstream that ignores Upgrade and serves every request it reads on a connection, one
 * after the other (as many servers do): records each request line and Authorization header.
 */
async function pipeliningServer() {
  const seen: string[] = []
  const sockets = new Set<tls.TLSSocket>()
  const server = tls.createServer({ cert: pki.cert, key: pki.key }, (socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    let buf = ''
    socket.on('data', (d: Buffer) => {
      buf += d.toString('latin1')
      let end: number
      while ((end = buf.indexOf('\r\n\r\n')) >= 0) {
        const head = buf.slice(0, end)
        buf = buf.slice(end + 4)
        const line = head.split('\r\n')[0]!
        const auth = /\r\nauthorization: ([^\r]*)/i.exec(head)?.[1] ?? ''
        seen.push(`${line} auth=${auth}`)
        const body = `served ${line.split(' ')[1]}`
        socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n${body}`)
      }
    })
    socket.on('error', () => socket.destroy())
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return { port: (server.address() as AddressInfo).port, seen, openConnections: () => sockets.size, close: () => new Promise<void>((r) => (sockets.forEach((s) => s.destroy()), server.close(() => r()))) }
}

describe('red team: the egress proxy request handling', () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-rt-egress-'))
  const ca = EgressCertificateAuthority.generate()
  const logs: string[] = []
  let api: Awaited<ReturnType<typeof echoServer>>
  let plain: Awaited<ReturnType<typeof echoServer>>
  let git: Awaited<ReturnType<typeof echoServer>>
  let store: Awaited<ReturnType<typeof storeServer>>
  let pipelining: Awaited<ReturnType<typeof pipeliningServer>>
  let proxy: EgressProxy
  /** networking none, one repository: only that repository's paths are reachable. */
  let repoOnly: EgressHandle
  /** networking limited to the credential hosts (and git.example.test). */
  let limited: EgressHandle

  const credentials: EgressPolicy['credentials'] = [
    { credentialId: 'vcrd_rt_header', secretName: 'API_TOKEN', hosts: ['api.example.test', 'store.example.test', 'plain.example.test'], header: true, body: false, plainHttpHosts: ['plain.example.test:80'], secret: async () => SECRET },
    { credentialId: 'vcrd_rt_body', secretName: 'BODY_TOKEN', hosts: ['store.example.test'], header: false, body: true, secret: async () => BODY_SECRET },
  ]
  const repositories = [{ url: REPO, token: async () => TOKEN }]

  beforeAll(async () => {
    api = await echoServer({ cert: pki.cert, key: pki.key })
    git = await echoServer({ cert: pki.cert, key: pki.key })
    plain = await echoServer()
    store = await storeServer()
    pipelining = await pipeliningServer()
    proxy = new EgressProxy({
      runtimeDir: join(dir, 'egress'),
      ca,
      resolver: fakeResolver({ 'api.example.test': ['203.0.113.10'], 'git.example.test': ['203.0.113.20'], 'store.example.test': ['203.0.113.30'], 'other.example.test': ['203.0.113.40'], 'plain.example.test': ['203.0.113.50'], 'pipe.example.test': ['203.0.113.60'] }),
      dialer: fakeDialer({ '203.0.113.10:443': api.port, '203.0.113.20:443': git.port, '203.0.113.30:443': store.port, '203.0.113.40:443': api.port, '203.0.113.50:80': plain.port, '203.0.113.50:8080': plain.port, '203.0.113.10:80': plain.port, '203.0.113.60:443': pipelining.port }),
      upstreamCa: [pki.caPem],
      log: (l) => logs.push(l),
    })
    repoOnly = await proxy.open({ sessionId: 'sesn_rt_repo', policy: { networking: { type: 'none' }, credentials: [], repositories } })
    limited = await proxy.open({
      sessionId: 'sesn_rt_limited',
      policy: { networking: { type: 'limited', allowedHosts: ['api.example.test', 'store.example.test', 'other.example.test', 'plain.example.test', 'git.example.test', 'pipe.example.test'] }, credentials: [...credentials, { ...credentials[0]!, credentialId: 'vcrd_rt_pipe', secretName: 'PIPE_TOKEN', hosts: ['pipe.example.test'] }], repositories },
    })
  })

  afterAll(async () => {
    await proxy?.dispose()
    await Promise.all([api?.close(), git?.close(), plain?.close(), store?.close(), pipelining?.close()])
    rmSync(dir, { recursive: true, force: true })
  })

  const gitGet = (handle: EgressHandle, path: string) => rawViaProxy(handle.socketPath, { scheme: 'https', host: 'git.example.test' }, `GET ${path} HTTP/1.1\r\nhost: git.example.test\r\nconnection: close\r\n\r\n`, [ca.certPem]).then(parsed)

  describe('finding 2: a repository token stays in its repository', () => {
    it.each([
      ['/acme/widgets.git/../secret.git/info/refs?service=git-upload-pack', /dot segment/],
      ['/acme/widgets.git/%2e%2e/secret.git/info/refs', /dot segment/],
      ['/acme/widgets.git/%2E%2e/secret.git/info/refs', /dot segment/],
      ['/acme/widgets.git/.%2E/.%2e/acme/secret.git/info/refs', /dot segment/],
      ['/acme/widgets.git/..;/secret.git/info/refs', /dot segment/],
      ['/acme/widgets.git%2f..%2fsecret.git/info/refs', /encodes a slash/],
      ['/acme/widgets.git\\..\\secret.git/info/refs', /backslash/],
      ['/acme/widgets.git%5c..%5csecret.git/info/refs', /encodes a slash, backslash/],
      ['/acme/widgets.git/%252e%252e/secret.git/info/refs', /percent sign/],
      ['/acme/widgets.git/%zz/info/refs', /malformed percent-encoding/],
    ])('refuses the non-canonical repository path %s with a 400 naming the rule, and sends nothing upstream', async (path, rule) => {
      const before = git.seen.length
      const r = await gitGet(repoOnly, path)
      expect(r.status).toBe(400)
      expect(r.body).toMatch(rule)
      expect(r.body).toMatch(/paths must be canonical/)
      expect(git.seen.length).toBe(before)
      expect(logs.at(-1)).toMatch(/sesn_rt_repo GET https:\/\/git\.example\.test:443 refused: .*canonical/)
    })

    it('refuses a dot-segment path on a repository host even when the environment may reach that host', async () => {
      const before = git.seen.length
      const r = await gitGet(limited, '/acme/widgets.git/../secret.git/info/refs')
      expect(r.status).toBe(400)
      expect(git.seen.length).toBe(before)
    })

    it.each(['/acme/widgets.git-x/info/refs', '/acme/widgets.gitx', '/acme/widgets-x.git/info/refs', '/acme/widgetsx/info/refs', '/acme/widget/info/refs', '/acme2/widgets.git/info/refs'])(
      'gives no token to the sibling %s: a 403 under networking none, and the token never leaves the proxy when the host is reachable',
      async (path) => {
        const none = await gitGet(repoOnly, path)
        expect(none.status).toBe(403)
        const reachable = await gitGet(limited, path)
        expect(reachable.status).toBe(200)
        expect(git.seen.at(-1)!.url).toBe(path)
        expect(git.seen.at(-1)!.headers.authorization).toBeUndefined()
      },
    )

    it.each(['/acme/widgets.git/info/refs?service=git-upload-pack', '/acme/widgets/info/refs', '/acme/widgets.git', '/acme/widgets', '/acme/%77idgets.git/info/refs'])('adds the token to the repository path %s', async (path) => {
      const r = await gitGet(repoOnly, path)
      expect(r.status).toBe(200)
      expect(git.seen.at(-1)!.headers.authorization).toBe(`Basic ${BASIC}`)
    })
  })

  describe('finding 3: upgrades', () => {
    it('sends nothing a client pipelines after an upgrade request to an upstream that did not switch protocols: the answer is relayed and the connection closed', async () => {
      const raw = await rawViaProxy(
        limited.socketPath,
        { scheme: 'https', host: 'pipe.example.test' },
        `GET /first HTTP/1.1\r\nhost: pipe.example.test\r\nconnection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nauthorization: Bearer ${placeholderFor('vcrd_rt_pipe')}\r\n\r\n` +
          `GET /second HTTP/1.1\r\nhost: other.example.test\r\nauthorization: Bearer attacker-chosen\r\n\r\n`,
        [ca.certPem],
      )
      expect(pipelining.seen).toEqual([`GET /first HTTP/1.1 auth=Bearer ${SECRET}`])
      const r = parsed(raw)
      expect(r.status).toBe(200)
      expect(r.head).toMatch(/\r\nconnection: close/i)
      expect(r.body).toBe('served /first')
      expect(raw).not.toContain('/second')
      expect(logs.some((l) => /UPGRADE https:\/\/pipe\.example\.test:443 answered 200 without switching protocols/.test(l))).toBe(true)
      await expect.poll(() => pipelining.openConnections()).toBe(0) // the proxy closed its side upstream too
    })

    it.each([
      ['Upgrade: h2c', 'GET /x HTTP/1.1\r\nhost: api.example.test\r\nconnection: Upgrade, HTTP2-Settings\r\nupgrade: h2c\r\nhttp2-settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n', /only WebSocket upgrades/],
      ['a POST upgrade', 'POST /x HTTP/1.1\r\nhost: api.example.test\r\nconnection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\ncontent-length: 0\r\n\r\n', /is a GET/],
      ['an upgrade without a key', 'GET /x HTTP/1.1\r\nhost: api.example.test\r\nconnection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\n\r\n', /Sec-WebSocket-Key/],
    ])('refuses %s with a 400 and sends nothing upstream', async (_name, request, rule) => {
      const before = api.seen.length
      const r = parsed(await rawViaProxy(limited.socketPath, { scheme: 'https', host: 'api.example.test' }, request, [ca.certPem]))
      expect(r.status).toBe(400)
      expect(r.body).toMatch(rule)
      expect(api.seen.length).toBe(before)
    })
  })

  describe('finding 5: every response from a credential host is scrubbed', () => {
    it('scrubs a secret stored with an injected body and fetched back later without any placeholder', async () => {
      const put = await viaProxy(limited.socketPath, 'https://store.example.test/store/k1', { method: 'PUT', body: `value=${BODY_PH}`, ca: [ca.certPem] })
      expect(put.status).toBe(204)
      const back = await viaProxy(limited.socketPath, 'https://store.example.test/store/k1', { ca: [ca.certPem] })
      expect(back.status).toBe(200)
      expect(back.body).toBe('value=[redacted by corral]')
      expect(back.headers['content-length']).toBe(String(back.body.length))
      expect(JSON.stringify(back.headers)).not.toContain(BODY_SECRET)
      const streamed = await viaProxy(limited.socketPath, 'https://store.example.test/store/k1?chunked', { ca: [ca.certPem] })
      expect(streamed.headers['transfer-encoding']).toBe('chunked')
      expect(streamed.body).toBe('value=[redacted by corral]')
    })

    it("scrubs the repository's Basic credentials (base64) from a response that reflects the request", async () => {
      const r = await gitGet(repoOnly, '/acme/widgets.git/info/refs')
      expect(git.seen.at(-1)!.headers.authorization).toBe(`Basic ${BASIC}`)
      expect(r.head).not.toContain(BASIC)
      expect(r.body).not.toContain(BASIC)
      expect(r.body).not.toContain(TOKEN)
      expect(r.body).toContain('[redacted by corral]')
    })

    it('decodes a gzip answer the proxy did not ask for and scrubs it, instead of passing the secret compressed', async () => {
      const r = await rawViaProxy(limited.socketPath, { scheme: 'https', host: 'store.example.test' }, `GET /gzip HTTP/1.1\r\nhost: store.example.test\r\nauthorization: Bearer ${PH}\r\naccept-encoding: gzip\r\nconnection: close\r\n\r\n`, [ca.certPem])
      const { head, body } = parsed(r)
      // Before the fix the body came back compressed: decode it the way a client would, to look for the secret.
      const text = /content-encoding: gzip/i.test(head) ? gunzipSync(Buffer.from(body, 'latin1')).toString() : body
      expect(head).not.toMatch(/content-encoding/i)
      expect(text).not.toContain(SECRET)
      expect(text).toContain('[redacted by corral]')
      expect(text).toContain('"accept-encoding":"identity"')
    })

    it('refuses a content coding it cannot decode with a 502 naming it', async () => {
      const r = await viaProxy(limited.socketPath, 'https://store.example.test/zstd', { ca: [ca.certPem] })
      expect(r.status).toBe(502)
      expect(r.body).toMatch(/content-encoding "zstd", which the egress proxy cannot decode/)
      expect(logs.at(-1)).toMatch(/store\.example\.test:443 refused: .*zstd/)
    })
  })

  describe('finding 6: injection follows the Host, the request target and the scheme', () => {
    it('refuses a request whose Host header names another host inside an intercepted tunnel (421), with nothing sent upstream', async () => {
      const before = api.seen.length
      const r = parsed(await rawViaProxy(limited.socketPath, { scheme: 'https', host: 'api.example.test' }, `GET /x HTTP/1.1\r\nhost: other.example.test\r\nauthorization: Bearer ${PH}\r\nconnection: close\r\n\r\n`, [ca.certPem]))
      expect(r.status).toBe(421)
      expect(r.body).toMatch(/Host header "other\.example\.test" does not name the request's target api\.example\.test:443/)
      expect(api.seen.length).toBe(before)
    })

    it('refuses an absolute-form target to another host inside a tunnel (400)', async () => {
      const before = api.seen.length
      const r = parsed(await rawViaProxy(limited.socketPath, { scheme: 'https', host: 'api.example.test' }, `GET https://other.example.test/x HTTP/1.1\r\nhost: api.example.test\r\nauthorization: Bearer ${PH}\r\nconnection: close\r\n\r\n`, [ca.certPem]))
      expect(r.status).toBe(400)
      expect(r.body).toMatch(/absolute-form targets may name another host/)
      expect(api.seen.length).toBe(before)
    })

    it('refuses a plain HTTP request whose Host header differs from its absolute URL', async () => {
      const before = plain.seen.length
      const r = parsed(await rawViaProxy(limited.socketPath, { scheme: 'http', host: 'plain.example.test' }, `GET http://plain.example.test/x HTTP/1.1\r\nhost: other.example.test\r\nx-api-key: ${PH}\r\nconnection: close\r\n\r\n`))
      expect(r.status).toBe(421)
      expect(plain.seen.length).toBe(before)
    })

    it('injects over plain HTTP only to a host:port the credential lists in corral.plain_http_hosts, and refuses elsewhere with the rule', async () => {
      const ok = await viaProxy(limited.socketPath, 'http://plain.example.test/x', { headers: { 'x-api-key': PH } })
      expect(ok.status).toBe(200)
      expect(plain.seen.at(-1)!.headers['x-api-key']).toBe(SECRET)
      expect(ok.body).not.toContain(SECRET)
      const before = plain.seen.length
      const otherPort = await viaProxy(limited.socketPath, 'http://plain.example.test:8080/x', { headers: { 'x-api-key': PH } })
      const notListed = await viaProxy(limited.socketPath, 'http://api.example.test/x', { headers: { 'x-api-key': PH } })
      expect([otherPort.status, notListed.status]).toEqual([403, 403])
      expect(otherPort.body).toMatch(/credential vcrd_rt_header is injected only over HTTPS: plain\.example\.test:8080 is not in its metadata "corral\.plain_http_hosts"/)
      expect(notListed.body).toMatch(/api\.example\.test:80 is not in its metadata/)
      expect(plain.seen.length).toBe(before)
    })

    it('still passes plain HTTP without a placeholder to a credential host', async () => {
      const r = await viaProxy(limited.socketPath, 'http://api.example.test/no-secret')
      expect(r.status).toBe(200)
      expect(plain.seen.at(-1)!.url).toBe('/no-secret')
    })
  })

  it('writes every refusal to its log and no secret', () => {
    expect(logs.filter((l) => l.includes(' refused: ')).length).toBeGreaterThan(15)
    const all = logs.join('\n')
    for (const s of [SECRET, BODY_SECRET, TOKEN, BASIC]) expect(all).not.toContain(s)
  })
})

/** The repository escape from inside real sandboxes with networking none: python3 urllib through the proxy variables. */
function describeSandboxRepositoryEscape(backend: 'docker' | 'bubblewrap', ready: boolean, makeProvider: (dir: string) => SandboxProvider): void {
  describe.skipIf(!ready)(`red team from a ${backend} sandbox: a repository token stays in its repository`, () => {
    const dir = mkdtempSync(join(tmpdir(), `corral-rt-egress-${backend}-`))
    let git: Awaited<ReturnType<typeof echoServer>>
    let proxy: EgressProxy
    let handle: EgressHandle
    let provider: SandboxProvider
    let sandbox: Sandbox
    let calls = 0
    const sh = async (c: string) => (await sandbox.execute({ toolUseId: `toolu_rt_${backend}_${++calls}`, name: 'bash', input: { command: c } })).content
    const get = (path: string) =>
      sh(
        py(`try:
    r = urllib.request.urlopen(urllib.request.Request('https://git.example.test' + ${JSON.stringify(path)}), timeout=10)
    print('STATUS', r.status)
except urllib.error.HTTPError as e:
    print('HTTPERROR', e.code, e.read().decode())
except Exception as e:
    print('ERR', type(e).__name__, e)`),
      )

    beforeAll(async () => {
      git = await echoServer({ cert: pki.cert, key: pki.key })
      proxy = new EgressProxy({ runtimeDir: join(dir, 'egress'), ca: EgressCertificateAuthority.generate(), resolver: fakeResolver({ 'git.example.test': ['203.0.113.20'] }), dialer: fakeDialer({ '203.0.113.20:443': git.port }), upstreamCa: [pki.caPem] })
      handle = await proxy.open({ sessionId: `sesn_rt_sbx_${backend}`, policy: { networking: { type: 'none' }, credentials: [], repositories: [{ url: REPO, token: async () => TOKEN }] } })
      provider = makeProvider(dir)
      sandbox = provider.create({ sessionId: `sesn_rt_sbx_${backend}_${process.pid}`, environmentId: 'env_rt', config: { type: 'cloud', corral: { pool_size: 0 } }, egress: { open: async () => handle, release: async () => {} } })
      await sandbox.provision()
    }, 120_000)

    afterAll(async () => {
      await sandbox?.dispose({ removeWorkspace: true })
      await provider?.dispose()
      await proxy?.dispose()
      await git?.close()
      rmSync(dir, { recursive: true, force: true })
    })

    it('is refused with the rule for dot segments (plain and encoded) and siblings, and the token never reaches another path', async () => {
      const dots = await get('/acme/widgets.git/%2e%2e/secret.git/info/refs?service=git-upload-pack')
      const raw = await get('/acme/widgets.git/../secret.git/info/refs')
      const sibling = await get('/acme/widgets.git-x/info/refs')
      expect(dots).toMatch(/HTTPERROR 400 corral egress proxy: the path has a dot segment/)
      expect(raw).toMatch(/HTTPERROR 400 .*dot segment/)
      expect(sibling).toMatch(/HTTPERROR 403 .*not among the hosts/)
      expect(git.seen.filter((s) => s.headers.authorization)).toEqual([])
      const own = await get('/acme/widgets.git/info/refs?service=git-upload-pack')
      expect(own).toMatch(/STATUS 200/)
      expect(git.seen.map((s) => s.url)).toEqual(['/acme/widgets.git/info/refs?service=git-upload-pack'])
      expect([dots, raw, sibling, own].join('\n')).not.toContain(TOKEN)
    })
  })
}

describeSandboxRepositoryEscape('docker', dockerReq().ok, () => new DockerSandboxProvider({ scope: `test-rt-egress-${process.pid}` }))
const hostPython = requirement('python3 in /usr/bin (for the bubblewrap egress tests)', () => (existsSync('/usr/bin/python3') ? undefined : 'no /usr/bin/python3 (apt-get install python3)'))
describeSandboxRepositoryEscape('bubblewrap', bwrapReq().ok && hostPython.ok, (dir) => new BubblewrapSandboxProvider({ dataDir: join(dir, 'bwrap') }))
