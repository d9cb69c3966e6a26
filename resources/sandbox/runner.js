#!/usr/bin/env node
/*
 * Corral's sandbox runner: ONE long-lived process inside each sandbox (Docker container or
 * bubblewrap) that runs the agent toolset (bash, read, write, edit, glob, grep) for the host.
 *
 * Transport: newline-delimited JSON on stdin (requests) and stdout (replies). In Docker the
 * host reaches it over the container's attached stdio, so a tool call costs a write and a read
 * on an open stream instead of a `docker exec`.
 *
 * Requests  {rid, op, ...}:
 *   hello {nonce}                 -> {rid, type:'hello', nonce, pid, version, workspace, roots}
 *   call {id, name, input, cap?}  -> {rid:id, type:'output', data, stream?:'stderr'}* then {rid:id, type:'result', result}
 *                                    (bash: `stream` marks stderr's chunks, and result.stderr is the
 *                                    [from, to) ranges of result.content that came from stderr)
 *   cancel {id}                   -> (the call's result arrives with isError, "interrupted")
 *   recover {id}                  -> {rid, type:'recovery', state:'finished'|'running'|'unknown', result?}
 *   place {path, tar_base64 | content_base64} -> {rid, type:'placed', existed}
 *   exists {path}                 -> {rid, type:'exists', exists}
 *   reset                         -> kills every process the shell started; {rid, type:'reset'}
 *   egress {env, socket, port}    -> the session's way out through Corral's egress proxy: `env` (proxy
 *                                    variables, CA bundle, credential placeholders) for every later
 *                                    shell, and a bridge in this process from 127.0.0.1:<port> to the
 *                                    proxy's unix `socket` (mounted); {rid, type:'egress', listening}
 *   clone {url, path, branch?, sha?} -> git clone as the sandbox user through the egress proxy
 *                                    (the proxy adds the repository's token); {rid, type:'cloned', existed}
 *   list_files {path, max?}       -> the regular files under a folder (symlinks and special files
 *                                    left out, never followed): {rid, type:'files', files:[{path, size,
 *                                    sig}], skipped, truncated}; `sig` changes whenever a file is written
 *   read_file {path, offset, length} -> {rid, type:'file_chunk', content_base64, size, sig}: at most
 *                                    `length` (≤ 4 MiB) bytes of a regular file (O_NOFOLLOW)
 * Every reply to a bad request is {rid, type:'error', message}.
 *
 * Results are kept by tool_use_id in this process's memory (never in a file the sandbox could
 * write) before they are sent, so a brain restarted mid-call can collect them with `recover`
 * from a runner that outlived it (a Docker container). Full outputs of capped results are saved
 * at $CORRAL_STATE_DIR/outputs/<id>.log for the agent to read; the host never reads them.
 *
 * Plain Node (>= 18, Debian's nodejs), no dependencies: it is copied into the image as is.
 */
'use strict'
const fs = require('fs')
const path = require('path')
const cp = require('child_process')
const crypto = require('crypto')
const net = require('net')
const { StringDecoder } = require('string_decoder')

// Docker starts the runner as root holding only CAP_SETUID/CAP_SETGID (no-new-privileges); it
// becomes the sandbox user before anything else. A process whose credentials changed is left
// non-dumpable by the kernel, so the agent's processes — the same uid, but started later by exec —
// can neither open /proc/<runner>/fd or /proc/<runner>/mem nor ptrace it; the container's init
// stays root. Nothing the agent runs can then write a line onto this process's output.
becomeSandboxUser(process.env.CORRAL_RUNNER_USER)
function becomeSandboxUser(spec) {
  if (!spec || typeof process.getuid !== 'function' || process.getuid() !== 0) return
  const m = /^(\d+):(\d+)$/.exec(spec)
  if (!m) throw new Error(`runner: CORRAL_RUNNER_USER must be uid:gid, got ${JSON.stringify(spec)}`)
  const uid = Number(m[1])
  const gid = Number(m[2])
  process.setgroups([gid])
  process.setgid(gid)
  process.setuid(uid)
  if (process.getuid() !== uid || process.geteuid() !== uid || process.getgid() !== gid) throw new Error('runner: could not become the sandbox user')
}

const VERSION = 1
const WORKSPACE = path.resolve(process.env.CORRAL_WORKSPACE || '/workspace')
const EXTRA_ROOTS = (process.env.CORRAL_ROOTS || '').split(':').filter(Boolean).map((r) => path.resolve(r))
const ROOTS = [WORKSPACE, ...EXTRA_ROOTS]
const STATE_DIR = path.resolve(process.env.CORRAL_STATE_DIR || path.join(WORKSPACE, '.corral'))
const OUTPUT_CAP = posInt(process.env.CORRAL_OUTPUT_CAP, 256 * 1024)
const MAX_SAVED_OUTPUT = posInt(process.env.CORRAL_MAX_SAVED_OUTPUT, 32 * 1024 * 1024)
const BASH_TIMEOUT_MS = posInt(process.env.CORRAL_BASH_TIMEOUT_MS, 120000)
const MAX_TIMEOUT_MS = 60 * 60 * 1000
const CPU_SECONDS = posInt(process.env.CORRAL_CPU_SECONDS, 0)
const READ_MAX_BYTES = 16 * 1024 * 1024
const GLOB_MAX_RESULTS = 1000
const GLOB_MAX_VISITS = 200000
const TMP_DIR = path.join(process.env.CORRAL_TMP || '/tmp', `.corral-runner-${process.pid}`)
const CLK_TCK = 100

function posInt(v, d) {
  const n = Number(v)
  return Number.isFinite(n) && n > 0 ? Math.floor(n) : d
}

// ---------------------------------------------------------------------------------------------
// Transport

function send(msg) {
  process.stdout.write(JSON.stringify(msg) + '\n')
}

let inbuf = []
process.stdin.on('data', (chunk) => {
  let start = 0
  let nl
  while ((nl = chunk.indexOf(10, start)) !== -1) {
    inbuf.push(chunk.subarray(start, nl))
    const line = Buffer.concat(inbuf).toString('utf8')
    inbuf = []
    start = nl + 1
    if (line.trim()) handleLine(line)
  }
  if (start < chunk.length) inbuf.push(chunk.subarray(start))
})
process.stdin.on('end', () => shutdown(0))
process.on('SIGTERM', () => shutdown(0))
process.stdout.on('error', () => {}) // the host went away; results are on disk

function shutdown(code) {
  try {
    shell.kill()
  } catch {}
  try {
    fs.rmSync(TMP_DIR, { recursive: true, force: true })
  } catch {}
  process.exit(code)
}

function handleLine(line) {
  let req
  try {
    req = JSON.parse(line)
  } catch {
    return send({ rid: null, type: 'error', message: 'runner: a request line is not JSON' })
  }
  const rid = req && req.rid
  Promise.resolve()
    .then(() => dispatch(req))
    .catch((err) => send({ rid, type: 'error', message: String((err && err.message) || err) }))
}

