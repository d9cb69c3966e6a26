import { mkdtempSync, rmSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gzipSync } from 'node:zlib'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { webFetch } from '../../../src/main/hands/toolset'
import { EgressCertificateAuthority } from '../../../src/main/vault/egress-ca'
import { EgressProxy, type EgressHandle } from '../../../src/main/vault/egress-proxy'
import { echoServer, fakeDialer, fakeResolver, upstreamPki } from '../vault/egress-helpers'

/*
 * web_fetch against the real egress proxy (its resolver and dialer injected, upstreams on
 * loopback): HTTPS through the proxy (the repository token the proxy adds, scrubbed from what comes
 * back), an upstream certificate nobody vouches for, compressed bodies, non-text types, HTTP errors.
 */

const TOKEN = 'ghp_canaryWEBFETCHtoken123456'

describe('web_fetch through the egress proxy', () => {
  const pki = upstreamPki(['git.example.test', 'selfsigned.example.test'])
  const ca = EgressCertificateAuthority.generate()
  let dir: string
  let secure: Awaited<ReturnType<typeof echoServer>>
  let plain: http.Server
  let proxy: EgressProxy
  let handle: EgressHandle

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'corral-webfetch-'))
    secure = await echoServer({ cert: pki.cert, key: pki.key })
    plain = http.createServer((req, res) => {
      if (req.url === '/gz') return res.writeHead(200, { 'content-type': 'text/plain', 'content-encoding': 'gzip' }).end(gzipSync('unzipped text\n'))
      if (req.url === '/png') return res.writeHead(200, { 'content-type': 'image/png' }).end(Buffer.from([0x89, 0x50, 0x4e, 0x47]))
      if (req.url === '/loop') return res.writeHead(301, { location: '/loop' }).end()
      res.writeHead(404, { 'content-type': 'text/plain' }).end('no such page')
    })
    await new Promise<void>((r) => plain.listen(0, '127.0.0.1', r))
    const plainPort = (plain.address() as AddressInfo).port
    proxy = new EgressProxy({
      runtimeDir: join(dir, 'egress'),
      ca,
      resolver: fakeResolver({ 'git.example.test': ['203.0.113.30'], 'selfsigned.example.test': ['203.0.113.31'], 'files.example.test': ['203.0.113.32'] }),
      dialer: fakeDialer({ '203.0.113.30:443': secure.port, '203.0.113.31:443': secure.port, '203.0.113.32:80': plainPort }),
      upstreamCa: [pki.caPem],
    })
    handle = await proxy.open({
      sessionId: 'sesn_webfetch',
      policy: { networking: { type: 'limited', allowedHosts: ['selfsigned.example.test', 'files.example.test'] }, credentials: [], repositories: [{ url: 'https://git.example.test/acme/docs', token: async () => TOKEN }] },
    })
  })

  afterAll(async () => {
    await proxy.dispose()
    await secure.close()
    await new Promise<void>((r) => plain.close(() => r()))
    rmSync(dir, { recursive: true, force: true })
  })

  it("fetches an https page of a session repository: the proxy adds the repository's token, and scrubs it from the page", async () => {
    const r = await webFetch({ url: 'https://git.example.test/acme/docs/raw/README.md', egress: handle })
    expect(r).toMatchObject({ ok: true, status: 200, contentType: 'application/json' })
    const seen = secure.seen.at(-1)!
    expect(seen.url).toBe('/acme/docs/raw/README.md')
    expect(seen.headers.authorization).toBe(`Basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`)
    expect(r.ok && r.text).not.toContain(Buffer.from(`x-access-token:${TOKEN}`).toString('base64'))
    expect(r.ok && r.text).toContain('[redacted by corral]')
  })

  it('refuses the same host outside the repository path, naming the networking policy', async () => {
    const r = await webFetch({ url: 'https://git.example.test/other/repo', egress: handle })
    expect(r).toEqual({ ok: false, message: expect.stringMatching(/^web_fetch: refused by the environment's networking policy \(allowed_hosts\): git\.example\.test is not among the hosts/) })
  })

  it('refuses an https page whose certificate it cannot verify through a blind tunnel', async () => {
    const r = await webFetch({ url: 'https://selfsigned.example.test/', egress: handle })
    expect(r).toEqual({ ok: false, message: expect.stringMatching(/^web_fetch: https:\/\/selfsigned\.example\.test\/: .*(certificate|issuer)/i) })
  })

  it('decodes a compressed body, refuses a binary type and a redirect loop, and reports an HTTP error with its status', async () => {
    expect(await webFetch({ url: 'http://files.example.test/gz', egress: handle })).toMatchObject({ ok: true, text: 'unzipped text\n' })
    expect(await webFetch({ url: 'http://files.example.test/png', egress: handle })).toEqual({ ok: false, message: expect.stringContaining('is image/png (4 bytes), not text') })
    expect(await webFetch({ url: 'http://files.example.test/loop', egress: handle })).toEqual({ ok: false, message: expect.stringContaining('redirected more than 5 times') })
    expect(await webFetch({ url: 'http://files.example.test/missing', egress: handle })).toEqual({ ok: false, message: 'web_fetch: http://files.example.test/missing answered HTTP 404: no such page' })
  })
})
