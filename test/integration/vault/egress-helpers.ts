import http from 'node:http'
import https from 'node:https'
import net from 'node:net'
import tls from 'node:tls'
import type { AddressInfo } from 'node:net'
import type { Duplex } from 'node:stream'
import { issueCertificate } from '../../../src/main/vault/x509'
import type { Dialer, Resolver } from '../../../src/main/vault/egress-proxy'

/** A CA for the test's "internet" hosts and a certificate for each name, as a real upstream would have. */
export function upstreamPki(names: string[]) {
  const now = Date.now()
  const ca = issueCertificate({ commonName: 'Test upstream CA', isCa: true, validFrom: new Date(now - 864e5), validTo: new Date(now + 864e5 * 30) })
  const leaf = issueCertificate({ commonName: names[0]!, altNames: names, isCa: false, validFrom: new Date(now - 864e5), validTo: new Date(now + 864e5 * 30), issuer: { ...ca, commonName: 'Test upstream CA' } })
  return { caPem: ca.certPem, cert: leaf.certPem, key: leaf.keyPem }
}

export interface Seen {
  method: string
  url: string
  headers: http.IncomingHttpHeaders
  body: string
}

/** An echo server on 127.0.0.1: answers every request with what it received, as JSON. */
export async function echoServer(tlsOptions?: { cert: string; key: string }) {
  const seen: Seen[] = []
  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const s = { method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') }
      seen.push(s)
      res.writeHead(200, { 'content-type': 'application/json', 'x-echo-auth': String(req.headers.authorization ?? '') })
      res.end(JSON.stringify(s))
    })
  }
  const server = tlsOptions ? https.createServer(tlsOptions, handler) : http.createServer(handler)
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return { port: (server.address() as AddressInfo).port, seen, close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()) }) }
}

/** The test's DNS: names → addresses, as an injected resolver. Records every lookup. */
export function fakeResolver(table: Record<string, string[]>): Resolver & { lookups: string[] } {
  const lookups: string[] = []
  const fn = (async (host: string) => {
    lookups.push(host)
    const a = table[host.toLowerCase()]
    if (!a) throw new Error(`ENOTFOUND ${host}`)
    return a
  }) as Resolver & { lookups: string[] }
  fn.lookups = lookups
  return fn
}

/**
 * The test's routing: "public" addresses (documentation ranges) → a port on 127.0.0.1. Records
 * every dial, so a test can prove the proxy never tried a forbidden address.
 */
export function fakeDialer(routes: Record<string, number>): Dialer & { dials: string[] } {
  const dials: string[] = []
  const fn = (async (address: string, port: number) => {
    dials.push(`${address}:${port}`)
    const local = routes[`${address}:${port}`]
    if (!local) throw new Error(`no route to ${address}:${port}`)
    return await new Promise<Duplex>((resolve, reject) => {
      const s = net.connect({ host: '127.0.0.1', port: local })
      s.once('connect', () => resolve(s))
      s.once('error', reject)
    })
  }) as Dialer & { dials: string[] }
  fn.dials = dials
  return fn
}

export interface ProxiedResponse {
  status: number
  headers: http.IncomingHttpHeaders
  body: string
}

/** Sends one request through the proxy's unix socket: absolute-form for http, CONNECT + TLS for https. */
export async function viaProxy(socketPath: string, url: string, options: { method?: string; headers?: Record<string, string>; body?: string; ca?: string[] } = {}): Promise<ProxiedResponse> {
  const u = new URL(url)
  if (u.protocol === 'http:') {
    return await new Promise((resolve, reject) => {
      const req = http.request({ socketPath, method: options.method ?? 'GET', path: url, headers: { host: u.host, ...options.headers } }, (res) => collect(res, resolve))
      req.on('error', reject)
      req.end(options.body)
    })
  }
  const port = u.port || '443'
  const tunnel = await new Promise<{ status: number; socket: net.Socket; body: string }>((resolve, reject) => {
    const req = http.request({ socketPath, method: 'CONNECT', path: `${u.hostname}:${port}` })
    req.on('connect', (res, socket, head) => {
      if (res.statusCode === 200) return resolve({ status: 200, socket, body: '' })
      // A refused CONNECT: the proxy's explanation follows the headers on the socket.
      const chunks: Buffer[] = [head]
      socket.on('data', (c: Buffer) => chunks.push(c))
      socket.on('close', () => resolve({ status: res.statusCode!, socket, body: Buffer.concat(chunks).toString('utf8') }))
    })
    req.on('response', (res) => collect(res, (r) => resolve({ status: r.status, socket: null as unknown as net.Socket, body: r.body })))
    req.on('error', reject)
    req.end()
  })
  if (tunnel.status !== 200) return { status: tunnel.status, headers: {}, body: tunnel.body }
  return await new Promise((resolve, reject) => {
    const secure = tls.connect({ socket: tunnel.socket, servername: u.hostname, ca: options.ca })
    secure.on('error', reject)
    const req = http.request({ createConnection: () => secure, method: options.method ?? 'GET', path: u.pathname + u.search, headers: { host: u.host, ...options.headers } }, (res) => collect(res, resolve))
    req.on('error', reject)
    req.end(options.body)
  })
}

function collect(res: http.IncomingMessage, resolve: (r: ProxiedResponse) => void): void {
  const chunks: Buffer[] = []
  res.on('data', (c: Buffer) => chunks.push(c))
  res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }))
}