const running = new Map() // tool_use_id -> { cancel(reason), done: Promise<result> }

async function dispatch(req) {
  switch (req.op) {
    case 'hello':
      return send({ rid: req.rid, type: 'hello', nonce: req.nonce, pid: process.pid, version: VERSION, workspace: WORKSPACE, roots: ROOTS })
    case 'call':
      return startCall(req)
    case 'cancel': {
      const c = running.get(String(req.id))
      if (c) c.cancel('interrupted')
      return
    }
    case 'recover':
      return send({ rid: req.rid, type: 'recovery', ...recover(String(req.id)) })
    case 'place':
      return send({ rid: req.rid, type: 'placed', ...(await place(req)) })
    case 'exists':
      return send({ rid: req.rid, type: 'exists', exists: fs.existsSync(resolvePath(req.path, 'path')) })
    case 'reset':
      shell.kill()
      return send({ rid: req.rid, type: 'reset' })
    case 'egress':
      return send({ rid: req.rid, type: 'egress', ...(await egress(req)) })
    case 'clone':
      return send({ rid: req.rid, type: 'cloned', ...(await clone(req)) })
    case 'list_files':
      return send({ rid: req.rid, type: 'files', ...listFiles(req) })
    case 'read_file':
      return send({ rid: req.rid, type: 'file_chunk', ...readFileChunk(req) })
    default:
      throw new Error(`runner: unknown op ${JSON.stringify(req.op)}`)
  }
}

// ---------------------------------------------------------------------------------------------
// Calls and their results, kept by tool_use_id

function safeId(id) {
  return /^[A-Za-z0-9_.-]{1,128}$/.test(id) && !id.startsWith('.') ? id : 'h-' + crypto.createHash('sha256').update(id).digest('hex').slice(0, 40)
}
const outputPath = (id) => path.join(STATE_DIR, 'outputs', safeId(id) + '.log')

// Results are kept in this process, by tool_use_id, never in a file: a file the sandbox's
// processes can write would let a command forge the "recovered" result of any call. The runner
// lives as long as its sandbox (a Docker container outlives a crashed host and keeps them; a
// bubblewrap sandbox dies with the host, and its calls with it).
const RESULT_TTL_MS = posInt(process.env.CORRAL_RESULT_TTL_DAYS, 7) * 86400000
const RESULTS_MAX = 1000
const RESULTS_MAX_BYTES = 64 * 1024 * 1024
const results = new Map() // id -> { result, at, bytes }, oldest first
let resultBytes = 0

function storedResult(id) {
  const kept = results.get(id)
  if (!kept) return undefined
  if (Date.now() - kept.at > RESULT_TTL_MS) {
    forgetResult(id)
    return undefined
  }
  return kept.result
}

function forgetResult(id) {
  const kept = results.get(id)
  if (!kept) return
  results.delete(id)
  resultBytes -= kept.bytes
}

function storeResult(id, result) {
  forgetResult(id)
  const bytes = Buffer.byteLength(result.content || '', 'utf8') + 64
  results.set(id, { result, at: Date.now(), bytes })
  resultBytes += bytes
  for (const [old] of results) {
    if (results.size <= RESULTS_MAX && resultBytes <= RESULTS_MAX_BYTES) break
    if (old === id) break
    forgetResult(old)
  }
}

function recover(id) {
  if (running.has(id)) return { state: 'running' }
  const result = storedResult(id)
  return result ? { state: 'finished', result } : { state: 'unknown' }
}

function startCall(req) {
  const id = String(req.id || '')
  if (!id) throw new Error('runner: a call needs an id (the tool_use_id)')
  const existing = running.get(id)
  if (existing) {
    // The same call asked for again (a reconnected host): answer from the running one, never run twice.
    existing.done.then((result) => send({ rid: id, type: 'result', result }))
    return
  }
  const stored = storedResult(id)
  if (stored) return send({ rid: id, type: 'result', result: stored })

  const started = Date.now()
  const ctl = { cancelled: undefined, onCancel: () => {} }
  const cap = posInt(req.cap, OUTPUT_CAP)
  const entry = {
    cancel(reason) {
      if (ctl.cancelled) return
      ctl.cancelled = reason
      ctl.onCancel(reason)
    },
  }
  entry.done = (async () => {
    let result
    try {
      result = await runTool(id, String(req.name), req.input && typeof req.input === 'object' ? req.input : {}, { cap, ctl, stream: req.stream !== false })
    } catch (err) {
      result = { content: `${req.name}: ${(err && err.message) || err}`, isError: true }
    }
    result.durationMs = Date.now() - started
    storeResult(id, result)
    running.delete(id)
    return result
  })()
  running.set(id, entry)
  entry.done.then((result) => send({ rid: id, type: 'result', result }))
}

class ToolError extends Error {}

// The fields each tool reads, and nothing else: the host validates every call against the
// toolset table (src/shared/tools/toolset.ts) and sends exactly these; a unit test checks that
// this list, the table and the tool functions' reads of `input` agree.
const TOOL_INPUTS = {
  bash: ['command', 'timeout', 'restart'],
  read: ['file_path', 'offset', 'limit'],
  write: ['file_path', 'content'],
  edit: ['file_path', 'old_string', 'new_string', 'replace_all'],
  glob: ['pattern', 'path'],
  grep: ['pattern', 'path', 'glob', '-i'],
}

async function runTool(id, name, input, opts) {
  const fields = Object.prototype.hasOwnProperty.call(TOOL_INPUTS, name) ? TOOL_INPUTS[name] : undefined
  if (!fields) throw new ToolError(`unknown tool "${name}" (the sandbox runs ${Object.keys(TOOL_INPUTS).join(', ')})`)
  const unknown = Object.keys(input).filter((k) => !fields.includes(k))
  if (unknown.length) throw new ToolError(`unknown field ${JSON.stringify(unknown[0])} (${name} takes ${fields.join(', ')})`)
  switch (name) {
    case 'bash':
      return shell.run(id, input, opts)
    case 'read':
      return capped(id, await readTool(input), opts.cap)
    case 'write':
      return writeTool(input)
    case 'edit':
      return editTool(input)
    case 'glob':
      return capped(id, await globTool(input), opts.cap)
    case 'grep':
      return grepTool(id, input, opts)
    default:
      throw new ToolError(`unknown tool "${name}"`)
  }
}

// ---------------------------------------------------------------------------------------------
// Output: sanitised for the model, capped, the full output saved inside the sandbox

// ANSI CSI / OSC / two-byte escapes, then any control character but tab and newline.
const ANSI = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]/g
function sanitize(text) {
  return text.replace(ANSI, '').replace(/\r\n/g, '\n').replace(/\r/g, '\n').replace(/[\x00-\x08\x0b-\x1f\x7f]/g, '')
}

