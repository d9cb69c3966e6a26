/**
 * The model client bench's endpoint (bench/model-client.bench.ts), in a process of its own: every
 * Messages request, read whole, is answered at once with the same streamed response (one bash
 * tool call, the six SSE events of test/support/model-server's `sseEvents`). It records nothing
 * and sends nothing over IPC per request, so the bench's process spends CPU only on its own
 * requests. IPC: `{ url }` once listening; it exits when the bench disconnects.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { sseEvents } from '../test/support/model-server'

const events = sseEvents({ kind: 'message', blocks: [{ type: 'tool_use', id: 'toolu_bench', name: 'bash', input: { command: 'echo hi' } }] }, 'claude-sonnet-5-5')
const body = events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join('')

const server = createServer((req, res) => {
  req.resume()
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.end(body)
  })
})
server.keepAliveTimeout = 60_000
server.listen(0, '127.0.0.1', () => process.send?.({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }))
process.on('disconnect', () => {
  server.closeAllConnections()
  server.close(() => process.exit(0))
})
