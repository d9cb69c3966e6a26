import { randomBytes } from 'node:crypto'
import type { Readable, Writable } from 'node:stream'
import { CorralError } from '../../../shared/errors'
import type { OutputStream, SandboxFileList, SandboxToolCall, ToolOutcome } from '../sandbox'
import { type AnsweredOp, answers, REPLY_TO, replySchema, type ReplyTo, type ReplyType, type RunnerReply, type RunnerRequest } from './protocol'

/** The runner's connection closed (stream end, error or close()): every pending request fails with it. */
export class RunnerClosedError extends CorralError {
  constructor(reason: string) {
    super('sandbox_error', `the sandbox runner connection closed: ${reason}`)
    this.name = 'RunnerClosedError'
  }
}

/**
 * The runner answered something that is not the protocol (a reply of the wrong shape or type,
 * a result past its cap, a line that is not JSON): whatever runs in the sandbox may have written
 * it, so the runner is no longer trusted and the connection is closed.
 */
export class RunnerMalformedError extends RunnerClosedError {
  constructor(readonly detail: string) {
    super(`the sandbox's runner answered malformed data (${detail})`)
    this.name = 'RunnerMalformedError'
  }
}

/** Room a result may take past the output cap: the runner's truncation note and status lines. */
export const RESULT_NOTE_ALLOWANCE = 16 * 1024
/** The cap on one result's text when the caller names none (settings' output_cap_bytes default). */
export const DEFAULT_RESULT_CAP = 256 * 1024

interface Pending {
  /** The reply type that answers this request ('result' for a call); 'error' always may. */
  expects: ReplyType
  resolve: (msg: RunnerReply) => void
  reject: (err: Error) => void
  onOutput?: (chunk: string, stream?: OutputStream) => void
  /** Output characters still allowed to reach onOutput (the runner caps, but the host does not trust it to). */
  outputBudget?: number
  /** Largest result text accepted, in UTF-8 bytes. */
  resultCap?: number
}

export interface RunnerConnectionParams {
  input: Writable
  output: Readable
  /** Called once when the connection closes (stream end, error or close()). */
  onClose?: (reason: string) => void
  /** Largest reply line accepted; a longer line is malformed and closes the connection (default 8 MiB). */
  maxLineBytes?: number
}

/** What the runner keeps of a call an earlier process started (its `recovery` reply). */
export type RunnerRecovery = { state: 'finished'; result: ToolOutcome } | { state: 'running' } | { state: 'unknown' }

/**
 * The host's end of the runner protocol (resources/sandbox/runner.js): newline-delimited JSON
 * requests written to `input`, replies read from `output` (the runner's stdout, demultiplexed
 * by the caller when it comes from Docker). One connection per live runner; it never retries:
 * when the stream ends every pending request fails with RunnerClosedError and the backend
 * decides what happened (container died, OOM, daemon down). Requests and replies are typed by
 * protocol.ts; every reply is parsed with its zod schema and held to its caps before anyone sees it.
 */
export class RunnerConnection {
  private readonly pending = new Map<string, Pending>()
  private buffered: Buffer[] = []
  private bufferedBytes = 0
  private seq = 0
  private closedReason: string | undefined
  private malformed: string | undefined
  /** Whether a hello was answered: torn lines before it are an earlier host's leftovers, after it they are malformed. */
  private greeted = false
  private readonly input: Writable
  private readonly output: Readable
  private readonly maxLineBytes: number
  private readonly closeListeners: ((reason: string) => void)[] = []

  constructor(params: RunnerConnectionParams) {
    this.input = params.input
    this.output = params.output
    if (params.onClose) this.closeListeners.push(params.onClose)
    this.maxLineBytes = params.maxLineBytes ?? 8 * 1024 * 1024
    this.output.on('data', (chunk: Buffer | string) => this.receive(typeof chunk === 'string' ? Buffer.from(chunk) : chunk))
    this.output.on('end', () => this.close('the runner\'s output ended'))
    this.output.on('close', () => this.close('the runner\'s output closed'))
    this.output.on('error', (err) => this.close(`read error: ${err.message}`))
    this.input.on('error', (err) => this.close(`write error: ${err.message}`))
  }

  get open(): boolean {
    return this.closedReason === undefined
  }

  /** Why the runner was found untrustworthy, when the connection closed for that. */
  get malformedReply(): string | undefined {
    return this.malformed
  }

  /**
   * Waits until the runner answers. Lines before the matching reply (a previous host's
   * half-written output after a re-attach) are ignored. Throws RunnerClosedError or a timeout.
   */
  async hello(timeoutMs = 10_000): Promise<{ pid: number; version: number; workspace: string }> {
    const nonce = randomBytes(8).toString('hex')
    const reply = await this.request({ rid: this.nextRid(), op: 'hello', nonce }, { timeoutMs })
    if (reply.nonce !== nonce) throw new CorralError('sandbox_error', 'the sandbox runner answered hello with the wrong nonce')
    this.greeted = true
    return { pid: reply.pid, version: reply.version, workspace: reply.workspace }
  }