function truncationNote(total, shownHead, shownTail, savedPath, savedBytes) {
  const saved = savedPath
    ? savedBytes < total
      ? `the first ${savedBytes} bytes are saved in the sandbox at ${savedPath}`
      : `the full output is saved in the sandbox at ${savedPath}`
    : 'the full output could not be saved'
  return `\n\n[... output truncated: ${total} bytes in total, showing the first ${shownHead} and the last ${shownTail} bytes; ${saved} (read it with the read tool's offset and limit, or grep it) ...]\n\n`
}

/** A finished text result: capped at `cap` bytes, the whole text saved when it is longer. */
function capped(id, text, cap) {
  const buf = Buffer.from(text, 'utf8')
  if (buf.length <= cap) return { content: text, isError: false }
  let saved
  try {
    fs.mkdirSync(path.dirname(outputPath(id)), { recursive: true })
    fs.writeFileSync(outputPath(id), buf.subarray(0, MAX_SAVED_OUTPUT))
    saved = outputPath(id)
  } catch {}
  const half = Math.floor(cap / 2)
  const content =
    buf.subarray(0, half).toString('utf8') + truncationNote(buf.length, half, cap - half, saved, Math.min(buf.length, MAX_SAVED_OUTPUT)) + buf.subarray(buf.length - (cap - half)).toString('utf8')
  return { content, isError: false }
}

/** How many bytes at the end of `buf` begin a UTF-8 character that is not complete yet (0-3). */
function utf8Pending(buf) {
  for (let back = 1; back <= Math.min(3, buf.length); back++) {
    const b = buf[buf.length - back]
    if ((b & 0xc0) === 0x80) continue // a continuation byte: look further back for the lead
    const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1
    return need > back ? back : 0
  }
  return 0
}

/** Most stream switches whose stderr part a result names (past it, the rest reads as stdout). */
const MAX_STDERR_RANGES = 10000

/**
 * Collects a command's output as it streams: all of it up to `cap`, then head + tail + a file.
 * Each chunk says which stream it came from ('stdout' | 'stderr'); the text is the chunks in the
 * order they were read, and `text()` also names the stderr parts of it as [from, to) ranges of
 * the returned string.
 */
class OutputSink {
  constructor(id, cap, onChunk, onOverflow) {
    this.id = id
    this.cap = cap
    this.half = Math.floor(cap / 2)
    this.onChunk = onChunk
    this.onOverflow = onOverflow
    this.chunks = []
    this.total = 0
    this.streamed = 0
    this.head = undefined
    this.tail = []
    this.tailBytes = 0
    this.fd = undefined
    this.saved = 0
    this.overflowed = false
    this.decoder = new StringDecoder('utf8')
    // Where the stream changes: {at: byte offset in the whole output, stream}, first at 0.
    this.switches = []
  }
  push(buf, stream = 'stdout') {
    if (buf.length === 0) return
    const last = this.switches[this.switches.length - 1]
    if (!last || last.stream !== stream) {
      if (this.switches.length < MAX_STDERR_RANGES * 2 - 1) this.switches.push({ at: this.total, stream })
      else if (last.stream === 'stderr') this.switches.push({ at: this.total, stream: 'stdout' }) // the last one: the rest is untagged
    }
    this.total += buf.length
    if (this.onChunk && this.streamed < this.cap) {
      const part = buf.subarray(0, this.cap - this.streamed)
      this.streamed += part.length
      const text = this.decoder.write(part)
      if (text) this.onChunk(text, stream)
    }
    if (this.head === undefined) {
      this.chunks.push(buf)
      if (this.total <= this.cap) return
      const all = Buffer.concat(this.chunks)
      this.chunks = []
      this.head = all.subarray(0, this.half)
      this.openFile()
      this.save(all)
      this.tail = [all.subarray(this.half)]
      this.tailBytes = all.length - this.half
    } else {
      this.save(buf)
      this.tail.push(buf)
      this.tailBytes += buf.length
    }
    const keep = this.cap - this.half
    while (this.tailBytes - this.tail[0].length >= keep) this.tailBytes -= this.tail.shift().length
    // Forget switches that fall between the head and the tail (keep the one the tail starts in).
    const tailStart = this.total - this.tailBytes
    let i = 0
    while (i < this.switches.length && this.switches[i].at < this.half) i++
    let j = i
    while (j + 1 < this.switches.length && this.switches[j + 1].at <= tailStart) j++
    if (j > i) this.switches.splice(i, j - i)
  }
  openFile() {
    try {
      fs.mkdirSync(path.dirname(outputPath(this.id)), { recursive: true })
      this.fd = fs.openSync(outputPath(this.id), 'w')
    } catch {}
  }
  save(buf) {
    if (this.fd === undefined) return
    const room = MAX_SAVED_OUTPUT - this.saved
    if (room > 0) {
      try {
        fs.writeSync(this.fd, buf, 0, Math.min(room, buf.length))
        this.saved += Math.min(room, buf.length)
      } catch {}
    }
    if (this.saved >= MAX_SAVED_OUTPUT && !this.overflowed) {
      this.overflowed = true
      this.onOverflow()
    }
  }
  /** The bytes [from, to) of the whole output, sanitised per stream part; stderr parts become ranges of `out`. */
  render(bytes, from, out) {
    const to = from + bytes.length
    for (let k = 0; k < this.switches.length; k++) {
      const a = Math.max(from, this.switches[k].at)
      const b = Math.min(to, k + 1 < this.switches.length ? this.switches[k + 1].at : Infinity)
      if (b <= a) continue
      const piece = sanitize(bytes.subarray(a - from, b - from).toString('utf8'))
      if (!piece) continue
      if (this.switches[k].stream === 'stderr') {
        const prev = out.stderr[out.stderr.length - 1]
        if (prev && prev[1] === out.text.length) prev[1] += piece.length
        else out.stderr.push([out.text.length, out.text.length + piece.length])
      }
      out.text += piece
    }
  }
  /** The collected output for the result: `{text, stderr}` (stderr: [from, to) ranges of text). */
  result() {
    if (this.fd !== undefined) {
      try {
        fs.closeSync(this.fd)
      } catch {}
      this.fd = undefined
    }
    const out = { text: '', stderr: [] }
    if (this.head === undefined) {
      this.render(Buffer.concat(this.chunks), 0, out)
      return out
    }
    const tail = Buffer.concat(this.tail)
    const keep = this.cap - this.half
    const tailPart = tail.subarray(Math.max(0, tail.length - keep))
    this.render(this.head, 0, out)
    out.text += truncationNote(this.total, this.head.length, tailPart.length, this.saved ? outputPath(this.id) : undefined, this.saved)
    this.render(tailPart, this.total - tailPart.length, out)
    return out
  }
  text() {
    return this.result().text
  }
}

// ---------------------------------------------------------------------------------------------
// bash: one persistent shell; each call's jobs get their own process groups (set -m)

