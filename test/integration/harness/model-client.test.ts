import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { AnthropicModelClient, ModelRequestError, type AnthropicModelClientParams, type ModelClient, type ModelRequest } from '../../../src/main/harness/model-client'
import { ModelThread, ThreadedModelClient, startModelWorker } from '../../../src/main/harness/model-thread'
import { nodeFetch } from '../../../src/main/harness/model-transport'
import { ScriptedModelServer, say } from '../../support/model-server'

let server: ScriptedModelServer | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

const request: ModelRequest = {
  model: 'claude-sonnet-5-5',
  max_tokens: 100,
  system: [{ type: 'text', text: 'sys', cache_control: { type: 'ephemeral' } }],
  tools: [
    { name: 'bash', description: 'run', input_schema: { type: 'object', properties: { command: { type: 'string' }, n: { type: 'array', items: { type: 'integer' } } }, required: ['command'] }, cache_control: { type: 'ephemeral' } },
    { type: 'web_search_20250305', name: 'web_search' } as never,
  ],
  messages: [{ role: 'user', content: [{ type: 'text', text: 'hi', cache_control: { type: 'ephemeral' } }] }],
  context_management: { edits: [{ type: 'clear_tool_uses_20250919' }] },
}

// The same client two ways: on the event loop (inline) and on the model thread (what the desktop
// and `corral serve` run: harness/model-thread.ts), which must not be told apart by its results.
const thread = new ModelThread()
afterAll(() => thread.dispose())
const clients: [string, (p: AnthropicModelClientParams) => ModelClient][] = [
  ['inline', (p) => new AnthropicModelClient(p)],
  ['on the model thread', (p) => new ThreadedModelClient(p, thread)],
]

