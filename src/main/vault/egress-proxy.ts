import { randomBytes } from 'node:crypto'
import { promises as dns } from 'node:dns'
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import http from 'node:http'
import net, { isIP } from 'node:net'
import { join } from 'node:path'
import { Transform, type Duplex, type TransformCallback } from 'node:stream'
import tls from 'node:tls'
import { CorralError } from '../../shared/errors'
import { forbiddenAddressReason, forbiddenHostnameReason, hostAllowed } from './address-policy'
import type { EgressCertificateAuthority } from './egress-ca'
import { SANDBOX_BRIDGE_SOURCE } from './sandbox-bridge'
import { policyFingerprint } from './egress-policy'

/*
 * Corral's egress proxy: the only way out of a sandbox, and the only reader of the secrets it
 * injects.
 *
 * Reaching it. A sandbox has no network (Docker --network none, bubblewrap --unshare-net). Each
 * session gets a directory on the host, `<runtimeDir>/<random>/`, holding the proxy's unix socket
 * `proxy.sock`, the CA bundle and a tiny bridge program. The directory is mounted into the
 * sandbox at /run/corral-egress; the bridge listens on the sandbox's own loopback
 * (127.0.0.1:3128) and forwards each connection to the socket, and HTTP_PROXY / HTTPS_PROXY
 * point at the bridge. The socket a connection arrives on says which session it is from: no
 * header, token or address inside the sandbox can claim another session's policy.
 *
 * Deciding. Plain HTTP (absolute-form requests) and HTTP CONNECT. The host must be allowed by
 * the environment's networking (`unrestricted`, or `limited` with allowed_hosts and, when
 * allowed, package-manager hosts), or be the host of one of the session's repositories (then
 * only paths under the repository). The proxy resolves names itself (the resolver is
 * injectable for tests), refuses localhost/metadata names, and refuses private, loopback,
 * link-local, shared, multicast and metadata addresses after resolution, IPv4 and IPv6, mapped,
 * NAT64 and 6to4 forms included. It connects to the exact address it checked, so a second DNS
 * answer cannot rebind it.
 *
 * Injecting. An `environment_variable` credential shows up in the sandbox as its variable set
 * to a placeholder (`corral_placeholder_<credential id>`). On a request to one of the
 * credential's hosts the proxy replaces the placeholder with the secret in header values
 * and/or the body (per `injection_location`). Anywhere else the placeholder stays a
 * placeholder. A repository's authorization token is added as an Authorization header on
 * requests under that repository's path, replacing whatever the sandbox sent. Responses to
 * requests that carried an injected secret are scrubbed of it (the request asks for an
 * identity encoding so the scrub can see the bytes), so an upstream that echoes a request back
 * does not hand the secret to the sandbox in clear text.
 *
 * HTTPS, the trade-off. Injection needs the plaintext request, so for the hosts that need it
 * (a credential's hosts, a repository's host) the proxy terminates TLS with a certificate for
 * that host signed by a per-install CA (EgressCertificateAuthority: ECDSA P-256, key in the
 * keychain) and opens its own TLS connection upstream, verifying the real certificate. The CA
 * is trusted only inside sandboxes (SSL_CERT_FILE, NODE_EXTRA_CA_CERTS, GIT_SSL_CAINFO, ...
 * point at the mounted bundle); the host never trusts it. Every other HTTPS host is a blind
 * TCP tunnel: the proxy sees its name, not its traffic, and certificate pinning keeps working.
 * Costs: a program in the sandbox that pins certificates, or ignores those variables, cannot
 * use an injected credential; the CA key is one more secret in the keychain (it can only
 * impersonate hosts to sandboxes of this install); an allowed host that transforms and
 * reflects a request (base64, compression) can still hand the secret back; that is why a
 * credential names its hosts. The alternative (giving the sandbox the secret) breaks the
 * promise that code the model writes never holds a credential.
 */

/** Resolves a host name to IP addresses. The default uses the OS resolver. */
export type Resolver = (host: string) => Promise<string[]>
/** Opens a TCP connection to an address the proxy has already checked. Tests map it to 127.0.0.1. */
export type Dialer = (address: string, port: number) => Promise<Duplex>

