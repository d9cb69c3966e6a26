/**
 * The scripted model server in a process of its own (for benchmarks, so the model's CPU does
 * not count as the harness's). Every request gets `say(text)` with the given delay and
 * streaming pace. Over IPC it sends `{url}` once listening, then `{marker, serverMs}` for each
 * response's first content delta (marker: the last text block of the request's last user message).
 * Usage: fork with argv [JSON.stringify({ text, delayMs, chunkSize, chunkDelayMs })].
 */
import { ScriptedModelServer, say } from './model-server'

const opts = JSON.parse(process.argv[2] ?? '{}') as { text?: string; delayMs?: number; chunkSize?: number; chunkDelayMs?: number }

async function main(): Promise<void> {
  const server = await ScriptedModelServer.start(() => say(opts.text ?? 'hello world', { delayMs: opts.delayMs ?? 5, chunkSize: opts.chunkSize, chunkDelayMs: opts.chunkDelayMs }))
  server.keepRequests = 0
  server.onFirstToken = (req) => {
    const last = [...req.body.messages].reverse().find((m) => m.role === 'user')
    const texts = !last ? [] : typeof last.content === 'string' ? [last.content] : last.content.filter((b) => b.type === 'text').map((b) => String(b.text))
    const marker = texts.at(-1) ?? ''
    process.send?.({ marker, serverMs: (req.firstTokenAt ?? req.receivedAt) - req.arrivedAt, arrivedAbs: performance.timeOrigin + req.arrivedAt })
  }
  process.send?.({ url: server.url })
  process.on('disconnect', () => void server.close().then(() => process.exit(0)))
}
void main()
