import { connect, type Socket } from 'node:net'
import { CorralError } from '../../../shared/errors'

/**
 * A QMP client on a VM's unix socket (the control plane: migrate, query-migrate, stop, quit).
 * Connects, reads the greeting, negotiates capabilities; `execute` sends one command and
 * resolves with its `return` (or throws CorralError sandbox_error with qemu's `error.desc`).
 * Events are ignored. dispose() closes the socket.
 */
export class QmpClient {
  private buffer = ''
  private seq = 0
  private readonly waiting = new Map<string, { resolve: (v: unknown) => void; reject: (e: Error) => void }>()
  private closed: Error | undefined

  private constructor(private readonly socket: Socket) {
    socket.setEncoding('utf8')
    socket.on('data', (d: string) => this.receive(d))
    const fail = (err: Error) => {
      this.closed ??= err
      for (const w of this.waiting.values()) w.reject(this.closed)
      this.waiting.clear()
    }
    socket.on('error', fail)
    socket.on('close', () => fail(new CorralError('sandbox_error', 'the VM\'s QMP socket closed')))
  }

  /** Connects to `path`, retrying while qemu has not created it yet (up to `timeoutMs`). */
  static async connect(path: string, timeoutMs = 10_000): Promise<QmpClient> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      try {
        const socket = await new Promise<Socket>((resolve, reject) => {
          const s = connect(path)
          s.once('connect', () => resolve(s))
          s.once('error', reject)
        })
        const client = new QmpClient(socket)
        await client.greeting(deadline - Date.now())
        await client.execute('qmp_capabilities')
        return client
      } catch (err) {
        if (Date.now() > deadline) throw new CorralError('sandbox_error', `no QMP answer on ${path}: ${(err as Error).message}`, { cause: err })
        await new Promise((r) => setTimeout(r, 50))
      }
    }
  }

  private greetingResolve?: () => void

  private greeting(timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no QMP greeting')), Math.max(100, timeoutMs))
      this.greetingResolve = () => {
        clearTimeout(timer)
        resolve()
      }
    })
  }

  private receive(data: string): void {
    this.buffer += data
    let nl: number
    while ((nl = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, nl).trim()
      this.buffer = this.buffer.slice(nl + 1)
      if (!line) continue
      let msg: { QMP?: unknown; id?: string; return?: unknown; error?: { desc?: string } }
      try {
        msg = JSON.parse(line) as typeof msg
      } catch {
        continue
      }
      if (msg.QMP) {
        this.greetingResolve?.()
        continue
      }
      if (msg.id === undefined) continue // an event
      const w = this.waiting.get(msg.id)
      if (!w) continue
      this.waiting.delete(msg.id)
      if (msg.error) w.reject(new CorralError('sandbox_error', `qemu refused a QMP command: ${msg.error.desc ?? JSON.stringify(msg.error)}`))
      else w.resolve(msg.return)
    }
  }

  execute(command: string, args?: Record<string, unknown>, timeoutMs = 30_000): Promise<unknown> {
    if (this.closed) return Promise.reject(this.closed)
    const id = `q${++this.seq}`
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id)
        reject(new CorralError('sandbox_error', `qemu did not answer QMP ${command} within ${timeoutMs} ms`))
      }, timeoutMs)
      this.waiting.set(id, {
        resolve: (v) => {
          clearTimeout(timer)
          resolve(v)
        },
        reject: (e) => {
          clearTimeout(timer)
          reject(e)
        },
      })
      this.socket.write(JSON.stringify({ execute: command, ...(args ? { arguments: args } : {}), id }) + '\n')
    })
  }

  dispose(): void {
    this.socket.destroy()
  }
}
