'use strict'
/*
 * Corral's egress bridge, guest side. Runs inside a VM sandbox (plain Node >= 18, no
 * dependencies). The guest has no network device: this program listens on the guest's own
 * loopback (127.0.0.1:3128, where HTTP_PROXY / HTTPS_PROXY point) and carries every TCP
 * connection over one virtio-serial port named `corral.egress` to the host, where
 * hands/vm/egress-bridge.ts opens one connection to the session's egress proxy per stream.
 * The host trusts nothing this side sends: it checks every frame.
 *
 *   node egress-bridge.js [--channel <path> | --channel - | <path>] [--listen <port>]
 *
 * --channel: the port's device (default: the /dev/vport* whose
 * /sys/class/virtio-ports/<p>/name is `corral.egress`); `-` reads frames on stdin and writes them
 * on stdout (tests run this script as a child process with pipes in place of the port).
 * --listen: the loopback port (default 3128). Logs go to stderr.
 *
 * Frames (one byte stream, both directions): a 9-byte header, then the payload.
 *   u8 type | u32 stream id (big-endian) | u32 payload length (big-endian, <= 65536)
 *   1 HELLO   stream 0, payload u8 version (1). The host sends it when it connects; the guest
 *             closes every stream it has and answers HELLO. No stream opens before it.
 *   2 OPEN    guest -> host: a new stream; ids increase strictly within one HELLO.
 *   3 DATA    bytes of the stream. A side may have at most WINDOW (256 KiB) bytes sent and not
 *             yet acknowledged per stream.
 *   4 WINDOW  payload u32: that many of the stream's bytes were written on; the sender may send
 *             that many more (per-stream backpressure: one slow stream never blocks the port).
 *   5 END     the sender sends no more data on the stream (TCP half-close).
 *   6 CLOSE   the stream is aborted both ways (refused by the proxy, reset, error); payload: an
 *             optional UTF-8 reason (<= 1 KiB). A stream is over once both sides sent END, or
 *             after a CLOSE; frames for a stream that is over are ignored.
 * A frame that breaks these rules is a protocol error: the host drops the whole bridge (that VM
 * loses its egress; the engine goes on), the guest drops every stream and waits for a new HELLO.
 */
const fs = require('fs')
const net = require('net')

const HEADER = 9
const MAX_PAYLOAD = 65536
const WINDOW = 256 * 1024
const VERSION = 1
const T = { HELLO: 1, OPEN: 2, DATA: 3, WINDOW: 4, END: 5, CLOSE: 6 }

function frame(type, id, payload) {
  const body = payload || Buffer.alloc(0)
  const out = Buffer.allocUnsafe(HEADER + body.length)
  out.writeUInt8(type, 0)
  out.writeUInt32BE(id >>> 0, 1)
  out.writeUInt32BE(body.length, 5)
  body.copy(out, HEADER)
  return out
}

/** Splits a byte stream into frames: push(chunk) returns the complete frames so far; throws on a bad header. */
function FrameReader() {
  let pending = Buffer.alloc(0)
  this.push = function (chunk) {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk
    const frames = []
    while (pending.length >= HEADER) {
      const type = pending.readUInt8(0)
      const id = pending.readUInt32BE(1)
      const length = pending.readUInt32BE(5)
      if (type < T.HELLO || type > T.CLOSE) throw new Error('unknown frame type ' + type)
      if (length > MAX_PAYLOAD) throw new Error('frame payload of ' + length + ' bytes is over ' + MAX_PAYLOAD)
      if (pending.length < HEADER + length) break
      frames.push({ type: type, id: id, payload: pending.subarray(HEADER, HEADER + length) })
      pending = pending.subarray(HEADER + length)
    }
    return frames
  }
}

module.exports = { HEADER: HEADER, MAX_PAYLOAD: MAX_PAYLOAD, WINDOW: WINDOW, VERSION: VERSION, TYPES: T, frame: frame, FrameReader: FrameReader }

function findPort(name) {
  const dir = '/sys/class/virtio-ports'
  let entries = []
  try {
    entries = fs.readdirSync(dir)
  } catch (err) {
    return undefined
  }
  for (const p of entries) {
    try {
      if (fs.readFileSync(dir + '/' + p + '/name', 'utf8').trim() === name) return '/dev/' + p
    } catch (err) {
      /* a port without a name */
    }
  }
  return undefined
}

