import net from 'node:net'
import type { Duplex } from 'node:stream'
import { CorralError } from '../../../shared/errors'

/*
 * The host side of a VM sandbox's egress. The guest has no network device: its
 * guest/egress-bridge.js listens on the guest's 127.0.0.1:3128 and carries each TCP connection
 * as a stream over one virtio-serial port (`corral.egress`), which QEMU exposes on the host as a
 * unix socket (`-chardev socket,id=eg,path=<dir>/egress.sock,server=on,wait=off
 * -device virtserialport,chardev=eg,name=corral.egress`). This end reads those frames and opens
 * one connection to the session's egress proxy socket per stream, so the proxy decides
 * everything exactly as for a Docker or bubblewrap sandbox (the proxy sees Corral's own uid, as
 * for web_fetch). The frame protocol is written down at the top of guest/egress-bridge.js.
 *
 * The guest is not trusted: every frame is checked (type, size, stream ids that only increase,
 * the per-stream window, nothing after END), and a frame that breaks a rule drops this VM's
 * bridge (every stream closed, the channel closed, `closed` resolves with the reason); nothing
 * is thrown into the engine. At most `maxStreams` streams are open at once; more are refused
 * one by one with CLOSE.
 */

export const EGRESS_PORT_NAME = 'corral.egress'
const HEADER = 9
const MAX_PAYLOAD = 65536
const WINDOW = 256 * 1024
const VERSION = 1
const enum T {
  HELLO = 1,
  OPEN = 2,
  DATA = 3,
  WINDOW = 4,
  END = 5,
  CLOSE = 6,
}

/** The frame codec's constants, for the test that holds the guest script to the same numbers. */
export const EGRESS_FRAME = { HEADER, MAX_PAYLOAD, WINDOW, VERSION, TYPES: { HELLO: 1, OPEN: 2, DATA: 3, WINDOW: 4, END: 5, CLOSE: 6 } } as const

function frame(type: T, id: number, payload?: Buffer): Buffer {
  const body = payload ?? Buffer.alloc(0)
  const out = Buffer.allocUnsafe(HEADER + body.length)
  out.writeUInt8(type, 0)
  out.writeUInt32BE(id >>> 0, 1)
  out.writeUInt32BE(body.length, 5)
  body.copy(out, HEADER)
  return out
}

const u32 = (n: number) => {
  const b = Buffer.allocUnsafe(4)
  b.writeUInt32BE(n, 0)
  return b
}

class ProtocolError extends Error {}

interface HostStream {
  id: number
  upstream: net.Socket
  /** Bytes this side may still send to the guest. */
  credit: number
  /** Bytes the guest sent that are not yet written upstream. */
  unacked: number
  backlog: Buffer[]
  upstreamEnded: boolean
  upstreamClosed: boolean
  sentEnd: boolean
  gotEnd: boolean
  over: boolean
}

export interface VmEgressBridgeOptions {
  /** The port's byte stream: the connected QEMU chardev socket (a pipe to the guest script in tests). */
  channel: Duplex
  /** The session's egress proxy socket; undefined while the sandbox has no session egress (a warm VM): streams are refused. */
  proxySocketPath?: string
  /** Streams open at once (default 128); each one past it is refused with CLOSE. */
  maxStreams?: number
  /** One line per event worth knowing (a refusal, a dropped bridge); never a byte of traffic. */
  log?: (line: string) => void
}

/**
 * One VM's egress bridge over an already connected channel. Sends HELLO at once. Owns the
 * channel and every upstream connection: `dispose()` closes them all. `closed` resolves when the
 * bridge is over, with the reason when it was dropped for a protocol error (undefined when the
 * channel simply ended or it was disposed).
 */
export class VmEgressBridge {
  readonly closed: Promise<string | undefined>
  private resolveClosed!: (reason: string | undefined) => void
  private readonly channel: Duplex
  private readonly streams = new Map<number, HostStream>()
  private readonly maxStreams: number
  private readonly log: (line: string) => void
  private proxySocketPath: string | undefined
  private pending: Buffer = Buffer.alloc(0)
  private helloSeen = false
  private lastId = 0
  private done = false
  private opened = 0

  constructor(options: VmEgressBridgeOptions) {
    this.channel = options.channel
    this.proxySocketPath = options.proxySocketPath
    this.maxStreams = options.maxStreams ?? 128
    this.log = options.log ?? (() => {})
    this.closed = new Promise((resolve) => (this.resolveClosed = resolve))
    this.channel.on('data', (chunk: Buffer) => this.onChannelData(chunk))
    this.channel.on('error', () => this.finish(undefined))
    this.channel.on('close', () => this.finish(undefined))
    this.channel.on('end', () => this.finish(undefined))
    this.channel.write(frame(T.HELLO, 0, Buffer.from([VERSION])))
  }

  /** Points later streams at another proxy socket (a warm VM claimed by a session), or refuses them (undefined). */
  setProxySocketPath(path: string | undefined): void {
    this.proxySocketPath = path
  }