describe.each(clients)('the Anthropic model client (%s)', (_how, makeClient) => {
  const AnthropicModelClient = function (p: AnthropicModelClientParams) {
    return makeClient(p)
  } as unknown as new (p: AnthropicModelClientParams) => ModelClient

  it('sends the full request with beta headers to Anthropic, and a stripped one to a local compatible server', async () => {
    server = await ScriptedModelServer.start([say('full'), say('stripped')])
    const signal = new AbortController().signal
    const full = new AnthropicModelClient({ baseURL: server.url, apiKey: 'k', betas: ['context-management-2025-06-27'] })
    expect((await full.stream(request, { signal })).blocks).toEqual([{ type: 'text', text: 'full' }])
    const local = new AnthropicModelClient({ baseURL: server.url, apiKey: 'k', betas: ['context-management-2025-06-27'], compatibilityMode: true })
    expect((await local.stream(request, { signal })).blocks).toEqual([{ type: 'text', text: 'stripped' }])

    const [a, b] = server.requests
    expect(a.headers['anthropic-beta']).toBe('context-management-2025-06-27')
    expect(JSON.stringify(a.body)).toContain('cache_control')
    expect(a.body.context_management).toBeDefined()
    expect(a.body.tools?.map((t) => t.name)).toEqual(['bash', 'web_search'])

    expect(b.headers['anthropic-beta']).toBeUndefined()
    expect(JSON.stringify(b.body)).not.toContain('cache_control')
    expect(b.body.context_management).toBeUndefined()
    expect(b.body.tools?.map((t) => t.name)).toEqual(['bash'])
    expect(String(b.headers['x-api-key'] ?? b.headers.authorization)).toMatch(/(^| )k$/)
  })

  it('reports usage from message_start and message_delta, and tool input assembled from input_json_delta', async () => {
    server = await ScriptedModelServer.start([
      { kind: 'message', blocks: [{ type: 'tool_use', name: 'bash', input: { command: 'echo "a b"', n: [1, 2] } }], usage: { input_tokens: 11, output_tokens: 22, cache_read_input_tokens: 5 } },
    ])
    const client = new AnthropicModelClient({ baseURL: server.url, apiKey: 'k' })
    const r = await client.stream(request, { signal: new AbortController().signal })
    expect(r.stopReason).toBe('tool_use')
    expect(r.usage).toEqual({ input_tokens: 11, output_tokens: 22, cache_creation_input_tokens: 0, cache_read_input_tokens: 5 })
    expect(r.blocks).toEqual([{ type: 'tool_use', id: expect.stringMatching(/^toolu_/), name: 'bash', input: { command: 'echo "a b"', n: [1, 2] } }])
  })

  it("keeps a tool call's input sent whole in its content_block_start, as some compatible servers send it", async () => {
    server = await ScriptedModelServer.start([{ kind: 'message', toolInputAtStart: true, blocks: [{ type: 'tool_use', name: 'bash', input: { command: 'ls -la', n: [3] } }] }])
    const r = await new AnthropicModelClient({ baseURL: server.url, apiKey: 'k', compatibilityMode: true }).stream(request, { signal: new AbortController().signal })
    expect(r.stopReason).toBe('tool_use')
    expect(r.blocks).toEqual([{ type: 'tool_use', id: expect.stringMatching(/^toolu_/), name: 'bash', input: { command: 'ls -la', n: [3] } }])
  })

  // (a body that ends before message_delta is a cut stream: model-transport.test.ts)
  it('takes a response whose body ends after message_delta, without message_stop, as whole', async () => {
    server = await ScriptedModelServer.start([
      { kind: 'message', noMessageStop: true, blocks: [{ type: 'text', text: 'all here' }, { type: 'tool_use', name: 'bash', input: { command: 'ls' } }] },
    ])
    const client = new AnthropicModelClient({ baseURL: server.url, apiKey: 'k', compatibilityMode: true })
    const r = await client.stream(request, { signal: new AbortController().signal })
    expect(r.stopReason).toBe('tool_use')
    expect(r.blocks).toEqual([{ type: 'text', text: 'all here' }, { type: 'tool_use', id: expect.stringMatching(/^toolu_/), name: 'bash', input: { command: 'ls' } }])
  })

  it('gives up on a socket that stays silent before the first byte and says so', async () => {
    server = await ScriptedModelServer.start([say('late', { delayMs: 2000 })])
    const client = new AnthropicModelClient({ baseURL: server.url, apiKey: 'k', stallTimeoutMs: 150 })
    const err = await client.stream(request, { signal: new AbortController().signal }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ModelRequestError)
    expect(err).toMatchObject({ kind: 'stalled', retryable: true })
  })

  it('hears the previews in order (block starts, text deltas, usage) and classifies the endpoint\'s errors with their retry-after', async () => {
    server = await ScriptedModelServer.start([
      { kind: 'message', blocks: [{ type: 'text', text: 'one two three' }, { type: 'tool_use', name: 'bash', input: { command: 'ls' } }] },
      { kind: 'error', status: 429, retryAfterSec: 3 },
      { kind: 'error', status: 529 },
      { kind: 'error', status: 400, message: 'bad field' },
      { kind: 'cut', blocks: [{ type: 'text', text: 'half' }], afterEvents: 3 },
    ])
    const client = new AnthropicModelClient({ baseURL: server.url, apiKey: 'k' })
    const heard: string[] = []
    const r = await client.stream(request, {
      signal: new AbortController().signal,
      onBlockStart: (i, type) => heard.push(`start ${i} ${type}`),
      onTextDelta: (i, text) => heard.push(`text ${i} ${text}`),
      onUsage: (u) => heard.push(`usage ${u.input_tokens}/${u.output_tokens}`),
    })
    expect(r.blocks.map((b) => b.type)).toEqual(['text', 'tool_use'])
    const texts = heard.filter((h) => h.startsWith('text 0 ')).map((h) => h.slice('text 0 '.length)).join('')
    expect(texts).toBe('one two three')
    expect(heard.indexOf('start 0 text')).toBeLessThan(heard.findIndex((h) => h.startsWith('text 0')))
    expect(heard.findLastIndex((h) => h.startsWith('text 0'))).toBeLessThan(heard.indexOf('start 1 tool_use'))
    expect(heard.at(-1)).toMatch(/^usage 100\/\d+$/)

    const errorOf = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => e as ModelRequestError)
    const signal = new AbortController().signal
    expect(await errorOf(client.stream(request, { signal }))).toMatchObject({ kind: 'rate_limited', status: 429, retryAfterMs: 3000, retryable: true, apiErrorType: 'model_rate_limited_error' })
    expect(await errorOf(client.stream(request, { signal }))).toMatchObject({ kind: 'overloaded', status: 529, retryable: true })
    const invalid = await errorOf(client.stream(request, { signal }))
    expect(invalid).toBeInstanceOf(ModelRequestError)
    expect(invalid).toMatchObject({ kind: 'invalid', status: 400, retryable: false })
    expect(invalid?.message).toContain('bad field')
    // a socket cut mid-stream is a connection failure, retried like one
    expect(await errorOf(client.stream(request, { signal }))).toMatchObject({ kind: 'connection', retryable: true })
  })

  it('stops a request when its signal aborts, mid-stream, as an aborted (not retried) failure', async () => {
    server = await ScriptedModelServer.start([{ kind: 'stall', blocks: [{ type: 'text', text: 'forever' }], afterEvents: 3 }])
    const client = new AnthropicModelClient({ baseURL: server.url, apiKey: 'k' })
    const controller = new AbortController()
    const started = new Promise<void>((resolve) => {
      const err = client.stream(request, { signal: controller.signal, onTextDelta: () => resolve() }).catch((e: unknown) => e)
      void err.then((e) => (aborted = e as ModelRequestError))
    })
    let aborted: ModelRequestError | undefined
    await started
    controller.abort()
    await expect.poll(() => aborted).toBeDefined()
    expect(aborted).toMatchObject({ kind: 'aborted', retryable: false })
  })
})

