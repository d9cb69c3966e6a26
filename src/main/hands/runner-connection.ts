import { randomBytes } from 'node:crypto'
import type { Readable, Writable } from 'node:stream'
import { CorralError } from '../../shared/errors'
import type { CallRecovery, SandboxCall, SandboxResult } from './sandbox'

/**
 * The host's end of the runner protocol (resources/sandbox/runner.js): newline-delimited JSON
 * requests written to `input`, replies read from `output` (the runner's stdout, demultiplexed
 * by the caller when it comes from Docker). One connection per live runner; it never retries:
 * when the stream ends every pending request fails with RunnerClosedError and the backend
 * decides what happened (container died, OOM, daemon down).
 */
export class RunnerClosedError extends CorralError {
  constructor(reason: string) {
    super('sandbox_error', `the sandbox runner connection closed: ${reason}`)
    this.name = 'RunnerClosedError'
  }
}

interface Pending {
  resolve: (msg: RunnerMessage) => void
  reject: (err: Error) => void
  onOutput?: (chunk: string) => void
  /** Output characters still allowed to reach onOutput (the runner caps, but the host does not trust it to). */
  outputBudget?: number
}

interface RunnerMessage {
  rid: string | null
  type: string
  [key: string]: unknown
}

export interface RunnerConnectionParams {
  input: Writable
  output: Readable
  /** Called once when the connection closes (stream end, error or close()). */
  onClose?: (reason: string) => void
  /** Largest reply line accepted; longer lines close the connection (a runner gone wrong). */
  maxLineBytes?: number
}

export class RunnerConnection {
  private readonly pending = new Map<string, Pending>()
  private buffered: Buffer[] = []
  private bufferedBytes = 0
  private seq = 0
  private closedReason: string | undefined
  private readonly input: Writable
  private readonly output: Readable
  private readonly maxLineBytes: number
  private readonly closeListeners: ((reason: string) => void)[] = []

  constructor(params: RunnerConnectionParams) {
    this.input = params.input
    this.output = params.output
    if (params.onClose) this.closeListeners.push(params.onClose)
    this.maxLineBytes = params.maxLineBytes ?? 64 * 1024 * 1024
    this.output.on('data', (chunk: Buffer | string) => this.receive(typeof chunk === 'string' ? Buffer.from(chunk) : chunk))
    this.output.on('end', () => this.close('the runner\'s output ended'))
    this.output.on('close', () => this.close('the runner\'s output closed'))
    this.output.on('error', (err) => this.close(`read error: ${err.message}`))
    this.input.on('error', (err) => this.close(`write error: ${err.message}`))
  }

  get open(): boolean {
    return this.closedReason === undefined
  }

  /**
   * Waits until the runner answers. Lines before the matching reply (a previous host's
   * half-written output after a re-attach) are ignored. Throws RunnerClosedError or a timeout.
   */
  async hello(timeoutMs = 10_000): Promise<{ pid: number; version: number; workspace: string }> {
    const nonce = randomBytes(8).toString('hex')
    const reply = await this.request({ op: 'hello', nonce }, timeoutMs)
    if (reply.nonce !== nonce) throw new CorralError('sandbox_error', 'the sandbox runner answered hello with the wrong nonce')
    return reply as unknown as { pid: number; version: number; workspace: string }
  }