  /** Open streams now, and streams opened since the start. */
  stats(): { open: number; opened: number } {
    return { open: this.streams.size, opened: this.opened }
  }

  dispose(): void {
    this.finish(undefined)
  }

  private finish(protocolError: string | undefined): void {
    if (this.done) return
    this.done = true
    if (protocolError) this.log(`vm egress bridge dropped: the guest broke the frame protocol (${protocolError})`)
    for (const s of this.streams.values()) {
      s.over = true
      s.upstream.destroy()
    }
    this.streams.clear()
    this.channel.destroy()
    this.resolveClosed(protocolError)
  }

  private send(type: T, id: number, payload?: Buffer): void {
    if (!this.done) this.channel.write(frame(type, id, payload))
  }

  private onChannelData(chunk: Buffer): void {
    if (this.done) return
    this.pending = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk
    try {
      while (this.pending.length >= HEADER && !this.done) {
        const type = this.pending.readUInt8(0)
        const id = this.pending.readUInt32BE(1)
        const length = this.pending.readUInt32BE(5)
        if (type < T.HELLO || type > T.CLOSE) throw new ProtocolError(`unknown frame type ${type}`)
        if (length > MAX_PAYLOAD) throw new ProtocolError(`a frame of ${length} bytes is over ${MAX_PAYLOAD}`)
        if (this.pending.length < HEADER + length) break
        const payload = this.pending.subarray(HEADER, HEADER + length)
        this.pending = this.pending.subarray(HEADER + length)
        this.onFrame(type as T, id, payload)
      }
    } catch (err) {
      if (!(err instanceof ProtocolError)) throw err
      this.finish(err.message)
    }
  }

  private onFrame(type: T, id: number, payload: Buffer): void {
    if (!this.helloSeen) {
      if (type !== T.HELLO) throw new ProtocolError(`frame type ${type} before HELLO`)
      if (id !== 0 || payload.length !== 1 || payload[0] !== VERSION) throw new ProtocolError(`HELLO for version ${payload[0]} (this host speaks ${VERSION})`)
      this.helloSeen = true
      return
    }
    if (type === T.HELLO) throw new ProtocolError('a second HELLO')
    if (id === 0) throw new ProtocolError(`frame type ${type} on stream 0`)
    if (type === T.OPEN) {
      if (id <= this.lastId) throw new ProtocolError(`OPEN of stream ${id} after stream ${this.lastId}`)
      if (payload.length) throw new ProtocolError('OPEN with a payload')
      this.lastId = id
      this.open(id)
      return
    }
    if (id > this.lastId) throw new ProtocolError(`frame type ${type} for stream ${id}, which was never opened`)
    const s = this.streams.get(id)
    if (!s) return // over already: frames that crossed our CLOSE
    if (type === T.DATA) {
      if (s.gotEnd) throw new ProtocolError(`DATA on stream ${id} after its END`)
      s.unacked += payload.length
      if (s.unacked > WINDOW) throw new ProtocolError(`stream ${id} sent ${s.unacked} bytes past a window of ${WINDOW}`)
      const n = payload.length
      // A copy: the payload is a view of the channel's buffer, and the upstream may queue it.
      s.upstream.write(Buffer.from(payload), () => {
        s.unacked -= n
        if (!s.over) this.send(T.WINDOW, id, u32(n))
      })
    } else if (type === T.WINDOW) {
      if (payload.length !== 4) throw new ProtocolError(`WINDOW of ${payload.length} bytes on stream ${id}`)
      s.credit += payload.readUInt32BE(0)
      if (s.credit > WINDOW) throw new ProtocolError(`stream ${id} granted a window over ${WINDOW}`)
      this.pump(s)
    } else if (type === T.END) {
      if (s.gotEnd) throw new ProtocolError(`a second END on stream ${id}`)
      s.gotEnd = true
      if (!s.upstream.destroyed) s.upstream.end()
      this.maybeDone(s)
    } else if (type === T.CLOSE) {
      this.abort(s, undefined)
    }
  }

  private open(id: number): void {
    if (this.streams.size >= this.maxStreams) {
      this.log(`vm egress bridge refused stream ${id}: ${this.maxStreams} streams are open`)
      this.send(T.CLOSE, id, Buffer.from(`too many connections at once (${this.maxStreams})`))
      return
    }
    const path = this.proxySocketPath
    if (!path) {
      this.send(T.CLOSE, id, Buffer.from('this sandbox has no egress'))
      return
    }
    this.opened++
    const upstream = net.connect({ path, allowHalfOpen: true })
    const s: HostStream = { id, upstream, credit: WINDOW, unacked: 0, backlog: [], upstreamEnded: false, upstreamClosed: false, sentEnd: false, gotEnd: false, over: false }
    this.streams.set(id, s)
    upstream.on('data', (chunk: Buffer) => {
      s.backlog.push(chunk)
      this.pump(s)
    })
    upstream.on('end', () => {
      s.upstreamEnded = true
      this.pump(s)
    })
    upstream.on('error', (err: NodeJS.ErrnoException) => {
      const why = upstream.connecting ? `the session's egress proxy refused the connection (${err.code ?? err.message})` : `the egress proxy connection failed (${err.code ?? err.message})`
      this.abort(s, why)
    })
    upstream.on('close', () => {
      s.upstreamClosed = true
      // A connection the proxy ended cleanly still has its last bytes to pass on; any other is aborted.
      if (s.upstreamEnded) this.pump(s)
      else this.abort(s, 'the egress proxy closed the connection')
    })
  }