describe('the model thread', () => {
  it("sends a request's tools once per set and by reference after that, and the endpoint still gets them every time, past the worker's 64 sets too", async () => {
    server = await ScriptedModelServer.start(() => say('ok'))
    const client = new ThreadedModelClient({ baseURL: server.url, apiKey: 'k' }, thread)
    const signal = new AbortController().signal
    const sets = Array.from({ length: 70 }, (_, i) => [{ name: `tool_${i}`, description: `tool ${i}`, input_schema: { type: 'object' as const, properties: {} } }])
    const order = [0, 0, 1, ...sets.map((_, i) => i), 0, 69, 3]
    for (const i of order) await client.stream({ ...request, tools: sets[i] }, { signal })
    expect(server.requests.map((r) => r.body.tools?.map((t) => t.name))).toEqual(order.map((i) => [`tool_${i}`]))
  })

  it("posts what one turn of its event loop heard as one message: a response that arrives in one piece wakes the engine's thread once", async () => {
    // the scripted server writes a whole response at once (one chunk): block starts, text, usage, done
    server = await ScriptedModelServer.start(() => ({ kind: 'message', blocks: [{ type: 'text', text: 'one two three four' }, { type: 'tool_use', name: 'bash', input: { command: 'ls' } }] }))
    const posts: { type: string; messages?: { type: string }[] }[] = []
    const own = new ModelThread(() => {
      const w = startModelWorker()
      w.on('message', (m: { type: string }) => void (m.type !== 'ready' && posts.push(m)))
      return w
    })
    const client = new ThreadedModelClient({ baseURL: server.url, apiKey: 'k' }, own)
    const heard: string[] = []
    const handlers = {
      signal: new AbortController().signal,
      onBlockStart: (i: number, type: string) => heard.push(`start ${i} ${type}`),
      onTextDelta: (i: number, text: string) => heard.push(`text ${i} ${text}`),
      onUsage: () => heard.push('usage'),
    }
    const r = await client.stream(request, handlers)
    expect(r.blocks.map((b) => b.type)).toEqual(['text', 'tool_use'])
    // every preview still heard, in order, the text of a block in one piece
    expect(heard).toEqual(['usage', 'start 0 text', 'text 0 one two three four', 'start 1 tool_use', 'usage'])
    expect(posts).toHaveLength(1)
    expect(posts[0].type).toBe('batch')
    expect(posts[0].messages?.map((m) => m.type)).toEqual(['usage', 'block_start', 'text', 'block_start', 'usage', 'done'])
    // a finished request is posted at once, not held for the other responses of the worker's turn:
    // two requests in flight, two posts, each ending with its done
    posts.length = 0
    await Promise.all([client.stream(request, { signal: handlers.signal }), client.stream(request, { signal: handlers.signal })])
    expect(posts).toHaveLength(2)
    for (const p of posts) expect((p.type === 'batch' ? p.messages! : [p]).at(-1)?.type).toBe('done')
    await own.dispose()
  })

  it('fails the requests in flight as retryable connection errors when its worker dies, and serves the next request on a new one', async () => {
    server = await ScriptedModelServer.start([{ kind: 'stall', blocks: [{ type: 'text', text: 'never ends' }], afterEvents: 3 }, say('after')])
    const own = new ModelThread()
    const client = new ThreadedModelClient({ baseURL: server.url, apiKey: 'k' }, own)
    let failed: ModelRequestError | undefined
    const streaming = new Promise<void>((resolve) => {
      void client.stream(request, { signal: new AbortController().signal, onTextDelta: () => resolve() }).catch((e: unknown) => (failed = e as ModelRequestError))
    })
    await streaming
    expect(own.inFlight).toBe(1)
    await own.dispose()
    await expect.poll(() => failed).toBeDefined()
    expect(failed).toMatchObject({ kind: 'connection', retryable: true })
    expect(failed?.message).toMatch(/model client thread exited/)
    expect((await client.stream(request, { signal: new AbortController().signal })).blocks).toEqual([{ type: 'text', text: 'after' }])
    expect(own.inFlight).toBe(0)
    await own.dispose()
  })
})

