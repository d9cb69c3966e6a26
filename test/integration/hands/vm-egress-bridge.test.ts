import { spawn, type ChildProcess } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import http from 'node:http'
import { mkdtempSync, rmSync } from 'node:fs'
import net, { type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { Duplex } from 'node:stream'
import tls from 'node:tls'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { VmEgressBridge } from '../../../src/main/hands/vm/egress-bridge'
import { EgressCertificateAuthority } from '../../../src/main/vault/egress-ca'
import { EgressProxy, placeholderFor, type EgressHandle, type EgressPolicy } from '../../../src/main/vault/egress-proxy'
import { echoServer, fakeDialer, fakeResolver, upstreamPki } from '../vault/egress-helpers'

/*
 * The VM egress bridge without a VM: the real guest script (guest/egress-bridge.js) runs as a
 * child process whose stdin/stdout stand in for the virtio-serial port, the host half
 * (VmEgressBridge) reads that channel, and each stream reaches the real EgressProxy. Upstreams
 * are loopback servers behind the proxy's injected resolver and dialer.
 */

const GUEST_SCRIPT = resolve(__dirname, '../../../src/main/hands/vm/guest/egress-bridge.js')
const CANARY = 'canary-vm-bridge-SECRET-91be'
const pki = upstreamPki(['api.example.test'])

interface Guest {
  child: ChildProcess
  port: number
  bridge: VmEgressBridge
  logs: string[]
}

/** Starts the guest script with pipes for the port and a host bridge on them. */
async function startGuest(proxySocketPath: string | undefined, logs: string[] = []): Promise<Guest> {
  const child = spawn(process.execPath, [GUEST_SCRIPT, '--channel', '-', '--listen', '0'], { stdio: ['pipe', 'pipe', 'pipe'] })
  const port = await new Promise<number>((res, rej) => {
    let err = ''
    child.stderr!.on('data', (c: Buffer) => {
      err += c.toString()
      const m = /listening on 127\.0\.0\.1:(\d+)/.exec(err)
      if (m) res(Number(m[1]))
    })
    child.once('exit', (code) => rej(new Error(`guest bridge exited ${code}: ${err}`)))
  })
  const channel = Duplex.from({ readable: child.stdout!, writable: child.stdin! })
  const bridge = new VmEgressBridge({ channel, proxySocketPath, log: (l) => logs.push(l) })
  return { child, port, bridge, logs }
}

function stopGuest(g: Guest) {
  g.bridge.dispose()
  g.child.kill('SIGKILL')
}

/** An absolute-form HTTP request to the guest's proxy port, as curl with HTTP_PROXY would send it. */
function viaGuest(port: number, url: string, options: { method?: string; body?: Buffer | string; headers?: Record<string, string> } = {}) {
  return new Promise<{ status: number; body: Buffer }>((res, rej) => {
    const req = http.request({ host: '127.0.0.1', port, method: options.method ?? 'GET', path: url, headers: { host: new URL(url).host, ...options.headers }, agent: false }, (r) => {
      const chunks: Buffer[] = []
      r.on('data', (c: Buffer) => chunks.push(c))
      r.on('end', () => res({ status: r.statusCode!, body: Buffer.concat(chunks) }))
      r.on('error', rej)
    })
    req.on('error', rej)
    req.end(options.body)
  })
}

/** CONNECT through the guest's proxy port; resolves with the raw tunnel socket once the proxy said 200. */
function tunnel(port: number, authority: string) {
  return new Promise<net.Socket>((res, rej) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'CONNECT', path: authority, agent: false })
    req.on('connect', (r, socket, head) => {
      if (r.statusCode !== 200) return rej(new Error(`CONNECT answered ${r.statusCode}`))
      if (head.length) socket.unshift(head)
      res(socket)
    })
    req.on('error', rej)
    req.end()
  })
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex')

