import { appendFileSync, closeSync, existsSync, fsyncSync, openSync, readFileSync, writeSync } from 'node:fs'
import type { ToolCall, ToolOutcome, ToolRecovery, ToolRouter } from '../../src/main/hands/tool-router'

/**
 * A real in-process ToolRouter for harness tests. Every call's side effect is one line appended
 * (and fsynced) to a file, so a test — even across kill -9 — can prove that no call ran twice.
 * The journal in the same file lets `recover` answer honestly:
 *   `start <id>`  written before the call waits `delayMs` (abortable),
 *   `effect <id> <json>`  the side effect itself, written once the wait is over.
 * recover: effect recorded → finished; started without effect → unknown; neither → not_started.
 */
export class RecordingToolRouter implements ToolRouter {
  readonly released: string[] = []
  readonly calls: ToolCall[] = []
  /** Called with each call before it runs; may await (e.g. until the test says go). */
  beforeRun?: (call: ToolCall) => Promise<void> | void

  constructor(
    readonly file: string,
    private readonly options: { delayMs?: number | (() => number); /** false: lines are written without fsync (a benchmark's tool that adds no delay; not for kill -9 tests). Default true. */ durable?: boolean } = {},
  ) {
    if (!existsSync(file)) appendFileSync(file, '')
  }

  async execute(call: ToolCall): Promise<ToolOutcome> {
    this.calls.push(call)
    this.line(`start ${call.toolUseId}`)
    await this.beforeRun?.(call)
    const d = this.options.delayMs
    const delay = typeof d === 'function' ? d() : (d ?? 0)
    if (delay > 0 || call.signal) {
      const aborted = await waitOrAbort(delay, call.signal)
      if (aborted) return { content: `cancelled: ${call.name} was interrupted before it had any effect`, isError: true }
    }
    const output = outputOf(call)
    this.line(`effect ${call.toolUseId} ${JSON.stringify({ name: call.name, input: call.input, output })}`)
    return { content: output, isError: false, durationMs: delay, ...(call.name === 'bash' ? { exitCode: 0 } : {}) }
  }

  async recover(call: Omit<ToolCall, 'signal' | 'onOutput'>): Promise<ToolRecovery> {
    const lines = this.lines()
    const effect = lines.find((l) => l.startsWith(`effect ${call.toolUseId} `))
    if (effect) return { state: 'finished', outcome: { content: (JSON.parse(effect.slice(`effect ${call.toolUseId} `.length)) as { output: string }).output, isError: false } }
    if (lines.includes(`start ${call.toolUseId}`)) return { state: 'unknown' }
    return { state: 'not_started' }
  }

  async release(sessionId: string): Promise<void> {
    this.released.push(sessionId)
  }

  /** Every line of the side-effect file. */
  lines(): string[] {
    return readFileSync(this.file, 'utf8').split('\n').filter(Boolean)
  }

  /** Tool-use ids whose side effect happened, with repetitions. */
  effects(): string[] {
    return this.lines()
      .filter((l) => l.startsWith('effect '))
      .map((l) => l.split(' ')[1])
  }

  private line(text: string): void {
    const fd = openSync(this.file, 'a')
    try {
      writeSync(fd, text + '\n')
      if (this.options.durable !== false) fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
  }
}

function outputOf(call: ToolCall): string {
  const cmd = typeof call.input.command === 'string' ? call.input.command : JSON.stringify(call.input)
  return `ran ${call.name}: ${cmd}`
}

function waitOrAbort(ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(true)
    if (ms <= 0 && !signal) return resolve(false)
    let timer: NodeJS.Timeout | undefined
    const onAbort = () => {
      if (timer) clearTimeout(timer)
      resolve(true)
    }
    if (ms > 0 || !signal) {
      timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort)
        resolve(false)
      }, ms)
    } else {
      // no delay: still give an abort that is already queued a chance to land
      return resolve(false)
    }
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}
