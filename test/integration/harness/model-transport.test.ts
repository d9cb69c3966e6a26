import { getEventListeners } from 'node:events'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { AnthropicModelClient, ModelRequestError, type ModelRequest } from '../../../src/main/harness/model-client'
import { eventStreamBody, nodeFetch } from '../../../src/main/harness/model-transport'
import { sseEvents } from '../../support/model-server'

// The SDK's transport (harness/model-transport.ts): node:http with keep-alive under the official
// SDK. These cases hold what the SDK relies on of a fetch; model-client.test.ts runs the client's
// whole contract (previews, errors, stalls, aborts) over it.

const request: ModelRequest = { model: 'claude-sonnet-5-5', max_tokens: 100, messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }] }

let server: Server | undefined
afterEach(async () => {
  server?.closeAllConnections()
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()))
  server = undefined
})

/** A plain HTTP server: counts connections, records bodies, answers with `answer`. */
async function serve(answer: (body: string, res: import('node:http').ServerResponse) => void): Promise<{ url: string; connections: () => number; bodies: string[] }> {
  let connections = 0
  const bodies: string[] = []
  server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8')
      bodies.push(body)
      answer(body, res)
    })
  })
  server.on('connection', () => connections++)
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, connections: () => connections, bodies }
}

function streamText(res: import('node:http').ServerResponse, text: string): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' })
  for (const e of sseEvents({ kind: 'message', blocks: [{ type: 'text', text }] }, 'claude-sonnet-5-5')) res.write(`event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`)
  res.end()
}