export interface EgressCredential {
  credentialId: string
  secretName: string
  /** `unrestricted` = any host the environment allows; else these allow-list entries. */
  hosts: 'unrestricted' | readonly string[]
  header: boolean
  body: boolean
  /** Reads the secret (from the keychain) when a request needs it; never cached by the proxy. */
  secret: () => Promise<string | undefined>
}

export interface EgressRepository {
  /** The repository's URL as the session names it (https://host/owner/repo[.git]). */
  url: string
  /** Reads the authorization token when a request needs it. */
  token: () => Promise<string | undefined>
}

export type EgressNetworking = { type: 'none' } | { type: 'unrestricted' } | { type: 'limited'; allowedHosts: readonly string[] }

/** What one session's sandbox may reach and with which credentials. */
export interface EgressPolicy {
  networking: EgressNetworking
  credentials: readonly EgressCredential[]
  repositories: readonly EgressRepository[]
}

export interface EgressProxyOptions {
  /**
   * Parent of the per-session directories (mode 0711; each session dir has a random name).
   * Keep it short: socket paths are limited to 107 bytes. See `defaultEgressRuntimeDir`.
   */
  runtimeDir: string
  ca: EgressCertificateAuthority
  resolver?: Resolver
  dialer?: Dialer
  /** Extra CAs trusted when the proxy opens TLS upstream (tests); the system store otherwise. */
  upstreamCa?: readonly string[]
  /** One line per decision; never a header value or a body. */
  log?: (line: string) => void
  /** Largest request body the proxy buffers to inject into (default 16 MiB). */
  maxInjectedBodyBytes?: number
}

/** Where the session's egress directory appears inside a sandbox. */
export const SANDBOX_EGRESS_DIR = '/run/corral-egress'
export const SANDBOX_PROXY_PORT = 3128

/** One session's way out: mount `dir` at `sandboxDir`, set `env`, run `bridgeCommand` at provision. */
export interface EgressHandle {
  readonly sessionId: string
  /** Host directory to mount (read-only is enough) at `sandboxDir`. */
  readonly dir: string
  readonly socketPath: string
  readonly sandboxDir: string
  /** Environment for every process in the sandbox: proxy variables, CA bundle, credential placeholders. */
  readonly env: Readonly<Record<string, string>>
  /** Starts the in-sandbox bridge (a Node program; the sandbox image has node). */
  readonly bridgeCommand: readonly string[]
  /** What the bridge connects: 127.0.0.1:`port` in the sandbox → `socket` (the in-sandbox path of the proxy's socket). */
  readonly bridge: { readonly socket: string; readonly port: number }
  /** URLs of the repositories the proxy serves with their token (the sandbox clones them through it). */
  readonly repositories: readonly string[]
  /**
   * Replaces the policy (the environment, the vaults or the session changed): every later request
   * and connection is decided by it; when it decides differently (policyFingerprint), the
   * session's open connections are closed. Synchronous: done when it returns.
   */
  update(policy: EgressPolicy): void
  close(): Promise<void>
}

/** A fresh private parent directory for session sockets: $XDG_RUNTIME_DIR or the temp dir, mode 0711. */
export function defaultEgressRuntimeDir(env: NodeJS.ProcessEnv = process.env): string {
  const dir = mkdtempSync(join(env.XDG_RUNTIME_DIR || tmpdir(), 'corral-egress-'))
  chmodSync(dir, 0o711)
  return dir
}

export const placeholderFor = (credentialId: string) => `corral_placeholder_${credentialId}`

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer', 'upgrade'])

interface Target {
  host: string
  port: number
  tls: boolean
}

interface Session {
  id: string
  policy: EgressPolicy
  server: http.Server
  inner: http.Server
  sockets: Set<Duplex>
}

class Refusal extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message)
  }
}

const defaultResolver: Resolver = async (host) => (await dns.lookup(host, { all: true, verbatim: true })).map((a) => a.address)