  /** Runs one tool call in the runner. Throws only RunnerClosedError (the runner is gone). */
  async call(call: SandboxCall & { cap?: number }): Promise<SandboxResult> {
    const id = call.toolUseId
    if (this.pending.has(id)) throw new CorralError('conflict_error', `tool call ${id} is already running in this sandbox`)
    const onAbort = () => this.send({ rid: `c${++this.seq}`, op: 'cancel', id })
    const reply = new Promise<RunnerMessage>((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onOutput: call.onOutput, outputBudget: call.cap ?? 256 * 1024 })
    })
    this.send({ rid: id, op: 'call', id, name: call.name, input: call.input, cap: call.cap, stream: call.onOutput !== undefined })
    if (call.signal?.aborted) onAbort()
    call.signal?.addEventListener('abort', onAbort, { once: true })
    try {
      const msg = await reply
      return msg.result as SandboxResult
    } finally {
      call.signal?.removeEventListener('abort', onAbort)
    }
  }

  async recover(toolUseId: string, timeoutMs = 10_000): Promise<CallRecovery> {
    const reply = await this.request({ op: 'recover', id: toolUseId }, timeoutMs)
    if (reply.state === 'finished') return { state: 'finished', result: reply.result as SandboxResult }
    return reply.state === 'running' ? { state: 'running' } : { state: 'unknown' }
  }

  async exists(path: string, timeoutMs = 10_000): Promise<boolean> {
    const reply = await this.request({ op: 'exists', path }, timeoutMs)
    return reply.exists === true
  }

  /** Places a file or an unpacked tar at an in-sandbox path, unless something is there already. */
  async place(params: { path: string; contentBase64?: string; tarBase64?: string }, timeoutMs = 120_000): Promise<{ existed: boolean }> {
    const reply = await this.request({ op: 'place', path: params.path, content_base64: params.contentBase64, tar_base64: params.tarBase64 }, timeoutMs)
    return { existed: reply.existed === true }
  }

  /**
   * Gives the sandbox its egress: `env` for every later shell, and a bridge in the runner from
   * 127.0.0.1:`port` to the proxy's `socket` (in-sandbox path). Resolves once the bridge listens.
   */
  async egress(params: { env: Readonly<Record<string, string>>; socket: string; port: number }, timeoutMs = 15_000): Promise<void> {
    await this.request({ op: 'egress', env: params.env, socket: params.socket, port: params.port }, timeoutMs)
  }

  /** Clones an http(s) repository into an in-sandbox path as the sandbox user, through the egress proxy. */
  async clone(params: { url: string; path: string; branch?: string; sha?: string }, timeoutMs = 320_000): Promise<{ existed: boolean }> {
    const reply = await this.request({ op: 'clone', url: params.url, path: params.path, branch: params.branch, sha: params.sha }, timeoutMs)
    return { existed: reply.existed === true }
  }

  /** Closes the connection; pending requests fail with RunnerClosedError(reason). */
  close(reason = 'closed by the host'): void {
    if (this.closedReason !== undefined) return
    this.closedReason = reason
    const err = new RunnerClosedError(reason)
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

  private async request(body: Record<string, unknown>, timeoutMs: number): Promise<RunnerMessage> {
    const rid = `r${++this.seq}`
    let timer: NodeJS.Timeout | undefined
    try {
      return await new Promise<RunnerMessage>((resolve, reject) => {
        this.pending.set(rid, { resolve, reject })
        timer = setTimeout(() => {
          this.pending.delete(rid)
          reject(new CorralError('sandbox_error', `the sandbox runner did not answer ${String(body.op)} within ${timeoutMs} ms`))
        }, timeoutMs)
        this.send({ rid, ...body })
      })
    } finally {
      clearTimeout(timer)
    }
  }

  private send(msg: Record<string, unknown>): void {
    if (this.closedReason !== undefined) {
      const p = this.pending.get(String(msg.rid))
      this.pending.delete(String(msg.rid))
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
      if (this.bufferedBytes > this.maxLineBytes) this.close(`the runner sent a line longer than ${this.maxLineBytes} bytes`)
    }
  }

  private dispatch(line: string): void {
    let msg: RunnerMessage
    try {
      msg = JSON.parse(line) as RunnerMessage
    } catch {
      return // a torn line from before a re-attach
    }
    if (!msg || typeof msg !== 'object') return
    const p = msg.rid === null || msg.rid === undefined ? undefined : this.pending.get(String(msg.rid))
    if (!p) return
    if (msg.type === 'output') {
      if (typeof msg.data === 'string' && p.onOutput && (p.outputBudget ?? 0) > 0) {
        const chunk = msg.data.slice(0, p.outputBudget)
        p.outputBudget = (p.outputBudget ?? 0) - chunk.length
        p.onOutput(chunk)
      }
      return
    }
    this.pending.delete(String(msg.rid))
    if (msg.type === 'error') p.reject(new CorralError('sandbox_error', `the sandbox runner refused a request: ${String(msg.message)}`))
    else p.resolve(msg)
  }
}