  /** Sends what the proxy gave as far as the guest's window allows; END once all of it is out. */
  private pump(s: HostStream): void {
    while (!s.over && s.backlog.length && s.credit > 0) {
      const chunk = s.backlog[0]!
      const n = Math.min(chunk.length, s.credit, MAX_PAYLOAD)
      this.send(T.DATA, s.id, chunk.subarray(0, n))
      s.credit -= n
      if (n === chunk.length) s.backlog.shift()
      else s.backlog[0] = chunk.subarray(n)
    }
    if (s.over) return
    if (s.backlog.length) {
      if (!s.upstreamClosed) s.upstream.pause()
    } else if (s.upstreamEnded && !s.sentEnd) {
      s.sentEnd = true
      this.send(T.END, s.id)
    } else if (!s.upstreamEnded && s.upstream.isPaused()) s.upstream.resume()
    this.maybeDone(s)
  }

  private maybeDone(s: HostStream): void {
    if (s.over || !s.sentEnd) return
    if (s.gotEnd) {
      s.over = true
      this.streams.delete(s.id)
    } else if (s.upstreamClosed) this.abort(s, 'the egress proxy closed the connection')
  }

  /** Ends a stream both ways; tells the guest why unless the guest asked (reason undefined). */
  private abort(s: HostStream, reason: string | undefined): void {
    if (s.over) return
    s.over = true
    this.streams.delete(s.id)
    if (reason !== undefined) this.send(T.CLOSE, s.id, Buffer.from(reason.slice(0, 1024)))
    // After the guest's END, what it sent may still be on its way to the proxy: end, do not cut.
    if (s.gotEnd && !s.upstream.destroyed) {
      s.upstream.removeAllListeners('data')
      s.upstream.resume()
      s.upstream.end()
      setTimeout(() => s.upstream.destroy(), 30_000).unref()
    } else s.upstream.destroy()
  }
}

export interface VmEgressBridgeConnectParams {
  /** QEMU's chardev socket of the `corral.egress` port (server=on,wait=off: QEMU listens). */
  chardevPath: string
  proxySocketPath?: string
  maxStreams?: number
  log?: (line: string) => void
  /** How long to wait for QEMU to create and accept on the socket (default 10 s). */
  timeoutMs?: number
}

/**
 * Connects to QEMU's egress chardev socket (retrying while QEMU is still starting) and starts the
 * bridge. Throws sandbox_error when the socket does not accept within `timeoutMs`. The caller
 * owns the bridge (`dispose()`); it ends by itself when QEMU exits.
 */
export async function connectVmEgressBridge(params: VmEgressBridgeConnectParams): Promise<VmEgressBridge> {
  const deadline = Date.now() + (params.timeoutMs ?? 10_000)
  let last: Error | undefined
  while (Date.now() < deadline) {
    try {
      const socket = await new Promise<net.Socket>((resolve, reject) => {
        const s = net.connect({ path: params.chardevPath })
        s.once('connect', () => resolve(s))
        s.once('error', reject)
      })
      socket.setNoDelay?.(true)
      return new VmEgressBridge({ channel: socket, proxySocketPath: params.proxySocketPath, maxStreams: params.maxStreams, log: params.log })
    } catch (err) {
      last = err as Error
      await new Promise((r) => setTimeout(r, 20))
    }
  }
  throw new CorralError('sandbox_error', `the VM's egress port socket ${params.chardevPath} did not accept a connection: ${last?.message ?? 'timed out'}`, { cause: last })
}

/**
 * QEMU arguments of the egress port: a chardev unix socket QEMU listens on (`chardevPath`, keep
 * it in a 0700 directory) wired to a virtio-serial port named `corral.egress` (needs a
 * `-device virtio-serial-pci` on the command line already, the runner's port's bus).
 */
export function egressPortArgs(chardevPath: string): string[] {
  if (chardevPath.includes(',')) throw new CorralError('sandbox_error', `the egress socket path may not contain a comma (QEMU's option separator): ${chardevPath}`)
  return ['-chardev', `socket,id=corral_egress,path=${chardevPath},server=on,wait=off`, '-device', `virtserialport,chardev=corral_egress,name=${EGRESS_PORT_NAME}`]
}