describe('the VM egress bridge (guest script over a pipe, host bridge, real egress proxy)', () => {
  let dir: string
  let proxy: EgressProxy
  let handle: EgressHandle
  let echo: Awaited<ReturnType<typeof echoServer>>
  let tlsEcho: Awaited<ReturnType<typeof echoServer>>
  let bulk: http.Server
  let halfClose: net.Server
  let guest: Guest
  const proxyLogs: string[] = []
  const ca = EgressCertificateAuthority.generate()
  const big = randomBytes(12 * 1024 * 1024)

  const policy: EgressPolicy = {
    networking: { type: 'limited', allowedHosts: ['api.example.test', 'plain.example.test', 'bulk.example.test', 'tcp.example.test', '127.0.0.1', 'localhost'] },
    credentials: [{ credentialId: 'vcrd_vm', secretName: 'API_TOKEN', hosts: ['api.example.test'], header: true, body: false, secret: async () => CANARY }],
    repositories: [],
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'corral-vmeg-'))
    echo = await echoServer()
    tlsEcho = await echoServer({ cert: pki.cert, key: pki.key })
    // bulk: GET returns `big`; POST answers the sha256 and size of what it received.
    bulk = http.createServer((req, res) => {
      if (req.method === 'GET') return res.end(big)
      const h = createHash('sha256')
      let n = 0
      req.on('data', (c: Buffer) => {
        h.update(c)
        n += c.length
      })
      req.on('end', () => res.end(JSON.stringify({ sha: h.digest('hex'), n })))
    })
    await new Promise<void>((r) => bulk.listen(0, '127.0.0.1', r))
    // tcp: reads until the client half-closes, then answers how many bytes came and closes.
    halfClose = net.createServer({ allowHalfOpen: true }, (s) => {
      let n = 0
      s.on('data', (c: Buffer) => (n += c.length))
      s.on('end', () => s.end(`got ${n} bytes before your FIN`))
    })
    await new Promise<void>((r) => halfClose.listen(0, '127.0.0.1', r))
    const resolver = fakeResolver({ 'api.example.test': ['203.0.113.10'], 'plain.example.test': ['203.0.113.11'], 'bulk.example.test': ['203.0.113.12'], 'tcp.example.test': ['203.0.113.13'] })
    const dialer = fakeDialer({
      '203.0.113.10:443': tlsEcho.port,
      '203.0.113.11:80': echo.port,
      '203.0.113.12:80': (bulk.address() as AddressInfo).port,
      '203.0.113.13:7000': (halfClose.address() as AddressInfo).port,
    })
    proxy = new EgressProxy({ runtimeDir: join(dir, 'egress'), ca, resolver, dialer, upstreamCa: [pki.caPem], log: (l) => proxyLogs.push(l) })
    handle = await proxy.open({ sessionId: 'sesn_vmbridge', policy })
    guest = await startGuest(handle.socketPath)
  })

  afterAll(async () => {
    stopGuest(guest)
    await proxy.dispose()
    await echo.close()
    await tlsEcho.close()
    bulk.closeAllConnections()
    await new Promise((r) => bulk.close(r))
    await new Promise((r) => halfClose.close(r))
    rmSync(dir, { recursive: true, force: true })
  })

  it('carries 60 concurrent requests from the guest loopback to the session proxy, each answered with its own request', async () => {
    const results = await Promise.all(Array.from({ length: 60 }, (_, i) => viaGuest(guest.port, `http://plain.example.test/item/${i}`, { method: 'POST', body: `body-${i}` })))
    results.forEach((r, i) => {
      expect(r.status).toBe(200)
      const seen = JSON.parse(r.body.toString()) as { url: string; body: string }
      expect(seen.url).toBe(`/item/${i}`)
      expect(seen.body).toBe(`body-${i}`)
    })
    expect(guest.bridge.stats().opened).toBeGreaterThanOrEqual(60)
  })

  it('carries a 12 MiB response to the guest and a 12 MiB request body to the upstream byte for byte', async () => {
    const [down, up] = await Promise.all([viaGuest(guest.port, 'http://bulk.example.test/big'), viaGuest(guest.port, 'http://bulk.example.test/upload', { method: 'POST', body: big })])
    expect(down.status).toBe(200)
    expect(down.body.length).toBe(big.length)
    expect(sha(down.body)).toBe(sha(big))
    expect(JSON.parse(up.body.toString())).toEqual({ sha: sha(big), n: big.length })
  })

  it('keeps a half-closed stream open the other way: the upstream answers after the guest client sent its FIN', async () => {
    const socket = await tunnel(guest.port, 'tcp.example.test:7000')
    const payload = randomBytes(300_000)
    const answer = await new Promise<string>((res, rej) => {
      const chunks: Buffer[] = []
      socket.on('data', (c: Buffer) => chunks.push(c))
      socket.on('end', () => res(Buffer.concat(chunks).toString()))
      socket.on('error', rej)
      socket.end(payload)
    })
    expect(answer).toBe(`got ${payload.length} bytes before your FIN`)
  })

  it('lets the proxy inject a credential on its host for a request that came over the bridge, and the guest sees only the placeholder', async () => {
    const socket = await tunnel(guest.port, 'api.example.test:443')
    const secure = tls.connect({ socket, servername: 'api.example.test', ca: [ca.certPem] })
    await new Promise<void>((r, j) => secure.once('secureConnect', () => r()).once('error', j))
    const body = await new Promise<string>((res, rej) => {
      const req = http.request({ createConnection: () => secure, path: '/v1/things', headers: { host: 'api.example.test', authorization: `Bearer ${placeholderFor('vcrd_vm')}` } }, (r) => {
        const chunks: Buffer[] = []
        r.on('data', (c: Buffer) => chunks.push(c))
        r.on('end', () => res(Buffer.concat(chunks).toString()))
      })
      req.on('error', rej)
      req.end()
    })
    expect(tlsEcho.seen.at(-1)!.headers.authorization).toBe(`Bearer ${CANARY}`)
    // The upstream echoes what it got: the proxy scrubs the secret out of the answer.
    expect(body).not.toContain(CANARY)
  })

  it('refuses through the proxy what the policy refuses, exactly as for a Docker sandbox', async () => {
    const r = await viaGuest(guest.port, 'http://elsewhere.example.test/')
    expect(r.status).toBe(403)
    expect(r.body.toString()).toMatch(/not among the hosts/)
  })

  it('does not let one guest connection that stops reading hold up the others', async () => {
    const stalled = await tunnel(guest.port, 'bulk.example.test:80')
    stalled.write('GET /big HTTP/1.1\r\nhost: bulk.example.test\r\n\r\n')
    stalled.pause() // reads nothing more: its window shuts, the port keeps moving
    await new Promise((r) => setTimeout(r, 300))
    const others = await Promise.all(Array.from({ length: 5 }, (_, i) => viaGuest(guest.port, `http://plain.example.test/after-stall/${i}`)))
    expect(others.map((o) => o.status)).toEqual([200, 200, 200, 200, 200])
    // The stalled stream still gets all of its bytes once it reads again.
    const got = await new Promise<number>((res) => {
      let n = 0
      stalled.on('data', (c: Buffer) => {
        n += c.length
        if (n >= big.length) {
          stalled.destroy()
          res(n)
        }
      })
      stalled.resume()
    })
    expect(got).toBeGreaterThanOrEqual(big.length)
  })

  it('closes the guest connection with nothing sent when the proxy socket refuses the stream', async () => {
    const logs: string[] = []
    const refused = await startGuest(join(dir, 'no-proxy-here.sock'), logs)
    try {
      const outcome = await new Promise<string>((res) => {
        const s = net.connect({ host: '127.0.0.1', port: refused.port })
        const chunks: Buffer[] = []
        s.on('connect', () => s.write('GET http://plain.example.test/ HTTP/1.1\r\nhost: plain.example.test\r\n\r\n'))
        s.on('data', (c: Buffer) => chunks.push(c))
        s.on('error', (e) => res(`error ${e.message}`))
        s.on('close', () => res(`closed after ${Buffer.concat(chunks).length} bytes`))
      })
      expect(outcome).toMatch(/^(closed after 0 bytes|error .*ECONNRESET)/)
      // The bridge itself is fine: the next stream is refused the same way, not dropped.
      expect(refused.bridge.stats()).toEqual({ open: 0, opened: 1 })
    } finally {
      stopGuest(refused)
    }
  })
})