/** The channel to the host: write(buf) and onData(fn) / onEnd(fn), over pipes or the virtio port's device. */
function openChannel(spec) {
  if (spec === '-') {
    process.stdin.on('data', (c) => channel.data(c))
    process.stdin.on('end', () => process.exit(0))
    const channel = {
      data: () => {},
      write: (buf) => process.stdout.write(buf),
      disconnected: () => {},
    }
    return channel
  }
  // A virtio port allows one open: read and write through the same descriptor. read() returns
  // 0 while no host is connected (before the host's bridge connects, and across a snapshot), so
  // the reader waits and tries again instead of ending.
  const fd = fs.openSync(spec, 'r+')
  const channel = { data: () => {}, disconnected: () => {}, write: null }
  const queue = []
  let writing = false
  channel.write = (buf) => {
    queue.push(buf)
    if (!writing) flush()
  }
  function flush() {
    const buf = queue.shift()
    if (!buf) {
      writing = false
      return
    }
    writing = true
    fs.write(fd, buf, 0, buf.length, null, (err, n) => {
      if (err) {
        log('port write failed: ' + err.message)
        queue.length = 0
        writing = false
        return
      }
      if (n < buf.length) queue.unshift(buf.subarray(n))
      flush()
    })
  }
  const buf = Buffer.allocUnsafe(MAX_PAYLOAD + HEADER)
  let connected = false
  function read() {
    fs.read(fd, buf, 0, buf.length, null, (err, n) => {
      if (err || n === 0) {
        if (connected) channel.disconnected()
        connected = false
        return setTimeout(read, err ? 500 : 100)
      }
      connected = true
      channel.data(Buffer.from(buf.subarray(0, n)))
      read()
    })
  }
  read()
  return channel
}

function loopbackUp() {
  try {
    return (parseInt(fs.readFileSync('/sys/class/net/lo/flags', 'utf8'), 16) & 1) === 1
  } catch (err) {
    return true // no sysfs (a test on a host): nothing to do
  }
}

function bringUpLoopback() {
  const cp = require('child_process')
  for (const cmd of [['ip', ['link', 'set', 'lo', 'up']], ['/opt/corral/busybox', ['ifconfig', 'lo', '127.0.0.1', 'up']], ['ifconfig', ['lo', '127.0.0.1', 'up']]]) {
    try {
      cp.execFileSync(cmd[0], cmd[1], { stdio: 'ignore' })
      return
    } catch (err) {
      /* the next way */
    }
  }
  log('could not bring up lo')
}

function log(line) {
  process.stderr.write('corral egress bridge (guest): ' + line + '\n')
}