const defaultDialer: Dialer = (address, port) =>
  new Promise((resolve, reject) => {
    // Requests relayed in pieces must not wait on Nagle + delayed ACK (~40 ms each).
    const s = net.connect({ host: address, port, noDelay: true })
    s.once('connect', () => resolve(s))
    s.once('error', reject)
  })

export class EgressProxy {
  private readonly sessions = new Map<string, Session>()
  private readonly resolver: Resolver
  private readonly dialer: Dialer
  private readonly log: (line: string) => void
  private readonly maxBody: number
  private readonly sandboxBundle: string

  constructor(private readonly options: EgressProxyOptions) {
    this.resolver = options.resolver ?? defaultResolver
    this.dialer = options.dialer ?? defaultDialer
    this.log = options.log ?? (() => {})
    this.maxBody = options.maxInjectedBodyBytes ?? 16 * 1024 * 1024
    // What sandboxes trust: the public roots Node ships plus this install's CA.
    this.sandboxBundle = [...tls.rootCertificates, options.ca.certPem].join('\n')
  }

  /**
   * Opens the session's socket and directory. Throws sandbox_error when the socket cannot be
   * made. The caller disposes with `handle.close()` (or `proxy.dispose()` for all).
   */
  async open(params: { sessionId: string; policy: EgressPolicy; dir?: string }): Promise<EgressHandle> {
    if (this.sessions.has(params.sessionId)) throw new CorralError('conflict_error', `egress for session ${params.sessionId} is already open`)
    let dir: string
    if (params.dir) {
      // A directory made earlier by `reserveDir` and already mounted into a (warm) sandbox.
      dir = params.dir
      if (existsSync(join(dir, 'proxy.sock'))) throw new CorralError('conflict_error', `the egress directory ${dir} already serves a session`)
    } else dir = this.reserveDir()
    const socketPath = join(dir, 'proxy.sock')
    writeFileSync(join(dir, 'ca.pem'), this.options.ca.certPem, { mode: 0o644 })
    writeFileSync(join(dir, 'ca-bundle.pem'), this.sandboxBundle, { mode: 0o644 })
    writeFileSync(join(dir, 'bridge.js'), SANDBOX_BRIDGE_SOURCE, { mode: 0o644 })

    const session: Session = {
      id: params.sessionId,
      policy: params.policy,
      server: http.createServer(),
      inner: http.createServer(),
      sockets: new Set(),
    }
    const track = (s: Duplex) => {
      session.sockets.add(s)
      s.once('close', () => session.sockets.delete(s))
    }
    session.server.on('connection', track)
    session.server.on('request', (req, res) => void this.onRequest(session, req, res, undefined))
    session.server.on('connect', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void this.onConnect(session, req, socket, head))
    session.inner.on('request', (req, res) => void this.onRequest(session, req, res, targets.get(req.socket)))
    session.server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void this.onUpgrade(session, req, socket, head, undefined))
    session.inner.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void this.onUpgrade(session, req, socket, head, targets.get(req.socket)))
    session.server.on('clientError', (_err, socket) => socket.destroy())
    session.inner.on('clientError', (_err, socket) => socket.destroy())
    await new Promise<void>((resolve, reject) => {
      session.server.once('error', (err) => reject(new CorralError('sandbox_error', `the egress proxy could not listen on ${socketPath}: ${err.message}`, { cause: err })))
      session.server.listen(socketPath, () => resolve())
    })
    chmodSync(socketPath, 0o666) // the sandbox user is not the host user
    this.sessions.set(params.sessionId, session)

    const env = this.sandboxEnv(params.policy)
    return {
      sessionId: params.sessionId,
      dir,
      socketPath,
      sandboxDir: SANDBOX_EGRESS_DIR,
      get env() {
        return env
      },
      bridgeCommand: ['node', `${SANDBOX_EGRESS_DIR}/bridge.js`, `${SANDBOX_EGRESS_DIR}/proxy.sock`, String(SANDBOX_PROXY_PORT)],
      bridge: { socket: `${SANDBOX_EGRESS_DIR}/proxy.sock`, port: SANDBOX_PROXY_PORT },
      get repositories() {
        return session.policy.repositories.map((r) => r.url)
      },
      update: (policy) => {
        const changed = policyFingerprint(policy) !== policyFingerprint(session.policy)
        session.policy = policy
        Object.assign(env, this.sandboxEnv(policy))
        // A blind tunnel, an upgraded or intercepted connection outlives the decision that let it
        // through: when the decisions change, every connection made under the old ones ends, and
        // the sandbox's next connection is decided by the new policy.
        if (changed) for (const s of session.sockets) s.destroy()
      },
      close: async () => {
        this.sessions.delete(params.sessionId)
        await closeSession(session)
        rmSync(dir, { recursive: true, force: true })
      },
    }
  }

  /**
   * Makes an empty egress directory without a session yet, for a sandbox that must be created
   * before its session is known (a warm container): mount it, then `open({ ..., dir })` when a
   * session claims the sandbox. The sandbox reaches nothing until then.
   */
  reserveDir(): string {
    mkdirSync(this.options.runtimeDir, { recursive: true, mode: 0o711 })
    chmodSync(this.options.runtimeDir, 0o711)
    // A random directory name: other local users cannot guess the path of a session's socket.
    // Short, because a unix socket path is limited to 107 bytes.
    const dir = join(this.options.runtimeDir, randomBytes(9).toString('base64url'))
    mkdirSync(dir, { mode: 0o755 })
    return dir
  }

  /** The sandbox's environment for a policy. Contains placeholders, never a secret. */
  sandboxEnv(policy: EgressPolicy): Record<string, string> {
    const env: Record<string, string> = {}
    for (const c of policy.credentials) env[c.secretName] = placeholderFor(c.credentialId)
    if (policy.networking.type === 'none' && policy.repositories.length === 0) return env
    const proxy = `http://127.0.0.1:${SANDBOX_PROXY_PORT}`
    const bundle = `${SANDBOX_EGRESS_DIR}/ca-bundle.pem`
    Object.assign(env, {
      HTTP_PROXY: proxy,
      HTTPS_PROXY: proxy,
      http_proxy: proxy,
      https_proxy: proxy,
      NO_PROXY: 'localhost,127.0.0.1,::1',
      no_proxy: 'localhost,127.0.0.1,::1',
      SSL_CERT_FILE: bundle,
      CURL_CA_BUNDLE: bundle,
      GIT_SSL_CAINFO: bundle,
      REQUESTS_CA_BUNDLE: bundle,
      PIP_CERT: bundle,
      NODE_EXTRA_CA_CERTS: `${SANDBOX_EGRESS_DIR}/ca.pem`,
      npm_config_proxy: proxy,
      npm_config_https_proxy: proxy,
    })
    return env
  }

  async dispose(): Promise<void> {
    const all = [...this.sessions.values()]
    this.sessions.clear()
    await Promise.all(all.map(closeSession))
  }

  // --- decisions -------------------------------------------------------------------------

  private networkAllows(policy: EgressPolicy, host: string): boolean {
    const n = policy.networking
    if (n.type === 'unrestricted') return true
    if (n.type === 'limited') return hostAllowed(host, n.allowedHosts)
    return false
  }

  private repositoryFor(policy: EgressPolicy, target: Target, path: string | undefined): EgressRepository | undefined {
    for (const repo of policy.repositories) {
      const u = safeUrl(repo.url)
      if (!u || u.hostname.toLowerCase() !== target.host.toLowerCase()) continue
      if (portOf(u) !== target.port) continue
      if (path === undefined) return repo
      const base = u.pathname.replace(/\.git\/?$/, '').replace(/\/$/, '')
      const p = path.split('?')[0]!
      if (p === base || p.startsWith(base + '/') || p.startsWith(base + '.git')) return repo
    }
    return undefined
  }

  private credentialsFor(policy: EgressPolicy, host: string): EgressCredential[] {
    if (!this.networkAllows(policy, host)) return []
    return policy.credentials.filter((c) => (c.header || c.body) && (c.hosts === 'unrestricted' || hostAllowed(host, c.hosts)))
  }

  /** Resolves and checks; returns the permitted addresses, in the resolver's order. Throws Refusal. */
  private async destinations(host: string): Promise<string[]> {
    const bare = host.replace(/^\[|\]$/g, '')
    const nameWhy = isIP(bare) ? undefined : forbiddenHostnameReason(bare)
    if (nameWhy) throw new Refusal(403, `${host} ${nameWhy}`)
    let addresses: string[]
    if (isIP(bare)) addresses = [bare]
    else {
      try {
        addresses = await this.resolver(bare)
      } catch {
        throw new Refusal(502, `${host} could not be resolved`)
      }
    }
    const permitted = addresses.filter((a) => forbiddenAddressReason(a) === undefined)
    if (permitted.length === 0) {
      const why = addresses.length ? forbiddenAddressReason(addresses[0]!) : 'no addresses'
      throw new Refusal(403, `${host} resolves to a destination sandboxes may not reach (${why})`)
    }
    return permitted
  }

  /** Connects to the first permitted address that answers (e.g. IPv4 when IPv6 has no route). */
  private async connectUpstream(target: Target): Promise<Duplex> {
    for (const address of await this.destinations(target.host)) {
      try {
        return await this.dialer(address, target.port)
      } catch {
        // try the next address
      }
    }
    throw new Refusal(502, `could not connect to ${target.host}:${target.port}`)
  }

  // --- CONNECT ---------------------------------------------------------------------------

  private async onConnect(session: Session, req: http.IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
    client.on('error', () => client.destroy())
    const target = parseAuthority(req.url ?? '')
    if (!target) return refuseSocket(client, 400, `CONNECT needs host:port, got ${JSON.stringify((req.url ?? '').slice(0, 200))}`)
    const policy = session.policy
    const repo = this.repositoryFor(policy, target, undefined)
    const allowed = this.networkAllows(policy, target.host)
    if (!allowed && !repo) {
      this.log(`egress ${session.id} CONNECT ${target.host}:${target.port} refused: not an allowed host`)
      return refuseSocket(client, 403, `${target.host} is not among the hosts this environment may reach`)
    }
    const intercept = repo !== undefined || this.credentialsFor(policy, target.host).length > 0
    try {
      if (intercept) {
        // Check the destination before telling the client the tunnel is up.
        await this.destinations(target.host)
        client.write('HTTP/1.1 200 Connection established\r\n\r\n')
        if (head.length) client.unshift(head)
        const secure = new tls.TLSSocket(client, { isServer: true, secureContext: this.options.ca.contextFor(target.host) })
        secure.on('error', () => secure.destroy())
        targets.set(secure, { ...target, tls: true })
        this.log(`egress ${session.id} CONNECT ${target.host}:${target.port} intercepted (credential injection)`)
        session.inner.emit('connection', secure)
        return
      }
      const upstream = await this.connectUpstream(target)
      this.log(`egress ${session.id} CONNECT ${target.host}:${target.port} tunnelled`)
      client.write('HTTP/1.1 200 Connection established\r\n\r\n')
      if (head.length) upstream.write(head)
      upstream.on('error', () => client.destroy())
      client.on('close', () => upstream.destroy())
      upstream.on('close', () => client.destroy())
      client.pipe(upstream).pipe(client)
    } catch (err) {
      const r = err instanceof Refusal ? err : new Refusal(502, 'the egress proxy failed')
      this.log(`egress ${session.id} CONNECT ${target.host}:${target.port} refused: ${r.message}`)
      refuseSocket(client, r.status, r.message)
    }
  }

  // --- Upgrades (WebSocket), plain or inside an intercepted tunnel ---------------------------

  /**
   * Same decisions and header injection as a request; then the two connections are spliced.
   * Frames coming back are scrubbed of injected secrets with a same-length mask, so frame
   * lengths stay valid; such a connection negotiates no extension, so no frame is compressed.
   */
  private async onUpgrade(session: Session, req: http.IncomingMessage, client: Duplex, head: Buffer, tunnel: Target | undefined): Promise<void> {
    client.on('error', () => client.destroy())
    const where = requestTarget(req, tunnel)
    if (!where) return refuseSocket(client, 400, NOT_A_PROXY_REQUEST)
    const { target, path } = where
    const policy = session.policy
    const repo = this.repositoryFor(policy, target, path)
    const label = `UPGRADE ${target.tls ? 'https' : 'http'}://${target.host}:${target.port}`
    if (!this.networkAllows(policy, target.host) && !repo) {
      this.log(`egress ${session.id} ${label} refused: not an allowed host or repository path`)
      return refuseSocket(client, 403, `${target.host} is not among the hosts this environment may reach`)
    }
    try {
      const headers: Record<string, string | string[]> = {}
      for (const [k, v] of Object.entries(req.headers)) if (k !== 'proxy-connection' && k !== 'proxy-authorization' && v !== undefined) headers[k] = v
      const secrets: string[] = []
      for (const c of this.credentialsFor(policy, target.host)) {
        const placeholder = placeholderFor(c.credentialId)
        if (!c.header || !Object.values(headers).some((v) => String(v).includes(placeholder))) continue
        const secret = await c.secret()
        if (!secret) throw new Refusal(502, `credential ${c.credentialId} has no secret stored`)
        secrets.push(secret)
        for (const [k, v] of Object.entries(headers)) headers[k] = Array.isArray(v) ? v.map((x) => x.split(placeholder).join(secret)) : v.split(placeholder).join(secret)
      }
      if (repo) {
        const token = await repo.token()
        if (!token) throw new Refusal(502, `the repository ${repo.url} has no authorization token stored`)
        headers.authorization = `Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`
        secrets.push(token)
      }
      if (Object.values(headers).flat().some((v) => /[\r\n]/.test(v)) || /\s/.test(path)) throw new Refusal(400, 'a header value or the path carries a line break or space')
      // A compressed frame (permessage-deflate) would hide a reflected secret from the mask:
      // a connection that carries one negotiates no extension at all.
      if (secrets.length) delete headers['sec-websocket-extensions']
      const raw = await this.connectUpstream(target)
      const upstream: Duplex = target.tls ? tls.connect({ socket: raw, host: target.host, servername: isIP(target.host) ? undefined : target.host, ca: this.options.upstreamCa ? [...this.options.upstreamCa] : undefined }) : raw
      this.log(`egress ${session.id} ${label}${secrets.length ? ' (credentials injected)' : ''}`)
      const lines = [`${req.method} ${path} HTTP/1.1`]
      for (const [k, v] of Object.entries(headers)) for (const one of Array.isArray(v) ? v : [v]) lines.push(`${k}: ${one}`)
      upstream.write(lines.join('\r\n') + '\r\n\r\n')
      if (head.length) upstream.write(head)
      upstream.on('error', () => client.destroy())
      client.on('close', () => upstream.destroy())
      upstream.on('close', () => client.destroy())
      client.pipe(upstream)
      ;(secrets.length ? upstream.pipe(new SecretScrubber(secrets, 'mask')) : upstream).pipe(client)
    } catch (err) {
      const r = err instanceof Refusal ? err : new Refusal(502, 'the egress proxy failed')
      this.log(`egress ${session.id} ${label} refused: ${r.message}`)
      refuseSocket(client, r.status, r.message)
    }
  }

  // --- HTTP requests (plain, or inside an intercepted tunnel) -------------------------------

  private async onRequest(session: Session, req: http.IncomingMessage, res: http.ServerResponse, tunnel: Target | undefined): Promise<void> {
    const where = requestTarget(req, tunnel)
    if (!where) return refuse(res, 400, NOT_A_PROXY_REQUEST)
    const { target, path } = where
    const policy = session.policy
    const repo = this.repositoryFor(policy, target, path)
    const label = `${req.method} ${target.tls ? 'https' : 'http'}://${target.host}:${target.port}`
    if (!this.networkAllows(policy, target.host) && !repo) {
      this.log(`egress ${session.id} ${label} refused: not an allowed host or repository path`)
      return refuse(res, 403, `${target.host} is not among the hosts this environment may reach`)
    }
    try {
      const headers: http.OutgoingHttpHeaders = {}
      for (const [k, v] of Object.entries(req.headers)) if (!HOP_BY_HOP.has(k) && v !== undefined) headers[k] = v
      const secrets: string[] = []
      let body: Buffer | undefined
      const creds = this.credentialsFor(policy, target.host)
      for (const c of creds) {
        const placeholder = placeholderFor(c.credentialId)
        const needsHeader = c.header && Object.values(headers).some((v) => String(v).includes(placeholder))
        let needsBody = false
        if (c.body) {
          body ??= await readBody(req, this.maxBody)
          needsBody = body.includes(placeholder)
        }
        if (!needsHeader && !needsBody) continue
        const secret = await c.secret()
        if (!secret) throw new Refusal(502, `credential ${c.credentialId} has no secret stored`)
        secrets.push(secret)
        if (needsHeader) for (const [k, v] of Object.entries(headers)) headers[k] = Array.isArray(v) ? v.map((x) => x.split(placeholder).join(secret)) : String(v).split(placeholder).join(secret)
        if (needsBody) body = Buffer.from(body!.toString('latin1').split(placeholder).join(Buffer.from(secret, 'utf8').toString('latin1')), 'latin1')
      }
      if (repo) {
        const token = await repo.token()
        if (!token) throw new Refusal(502, `the repository ${repo.url} has no authorization token stored`)
        headers.authorization = `Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`
        secrets.push(token)
      }
      if (secrets.length) headers['accept-encoding'] = 'identity'
      if (body) {
        headers['content-length'] = String(body.length)
        delete headers['transfer-encoding']
      }
      const raw = await this.connectUpstream(target)
      // `host` makes certificate checks use the target name (or IP literal), not the socket's address.
      const socket = target.tls ? tls.connect({ socket: raw, host: target.host, servername: isIP(target.host) ? undefined : target.host, ca: this.options.upstreamCa ? [...this.options.upstreamCa] : undefined }) : raw
      this.log(`egress ${session.id} ${label}${secrets.length ? ' (credentials injected)' : ''}`)
      await new Promise<void>((resolve) => {
        const upstreamReq = http.request({ method: req.method, path, headers, createConnection: () => socket as net.Socket })
        upstreamReq.on('response', (up) => {
          const out: http.OutgoingHttpHeaders = {}
          for (const [k, v] of Object.entries(up.headers)) if (!HOP_BY_HOP.has(k) && v !== undefined) out[k] = scrubHeader(v, secrets)
          if (secrets.length) delete out['content-length']
          res.writeHead(up.statusCode ?? 502, out)
          ;(secrets.length ? up.pipe(new SecretScrubber(secrets)) : up).pipe(res)
          up.on('end', resolve)
          up.on('error', () => {
            res.destroy()
            resolve()
          })
        })
        upstreamReq.on('error', (err) => {
          const msg = err.message.includes('certificate') ? `TLS verification of ${target.host} failed` : `the request to ${target.host} failed`
          if (!res.headersSent) refuse(res, 502, msg)
          else res.destroy()
          resolve()
        })
        res.on('close', () => upstreamReq.destroy())
        if (body) upstreamReq.end(body)
        else req.pipe(upstreamReq)
      })
    } catch (err) {
      const r = err instanceof Refusal ? err : new Refusal(502, 'the egress proxy failed')
      this.log(`egress ${session.id} ${label} refused: ${r.message}`)
      if (!res.headersSent) refuse(res, r.status, r.message)
      else res.destroy()
    }
  }
}

