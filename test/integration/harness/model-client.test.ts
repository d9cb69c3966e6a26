import { afterEach, describe, expect, it } from 'vitest'
import { AnthropicModelClient, ModelRequestError, type ModelRequest } from '../../../src/main/harness/model-client'
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

describe('the Anthropic model client', () => {
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

  it('gives up on a socket that stays silent before the first byte and says so', async () => {
    server = await ScriptedModelServer.start([say('late', { delayMs: 2000 })])
    const client = new AnthropicModelClient({ baseURL: server.url, apiKey: 'k', stallTimeoutMs: 150 })
    const err = await client.stream(request, { signal: new AbortController().signal }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ModelRequestError)
    expect(err).toMatchObject({ kind: 'stalled', retryable: true })
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
