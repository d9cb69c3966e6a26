import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { EgressCertificateAuthority } from '../../../src/main/vault/egress-ca'
import { EgressProxy, placeholderFor, type EgressHandle, type EgressPolicy } from '../../../src/main/vault/egress-proxy'
import { requirement } from '../../support/requirements'
import { echoServer, fakeDialer, fakeResolver, reflectingWebSocketServer, upstreamPki, viaProxy, webSocketViaProxy } from './egress-helpers'

const CANARY = 'canary-egress-SECRET-7f3a9c'
const BODY_CANARY = 'canary-body-SECRET-44d1'
const pki = upstreamPki(['api.example.test', 'other.example.test', '203.0.113.12'])
const curl = requirement('curl', () => (existsSync('/usr/bin/curl') ? undefined : 'no /usr/bin/curl (apt-get install curl)'))

describe('EgressProxy', () => {
  let dir: string
  let https: Awaited<ReturnType<typeof echoServer>>
  let plain: Awaited<ReturnType<typeof echoServer>>
  let proxy: EgressProxy
  let handle: EgressHandle
  let resolver: ReturnType<typeof fakeResolver>
  let dialer: ReturnType<typeof fakeDialer>
  const logs: string[] = []
  const ca = EgressCertificateAuthority.generate()

  const policy = (over: Partial<EgressPolicy> = {}): EgressPolicy => ({
    networking: { type: 'limited', allowedHosts: ['api.example.test', 'other.example.test', 'multi.example.test', '203.0.113.12', 'evil.example.test', 'rebind.example.test', 'mapped.example.test', 'localhost', '169.254.169.254', '127.0.0.1', 'metadata.google.internal'] },
    credentials: [
      { credentialId: 'vcrd_header', secretName: 'API_TOKEN', hosts: ['api.example.test', '203.0.113.12'], header: true, body: false, plainHttpHosts: ['api.example.test:80'], secret: async () => CANARY },
      { credentialId: 'vcrd_body', secretName: 'BODY_TOKEN', hosts: ['api.example.test'], header: false, body: true, secret: async () => BODY_CANARY },
    ],
    repositories: [],
    ...over,
  })

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'corral-egress-'))
    https = await echoServer({ cert: pki.cert, key: pki.key })
    plain = await echoServer()
    resolver = fakeResolver({
      'api.example.test': ['203.0.113.10'],
      'other.example.test': ['203.0.113.11'],
      'multi.example.test': ['203.0.113.99', '203.0.113.11'],
      'rebind.example.test': ['127.0.0.1'],
      'evil.example.test': ['169.254.169.254', '10.0.0.5'],
      'mapped.example.test': ['::ffff:127.0.0.1'],
      'metadata.google.internal': ['169.254.169.254'],
    })
    dialer = fakeDialer({ '203.0.113.10:443': https.port, '203.0.113.10:80': plain.port, '203.0.113.11:443': https.port, '203.0.113.11:80': plain.port, '203.0.113.12:443': https.port })
    proxy = new EgressProxy({ runtimeDir: join(dir, 'egress'), ca, resolver, dialer, upstreamCa: [pki.caPem], log: (l) => logs.push(l) })
    handle = await proxy.open({ sessionId: 'sesn_test1', policy: policy() })
  })

  afterAll(async () => {
    await proxy.dispose()
    await https.close()
    await plain.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('injects a header credential into an HTTPS request to its host, and scrubs it from the echoed response', async () => {
    const r = await viaProxy(handle.socketPath, 'https://api.example.test/v1/thing', { headers: { authorization: `Bearer ${placeholderFor('vcrd_header')}` }, ca: [ca.certPem] })
    expect(r.status).toBe(200)
    expect(https.seen.at(-1)!.headers.authorization).toBe(`Bearer ${CANARY}`)
    expect(r.body).not.toContain(CANARY)
    expect(r.headers['x-echo-auth']).not.toContain(CANARY)
    expect(r.body).toContain('[redacted by corral]')
  })

  it('injects a body credential only when injection_location.body allows it', async () => {
    const body = JSON.stringify({ key: placeholderFor('vcrd_body'), other: placeholderFor('vcrd_header') })
    const r = await viaProxy(handle.socketPath, 'https://api.example.test/v1/post', { method: 'POST', headers: { 'content-type': 'application/json' }, body, ca: [ca.certPem] })
    expect(r.status).toBe(200)
    const seen = JSON.parse(https.seen.at(-1)!.body) as Record<string, string>
    expect(seen.key).toBe(BODY_CANARY)
    expect(seen.other).toBe(placeholderFor('vcrd_header'))
  })

  it('injects into a plain HTTP request to a host:port the credential lists for plain HTTP', async () => {
    const r = await viaProxy(handle.socketPath, 'http://api.example.test/plain', { headers: { 'x-api-key': placeholderFor('vcrd_header') } })
    expect(r.status).toBe(200)
    expect(plain.seen.at(-1)!.headers['x-api-key']).toBe(CANARY)
    expect(r.body).not.toContain(CANARY)
  })

  it('leaves the placeholder alone on an allowed host the credential does not name, through a blind tunnel', async () => {
    // The client checks the upstream's own certificate: the proxy did not intercept.
    const r = await viaProxy(handle.socketPath, 'https://other.example.test/x', { headers: { authorization: `Bearer ${placeholderFor('vcrd_header')}` }, ca: [pki.caPem] })
    expect(r.status).toBe(200)
    expect(https.seen.at(-1)!.headers.authorization).toBe(`Bearer ${placeholderFor('vcrd_header')}`)
    expect(logs.some((l) => l.includes('other.example.test:443 tunnelled'))).toBe(true)
  })

  it('injects into HTTPS to an allowed IP literal, checking the upstream certificate against the IP', async () => {
    const r = await viaProxy(handle.socketPath, 'https://203.0.113.12/ip', { headers: { authorization: `Bearer ${placeholderFor('vcrd_header')}` }, ca: [ca.certPem] })
    expect(r.status).toBe(200)
    expect(https.seen.at(-1)!.url).toBe('/ip')
    expect(https.seen.at(-1)!.headers.authorization).toBe(`Bearer ${CANARY}`)
  })

  it('falls back to the next resolved address when the first does not answer', async () => {
    const r = await viaProxy(handle.socketPath, 'http://multi.example.test/fallback')
    expect(r.status).toBe(200)
    expect(dialer.dials.slice(-2)).toEqual(['203.0.113.99:80', '203.0.113.11:80'])
  })

  it('injects into a WebSocket upgrade and masks the secret, length kept, in frames the server reflects (compression is never negotiated, so no frame escapes the mask)', async () => {
    const ws = await reflectingWebSocketServer({ cert: pki.cert, key: pki.key })
    const wsProxy = new EgressProxy({ runtimeDir: join(dir, 'egress-ws'), ca, resolver: fakeResolver({ 'api.example.test': ['203.0.113.10'] }), dialer: fakeDialer({ '203.0.113.10:443': ws.port }), upstreamCa: [pki.caPem] })
    const h = await wsProxy.open({ sessionId: 'sesn_ws', policy: policy() })
    try {
      const out = await webSocketViaProxy(h.socketPath, 'api.example.test', { authorization: `Bearer ${placeholderFor('vcrd_header')}`, 'sec-websocket-extensions': 'permessage-deflate; client_max_window_bits' }, [ca.certPem])
      expect(ws.seen).toEqual([`Bearer ${CANARY}`])
      expect(ws.extensions).toEqual([''])
      expect(out).toMatch(/^HTTP\/1.1 101/)
      expect(out).not.toContain(CANARY)
      const frame = out.slice(out.indexOf('\r\n\r\n') + 4)
      expect(frame.charCodeAt(1)).toBe(frame.length - 2) // the frame length still matches its payload
      expect(frame.slice(2)).toBe(`you sent Bearer ${'*'.repeat(CANARY.length)}`)
    } finally {
      await wsProxy.dispose()
      await ws.close()
    }
  })

  it('refuses a host outside the allow-list over CONNECT and plain HTTP', async () => {
    const a = await viaProxy(handle.socketPath, 'https://not-allowed.example.test/')
    const b = await viaProxy(handle.socketPath, 'http://not-allowed.example.test/')
    expect([a.status, b.status]).toEqual([403, 403])
    expect(b.body).toMatch(/not among the hosts this environment may reach/)
    expect(resolver.lookups).not.toContain('not-allowed.example.test')
  })

  it.each([
    ['https://rebind.example.test/', /loopback/],
    ['http://rebind.example.test/', /loopback/],
    ['https://evil.example.test/', /link-local/],
    ['https://mapped.example.test/', /loopback.*embedded/],
    ['http://169.254.169.254/latest/meta-data/', /link-local/],
    ['https://127.0.0.1:4610/v1/agents', /loopback/],
    ['http://localhost:4610/v1/agents', /this machine/],
    ['http://metadata.google.internal/computeMetadata/v1/', /metadata/],
  ])('refuses %s after resolving it, without dialing', async (url, why) => {
    const before = dialer.dials.length
    const r = await viaProxy(handle.socketPath, url)
    expect(r.status).toBe(403)
    expect(r.body).toMatch(why)
    expect(dialer.dials.length).toBe(before)
  })

  it('fails closed when the upstream certificate does not verify', async () => {
    const strict = new EgressProxy({ runtimeDir: join(dir, 'egress-strict'), ca, resolver, dialer })
    const h = await strict.open({ sessionId: 'sesn_strict', policy: policy() })
    try {
      const r = await viaProxy(h.socketPath, 'https://api.example.test/x', { headers: { authorization: `Bearer ${placeholderFor('vcrd_header')}` }, ca: [ca.certPem] })
      expect(r.status).toBe(502)
      expect(r.body).toMatch(/TLS verification of api.example.test failed/)
    } finally {
      await strict.dispose()
    }
  })

  it('refuses everything when the environment has no networking', async () => {
    const h = await proxy.open({ sessionId: 'sesn_none', policy: policy({ networking: { type: 'none' } }) })
    try {
      const r = await viaProxy(h.socketPath, 'https://api.example.test/')
      expect(r.status).toBe(403)
      expect(h.env.HTTP_PROXY).toBeUndefined()
    } finally {
      await h.close()
    }
  })

  it('serves a session from a directory reserved (and mounted) before the session was known', async () => {
    const reserved = proxy.reserveDir()
    expect(readdirSync(reserved)).toEqual([])
    const h = await proxy.open({ sessionId: 'sesn_warm', policy: policy(), dir: reserved })
    try {
      expect(h.dir).toBe(reserved)
      expect(readdirSync(reserved).sort()).toEqual(['bridge.js', 'ca-bundle.pem', 'ca.pem', 'proxy.sock'])
      const r = await viaProxy(h.socketPath, 'http://api.example.test/warm', { headers: { 'x-api-key': placeholderFor('vcrd_header') } })
      expect(plain.seen.at(-1)!.headers['x-api-key']).toBe(CANARY)
      expect(r.status).toBe(200)
      await expect(proxy.open({ sessionId: 'sesn_other', policy: policy(), dir: reserved })).rejects.toThrow(/already serves a session/)
    } finally {
      await h.close()
    }
  })

  it('gives the sandbox placeholders and proxy settings, never a secret', () => {
    expect(handle.env.API_TOKEN).toBe(placeholderFor('vcrd_header'))
    expect(handle.env.HTTPS_PROXY).toBe('http://127.0.0.1:3128')
    expect(handle.env.SSL_CERT_FILE).toBe('/run/corral-egress/ca-bundle.pem')
    expect(JSON.stringify(handle.env)).not.toContain(CANARY)
    expect(readFileSync(join(handle.dir, 'ca-bundle.pem'), 'utf8')).toContain(ca.certPem.trim())
  })

  it('writes no secret to its log', () => {
    expect(logs.length).toBeGreaterThan(5)
    expect(logs.join('\n')).not.toContain(CANARY)
    expect(logs.join('\n')).not.toContain(BODY_CANARY)
  })

  it.skipIf(!curl.ok)('serves curl through the sandbox bridge program with the mounted CA bundle', async () => {
    let bridge: ChildProcess | undefined
    try {
      bridge = spawn(process.execPath, [join(handle.dir, 'bridge.js'), handle.socketPath, '0'], { stdio: ['ignore', 'pipe', 'inherit'] })
      const port = await new Promise<number>((resolve, reject) => {
        bridge!.stdout!.on('data', (d: Buffer) => {
          const m = /127\.0\.0\.1:(\d+)/.exec(d.toString())
          if (m) resolve(Number(m[1]))
        })
        bridge!.on('exit', (code) => reject(new Error(`bridge exited ${code}`)))
      })
      const { stdout } = await promisify(execFile)('curl', ['-sS', '--proxy', `http://127.0.0.1:${port}`, '--cacert', join(handle.dir, 'ca-bundle.pem'), '-H', `Authorization: Bearer ${placeholderFor('vcrd_header')}`, 'https://api.example.test/curl'])
      expect(JSON.parse(stdout).url).toBe('/curl')
      expect(https.seen.at(-1)!.headers.authorization).toBe(`Bearer ${CANARY}`)
      expect(stdout).not.toContain(CANARY)
    } finally {
      bridge?.kill()
    }
  })
})