function procStat(pid) {
  const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ')
  // f[0] = state (field 3), so field N is f[N - 3]
  return { pid, pgrp: Number(f[2]), session: Number(f[3]), start: Number(f[19]) }
}

function nowTicks() {
  try {
    return Math.floor(Number(fs.readFileSync('/proc/uptime', 'utf8').split(' ')[0]) * CLK_TCK)
  } catch {
    return 0
  }
}

/** Every process in `session` (but `except`) started at or after `sinceTicks`. */
function sessionProcesses(session, except, sinceTicks) {
  const out = []
  let names = []
  try {
    names = fs.readdirSync('/proc')
  } catch {}
  for (const name of names) {
    if (!/^\d+$/.test(name) || Number(name) === except || Number(name) === process.pid) continue
    try {
      const st = procStat(Number(name))
      if (st.session === session && st.start >= sinceTicks) out.push(st)
    } catch {}
  }
  return out
}

/** Kills the process groups (and stray processes) of `session` started since `sinceTicks`, until none is left. */
function killSince(session, shellPid, sinceTicks) {
  for (let round = 0; round < 50; round++) {
    const victims = sessionProcesses(session, shellPid, sinceTicks)
    if (victims.length === 0) return
    const groups = new Set(victims.map((v) => v.pgrp))
    for (const g of groups) {
      if (g !== shellPid && g > 1) {
        try {
          process.kill(-g, 'SIGKILL')
        } catch {}
      }
    }
    for (const v of victims) {
      if (v.pgrp === shellPid) {
        try {
          process.kill(v.pid, 'SIGKILL')
        } catch {}
      }
    }
  }
}

function oomKills() {
  for (const [file, re] of [
    ['/sys/fs/cgroup/memory.events', /^oom_kill (\d+)/m],
    ['/sys/fs/cgroup/memory/memory.oom_control', /^oom_kill (\d+)/m],
  ]) {
    try {
      const m = re.exec(fs.readFileSync(file, 'utf8'))
      if (m) return Number(m[1])
    } catch {}
  }
  return undefined
}

function shellEnv() {
  const env = {}
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('CORRAL_') && !k.startsWith('NODE_')) env[k] = v
  // The egress variables are the host's to set (NODE_EXTRA_CA_CERTS among them).
  Object.assign(env, egressEnv)
  env.HOME = env.HOME || WORKSPACE
  env.TERM = 'dumb'
  env.PAGER = 'cat'
  env.GIT_PAGER = 'cat'
  return env
}