/**
 * A WebSocket endpoint on 127.0.0.1 (HTTPS): accepts the upgrade and sends one text frame that
 * reflects the Authorization header it received (a careless server), then closes.
 */
export async function reflectingWebSocketServer(tlsOptions: { cert: string; key: string }) {
  const { createHash } = await import('node:crypto')
  const seen: string[] = []
  /** The `sec-websocket-extensions` each upgrade offered ('' for none). */
  const extensions: string[] = []
  const server = https.createServer(tlsOptions)
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex) => {
    const auth = String(req.headers.authorization ?? '')
    seen.push(auth)
    extensions.push(String(req.headers['sec-websocket-extensions'] ?? ''))
    const accept = createHash('sha1').update(`${req.headers['sec-websocket-key']}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64')
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: ${accept}\r\n\r\n`)
    const payload = Buffer.from(`you sent ${auth}`)
    socket.end(Buffer.concat([Buffer.from([0x81, payload.length]), payload]))
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return { port: (server.address() as AddressInfo).port, seen, extensions, close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()) }) }
}

/** Opens a WebSocket through the proxy (CONNECT + TLS + upgrade) and returns everything the server sent back. */
export async function webSocketViaProxy(socketPath: string, host: string, headers: Record<string, string>, ca: string[]): Promise<string> {
  const socket = await new Promise<net.Socket>((resolve, reject) => {
    const req = http.request({ socketPath, method: 'CONNECT', path: `${host}:443` })
    req.on('connect', (res, s) => (res.statusCode === 200 ? resolve(s) : reject(new Error(`CONNECT ${res.statusCode}`))))
    req.on('error', reject)
    req.end()
  })
  const secure = tls.connect({ socket, servername: host, ca })
  const extra = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')
  secure.write(`GET /ws HTTP/1.1\r\nhost: ${host}\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n${extra}\r\n`)
  const chunks: Buffer[] = []
  secure.on('data', (c: Buffer) => chunks.push(c))
  await new Promise<void>((resolve) => secure.on('close', () => resolve()))
  return Buffer.concat(chunks).toString('latin1')
}

/** A python3 program (heredoc) for a sandbox shell. */
/** Python lines that print a response `r` (opened inside a `try:`) or the error, as the tests read them. */
const PRINT_RESPONSE = `    print('STATUS', r.status)
    print(r.read().decode())
except urllib.error.HTTPError as e:
    print('HTTPERROR', e.code, e.read().decode())
except Exception as e:
    print('ERR', type(e).__name__, e)`

export const py = (code: string) => `python3 - <<'PY'\nimport os, urllib.request, urllib.error\n${code}\nPY`
/** python3 urllib GET/POST through the sandbox's proxy variables (or around them); prints STATUS/HTTPERROR/ERR. */
export const fetchPy = (url: string, headers = '{}', proxy = true, cafile?: string) =>
  py(`import ssl
handlers = [${proxy ? '' : 'urllib.request.ProxyHandler({})'}]
${cafile ? `handlers.append(urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=${JSON.stringify(cafile)})))` : ''}
opener = urllib.request.build_opener(*[h for h in handlers if h])
try:
    r = opener.open(urllib.request.Request(${JSON.stringify(url)}, headers=${headers}), timeout=10)
${PRINT_RESPONSE}`)

/** python3 urllib request with a body; `url` and `headers`/`body` are Python expressions. */
export const requestPy = (p: { url: string; method?: string; headers?: string; body?: string }) =>
  py(`try:
    req = urllib.request.Request(${p.url}, method=${JSON.stringify(p.method ?? 'GET')}, headers=${p.headers ?? '{}'}, data=${p.body ? `(${p.body}).encode()` : 'None'})
    r = urllib.request.urlopen(req, timeout=10)
${PRINT_RESPONSE}`)

/**
 * Writes raw bytes through the proxy and returns everything that comes back until the
 * connection closes: for `https:` inside a CONNECT tunnel the proxy intercepts (TLS with `ca`),
 * for `http:` straight to the proxy's socket (the bytes then start with an absolute-form request).
 * For requests a well-behaved client would never send (dot segments, a foreign Host, pipelining).
 */
export async function rawViaProxy(socketPath: string, target: { scheme: 'https' | 'http'; host: string; port?: number }, bytes: string, ca: string[] = []): Promise<string> {
  let socket: Duplex
  if (target.scheme === 'http') {
    socket = await new Promise<net.Socket>((resolve, reject) => {
      const s = net.connect(socketPath)
      s.once('connect', () => resolve(s))
      s.once('error', reject)
    })
  } else {
    const tunnel = await new Promise<net.Socket>((resolve, reject) => {
      const req = http.request({ socketPath, method: 'CONNECT', path: `${target.host}:${target.port ?? 443}` })
      req.on('connect', (res, s) => (res.statusCode === 200 ? resolve(s) : reject(new Error(`CONNECT ${res.statusCode}`))))
      req.on('error', reject)
      req.end()
    })
    socket = await new Promise<tls.TLSSocket>((resolve, reject) => {
      const s = tls.connect({ socket: tunnel, servername: target.host, ca }, () => resolve(s))
      s.once('error', reject)
    })
  }
  const chunks: Buffer[] = []
  socket.on('data', (c: Buffer) => chunks.push(c))
  const closed = new Promise<void>((resolve) => {
    socket.on('close', () => resolve())
    socket.on('error', () => resolve())
  })
  socket.write(bytes)
  await closed
  return Buffer.concat(chunks).toString('latin1')
}
