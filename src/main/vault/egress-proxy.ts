import { randomBytes } from 'node:crypto'
import { promises as dns } from 'node:dns'
import { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import http from 'node:http'
import net, { isIP } from 'node:net'
import { join } from 'node:path'
import { PassThrough, type Duplex } from 'node:stream'
import tls from 'node:tls'
import { CorralError } from '../../shared/errors'
import { PLAIN_HTTP_HOSTS_KEY } from '../../shared/api/plain-http-hosts'
import { forbiddenAddressReason, forbiddenHostnameReason } from './address-policy'
import { hostAllowed } from '../../shared/api/allowed-hosts'
import { headerTokens, hostHeaderProblem, NOT_A_PROXY_REQUEST, plainHttpAllowed, Refusal, repositoryFor, repositoryOnHost, requestTarget, webSocketUpgradeProblem, type EgressTarget } from './egress-request'
import { contentCodings, repositoryAuthorization, repositoryScrubValues, SecretScrubber, scrubBuffer, scrubbedBody, scrubHeaderValue } from './egress-response'
import type { EgressCertificateAuthority } from './egress-ca'
import { SANDBOX_BRIDGE_SOURCE } from './sandbox-bridge'
import { policyFingerprint, type EgressCredential, type EgressPolicy, type EgressRepository } from './egress-policy'
// The policy's types live with the policy (egress-policy.ts, which imports nothing of the proxy);
// re-exported here for the proxy's callers.
export type { EgressCredential, EgressNetworking, EgressPolicy, EgressRepository } from './egress-policy'
import { egressPeerRefusal, peerCredentialsReader, socketFd, type EgressPeerRule, type PeerCredentialsReader } from './peer-credentials'

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
 * requests for that repository's own paths, replacing whatever the sandbox sent. Secrets go
 * only over TLS (plain HTTP where a credential lists the host in `corral.plain_http_hosts`).
 * Every response from a host that may hold a secret is scrubbed of it, whether or not the
 * request carried one (the request asks for an identity encoding; gzip, deflate and br are
 * decoded), so an upstream that echoes or stores a request does not hand the secret back in
 * clear text. The rules for reading a request are in egress-request.ts, the scrubbing in
 * egress-response.ts (see the vault README for the table of rules and limitations).
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

export interface EgressProxyOptions {
  /**
   * Parent of the per-session directories (made mode 0700, owned by Corral's user; each session
   * dir has a random name and is reached by its sandbox through a bind mount).
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
  /**
   * The uids the host sees for Docker sandboxes, accepted on a session socket only from inside a
   * Docker container (default [1000]; see peer-credentials.ts). Corral's own uid is always accepted.
   */
  containerUids?: readonly number[]
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

/**
 * A fresh private parent directory for session sockets: under $XDG_RUNTIME_DIR or the temp dir,
 * mode 0700 (only Corral's user can traverse it; a sandbox reaches its own session directory
 * through a bind mount, which does not traverse the host path).
 */
export function defaultEgressRuntimeDir(env: NodeJS.ProcessEnv = process.env): string {
  const dir = mkdtempSync(join(env.XDG_RUNTIME_DIR || tmpdir(), 'corral-egress-'))
  chmodSync(dir, 0o700)
  return dir
}

export const placeholderFor = (credentialId: string) => `corral_placeholder_${credentialId}`

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer', 'upgrade'])

type Target = EgressTarget

export { SecretScrubber } from './egress-response'

interface Session {
  id: string
  policy: EgressPolicy
  server: http.Server
  inner: http.Server
  sockets: Set<Duplex>
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
  /** Reads a connection's peer credentials; undefined where the addon is not built (the 0700 directory alone then). */
  private readonly peerReader?: PeerCredentialsReader
  private readonly peerRule: EgressPeerRule

  constructor(private readonly options: EgressProxyOptions) {
    this.resolver = options.resolver ?? defaultResolver
    this.dialer = options.dialer ?? defaultDialer
    this.log = options.log ?? (() => {})
    this.maxBody = options.maxInjectedBodyBytes ?? 16 * 1024 * 1024
    const reader = peerCredentialsReader()
    if ('read' in reader) this.peerReader = reader.read
    else this.log(`egress: connections are not checked by peer credentials, only the 0700 socket directory keeps other local users out: ${reader.unavailable}`)
    this.peerRule = { ownUid: process.getuid?.() ?? -1, containerUids: options.containerUids ?? [DOCKER_SANDBOX_UID] }
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
    // First, before the HTTP parser reads a byte: who connected (peer-credentials.ts).
    session.server.prependListener('connection', (s: net.Socket) => {
      const why = this.peerRefusal(s)
      if (!why) return
      this.log(`egress ${session.id} refused a connection: ${why}`)
      s.destroy()
    })
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
    // A Docker sandbox's uid is not Corral's: the socket is writable by all, and reachable only
    // through the 0700 runtime directory (Corral's user) or the sandbox's mount; the peer check decides.
    chmodSync(socketPath, 0o666)
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
    ensurePrivateDir(this.options.runtimeDir)
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

  /** Why a connection may not use a session socket (peer-credentials.ts), or undefined. */
  private peerRefusal(socket: net.Socket): string | undefined {
    if (!this.peerReader) return undefined
    const fd = socketFd(socket)
    if (fd === undefined) return 'its peer credentials could not be read (no descriptor)'
    try {
      return egressPeerRefusal(this.peerReader(fd), this.peerRule)
    } catch (err) {
      return `its peer credentials could not be read (${(err as Error).message})`
    }
  }

  // --- decisions -------------------------------------------------------------------------

  private networkAllows(policy: EgressPolicy, host: string): boolean {
    const n = policy.networking
    if (n.type === 'unrestricted') return true
    if (n.type === 'limited') return hostAllowed(host, n.allowedHosts)
    return false
  }

  /** The repository a request (or, `path` undefined, a CONNECT) is for; see egress-request's repositoryFor. Throws Refusal. */
  private repositoryFor(policy: EgressPolicy, target: Target, path: string | undefined): EgressRepository | undefined {
    return repositoryFor(policy.repositories, target, path)
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
   * Only a real WebSocket opening handshake passes, with the same decisions and header
   * injection as a request. The two connections are spliced only after the upstream answers
   * `101 Switching Protocols` with `Upgrade: websocket`; any other answer is relayed as an
   * ordinary response (scrubbed) and the connection closed, so bytes the client sent after its
   * request never reach an upstream that is still speaking HTTP. Frames coming back from a host
   * whose responses are scrubbed are masked (same length, so frame lengths stay valid); such a
   * connection negotiates no extension, so no frame is compressed past the mask.
   */
  private async onUpgrade(session: Session, req: http.IncomingMessage, client: Duplex, head: Buffer, tunnel: Target | undefined): Promise<void> {
    client.on('error', () => client.destroy())
    let label = `UPGRADE ${tunnel ? `https://${tunnel.host}:${tunnel.port}` : String(req.url ?? '').slice(0, 100)}`
    try {
      const where = requestTarget(req.url ?? '', tunnel)
      if (!where) throw new Refusal(400, NOT_A_PROXY_REQUEST)
      const { target, path } = where
      label = `UPGRADE ${target.tls ? 'https' : 'http'}://${target.host}:${target.port}`
      const notWebSocket = webSocketUpgradeProblem(req)
      if (notWebSocket) throw new Refusal(400, notWebSocket)
      const out = await this.prepare(session.policy, req, target, path)
      const { headers, scrubbing } = out
      headers.connection = 'Upgrade'
      headers.upgrade = 'websocket'
      // A compressed frame (permessage-deflate) would hide a reflected secret from the mask.
      if (scrubbing) delete headers['sec-websocket-extensions']
      const secrets = await out.scrubValues
      const socket = await this.upstreamSocket(target)
      this.log(`egress ${session.id} ${label}${out.injected ? ' (credentials injected)' : ''}`)
      await new Promise<void>((resolve) => {
        const upstreamReq = http.request({ method: 'GET', path, headers, createConnection: () => socket as net.Socket })
        client.on('close', () => {
          upstreamReq.destroy()
          socket.destroy()
        })
        upstreamReq.on('upgrade', (up: http.IncomingMessage, upstream: Duplex, upHead: Buffer) => {
          upstream.on('error', () => client.destroy())
          client.on('close', () => upstream.destroy())
          upstream.on('close', () => client.destroy())
          const switched = headerTokens(up.headers.upgrade)
          const refusal =
            switched.length !== 1 || switched[0] !== 'websocket'
              ? `${target.host} switched to ${JSON.stringify(String(up.headers.upgrade ?? '').slice(0, 100))}, not websocket`
              : scrubbing && up.headers['sec-websocket-extensions'] !== undefined
                ? `${target.host} negotiated a WebSocket extension it was not offered`
                : undefined
          if (refusal) {
            upstream.destroy()
            this.log(`egress ${session.id} ${label} refused: ${refusal}`)
            refuseSocket(client, 502, refusal)
            return resolve()
          }
          client.write(responseHead(up, secrets, []))
          if (head.length) upstream.write(head)
          client.pipe(upstream)
          const back = scrubbing ? new SecretScrubber(secrets, 'mask') : new PassThrough()
          back.pipe(client)
          if (upHead.length) back.write(upHead)
          upstream.pipe(back)
          resolve()
        })
        upstreamReq.on('response', (up) => {
          // Not switched: an ordinary answer, then the end of this connection.
          try {
            const codings = scrubbing ? contentCodings(up, target.host) : []
            this.log(`egress ${session.id} ${label} answered ${up.statusCode} without switching protocols: relayed, connection closed`)
            client.write(responseHead(up, secrets, codings))
            const body = scrubbing ? scrubbedBody(up, codings, secrets) : up
            body.on('error', () => client.destroy())
            body.on('end', resolve)
            body.pipe(client)
          } catch (err) {
            up.destroy()
            const r = err instanceof Refusal ? err : new Refusal(502, 'the egress proxy failed')
            this.log(`egress ${session.id} ${label} refused: ${r.logReason}`)
            refuseSocket(client, r.status, r.message)
            resolve()
          }
        })
        upstreamReq.on('error', (err) => {
          const msg = err.message.includes('certificate') ? `TLS verification of ${target.host} failed` : `the request to ${target.host} failed`
          this.log(`egress ${session.id} ${label} refused: ${msg}`)
          refuseSocket(client, 502, msg)
          resolve()
        })
        upstreamReq.end()
      })
    } catch (err) {
      const r = err instanceof Refusal ? err : new Refusal(502, 'the egress proxy failed')
      this.log(`egress ${session.id} ${label} refused: ${r.logReason}`)
      refuseSocket(client, r.status, r.message)
    }
  }

  // --- HTTP requests (plain, or inside an intercepted tunnel) -------------------------------

  /**
   * The decisions every request and upgrade goes through, and the headers it goes out with:
   * the target allowed (network or a repository path), the Host header naming the target,
   * placeholders replaced (only over TLS unless the credential lists the plain-HTTP host), a
   * repository's token added (only over TLS). `scrubbing`: the response comes from a host that
   * may hold a secret (a credential's host, a repository's host), so it is scrubbed of
   * `scrubValues` (started now, read in parallel with the upstream connection). Throws Refusal.
   */
  private async prepare(policy: EgressPolicy, req: http.IncomingMessage, target: Target, path: string): Promise<PreparedRequest> {
    const repo = this.repositoryFor(policy, target, path)
    if (!this.networkAllows(policy, target.host) && !repo) throw new Refusal(403, `${target.host} is not among the hosts this environment may reach`, 'not an allowed host or repository path')
    const hostProblem = hostHeaderProblem(req.headers.host, target)
    if (hostProblem) throw new Refusal(421, hostProblem)
    const headers: http.OutgoingHttpHeaders = {}
    for (const [k, v] of Object.entries(req.headers)) if (!HOP_BY_HOP.has(k) && v !== undefined) headers[k] = v
    headers.host ??= authorityOf(target)
    const creds = this.credentialsFor(policy, target.host)
    const repos = policy.repositories.filter((r) => repositoryOnHost(r.url, target.host))
    // One keychain read per credential per request, shared by injection and scrubbing.
    const reads = new Map<EgressCredential, Promise<string | undefined>>()
    const secretOf = (c: EgressCredential) => {
      let p = reads.get(c)
      if (!p) reads.set(c, (p = c.secret()))
      return p
    }
    let injected = false
    for (const c of creds) {
      const placeholder = placeholderFor(c.credentialId)
      if (!c.header || !Object.values(headers).some((v) => String(v).includes(placeholder))) continue
      if (!target.tls && !plainHttpAllowed(c.plainHttpHosts, target)) throw new Refusal(403, `credential ${c.credentialId} is injected only over HTTPS: ${target.host}:${target.port} is not in its metadata "${PLAIN_HTTP_HOSTS_KEY}"`)
      const secret = await secretOf(c)
      if (!secret) throw new Refusal(502, `credential ${c.credentialId} has no secret stored`)
      injected = true
      for (const [k, v] of Object.entries(headers)) headers[k] = Array.isArray(v) ? v.map((x) => x.split(placeholder).join(secret)) : String(v).split(placeholder).join(secret)
    }
    if (repo) {
      if (!target.tls) throw new Refusal(403, `the token of ${repo.url} is sent only over HTTPS`)
      const token = await repo.token()
      if (!token) throw new Refusal(502, `the repository ${repo.url} has no authorization token stored`)
      headers.authorization = repositoryAuthorization(token)
      injected = true
    }
    const scrubbing = creds.length > 0 || repos.length > 0
    if (scrubbing) headers['accept-encoding'] = 'identity'
    const scrubValues = scrubbing
      ? (async () => {
          const values: string[] = []
          for (const c of creds) {
            const s = await secretOf(c)
            if (s) values.push(s)
          }
          for (const r of repos) {
            const t = await r.token()
            if (t) values.push(...repositoryScrubValues(t))
          }
          return values
        })()
      : Promise.resolve([])
    scrubValues.catch(() => {}) // awaited by the caller; a failure there refuses the request
    return { headers, scrubbing, scrubValues, injected, creds, secretOf }
  }

  private async onRequest(session: Session, req: http.IncomingMessage, res: http.ServerResponse, tunnel: Target | undefined): Promise<void> {
    let label = `${req.method} ${tunnel ? `https://${tunnel.host}:${tunnel.port}` : String(req.url ?? '').slice(0, 100)}`
    try {
      const where = requestTarget(req.url ?? '', tunnel)
      if (!where) throw new Refusal(400, NOT_A_PROXY_REQUEST)
      const { target, path } = where
      label = `${req.method} ${target.tls ? 'https' : 'http'}://${target.host}:${target.port}`
      const out = await this.prepare(session.policy, req, target, path)
      const { headers, scrubbing } = out
      let body: Buffer | undefined
      for (const c of out.creds) {
        if (!c.body) continue
        const placeholder = placeholderFor(c.credentialId)
        body ??= await readBody(req, this.maxBody)
        if (!body.includes(placeholder)) continue
        if (!target.tls && !plainHttpAllowed(c.plainHttpHosts, target)) throw new Refusal(403, `credential ${c.credentialId} is injected only over HTTPS: ${target.host}:${target.port} is not in its metadata "${PLAIN_HTTP_HOSTS_KEY}"`)
        const secret = await out.secretOf(c)
        if (!secret) throw new Refusal(502, `credential ${c.credentialId} has no secret stored`)
        out.injected = true
        body = Buffer.from(body.toString('latin1').split(placeholder).join(Buffer.from(secret, 'utf8').toString('latin1')), 'latin1')
      }
      if (body) {
        headers['content-length'] = String(body.length)
        delete headers['transfer-encoding']
      }
      const socket = await this.upstreamSocket(target)
      this.log(`egress ${session.id} ${label}${out.injected ? ' (credentials injected)' : ''}`)
      await new Promise<void>((resolve) => {
        const upstreamReq = http.request({ method: req.method, path, headers, createConnection: () => socket as net.Socket })
        upstreamReq.on('response', (up) => void this.relay({ session, label, req, res, up, target, scrubbing, scrubValues: out.scrubValues }).then(resolve))
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
      this.log(`egress ${session.id} ${label} refused: ${r.logReason}`)
      if (!res.headersSent) refuse(res, r.status, r.message)
      else res.destroy()
    }
  }

  /** Sends the upstream's response to the client: scrubbed (decoded first) when `scrubbing`. Resolves when it is done. */
  private async relay(p: { session: Session; label: string; req: http.IncomingMessage; res: http.ServerResponse; up: http.IncomingMessage; target: Target; scrubbing: boolean; scrubValues: Promise<string[]> }): Promise<void> {
    const { res, up } = p
    try {
      const secrets = await p.scrubValues
      const status = up.statusCode ?? 502
      const bodiless = p.req.method === 'HEAD' || status === 204 || status === 304
      const codings = p.scrubbing && !bodiless ? contentCodings(up, p.target.host) : []
      const out: http.OutgoingHttpHeaders = {}
      for (const [k, v] of Object.entries(up.headers)) if (!HOP_BY_HOP.has(k) && v !== undefined) out[k] = scrubHeaderValue(v, secrets)
      if (codings.length) delete out['content-encoding']
      const length = Number(up.headers['content-length'])
      if (p.scrubbing && !bodiless && codings.length === 0 && Number.isInteger(length) && length <= SCRUB_IN_ONE_PIECE) {
        // A small body of known length is scrubbed whole and keeps a (new) length: no chunked
        // framing and one write, so scrubbing every response costs a keep-alive GET nothing noticeable.
        const clean = scrubBuffer(await readBody(up, SCRUB_IN_ONE_PIECE), secrets)
        out['content-length'] = String(clean.length)
        res.writeHead(status, out)
        res.end(clean)
        return
      }
      if (p.scrubbing && !bodiless) delete out['content-length']
      res.writeHead(status, out)
      const body = p.scrubbing && !bodiless ? scrubbedBody(up, codings, secrets) : up
      await new Promise<void>((resolve) => {
        body.on('end', resolve)
        body.on('error', () => {
          res.destroy()
          resolve()
        })
        body.pipe(res)
      })
    } catch (err) {
      up.destroy()
      const r = err instanceof Refusal ? err : new Refusal(502, 'the egress proxy could not read the secrets to scrub the response with')
      this.log(`egress ${p.session.id} ${p.label} refused: ${r.logReason}`)
      if (!res.headersSent) refuse(res, r.status, r.message)
      else res.destroy()
    }
  }

  /** Connects to the target and, for an intercepted tunnel, opens a verified TLS session over it. */
  private async upstreamSocket(target: Target): Promise<Duplex> {
    const raw = await this.connectUpstream(target)
    // `host` makes certificate checks use the target name (or IP literal), not the socket's address.
    return target.tls ? tls.connect({ socket: raw, host: target.host, servername: isIP(target.host) ? undefined : target.host, ca: this.options.upstreamCa ? [...this.options.upstreamCa] : undefined }) : raw
  }
}

/** Largest response body (with a content-length) scrubbed in one piece rather than streamed. */
const SCRUB_IN_ONE_PIECE = 256 * 1024

interface PreparedRequest {
  headers: http.OutgoingHttpHeaders
  scrubbing: boolean
  scrubValues: Promise<string[]>
  injected: boolean
  creds: EgressCredential[]
  secretOf: (c: EgressCredential) => Promise<string | undefined>
}

const targets = new WeakMap<object, Target>()

/** The uid a Docker sandbox runs as (container-spec: User 1000:1000), as the host sees it without userns-remap. */
const DOCKER_SANDBOX_UID = 1000

/**
 * Makes `dir` (and missing parents) and leaves it mode 0700, owned by this process's user and
 * not a symlink; throws sandbox_error otherwise (a directory someone else controls could let
 * them swap a socket).
 */
function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  const st = lstatSync(dir)
  const uid = process.getuid?.()
  if (!st.isDirectory() || (uid !== undefined && st.uid !== uid)) {
    throw new CorralError('sandbox_error', `the egress runtime directory ${dir} must be a directory owned by uid ${uid} (found ${st.isSymbolicLink() ? 'a symlink' : st.isDirectory() ? `a directory of uid ${st.uid}` : 'a file'})`)
  }
  chmodSync(dir, 0o700)
}

async function closeSession(s: Session): Promise<void> {
  for (const sock of s.sockets) sock.destroy()
  await new Promise<void>((resolve) => s.server.close(() => resolve()))
  s.inner.close()
}

function authorityOf(t: Target): string {
  const host = t.host.includes(':') ? `[${t.host}]` : t.host
  return t.port === (t.tls ? 443 : 80) ? host : `${host}:${t.port}`
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
  socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? 'Refused'}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\nx-corral-egress: refused\r\n\r\n${body}`)
}

/**
 * A response's status line and headers for a raw socket, values scrubbed. A 101 keeps its
 * upgrade headers; any other status is sent for a connection that closes after the body
 * (no length or transfer coding: the body ends with the connection), decoded of `codings`.
 */
function responseHead(up: http.IncomingMessage, secrets: readonly string[], codings: readonly string[]): string {
  const status = up.statusCode ?? 502
  const lines = [`HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? ''}`]
  for (let i = 0; i + 1 < up.rawHeaders.length; i += 2) {
    const name = up.rawHeaders[i]!
    const k = name.toLowerCase()
    if (status === 101 ? k === 'content-length' || k === 'transfer-encoding' : HOP_BY_HOP.has(k) || k === 'content-length' || k === 'transfer-encoding') continue
    if (k === 'content-encoding' && codings.length) continue
    lines.push(`${name}: ${String(scrubHeaderValue(up.rawHeaders[i + 1]!, secrets))}`)
  }
  if (status !== 101) lines.push('connection: close')
  return lines.join('\r\n') + '\r\n\r\n'
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