class Shell {
  constructor() {
    this.proc = undefined
    this.queue = Promise.resolve()
    this.current = undefined
    this.seq = 0
  }
  ensure() {
    if (this.proc) return
    fs.mkdirSync(TMP_DIR, { recursive: true, mode: 0o700 })
    // CORRAL_CPU_SECONDS (bubblewrap, which has no cgroup): RLIMIT_CPU for the shell and every command it runs.
    const [file, args] = CPU_SECONDS ? ['prlimit', [`--cpu=${CPU_SECONDS}`, '--', 'bash', '--noprofile', '--norc']] : ['bash', ['--noprofile', '--norc']]
    const proc = cp.spawn(file, args, { cwd: WORKSPACE, env: shellEnv(), detached: true, stdio: ['pipe', 'pipe', 'pipe'] })
    this.proc = proc
    proc.stdin.on('error', () => {})
    // A call's stdout and stderr arrive on the shell's two pipes; between calls, the shell's own
    // notices on stderr go nowhere.
    proc.stdout.on('data', (d) => this.current && this.current.data(d, 'stdout'))
    proc.stderr.on('data', (d) => this.current && this.current.data(d, 'stderr'))
    // A shell we killed on purpose (restart, reset) reports nothing to the call that follows it.
    proc.on('exit', (code, signal) => {
      if (this.proc !== proc) return
      this.proc = undefined
      if (this.current) this.current.exited(code, signal)
    })
    proc.on('error', (err) => {
      if (this.proc !== proc) return
      this.proc = undefined
      if (this.current) this.current.exited(null, null, err)
    })
    // set -m: each job of a call gets its own process group. USR1 (sent at a timeout or an
    // interrupt) makes the shell return from the sourced command file once the running job is
    // killed, so the rest of the command does not run.
    // fds 63 and 62 keep the shell's own stdout and stderr, put back after each call: a command's
    // `exec 2>/dev/null` (or `exec >file`) would otherwise swallow the end markers and every
    // later call's output.
    proc.stdin.write("set -m 2>/dev/null; unset HISTFILE; PS1=; PS2=; trap 'return 124 2>/dev/null' USR1; exec 63>&1 62>&2\n")
  }
  kill() {
    const proc = this.proc
    if (!proc) return
    this.proc = undefined
    killSince(proc.pid, proc.pid, 0)
    try {
      process.kill(-proc.pid, 'SIGKILL')
    } catch {}
  }
  run(id, input, opts) {
    const job = this.queue.then(() => this.runNow(id, input, opts))
    this.queue = job.catch(() => {})
    return job
  }
  async runNow(id, input, { cap, ctl, stream }) {
    if (input.restart) {
      this.kill()
      this.ensure()
      return { content: 'bash session restarted: a fresh shell in ' + WORKSPACE + ' (cwd and environment reset)', isError: false }
    }
    if (typeof input.command !== 'string' || input.command === '') throw new ToolError('command is required (or restart: true)')
    if (input.command.includes('\0')) throw new ToolError('the command contains a NUL byte')
    const timeoutMs = Math.min(input.timeout > 0 ? Math.floor(input.timeout) : BASH_TIMEOUT_MS, MAX_TIMEOUT_MS)
    if (ctl.cancelled) return { content: 'interrupted before it started', isError: true }
    this.ensure()
    const proc = this.proc
    const seq = ++this.seq
    const file = path.join(TMP_DIR, `cmd-${seq}.sh`)
    fs.writeFileSync(file, input.command + '\n', { mode: 0o600 })
    const nonce = crypto.randomBytes(9).toString('hex')
    const marker = Buffer.from(`\x1eCORRAL_${nonce}_`)
    const since = nowTicks()
    const oomBefore = oomKills()

    return await new Promise((resolve) => {
      // Per stream: bytes held back (a marker's possible start, a character not complete yet),
      // and whether its end marker came. stdout's marker carries the exit status and ends the
      // call; stderr's says nothing of the command is still in that pipe (it is written after
      // the command returns, like stdout's), waited for briefly in case the command closed or
      // redirected the shell's own stderr (exec 2>&-).
      const carry = { stdout: Buffer.alloc(0), stderr: Buffer.alloc(0) }
      const ended = { stdout: false, stderr: false }
      let exitStatus
      let stderrWait
      let killedFor // 'timeout' | 'interrupted' | 'output'
      let settled = false
      let graceTimer
      const sink = new OutputSink(id, cap, stream ? (text, from) => send({ rid: id, type: 'output', data: text, ...(from === 'stderr' ? { stream: 'stderr' } : {}) }) : undefined, () => stop('output'))
      const finish = (result) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        clearTimeout(graceTimer)
        clearTimeout(stderrWait)
        this.current = undefined
        fs.rm(file, { force: true }, () => {})
        resolve(result)
      }
      const describe = (rc) => {
        const out = sink.result()
        let text = out.text.replace(/\n$/, '')
        const stderr = out.stderr.map(([a, b]) => [a, Math.min(b, text.length)]).filter(([a, b]) => b > a)
        const notes = []
        if (killedFor === 'timeout') notes.push(`timed out after ${timeoutMs} ms: the command's processes were killed`)
        else if (killedFor === 'interrupted') notes.push('interrupted: the command\'s processes were killed')
        else if (killedFor === 'output') notes.push(`stopped: the command wrote more than ${MAX_SAVED_OUTPUT} bytes of output`)
        else if (rc === 137 || rc === 128 + 9) {
          const oomAfter = oomKills()
          if (oomBefore !== undefined && oomAfter !== undefined && oomAfter > oomBefore) notes.push('killed by the out-of-memory killer (OOM): the sandbox memory limit was reached (exit 137)')
          else notes.push('killed by SIGKILL (exit 137; out of memory or killed)')
        }
        if (rc !== 0 && rc !== null) notes.push(`exit code ${rc}`)
        if (notes.length) text += (text ? '\n' : '') + `[${notes.join('; ')}]`
        const r = { content: text, isError: rc !== 0 || killedFor !== undefined, exitCode: rc }
        if (stderr.length) r.stderr = stderr
        return r
      }
      const stop = (why) => {
        if (killedFor || settled) return
        killedFor = why
        try {
          process.kill(proc.pid, 'SIGUSR1')
        } catch {}
        killSince(proc.pid, proc.pid, since)
        // A shell stuck in a builtin loop never returns: restart it.
        graceTimer = setTimeout(() => {
          if (settled) return
          this.kill()
          const r = describe(null)
          r.content += '\n[the shell did not return and was restarted: cwd and environment were reset]'
          r.isError = true
          finish(r)
        }, 1000)
      }
      ctl.onCancel = (reason) => stop(reason === 'interrupted' ? 'interrupted' : 'timeout')
      const timer = setTimeout(() => stop('timeout'), timeoutMs)
      const ended_ = () => {
        if (ended.stdout && ended.stderr) return finish(describe(exitStatus))
        if (ended.stdout && !stderrWait) stderrWait = setTimeout(() => finish(describe(exitStatus)), 250)
      }
      this.current = {
        data: (d, stream) => {
          if (settled || ended[stream]) return
          let buf = carry[stream].length ? Buffer.concat([carry[stream], d]) : d
          const at = buf.indexOf(marker)
          if (at !== -1) {
            const nl = buf.indexOf(10, at + marker.length)
            if (nl === -1) {
              sink.push(buf.subarray(0, at), stream)
              carry[stream] = buf.subarray(at)
              return
            }
            sink.push(buf.subarray(0, at), stream)
            carry[stream] = Buffer.alloc(0)
            ended[stream] = true
            if (stream === 'stdout') {
              const rc = Number(buf.subarray(at + marker.length, nl).toString())
              exitStatus = Number.isFinite(rc) ? rc : null
            }
            return ended_()
          }
          // Keep back only what could be the start of a marker split across reads: from a \x1e
          // in the last marker-length bytes on (output without one streams at once, so a line
          // shows while the command runs, not when the next 26 bytes arrive); and a character
          // whose last bytes have not come yet, so the other stream's chunk never lands inside it.
          const lastStart = buf.lastIndexOf(0x1e, buf.length - 1)
          const keep = lastStart !== -1 && buf.length - lastStart < marker.length ? buf.length - lastStart : utf8Pending(buf)
          sink.push(buf.subarray(0, buf.length - keep), stream)
          carry[stream] = Buffer.from(buf.subarray(buf.length - keep))
        },
        exited: (code, signal, err) => {
          if (settled) return
          for (const stream of ['stdout', 'stderr']) if (carry[stream].length) sink.push(carry[stream], stream)
          const r = describe(code === null ? null : code)
          r.content += `\n[the shell exited (${err ? err.message : signal ? 'signal ' + signal : 'code ' + code}); the next call starts a fresh shell in ${WORKSPACE}]`
          r.isError = true
          r.exitCode = code
          finish(r)
        },
      }
      // Sourced, so cd and exports persist; stdin is /dev/null so a command cannot read our pipe.
      const q = file.replace(/'/g, `'\\''`)
      // `jobs` swallows the shell's notices about earlier background jobs, which would otherwise
      // show up in the next call's output.
      // The command's stderr is the shell's own (a pipe of its own): each stream ends with the
      // marker, stderr's first.
      proc.stdin.write(`jobs >/dev/null 2>&1; . '${q}' </dev/null; __corral_rc=$?; exec 1>&63 2>&62; jobs >/dev/null 2>&1; printf '\\036CORRAL_${nonce}_e\\n' >&2; printf '\\036CORRAL_${nonce}_%d\\n' "$__corral_rc"\n`)
    })
  }
}
const shell = new Shell()

// ---------------------------------------------------------------------------------------------
// Paths: inside the workspace (and the extra roots) as the sandbox sees them, symlinks included

function within(p, root) {
  return p === root || p.startsWith(root.endsWith('/') ? root : root + '/')
}

const realRoots = () =>
  ROOTS.map((r) => {
    try {
      return fs.realpathSync(r)
    } catch {
      return r
    }
  })

function resolvePath(p, what = 'file_path') {
  if (typeof p !== 'string' || p === '') throw new ToolError(`${what} is required`)
  if (p.includes('\0')) throw new ToolError(`${what} contains a NUL byte`)
  const abs = path.resolve(WORKSPACE, p)
  if (!ROOTS.some((r) => within(abs, r))) throw new ToolError(`${p} is outside the workspace (${ROOTS.join(', ')})`)
  // The deepest part that exists must really (symlinks resolved) be inside a root too.
  let probe = abs
  let real
  for (;;) {
    try {
      real = fs.realpathSync(probe)
      break
    } catch (err) {
      if (err.code !== 'ENOENT' && err.code !== 'ENOTDIR') throw new ToolError(`${p}: ${err.code || err.message}`)
      const parent = path.dirname(probe)
      if (parent === probe) break
      probe = parent
    }
  }
  if (real !== undefined && !realRoots().some((r) => within(real, r))) throw new ToolError(`${p} leads outside the workspace through a symlink`)
  return abs
}

function fsError(err, p) {
  const why = { ENOENT: 'no such file or directory', EACCES: 'permission denied', EISDIR: 'is a directory', ENOTDIR: 'a part of the path is not a directory', ELOOP: 'is a symlink (file tools do not follow a symlink at the last step)', ENOSPC: 'no space left on the device', EROFS: 'read-only file system', EFBIG: 'file too large' }[err.code]
  return new ToolError(`${p}: ${why || err.message}`)
}

function looksBinary(buf) {
  if (buf.includes(0)) return true
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(buf.subarray(0, 64 * 1024), { stream: true })
    return false
  } catch {
    return true
  }
}

/** offset (1-based first line) and limit (line count), each a positive integer when given. */
function lineWindow(offset, limit) {
  for (const [name, v] of [['offset', offset], ['limit', limit]]) {
    if (v !== undefined && !(Number.isInteger(v) && v >= 1)) throw new ToolError(`${name} must be an integer of at least 1`)
  }
  return { offset, limit }
}

async function readTool(input) {
  const p = input.file_path
  const abs = resolvePath(p)
  let fd
  try {
    fd = fs.openSync(abs, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK)
  } catch (err) {
    throw fsError(err, p)
  }
  try {
    const st = fs.fstatSync(fd)
    if (st.isDirectory()) throw new ToolError(`${p} is a directory (list it with glob or bash ls)`)
    if (!st.isFile()) throw new ToolError(`${p} is not a regular file`)
    const { offset, limit } = lineWindow(input.offset, input.limit)
    const ranged = offset !== undefined || limit !== undefined
    if (st.size > READ_MAX_BYTES && !ranged) throw new ToolError(`${p} is ${st.size} bytes; read it in parts with offset and limit, or search it with grep`)
    const sample = Buffer.alloc(Math.min(st.size, 64 * 1024))
    fs.readSync(fd, sample, 0, sample.length, 0)
    if (looksBinary(sample)) throw new ToolError(`${p} is a binary file (${st.size} bytes); the read tool shows text only. Inspect it with bash (xxd, od, file)`)
    if (st.size === 0) return '(the file is empty)'
    const start = offset || 1
    const end = limit ? start + limit - 1 : Infinity
    const out = []
    let lineNo = 1
    let partial = ''
    const decoder = new StringDecoder('utf8')
    const chunk = Buffer.alloc(256 * 1024)
    let pos = 0
    let bytes = 0
    outer: for (;;) {
      const n = fs.readSync(fd, chunk, 0, chunk.length, pos)
      if (n === 0) break
      pos += n
      const lines = (partial + decoder.write(chunk.subarray(0, n))).split('\n')
      partial = lines.pop()
      for (const line of lines) {
        if (lineNo >= start) {
          out.push(`${String(lineNo).padStart(6)}\t${line}`)
          bytes += line.length + 8
        }
        lineNo++
        if (lineNo > end || bytes > READ_MAX_BYTES) break outer
      }
    }
    partial += decoder.end()
    if (partial && lineNo >= start && lineNo <= end) out.push(`${String(lineNo).padStart(6)}\t${partial}`)
    if (out.length === 0) throw new ToolError(`${p} has ${lineNo - (partial ? 0 : 1)} lines; offset ${start} is past its end`)
    return sanitizeLines(out.join('\n'))
  } finally {
    fs.closeSync(fd)
  }
}

function sanitizeLines(text) {
  return text.replace(ANSI, '').replace(/[\x00-\x08\x0b-\x1f\x7f]/g, (c) => (c === '\r' ? '' : '\ufffd'))
}

function writeFileNoFollow(abs, p, data, mode) {
  try {
    fs.mkdirSync(path.dirname(abs), { recursive: true })
  } catch (err) {
    throw fsError(err, p)
  }
  // The parent, now made, must still be inside a root (a symlinked directory made meanwhile).
  resolvePath(path.dirname(abs), 'file_path')
  let fd
  try {
    fd = fs.openSync(abs, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_TRUNC | fs.constants.O_NOFOLLOW, mode || 0o644)
    if (!fs.fstatSync(fd).isFile()) throw Object.assign(new Error('not a regular file'), { code: 'EISDIR' })
    fs.writeSync(fd, data)
  } catch (err) {
    throw fsError(err, p)
  } finally {
    if (fd !== undefined) fs.closeSync(fd)
  }
}

function writeTool(input) {
  const p = input.file_path
  if (typeof input.content !== 'string') throw new ToolError('content is required (a string)')
  const abs = resolvePath(p)
  const data = Buffer.from(input.content, 'utf8')
  writeFileNoFollow(abs, p, data)
  return { content: `wrote ${data.length} bytes to ${abs}`, isError: false }
}

function editTool(input) {
  const p = input.file_path
  const oldS = input.old_string
  const newS = input.new_string
  if (typeof oldS !== 'string' || oldS === '') throw new ToolError('old_string is required (a non-empty string)')
  if (typeof newS !== 'string') throw new ToolError('new_string is required (a string)')
  const abs = resolvePath(p)
  let buf
  let mode
  try {
    const fd = fs.openSync(abs, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK)
    try {
      const st = fs.fstatSync(fd)
      if (!st.isFile()) throw new ToolError(`${p} is not a regular file`)
      if (st.size > READ_MAX_BYTES) throw new ToolError(`${p} is ${st.size} bytes, too large to edit; use bash (sed, python)`)
      mode = st.mode & 0o7777
      buf = fs.readFileSync(fd)
    } finally {
      fs.closeSync(fd)
    }
  } catch (err) {
    if (err instanceof ToolError) throw err
    throw fsError(err, p)
  }
  if (looksBinary(buf)) throw new ToolError(`${p} is a binary file; the edit tool changes text files only`)
  const text = buf.toString('utf8')
  const count = text.split(oldS).length - 1
  if (count === 0) throw new ToolError(`old_string was not found in ${p} (0 matches); it must match the file exactly, whitespace included`)
  if (count > 1 && !input.replace_all) throw new ToolError(`old_string matches ${count} times in ${p}; it must match exactly once. Add surrounding context to make it unique, or pass replace_all: true`)
  const next = input.replace_all ? text.split(oldS).join(newS) : text.replace(oldS, () => newS)
  writeFileNoFollow(abs, p, Buffer.from(next, 'utf8'), mode)
  return { content: `edited ${abs}: ${input.replace_all ? count : 1} replacement${(input.replace_all ? count : 1) === 1 ? '' : 's'}`, isError: false }
}

function globToRegExp(glob) {
  let re = ''
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]
    if (c === '*') {
      if (glob[i + 1] === '*') {
        const slash = glob[i + 2] === '/'
        re += slash ? '(?:.*/)?' : '.*'
        i += slash ? 2 : 1
      } else re += '[^/]*'
    } else if (c === '?') re += '[^/]'
    else if (c === '{') {
      const close = glob.indexOf('}', i)
      if (close === -1) re += '\\{'
      else {
        re += '(?:' + glob.slice(i + 1, close).split(',').map((s) => s.replace(/[.+^$()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]')).join('|') + ')'
        i = close
      }
    } else if (c === '[') {
      const close = glob.indexOf(']', i + 1)
      if (close === -1) re += '\\['
      else {
        re += '[' + glob.slice(i + 1, close).replace(/^!/, '^').replace(/\\/g, '\\\\') + ']'
        i = close
      }
    } else re += c.replace(/[.+^$()|\\]/g, '\\$&')
  }
  return new RegExp('^' + re + '$')
}

async function globTool(input) {
  const pattern = input.pattern
  if (typeof pattern !== 'string' || pattern === '') throw new ToolError('pattern is required')
  if (pattern.includes('\0')) throw new ToolError('pattern contains a NUL byte')
  if (path.isAbsolute(pattern)) throw new ToolError('pattern must be relative; pass the directory to search as path')
  if (pattern.split('/').includes('..')) throw new ToolError('".." is not allowed in a glob pattern')
  const base = input.path ? resolvePath(input.path, 'path') : WORKSPACE
  const re = globToRegExp(pattern)
  const matches = []
  let visits = 0
  let truncated = false
  const walk = (dir, rel) => {
    let entries
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true })
    } catch {
      return
    }
    for (const e of entries) {
      if (++visits > GLOB_MAX_VISITS) {
        truncated = true
        return
      }
      const r = rel ? rel + '/' + e.name : e.name
      const full = path.join(dir, e.name)
      if (re.test(r)) {
        let mtime = 0
        try {
          mtime = fs.lstatSync(full).mtimeMs
        } catch {}
        matches.push({ full, mtime })
      }
      // Never descend through a symlink; skip VCS internals and Corral's own state.
      if (e.isDirectory() && !(rel === '' && e.name === '.corral' && dir === WORKSPACE) && e.name !== '.git' && e.name !== 'node_modules') walk(full, r)
    }
  }
  walk(base, '')
  if (matches.length === 0) return `no files match ${pattern} under ${base}`
  matches.sort((a, b) => b.mtime - a.mtime)
  const shown = matches.slice(0, GLOB_MAX_RESULTS).map((m) => m.full)
  let text = shown.join('\n')
  if (matches.length > GLOB_MAX_RESULTS) text += `\n[... ${matches.length - GLOB_MAX_RESULTS} more matches not shown; narrow the pattern or path]`
  if (truncated) text += `\n[the search stopped after ${GLOB_MAX_VISITS} entries; narrow the path]`
  return text
}

function grepTool(id, input, { cap, ctl }) {
  const pattern = input.pattern
  if (typeof pattern !== 'string' || pattern === '') throw new ToolError('pattern is required')
  if (pattern.includes('\0')) throw new ToolError('pattern contains a NUL byte')
  const target = input.path ? resolvePath(input.path, 'path') : WORKSPACE
  const args = ['--no-config', '--line-number', '--no-heading', '--color', 'never', '--max-columns', '500', '--max-columns-preview', '--glob', '!.corral/', '--regexp', pattern]
  if (typeof input.glob === 'string' && input.glob) args.push('--glob', input.glob)
  if (input['-i'] === true) args.push('--ignore-case')
  args.push('--', target)
  return new Promise((resolve) => {
    const child = cp.spawn('rg', args, { cwd: WORKSPACE, env: shellEnv(), stdio: ['ignore', 'pipe', 'pipe'], detached: true })
    let killed
    const sink = new OutputSink(id, cap, undefined, () => {
      killed = 'output'
      kill()
    })
    const kill = () => {
      try {
        process.kill(-child.pid, 'SIGKILL')
      } catch {}
    }
    const timer = setTimeout(() => {
      killed = 'timeout'
      kill()
    }, 60000)
    ctl.onCancel = () => {
      killed = 'interrupted'
      kill()
    }
    let err = ''
    child.stdout.on('data', (d) => sink.push(d))
    child.stderr.on('data', (d) => (err.length < 4096 ? (err += d) : undefined))
    child.on('error', (e) => {
      clearTimeout(timer)
      resolve({ content: `grep: ripgrep (rg) could not start: ${e.message}`, isError: true })
    })
    child.on('close', (code) => {
      clearTimeout(timer)
      const text = sink.text().replace(/\n$/, '')
      if (killed === 'timeout') return resolve({ content: text + '\n[grep timed out after 60 s]', isError: true })
      if (killed === 'interrupted') return resolve({ content: text + '\n[interrupted]', isError: true })
      if (code === 0 || killed === 'output') return resolve({ content: text, isError: false })
      if (code === 1) return resolve({ content: `no matches for ${pattern} under ${target}`, isError: false })
      resolve({ content: `grep: ${sanitize(err).trim() || 'ripgrep exited with code ' + code}`, isError: true })
    })
  })
}

// ---------------------------------------------------------------------------------------------
// Session resources, placed by the host at provision (never over something already there)

async function place(req) {
  const abs = resolvePath(req.path, 'path')
  if (fs.existsSync(abs)) return { existed: true }
  if (typeof req.content_base64 === 'string') {
    writeFileNoFollow(abs, req.path, Buffer.from(req.content_base64, 'base64'), 0o644)
    return { existed: false }
  }
  if (typeof req.tar_base64 !== 'string') throw new Error('place needs content_base64 or tar_base64')
  const partial = abs + '.corral-partial'
  fs.rmSync(partial, { recursive: true, force: true })
  fs.mkdirSync(partial, { recursive: true })
  await new Promise((resolve, reject) => {
    const tar = cp.spawn('tar', ['-x', '--no-same-owner', '--no-same-permissions', '-C', partial], { stdio: ['pipe', 'ignore', 'pipe'] })
    let err = ''
    tar.stderr.on('data', (d) => (err += d))
    tar.on('error', reject)
    tar.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`tar failed (${code}): ${err.trim()}`))))
    tar.stdin.end(Buffer.from(req.tar_base64, 'base64'))
  })
  fs.renameSync(partial, abs)
  return { existed: false }
}

// ---------------------------------------------------------------------------------------------
// Files the host collects (a session's outputs folder): listed and read, never written here

const MAX_CHUNK = 4 * 1024 * 1024

/** A file's signature: it changes when the file is written, replaced or renamed over. */
function fileSig(st) {
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`
}

function listFiles(req) {
  const root = resolvePath(req.path, 'path')
  const max = Math.min(posInt(req.max, 1000), 10000)
  const files = []
  const skipped = []
  let truncated = false
  let st
  try {
    st = fs.lstatSync(root, { bigint: true })
  } catch (err) {
    if (err.code === 'ENOENT') return { files, skipped, truncated }
    throw fsError(err, req.path)
  }
  if (!st.isDirectory()) return { files, skipped: [{ path: '', reason: 'not a directory' }], truncated }
  const stack = ['']
  while (stack.length && !truncated) {
    const rel = stack.pop()
    let entries
    try {
      entries = fs.readdirSync(path.join(root, rel), { withFileTypes: true })
    } catch (err) {
      skipped.push({ path: rel, reason: err.code || err.message })
      continue
    }
    entries.sort((a, b) => (a.name < b.name ? 1 : a.name > b.name ? -1 : 0))
    for (const e of entries) {
      const r = rel ? `${rel}/${e.name}` : e.name
      let s
      try {
        s = fs.lstatSync(path.join(root, r), { bigint: true })
      } catch (err) {
        skipped.push({ path: r, reason: err.code || err.message })
        continue
      }
      if (s.isDirectory()) stack.push(r)
      else if (s.isFile()) {
        if (files.length >= max) {
          truncated = true
          break
        }
        files.push({ path: r, size: Number(s.size), sig: fileSig(s) })
      } else skipped.push({ path: r, reason: s.isSymbolicLink() ? 'a symlink' : 'not a regular file' })
    }
  }
  files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
  return { files, skipped, truncated }
}

function readFileChunk(req) {
  const abs = resolvePath(req.path, 'path')
  const offset = Number.isSafeInteger(req.offset) && req.offset >= 0 ? req.offset : 0
  const length = Math.min(posInt(req.length, MAX_CHUNK), MAX_CHUNK)
  let fd
  try {
    fd = fs.openSync(abs, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK)
  } catch (err) {
    throw fsError(err, req.path)
  }
  try {
    const st = fs.fstatSync(fd, { bigint: true })
    if (!st.isFile()) throw new ToolError(`${req.path}: not a regular file`)
    const buf = Buffer.alloc(Math.max(0, Math.min(length, Number(st.size) - offset)))
    let got = 0
    while (got < buf.length) {
      const n = fs.readSync(fd, buf, got, buf.length - got, offset + got)
      if (n === 0) break
      got += n
    }
    return { content_base64: buf.subarray(0, got).toString('base64'), size: Number(st.size), sig: fileSig(st) }
  } finally {
    fs.closeSync(fd)
  }
}

// ---------------------------------------------------------------------------------------------
// Egress: the sandbox has no network; Corral's proxy is reached through a bridge on the sandbox's
// own loopback (127.0.0.1:3128 → the proxy's unix socket, mounted read-only). Nothing secret
// passes here: the proxy adds credentials outside the sandbox.

let egressEnv = {}
let bridge // { socket, port, server, ready: Promise<void> }

async function egress(req) {
  const env = {}
  for (const [k, v] of Object.entries(req.env && typeof req.env === 'object' ? req.env : {})) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k) || typeof v !== 'string' || v.includes('\0')) throw new Error(`egress: env ${JSON.stringify(k)} must be a name and a string`)
    env[k] = v
  }
  const removed = Object.keys(egressEnv).filter((k) => !(k in env))
  const changed = JSON.stringify(env) !== JSON.stringify(egressEnv)
  egressEnv = env
  // A shell started from now on takes the variables from shellEnv(); the running one (started
  // ahead, idle at provision) gets them exported, so the first call does not wait for a new shell.
  if (changed && shell.proc && !shell.current) {
    const q = (v) => `'${v.replace(/'/g, `'\\''`)}'`
    const lines = [...removed.map((k) => `unset ${k}`), ...Object.entries(env).map(([k, v]) => `export ${k}=${q(v)}`)]
    shell.proc.stdin.write(lines.join('; ') + '\n')
  }
  const socket = typeof req.socket === 'string' ? req.socket : ''
  if (!socket) return { listening: false }
  const port = posInt(req.port, 3128)
  if (!bridge || bridge.socket !== socket || bridge.port !== port) {
    if (bridge) bridge.server.close()
    // The bridge lives in the runner (no process to start, none a command can kill on its own):
    // each loopback connection is piped to the proxy's socket, which decides everything.
    const server = net.createServer((client) => {
      // Without it, a response written in two pieces waits ~40 ms for the client's delayed ACK.
      client.setNoDelay(true)
      const upstream = net.connect(socket)
      client.on('error', () => upstream.destroy())
      upstream.on('error', () => client.destroy())
      client.pipe(upstream).pipe(client)
    })
    const b = { socket, port, server }
    b.ready = new Promise((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, '127.0.0.1', resolve)
    })
    bridge = b
    try {
      await b.ready
    } catch (err) {
      if (bridge === b) bridge = undefined
      throw new Error(`egress: the bridge cannot listen on 127.0.0.1:${port}: ${err.message}`)
    }
  }
  await bridge.ready
  return { listening: true }
}

/** Clones a repository the proxy serves (its token stays in the proxy) into the workspace, as the sandbox user. */
async function clone(req) {
  const abs = resolvePath(req.path, 'path')
  if (fs.existsSync(abs)) return { existed: true }
  const url = String(req.url || '')
  if (!/^https?:\/\//.test(url)) throw new Error(`clone: ${JSON.stringify(url)} is not an http(s) URL`)
  const partial = abs + '.corral-partial'
  fs.rmSync(partial, { recursive: true, force: true })
  fs.mkdirSync(path.dirname(abs), { recursive: true })
  const env = { ...shellEnv(), GIT_TERMINAL_PROMPT: '0', GIT_CONFIG_NOSYSTEM: '1' }
  const git = (args, cwd) =>
    new Promise((resolve, reject) => {
      cp.execFile('git', ['-c', 'protocol.ext.allow=never', '-c', 'core.hooksPath=/dev/null', ...args], { cwd, env, timeout: 300000, maxBuffer: 16 * 1024 * 1024 }, (e, _out, stderr) =>
        e ? reject(new Error(`git ${args[0]} failed: ${String(stderr || e.message).trim()}`)) : resolve(),
      )
    })
  try {
    await git(['clone', '--quiet', ...(req.branch ? ['--branch', String(req.branch)] : []), '--', url, partial], WORKSPACE)
    if (req.sha) await git(['checkout', '--quiet', '--detach', String(req.sha)], partial)
    fs.renameSync(partial, abs)
  } catch (err) {
    fs.rmSync(partial, { recursive: true, force: true })
    throw err
  }
  return { existed: false }
}

try {
  fs.mkdirSync(STATE_DIR, { recursive: true })
} catch (err) {
  process.stderr.write(`runner: cannot make ${STATE_DIR}: ${err.message}\n`)
}

// Saved outputs are kept for a week (a crashed brain collects within minutes).
function pruneOld(maxAgeMs) {
  const cutoff = Date.now() - maxAgeMs
  for (const sub of ['outputs']) {
    let names = []
    try {
      names = fs.readdirSync(path.join(STATE_DIR, sub))
    } catch {}
    for (const name of names) {
      try {
        const file = path.join(STATE_DIR, sub, name)
        if (fs.lstatSync(file).mtimeMs < cutoff) fs.unlinkSync(file)
      } catch {}
    }
  }
}
setTimeout(() => pruneOld(posInt(process.env.CORRAL_RESULT_TTL_DAYS, 7) * 86400000), 2000).unref()

// Start the shell now, so the first bash call does not wait for it.
try {
  shell.ensure()
} catch (err) {
  process.stderr.write(`runner: the shell did not start: ${err.message}\n`)
}