  /**
   * Runs one tool call in the runner. Throws RunnerClosedError when the runner is gone, and
   * RunnerMalformedError (a RunnerClosedError: the connection is closed) when its reply is not a
   * result of the protocol's shape or its text is longer than `cap` + RESULT_NOTE_ALLOWANCE bytes.
   */
  async call(call: SandboxToolCall & { cap?: number }): Promise<ToolOutcome> {
    const id = call.toolUseId
    if (this.pending.has(id)) throw new CorralError('conflict_error', `tool call ${id} is already running in this sandbox`)
    const onAbort = () => this.send({ rid: `c${++this.seq}`, op: 'cancel', id })
    const cap = call.cap ?? DEFAULT_RESULT_CAP
    const reply = new Promise<RunnerReply>((resolve, reject) => {
      this.pending.set(id, { expects: REPLY_TO.call, resolve, reject, onOutput: call.onOutput, outputBudget: cap, resultCap: cap })
    })
    this.send({ rid: id, op: 'call', id, name: call.name, input: call.input, cap: call.cap, stream: call.onOutput !== undefined })
    if (call.signal?.aborted) onAbort()
    call.signal?.addEventListener('abort', onAbort, { once: true })
    try {
      const msg = await reply
      if (!answers('call', msg)) throw new CorralError('sandbox_error', `unexpected ${msg.type} reply`)
      return msg.result
    } finally {
      call.signal?.removeEventListener('abort', onAbort)
    }
  }

  /** What the runner knows of a call; a finished result is held to `cap` like a call's. */
  async recover(toolUseId: string, options: { timeoutMs?: number; cap?: number } = {}): Promise<RunnerRecovery> {
    const reply = await this.request({ rid: this.nextRid(), op: 'recover', id: toolUseId }, { timeoutMs: options.timeoutMs ?? 10_000, resultCap: options.cap ?? DEFAULT_RESULT_CAP })
    if (reply.state === 'finished') {
      if (!reply.result) {
        this.close('a finished recovery without its result', true)
        throw new RunnerMalformedError('a finished recovery without its result')
      }
      return { state: 'finished', result: reply.result }
    }
    return reply.state === 'running' ? { state: 'running' } : { state: 'unknown' }
  }

  async exists(path: string, timeoutMs = 10_000): Promise<boolean> {
    const reply = await this.request({ rid: this.nextRid(), op: 'exists', path }, { timeoutMs })
    return reply.exists
  }

  /** Places a file or an unpacked tar at an in-sandbox path, unless something is there already. */
  async place(params: { path: string; contentBase64?: string; tarBase64?: string }, timeoutMs = 120_000): Promise<{ existed: boolean }> {
    const reply = await this.request({ rid: this.nextRid(), op: 'place', path: params.path, content_base64: params.contentBase64, tar_base64: params.tarBase64 }, { timeoutMs })
    return { existed: reply.existed }
  }

  /**
   * Gives the sandbox its egress: `env` for every later shell, and a bridge in the runner from
   * 127.0.0.1:`port` to the proxy's `socket` (in-sandbox path). Resolves once the bridge listens.
   */
  async egress(params: { env: Readonly<Record<string, string>>; socket: string; port: number }, timeoutMs = 15_000): Promise<void> {
    await this.request({ rid: this.nextRid(), op: 'egress', env: params.env, socket: params.socket, port: params.port }, { timeoutMs })
  }

  /** Clones an http(s) repository into an in-sandbox path as the sandbox user, through the egress proxy. */
  async clone(params: { url: string; path: string; branch?: string; sha?: string }, timeoutMs = 320_000): Promise<{ existed: boolean }> {
    const reply = await this.request({ rid: this.nextRid(), op: 'clone', url: params.url, path: params.path, branch: params.branch, sha: params.sha }, { timeoutMs })
    return { existed: reply.existed }
  }

  /** The regular files under an in-sandbox folder (none when it does not exist), each with a signature that changes on every write. */
  async listFiles(path: string, options: { max?: number; timeoutMs?: number } = {}): Promise<SandboxFileList> {
    const reply = await this.request({ rid: this.nextRid(), op: 'list_files', path, max: options.max }, { timeoutMs: options.timeoutMs ?? 30_000 })
    return { files: reply.files, skipped: reply.skipped, truncated: reply.truncated }
  }

  /** Up to `length` bytes (≤ 4 MiB) of an in-sandbox regular file from `offset`, with its size and signature when read. */
  async readFileChunk(params: { path: string; offset: number; length: number }, timeoutMs = 60_000): Promise<{ bytes: Buffer; size: number; sig: string }> {
    const reply = await this.request({ rid: this.nextRid(), op: 'read_file', path: params.path, offset: params.offset, length: params.length }, { timeoutMs })
    return { bytes: Buffer.from(reply.content_base64, 'base64'), size: reply.size, sig: reply.sig }
  }

