/**
 * The threads bench's scripted model (bench/threads.bench.ts), in a process of its own: a real
 * model is never in the engine's process, so its CPU (HTTP parsing, SSE writing) must not count
 * as the engine's. The script: the lead fans out to `children` workers with `send_to_agent`,
 * each worker runs `calls` bash calls then says "finished", the lead says "all done" once every
 * report is in. Every response waits `firstTokenMs` before its first byte.
 *
 * IPC: sends `{ url }` once listening; on `{ collect: true }` answers `{ requests }`: per worker
 * request its task, the tool_use_id of its last tool_result and, in CLOCK_MONOTONIC milliseconds
 * (process.hrtime, the same clock in every process), when its headers arrived and when its last
 * byte was handed to the socket; on `{ cpu: true }` answers `{ cpuMs }`, its CPU time so far (user + system).
 * Usage: fork with argv [JSON.stringify({ children, calls, firstTokenMs, lead, worker })].
 */
import { ScriptedModelServer, say, userTexts, type RecordedRequest, type ScriptStep } from '../test/support/model-server'

export interface ThreadsModelOptions {
  children: number
  calls: number
  firstTokenMs: number
  lead: string
  worker: string
  /** Characters of text streamed before each worker response's tool call and in its final answer, `chunkSize` per delta (0: none, the default). */
  textChars?: number
  /** ms between a response's SSE events once it started (0: the whole response in one write, the default). */
  chunkDelayMs?: number
}

export interface ThreadsModelRequest {
  role: 'lead' | 'worker' | 'other'
  task?: string
  lastToolResultId?: string
  arrivedAt: number
  endedAt?: number
}

const opts = JSON.parse(process.argv[2] ?? '{}') as ThreadsModelOptions
/** performance.now() + offset = process.hrtime in ms. */
const offset = Number(process.hrtime.bigint()) / 1e6 - performance.now()

function lastToolResultId(req: RecordedRequest): string | undefined {
  for (let m = req.body.messages.length - 1; m >= 0; m--) {
    const msg = req.body.messages[m]
    if (msg.role !== 'user' || typeof msg.content === 'string') continue
    for (let b = msg.content.length - 1; b >= 0; b--) if (msg.content[b].type === 'tool_result') return String(msg.content[b].tool_use_id)
  }
  return undefined
}

function respond(req: RecordedRequest): ScriptStep {
  const sys = req.body.system?.[0]?.text ?? ''
  if (sys === opts.lead) {
    if (req.body.messages.length === 1) {
      return { kind: 'message', delayMs: opts.firstTokenMs, blocks: Array.from({ length: opts.children }, (_, i) => ({ type: 'tool_use' as const, name: 'send_to_agent', input: { agent: 'worker', message: `task ${i}` } })) }
    }
    const reports = userTexts(req).filter((t) => t.startsWith('<message from=')).length
    return say(reports >= opts.children ? 'all done' : 'waiting', { delayMs: opts.firstTokenMs })
  }
  if (sys !== opts.worker) return say('warm', { delayMs: 1 })
  let results = 0
  for (const m of req.body.messages) if (m.role === 'user' && typeof m.content !== 'string') results += m.content.filter((b) => b.type === 'tool_result').length
  const text = opts.textChars ? 'Looking at what the task needs next, one more command. '.repeat(Math.ceil(opts.textChars / 56)).slice(0, opts.textChars) : ''
  const paced = { delayMs: opts.firstTokenMs, chunkDelayMs: opts.chunkDelayMs || undefined }
  if (results >= opts.calls) return { kind: 'message', ...paced, blocks: [{ type: 'text', text: text ? `finished. ${text}` : 'finished' }] }
  return { kind: 'message', ...paced, blocks: [...(text ? [{ type: 'text' as const, text }] : []), { type: 'tool_use', name: 'bash', input: { command: `echo ${results}` } }] }
}

async function main(): Promise<void> {
  const server = await ScriptedModelServer.start(respond)
  server.keepRequests = 100_000
  process.on('message', (m: { collect?: boolean; cpu?: boolean }) => {
    if (m.cpu) return void process.send?.({ cpuMs: ((u) => (u.user + u.system) / 1000)(process.cpuUsage()) })
    if (!m.collect) return
    const requests: ThreadsModelRequest[] = server.requests.map((r) => {
      const sys = r.body.system?.[0]?.text ?? ''
      const role = sys === opts.lead ? 'lead' : sys === opts.worker ? 'worker' : 'other'
      return {
        role,
        ...(role === 'worker' ? { task: userTexts(r)[0], lastToolResultId: lastToolResultId(r) } : {}),
        arrivedAt: r.arrivedAt + offset,
        ...(r.endedAt !== undefined ? { endedAt: r.endedAt + offset } : {}),
      }
    })
    process.send?.({ requests, violations: server.violations })
  })
  process.send?.({ url: server.url })
  process.on('disconnect', () => void server.close().then(() => process.exit(0)))
}
void main()