describe('the model transport (node:http under the SDK)', () => {
  it('answers a response at its message_stop, without waiting for the end of the body', async () => {
    let finish!: () => void
    const s = await serve((_body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      for (const e of sseEvents({ kind: 'message', blocks: [{ type: 'text', text: 'whole' }] }, 'claude-sonnet-5-5')) res.write(`event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`)
      finish = () => res.end()
    })
    const r = await new AnthropicModelClient({ baseURL: s.url, apiKey: 'k' }).stream(request, { signal: new AbortController().signal })
    expect(r).toMatchObject({ blocks: [{ type: 'text', text: 'whole' }], stopReason: 'end_turn' })
    finish()
  })


  it('streams responses over one kept-alive connection, request after request', async () => {
    const s = await serve((_body, res) => streamText(res, 'hello there'))
    const client = new AnthropicModelClient({ baseURL: s.url, apiKey: 'k' })
    for (let i = 0; i < 5; i++) {
      const r = await client.stream({ ...request, messages: [{ role: 'user', content: [{ type: 'text', text: `turn ${i}` }] }] }, { signal: new AbortController().signal })
      expect(r.blocks).toEqual([{ type: 'text', text: 'hello there' }])
      // (the response is answered at message_stop and the end of its body read behind it: a turn
      // does its appends before its next request, by then the connection is back in the pool)
      await new Promise((resolve) => setTimeout(resolve, 2))
    }
    expect(s.connections()).toBe(1)
    // the body went out whole, as JSON with stream: true
    expect(JSON.parse(s.bodies[4])).toMatchObject({ stream: true, messages: [{ role: 'user', content: [{ type: 'text', text: 'turn 4' }] }] })
  })

  it("sends every request's tools whole, the same JSON the SDK would send, serializing a tools array once however many turns send it", async () => {
    const s = await serve((_body, res) => streamText(res, 'ok'))
    const client = new AnthropicModelClient({ baseURL: s.url, apiKey: 'k' })
    let serialized = 0
    const bash = { name: 'bash', description: 'run "it"\n', input_schema: { type: 'object' as const, properties: { command: { type: 'string' } }, required: ['command'] }, toJSON: undefined as unknown }
    const tools = [bash, { name: 'read', input_schema: { type: 'object' as const, properties: {} }, cache_control: { type: 'ephemeral' as const } }]
    // counts the serializations of the array (JSON.stringify calls toJSON with the object as `this`)
    const { toJSON: _t, ...plain } = bash
    bash.toJSON = () => (serialized++, plain)
    const other = [{ name: 'glob', input_schema: { type: 'object' as const, properties: {} } }]
    const turns = [tools, tools, other, tools, tools]
    // (a model of its own: the first request for a model goes through the SDK's messages.create and its own encoder)
    const model = 'claude-tools-once'
    for (const [i, t] of turns.entries()) {
      const body = { ...request, model, system: [{ type: 'text' as const, text: 'sys' }], messages: [{ role: 'user' as const, content: [{ type: 'text' as const, text: `turn ${i}` }] }], tools: t }
      await client.stream(body, { signal: new AbortController().signal })
      const sent = JSON.parse(s.bodies[i]) as Record<string, unknown>
      expect(sent).toEqual({ ...body, tools: t.map((x) => (x === bash ? plain : x)), stream: true })
    }
    // once by the SDK's messages.create (the model's first request), once for the three requests after
    expect(serialized).toBe(2)
  })

  it("stops a request when its signal aborts, before it is sent or mid-body, and leaves no listener on the signal once it is done", async () => {
    let cut = false
    const s = await serve((body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write('event: ping\ndata: {"type":"ping"}\n\n')
      if (body === 'hold') res.on('close', () => (cut = true))
      else res.end()
    })
    const listeners = (signal: AbortSignal) => getEventListeners(signal, 'abort').length
    // a signal shared by many requests (the SDK's own is one per request): nothing stays on it
    const shared = new AbortController()
    for (let i = 0; i < 3; i++) {
      const res = await nodeFetch(`${s.url}/v1/messages`, { method: 'POST', body: 'go', signal: shared.signal })
      expect(await res.text()).toContain('ping')
    }
    await expect.poll(() => listeners(shared.signal)).toBe(0)
    // aborted mid-body: the body's reader fails (as with http.request's own signal option: the
    // socket is destroyed under the response, "aborted"), and the server sees the connection go
    const mid = new AbortController()
    const res = await nodeFetch(`${s.url}/v1/messages`, { method: 'POST', body: 'hold', signal: mid.signal })
    const reading = res.text().then(
      () => 'read whole',
      (e: unknown) => e,
    )
    mid.abort()
    expect(await reading).toMatchObject({ message: 'aborted', code: 'ECONNRESET' })
    await expect.poll(() => cut).toBe(true)
    expect(listeners(mid.signal)).toBe(0)
    // aborted before: nothing is sent
    const before = s.bodies.length
    await expect(nodeFetch(`${s.url}/v1/messages`, { method: 'POST', body: 'go', signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'AbortError' })
    expect(s.bodies.length).toBe(before)
  })

  it('names a refused connection and its endpoint, as a retryable connection error', async () => {
    const s = await serve((_b, res) => res.end())
    const url = s.url
    await new Promise<void>((r) => server!.close(() => r()))
    server = undefined
    const err = await new AnthropicModelClient({ baseURL: url, apiKey: 'k' }).stream(request, { signal: new AbortController().signal }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ModelRequestError)
    expect(err).toMatchObject({ kind: 'connection', retryable: true })
    expect((err as Error).message).toContain(`connection refused to ${url}`)
  })

  it('reports a response cut before message_stop as a cut stream, and an error status with its JSON body', async () => {
    const cut = await serve((_b, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      const evs = sseEvents({ kind: 'message', blocks: [{ type: 'text', text: 'partial answer' }] }, 'm')
      for (const e of evs.slice(0, 3)) res.write(`event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`)
      res.end()
    })
    const e1 = await new AnthropicModelClient({ baseURL: cut.url, apiKey: 'k' }).stream(request, { signal: new AbortController().signal }).catch((e: unknown) => e)
    expect(e1).toMatchObject({ kind: 'stream_cut', retryable: true })
    server?.closeAllConnections()
    await new Promise<void>((r) => server!.close(() => r()))
    const bad = await serve((_b, res) => {
      res.writeHead(400, { 'content-type': 'application/json', 'request-id': 'req_1' })
      res.end(JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: 'max_tokens: must be at least 1' } }))
    })
    const e2 = await new AnthropicModelClient({ baseURL: bad.url, apiKey: 'k' }).stream(request, { signal: new AbortController().signal }).catch((e: unknown) => e)
    expect(e2).toMatchObject({ kind: 'invalid', status: 400, retryable: false })
    expect((e2 as Error).message).toContain('max_tokens: must be at least 1')
  })

  it('answers what the SDK reads of a fetch Response, and hands a body it does not send itself to the global fetch', async () => {
    const s = await serve((body, res) => {
      res.writeHead(201, { 'content-type': 'application/json', 'x-two': 'a' })
      res.end(JSON.stringify({ echoed: body }))
    })
    const r = await nodeFetch(`${s.url}/v1/x?y=1`, { method: 'POST', headers: new Headers({ 'content-type': 'application/json' }), body: '{"a":1}' })
    expect(r.status).toBe(201)
    expect(r.ok).toBe(true)
    expect(r.headers.get('x-two')).toBe('a')
    expect(await r.json()).toEqual({ echoed: '{"a":1}' })
    await expect(r.text()).rejects.toThrow(/already been read/)
    // a streamed body: the global fetch sends it (duplex half), the same server reads it
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode('streamed'))
        c.close()
      },
    })
    const r2 = await nodeFetch(`${s.url}/v1/x`, { method: 'POST', body: stream, duplex: 'half' } as RequestInit)
    expect(await r2.json()).toEqual({ echoed: 'streamed' })
    // an aborted signal rejects before anything is sent, as an AbortError (the SDK's test for an abort)
    const controller = new AbortController()
    controller.abort()
    await expect(nodeFetch(`${s.url}/v1/x`, { method: 'POST', body: 'x', signal: controller.signal })).rejects.toMatchObject({ name: 'AbortError' })
    expect(s.bodies).toEqual(['{"a":1}', 'streamed'])
  })

  it('reads a stream whose events have only data: lines (some compatible servers send no event: line), cut anywhere, and passes a named one as it came', async () => {
    const text = 'héllo 🌍 from a local server'
    const wire = (named: boolean, eol: string) =>
      sseEvents({ kind: 'message', blocks: [{ type: 'text', text }, { type: 'tool_use', name: 'bash', input: { command: 'ls' } }] }, 'local-model')
        .map((e) => `${named ? `event: ${e.type}${eol}` : ''}data: ${JSON.stringify(e)}${eol}${eol}`)
        .join('')
    for (const eol of ['\n', '\r\n']) {
      const bytes = Buffer.from(`: a comment first${eol}${eol}${wire(false, eol)}`, 'utf8')
      // in pieces of 7 bytes: lines, the blank lines between events and the emoji's four bytes all split
      const s = await serve((_body, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' })
        for (let i = 0; i < bytes.length; i += 7) res.write(bytes.subarray(i, i + 7))
        res.end()
      })
      const r = await new AnthropicModelClient({ baseURL: s.url, apiKey: 'k' }).stream(request, { signal: new AbortController().signal })
      expect(r).toMatchObject({ blocks: [{ type: 'text', text }, { type: 'tool_use', name: 'bash', input: { command: 'ls' } }], stopReason: 'tool_use' })
      server?.closeAllConnections()
      await new Promise<void>((res) => server!.close(() => res()))
      server = undefined
    }
    // the Messages API's own streams: the same chunks, untouched
    const chunks = [Buffer.from(wire(true, '\n').slice(0, 50)), Buffer.from(wire(true, '\n').slice(50))]
    const out: Uint8Array[] = []
    for await (const c of eventStreamBody((async function* () { yield* chunks })())) out.push(c)
    expect(out).toEqual(chunks)
    expect(out[0]).toBe(chunks[0])
  })
})