function main(argv) {
  let channelSpec
  let port = 3128
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--channel') channelSpec = argv[++i]
    else if (argv[i] === '--listen') port = Number(argv[++i])
    else if (!channelSpec && argv[i].startsWith('/dev/')) channelSpec = argv[i] // the port's device, as the guest's init passes it
    else {
      log('usage: node egress-bridge.js [--channel <path>|-] [--listen <port>]')
      process.exit(2)
    }
  }
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    log('--listen takes a port number')
    process.exit(2)
  }
  if (!channelSpec) channelSpec = findPort('corral.egress')
  if (!channelSpec) {
    log('no virtio-serial port named corral.egress')
    process.exit(1)
  }
  const channel = openChannel(channelSpec)
  const reader = { current: new FrameReader() }
  const streams = new Map()
  const waiting = [] // connections accepted before the host said HELLO
  let nextId = 1
  let hello = false

  const send = (type, id, payload) => channel.write(frame(type, id, payload))

  function forget(s) {
    if (streams.get(s.id) === s) streams.delete(s.id)
  }
  // Ends a stream both ways. When the host had already sent END, what it sent may still be
  // on its way out of the local socket: end it gracefully instead of cutting it off.
  function closeStream(s, reason, tell) {
    if (s.over) return
    s.over = true
    forget(s)
    if (tell) send(T.CLOSE, s.id, Buffer.from(String(reason || '').slice(0, 1024)))
    if (s.gotEnd && !s.socket.destroyed) {
      s.socket.removeAllListeners('data')
      s.socket.resume()
      s.socket.end()
      setTimeout(() => s.socket.destroy(), 30000).unref()
    } else s.socket.destroy()
  }
  function maybeDone(s) {
    if (s.over || !s.sentEnd) return
    if (s.gotEnd) {
      s.over = true
      forget(s)
    } else if (s.closedLocally) closeStream(s, 'the guest side closed', true)
  }
  // Sends what the local socket gave, as far as the host's window allows; pauses the socket
  // while the window is shut, and sends END once everything before the socket's end is out.
  function pump(s) {
    while (!s.over && s.backlog.length && s.credit > 0) {
      const chunk = s.backlog[0]
      const n = Math.min(chunk.length, s.credit, MAX_PAYLOAD)
      send(T.DATA, s.id, chunk.subarray(0, n))
      s.credit -= n
      if (n === chunk.length) s.backlog.shift()
      else s.backlog[0] = chunk.subarray(n)
    }
    if (s.over) return
    if (s.backlog.length) {
      if (!s.closedLocally) s.socket.pause()
    } else if (s.ended && !s.sentEnd) {
      s.sentEnd = true
      send(T.END, s.id)
    } else if (!s.ended && s.socket.isPaused()) s.socket.resume()
    maybeDone(s)
  }
  function start(socket) {
    const s = { id: nextId++, socket: socket, credit: WINDOW, unacked: 0, backlog: [], ended: false, closedLocally: false, sentEnd: false, gotEnd: false, over: false }
    streams.set(s.id, s)
    send(T.OPEN, s.id)
    socket.on('data', (chunk) => {
      s.backlog.push(chunk)
      pump(s)
    })
    socket.on('end', () => {
      s.ended = true
      pump(s)
    })
    socket.on('error', () => {})
    socket.on('close', () => {
      s.closedLocally = true
      // A socket that ended cleanly still has its last bytes to send; one that did not is aborted.
      if (s.ended) pump(s)
      else closeStream(s, 'the guest side closed the connection', true)
    })
    socket.resume()
  }
  function reset(why) {
    for (const s of Array.from(streams.values())) closeStream(s, why, false)
    streams.clear()
    nextId = 1
    reader.current = new FrameReader()
  }

  channel.disconnected = () => {
    hello = false
    reset('the host went away')
  }
  channel.data = (chunk) => {
    let frames
    try {
      frames = reader.current.push(chunk)
    } catch (err) {
      log('the host sent a bad frame: ' + err.message)
      hello = false
      reset('protocol error')
      return
    }
    for (const f of frames) onFrame(f)
  }
  function onFrame(f) {
    if (f.type === T.HELLO) {
      reset('the host connected again')
      hello = true
      send(T.HELLO, 0, Buffer.from([VERSION]))
      while (waiting.length) {
        const w = waiting.shift()
        clearTimeout(w.timer)
        if (!w.socket.destroyed) start(w.socket)
      }
      return
    }
    const s = streams.get(f.id)
    if (!s || s.over) return
    if (f.type === T.DATA) {
      if (s.gotEnd) return closeStream(s, 'the host sent data after its END', true)
      s.unacked += f.payload.length
      if (s.unacked > WINDOW) return closeStream(s, 'the host sent past its window', true)
      const n = f.payload.length
      s.socket.write(f.payload, () => {
        s.unacked -= n
        if (!s.over) send(T.WINDOW, s.id, u32(n))
      })
    } else if (f.type === T.WINDOW) {
      if (f.payload.length !== 4) return closeStream(s, 'bad WINDOW frame', true)
      s.credit += f.payload.readUInt32BE(0)
      pump(s)
    } else if (f.type === T.END) {
      if (s.gotEnd) return
      s.gotEnd = true
      if (!s.socket.destroyed) s.socket.end()
      maybeDone(s)
    } else if (f.type === T.CLOSE) {
      closeStream(s, '', false)
    }
  }
  function u32(n) {
    const b = Buffer.allocUnsafe(4)
    b.writeUInt32BE(n, 0)
    return b
  }

  const server = net.createServer({ allowHalfOpen: true, pauseOnConnect: true }, (socket) => {
    socket.setNoDelay(true)
    if (hello) return start(socket)
    // The host's bridge is not connected yet (a guest just restored): hold the connection a while.
    const w = { socket: socket, timer: setTimeout(() => socket.destroy(), 10000) }
    socket.on('error', () => {})
    waiting.push(w)
  })
  // A guest without a NIC boots with lo down: 127.0.0.1 can be bound but not reached until lo is up.
  if (!loopbackUp()) bringUpLoopback()
  server.on('error', (err) => {
    log(err.message)
    process.exit(1)
  })
  server.on('listening', () => log('listening on 127.0.0.1:' + server.address().port + ', channel ' + channelSpec))
  server.listen(port, '127.0.0.1')
}

if (require.main === module) main(process.argv.slice(2))