describe('deprecated models', () => {
  it("lets the SDK warn about a deprecated model once, not on every request", async () => {
    server = await ScriptedModelServer.start([say('one'), say('two'), say('three')])
    const client = new AnthropicModelClient({ baseURL: server.url, apiKey: 'k' })
    const warnings: string[] = []
    const original = console.warn
    console.warn = (...args: unknown[]) => void warnings.push(args.map(String).join(' '))
    try {
      const deprecated = { ...request, model: 'claude-sonnet-4-5' }
      const texts: unknown[] = []
      for (let i = 0; i < 3; i++) texts.push((await client.stream(deprecated, { signal: new AbortController().signal })).blocks)
      expect(texts).toEqual([[{ type: 'text', text: 'one' }], [{ type: 'text', text: 'two' }], [{ type: 'text', text: 'three' }]])
    } finally {
      console.warn = original
    }
    expect(warnings.filter((w) => w.includes("'claude-sonnet-4-5' is deprecated"))).toHaveLength(1)
    expect(server.requests.map((r) => [r.body.model, r.body.stream])).toEqual([
      ['claude-sonnet-4-5', true],
      ['claude-sonnet-4-5', true],
      ['claude-sonnet-4-5', true],
    ])
  })
})

describe('requests of many threads at once', () => {
  /**
   * A client whose requests are recorded as the SDK hands them to the network, and when the
   * nextTick work queued right behind each runs (Node's HTTP client writes a request to its socket
   * in a nextTick it queues as the request is handed over).
   */
  function recordingClient(url: string) {
    const marks: string[] = []
    const client = new AnthropicModelClient({
      baseURL: url,
      apiKey: 'k',
      fetch: ((input: string | URL | Request, init?: RequestInit) => {
        const text = (JSON.parse(String(init?.body)) as { messages: { content: { text: string }[] }[] }).messages[0].content[0].text
        marks.push(`handed ${text}`)
        const r = nodeFetch(input, init)
        process.nextTick(() => marks.push(`written ${text}`))
        return r
      }) as typeof fetch,
    })
    const ask = (text: string, signal = new AbortController().signal) => client.stream({ ...request, messages: [{ role: 'user', content: [{ type: 'text', text }] }] }, { signal })
    return { marks, ask }
  }

  it('hands them to the network one at a time, in the order they were asked, each written before the next one is built', async () => {
    server = await ScriptedModelServer.start([say('a'), say('b'), say('c')])
    const { marks, ask } = recordingClient(server.url)
    const answers = await Promise.all([ask('one'), ask('two'), ask('three')])
    // not built together (the first one's bytes waiting for the last one's building)
    expect(marks).toEqual(['handed one', 'written one', 'handed two', 'written two', 'handed three', 'written three'])
    // the server answered them in the order they arrived
    expect(answers.map((r) => r.blocks)).toEqual([[{ type: 'text', text: 'a' }], [{ type: 'text', text: 'b' }], [{ type: 'text', text: 'c' }]])
  })

  it('lets the next request go when one in line fails before it reaches the network', async () => {
    server = await ScriptedModelServer.start([say('a'), say('c')])
    const { marks, ask } = recordingClient(server.url)
    const interrupted = new AbortController()
    const asked = [ask('one'), ask('two', interrupted.signal), ask('three')]
    // the second is interrupted while it waits for its turn
    interrupted.abort()
    const settled = await Promise.allSettled(asked)
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled'])
    expect((settled[1] as PromiseRejectedResult).reason).toMatchObject({ kind: 'aborted' })
    expect(marks.filter((m) => m.startsWith('handed'))).toEqual(['handed one', 'handed three'])
  })
})