  /**
   * Closes the connection; pending requests fail with RunnerClosedError(reason), or with
   * RunnerMalformedError(reason) when `malformed` (the runner said something off-protocol).
   */
  close(reason = 'closed by the host', malformed = false): void {
    if (this.closedReason !== undefined) return
    if (malformed) this.malformed = reason
    this.closedReason = malformed ? `the sandbox's runner answered malformed data (${reason})` : reason
    const err = malformed ? new RunnerMalformedError(reason) : new RunnerClosedError(reason)
    for (const p of this.pending.values()) p.reject(err)
    this.pending.clear()
    try {
      this.input.end()
    } catch {
      // already gone
    }
    this.output.removeAllListeners('data')
    for (const listener of this.closeListeners.splice(0)) listener(reason)
  }

  /** Calls `listener` once when the connection closes (at once if it is closed already). */
  onClosed(listener: (reason: string) => void): void {
    if (this.closedReason !== undefined) listener(this.closedReason)
    else this.closeListeners.push(listener)
  }

  private nextRid(): string {
    return `r${++this.seq}`
  }

  /** Sends a request and waits for the reply of its op (an `error` reply rejects). */
  private async request<R extends RunnerRequest & { op: AnsweredOp }>(req: R, p: { timeoutMs: number; resultCap?: number }): Promise<ReplyTo<R['op']>> {
    let timer: NodeJS.Timeout | undefined
    try {
      return await new Promise<ReplyTo<R['op']>>((resolve, reject) => {
        const answer = (msg: RunnerReply) => (answers<R['op']>(req.op, msg) ? resolve(msg) : reject(new CorralError('sandbox_error', `unexpected ${msg.type} reply`)))
        this.pending.set(req.rid, { expects: REPLY_TO[req.op], resolve: answer, reject, resultCap: p.resultCap })
        timer = setTimeout(() => {
          this.pending.delete(req.rid)
          reject(new CorralError('sandbox_error', `the sandbox runner did not answer ${req.op} within ${p.timeoutMs} ms`))
        }, p.timeoutMs)
        this.send(req)
      })
    } finally {
      clearTimeout(timer)
    }
  }

  private send(msg: RunnerRequest): void {
    if (this.closedReason !== undefined) {
      const p = this.pending.get(msg.rid)
      this.pending.delete(msg.rid)
      p?.reject(new RunnerClosedError(this.closedReason))
      return
    }
    this.input.write(JSON.stringify(msg) + '\n')
  }

  private receive(chunk: Buffer): void {
    let start = 0
    let nl: number
    while ((nl = chunk.indexOf(10, start)) !== -1) {
      this.buffered.push(chunk.subarray(start, nl))
      const line = Buffer.concat(this.buffered).toString('utf8')
      this.buffered = []
      this.bufferedBytes = 0
      start = nl + 1
      this.dispatch(line)
    }
    if (start < chunk.length) {
      this.buffered.push(chunk.subarray(start))
      this.bufferedBytes += chunk.length - start
      if (this.bufferedBytes > this.maxLineBytes) this.close(`a line longer than ${this.maxLineBytes} bytes`, true)
    }
  }

  private dispatch(line: string): void {
    if (this.closedReason !== undefined) return
    let raw: unknown
    try {
      raw = JSON.parse(line)
    } catch {
      // Before the hello: a torn line an earlier host left half-read. After it: off-protocol.
      if (this.greeted && line.trim() !== '') this.close('a line that is not JSON', true)
      return
    }
    const parsed = replySchema.safeParse(raw)
    if (!parsed.success) {
      const issue = parsed.error.issues[0]
      const type = raw && typeof raw === 'object' && typeof (raw as { type?: unknown }).type === 'string' ? `a ${(raw as { type: string }).type} reply` : 'a reply'
      if (this.greeted || this.pending.size > 0) this.close(`${type} whose ${issue?.path.join('.') || 'shape'} is wrong: ${issue?.message ?? 'invalid'}`, true)
      return
    }
    const msg = parsed.data
    const p = msg.rid === null ? undefined : this.pending.get(msg.rid)
    // A reply nobody waits for (a request that timed out, a previous host's call) is dropped.
    if (!p) return
    if (msg.type === 'output') {
      if (p.expects !== 'result') return this.close(`output for a ${p.expects} request`, true)
      if (p.onOutput && (p.outputBudget ?? 0) > 0) {
        const chunk = msg.data.slice(0, p.outputBudget)
        p.outputBudget = (p.outputBudget ?? 0) - chunk.length
        p.onOutput(chunk, msg.stream ?? 'stdout')
      }
      return
    }
    if (msg.type !== 'error' && msg.type !== p.expects) return this.close(`a ${msg.type} reply where ${p.expects} was asked for`, true)
    const result = msg.type === 'result' || msg.type === 'recovery' ? msg.result : undefined
    if (result && p.resultCap !== undefined) {
      const bytes = Buffer.byteLength(result.content, 'utf8')
      if (bytes > p.resultCap + RESULT_NOTE_ALLOWANCE) return this.close(`a result of ${bytes} bytes, over the ${p.resultCap}-byte cap`, true)
    }
    this.pending.delete(msg.rid as string)
    if (msg.type === 'error') p.reject(new CorralError('sandbox_error', `the sandbox runner refused a request: ${msg.message}`))
    else p.resolve(msg)
  }
}