const targets = new WeakMap<object, Target>()

async function closeSession(s: Session): Promise<void> {
  for (const sock of s.sockets) sock.destroy()
  await new Promise<void>((resolve) => s.server.close(() => resolve()))
  s.inner.close()
}

function safeUrl(s: string): URL | undefined {
  try {
    return new URL(s)
  } catch {
    return undefined
  }
}

function portOf(u: URL): number {
  return u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80
}

function parseAuthority(s: string): Target | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})$/.exec(s)
  if (!m) return undefined
  const port = Number(m[2])
  if (port < 1 || port > 65535) return undefined
  return { host: m[1]!.replace(/^\[|\]$/g, ''), port, tls: true }
}

function refuse(res: http.ServerResponse, status: number, message: string): void {
  const body = `corral egress proxy: ${message}\n`
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body), 'x-corral-egress': 'refused' })
  res.end(body)
}

function refuseSocket(socket: Duplex, status: number, message: string): void {
  const body = `corral egress proxy: ${message}\n`
  const reason = status === 403 ? 'Forbidden' : status === 400 ? 'Bad Request' : 'Bad Gateway'
  socket.end(`HTTP/1.1 ${status} ${reason}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\nx-corral-egress: refused\r\n\r\n${body}`)
}

function readBody(req: http.IncomingMessage, max: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    req.on('data', (c: Buffer) => {
      size += c.length
      if (size > max) {
        reject(new Refusal(413, `a request body that may carry a credential is limited to ${max} bytes`))
        req.destroy()
        return
      }
      chunks.push(c)
    })
    req.on('end', () => resolve(Buffer.concat(chunks)))
    req.on('error', reject)
  })
}