describe('a guest that breaks the frame protocol', () => {
  // The test plays a hostile guest: it writes frames (or garbage) straight into the channel.
  const frame = (type: number, id: number, payload: Buffer = Buffer.alloc(0)) => {
    const h = Buffer.alloc(9)
    h.writeUInt8(type, 0)
    h.writeUInt32BE(id, 1)
    h.writeUInt32BE(payload.length, 5)
    return Buffer.concat([h, payload])
  }
  const hello = frame(1, 0, Buffer.from([1]))
  let dir: string
  let upstream: net.Server
  let sockPath: string
  let stallPath: string
  let stall: net.Server
  let accepted = 0
  const upstreamSockets = new Set<net.Socket>()

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'corral-vmeg-bad-'))
    sockPath = join(dir, 'up.sock')
    upstream = net.createServer((s) => {
      accepted++
      upstreamSockets.add(s)
      s.on('error', () => {})
      s.resume()
    })
    await new Promise<void>((r) => upstream.listen(sockPath, r))
    // An upstream that reads nothing: what the guest sends stays unacknowledged.
    stallPath = join(dir, 'stall.sock')
    stall = net.createServer((s) => {
      upstreamSockets.add(s)
      s.on('error', () => {})
      s.pause()
    })
    await new Promise<void>((r) => stall.listen(stallPath, r))
  })
  afterAll(async () => {
    for (const s of upstreamSockets) s.destroy()
    await new Promise((r) => upstream.close(r))
    await new Promise((r) => stall.close(r))
    rmSync(dir, { recursive: true, force: true })
  })

  /** A host bridge on one end of a unix socket pair; the other end is the hostile guest. */
  async function hostile(proxySocketPath = sockPath) {
    const server = net.createServer()
    const path = join(dir, `ch-${Math.random().toString(36).slice(2)}.sock`)
    await new Promise<void>((r) => server.listen(path, r))
    const guestSide = new Promise<net.Socket>((r) => server.once('connection', r))
    const hostSide = net.connect(path)
    const logs: string[] = []
    const bridge = new VmEgressBridge({ channel: hostSide, proxySocketPath, log: (l) => logs.push(l) })
    const g = await guestSide
    server.close()
    g.on('error', () => {})
    g.resume()
    const guestClosed = new Promise<void>((r) => g.once('close', () => r()))
    return { bridge, guest: g, logs, guestClosed }
  }

  const cases: [string, Buffer, RegExp, string?][] = [
    ['an unknown frame type', Buffer.concat([hello, frame(9, 1)]), /unknown frame type 9/],
    ['a frame longer than 64 KiB', Buffer.concat([hello, Buffer.from([3, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff])]), /over 65536/],
    ['a stream before HELLO', frame(2, 1), /before HELLO/],
    ['a HELLO of another version', frame(1, 0, Buffer.from([7])), /version 7/],
    ['data for a stream it never opened', Buffer.concat([hello, frame(3, 5, Buffer.from('x'))]), /never opened/],
    ['stream ids that go back', Buffer.concat([hello, frame(2, 4), frame(2, 2)]), /OPEN of stream 2 after stream 4/],
    ['more data than the window allows', Buffer.concat([hello, frame(2, 1), ...Array.from({ length: 24 }, () => frame(3, 1, Buffer.alloc(65536)))]), /past a window/, 'stall'],
    ['data after its own END', Buffer.concat([hello, frame(2, 1), frame(5, 1), frame(3, 1, Buffer.from('late'))]), /after its END/],
    ['random bytes', randomBytes(4096), /frame|HELLO/],
  ]

  for (const [what, bytes, reason, upstreamKind] of cases) {
    it(`drops that VM's bridge, closing its streams and channel, when the guest sends ${what}`, async () => {
      const h = await hostile(upstreamKind === 'stall' ? stallPath : sockPath)
      h.guest.write(bytes)
      const why = await h.bridge.closed
      expect(why).toMatch(reason)
      await h.guestClosed
      expect(h.bridge.stats().open).toBe(0)
      expect(h.logs.join('\n')).toMatch(/dropped: the guest broke the frame protocol/)
    })
  }

  it('keeps other VMs bridges working while one is dropped', async () => {
    const bad = await hostile()
    const good = await hostile()
    const before = accepted
    good.guest.write(Buffer.concat([hello, frame(2, 1)]))
    bad.guest.write(Buffer.concat([hello, frame(2, 1), frame(200, 1)]))
    expect(await bad.bridge.closed).toMatch(/unknown frame type 200/)
    await new Promise((r) => setTimeout(r, 100))
    expect(good.bridge.stats().open).toBe(1)
    expect(accepted).toBeGreaterThanOrEqual(before + 1)
    good.bridge.dispose()
    expect(await good.bridge.closed).toBeUndefined()
  })

  it('refuses streams past its limit one by one with CLOSE and keeps the bridge', async () => {
    const server = net.createServer()
    const path = join(dir, 'limit.sock')
    await new Promise<void>((r) => server.listen(path, r))
    const guestSide = new Promise<net.Socket>((r) => server.once('connection', r))
    const bridge = new VmEgressBridge({ channel: net.connect(path), proxySocketPath: sockPath, maxStreams: 3 })
    const g = await guestSide
    server.close()
    const got: Buffer[] = []
    g.on('data', (c: Buffer) => got.push(c))
    g.write(Buffer.concat([hello, frame(2, 1), frame(2, 2), frame(2, 3), frame(2, 4)]))
    await new Promise((r) => setTimeout(r, 200))
    const all = Buffer.concat(got)
    // HELLO first, then a CLOSE for stream 4 only.
    expect(all.readUInt8(0)).toBe(1)
    const close = all.subarray(10)
    expect(close.readUInt8(0)).toBe(6)
    expect(close.readUInt32BE(1)).toBe(4)
    expect(close.subarray(9).toString()).toMatch(/too many connections at once \(3\)/)
    expect(bridge.stats().open).toBe(3)
    bridge.dispose()
    g.destroy()
  })
})