function scrubHeader(v: string | string[] | number, secrets: readonly string[]): string | string[] | number {
  if (!secrets.length || typeof v === 'number') return v
  const one = (s: string) => secrets.reduce((acc, sec) => acc.split(sec).join('[redacted by corral]'), s)
  return Array.isArray(v) ? v.map(one) : one(v)
}

/**
 * Replaces secrets in a byte stream, across chunk boundaries: with `[redacted by corral]`, or
 * with `*` of the same length (`mask`, for framed streams whose lengths must not change).
 */
export class SecretScrubber extends Transform {
  private tail = Buffer.alloc(0)
  private readonly needles: Buffer[]
  private readonly keep: number

  constructor(
    secrets: readonly string[],
    private readonly mode: 'redact' | 'mask' = 'redact',
  ) {
    super()
    this.needles = secrets.filter(Boolean).map((s) => Buffer.from(s, 'utf8'))
    this.keep = Math.max(0, ...this.needles.map((n) => n.length - 1))
  }

  private scrub(buf: Buffer): Buffer {
    let out = buf
    for (const n of this.needles) {
      let i = out.indexOf(n)
      if (i < 0) continue
      const parts: Buffer[] = []
      let from = 0
      while (i >= 0) {
        parts.push(out.subarray(from, i), this.mode === 'mask' ? Buffer.alloc(n.length, '*') : Buffer.from('[redacted by corral]'))
        from = i + n.length
        i = out.indexOf(n, from)
      }
      parts.push(out.subarray(from))
      out = Buffer.concat(parts)
    }
    return out
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    const data = this.scrub(Buffer.concat([this.tail, chunk]))
    const cut = Math.max(0, data.length - this.keep)
    this.tail = Buffer.from(data.subarray(cut))
    done(null, data.subarray(0, cut))
  }

  override _flush(done: TransformCallback): void {
    done(null, this.scrub(this.tail))
  }
}

const NOT_A_PROXY_REQUEST = 'the egress proxy takes absolute http:// URLs and CONNECT for https'

/**
 * Where a request goes: inside an intercepted tunnel, the tunnel's target and the request's
 * path; otherwise the absolute http:// URL a proxy client sends (undefined when it is not one).
 */
function requestTarget(req: http.IncomingMessage, tunnel: Target | undefined): { target: Target; path: string } | undefined {
  if (tunnel) return { target: tunnel, path: req.url ?? '/' }
  const u = safeUrl(req.url ?? '')
  if (!u || u.protocol !== 'http:') return undefined
  return { target: { host: u.hostname.replace(/^\[|\]$/g, ''), port: portOf(u), tls: false }, path: u.pathname + u.search }
}
