import { describe, expect, it } from 'vitest'
import { PRIMARY_THREAD } from '../../../src/shared/api/events'
import { buildContextView, COMPACTION_INSTRUCTION, jsonSize, type ViewEvent } from '../../../src/main/harness/context/view'

let seq = 0
const ev = (type: string, fields: Record<string, unknown> = {}): ViewEvent => {
  seq++
  return { seq, event: { id: (fields.id as string) ?? `sevt_${seq}`, type, ...fields } }
}
const userText = (text: string) => ev('user.message', { content: [{ type: 'text', text }] })
const agent = { model: { id: 'claude-sonnet-5-5' }, system: 'Be brief.', tools: [{ type: 'agent_toolset_20260401' }] }

describe('the context view', () => {
  it('turns a conversation with tool calls into alternating messages with results after their calls', () => {
    seq = 0
    const events = [
      userText('list files'),
      ev('session.status_running'),
      ev('span.model_request_start'),
      ev('agent.message', { content: [{ type: 'text', text: 'Listing.' }] }),
      ev('agent.tool_use', { id: 'sevt_use1', name: 'bash', input: { command: 'ls' }, evaluated_permission: 'allow' }),
      ev('span.model_request_end', { is_error: false }),
      ev('agent.tool_result', { tool_use_id: 'sevt_use1', content: [{ type: 'text', text: 'a.txt' }], is_error: false }),
    ]
    const { request } = buildContextView(events, { thread: PRIMARY_THREAD, agent })
    expect(request.model).toBe('claude-sonnet-5-5')
    expect(request.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'list files' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'Listing.' }, { type: 'tool_use', id: 'sevt_use1', name: 'bash', input: { command: 'ls' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'sevt_use1', content: [{ type: 'text', text: 'a.txt' }], cache_control: { type: 'ephemeral' } }] },
    ])
  })

  it('puts cache breakpoints on the system prompt, the last tool and the conversation tail only', () => {
    seq = 0
    const { request } = buildContextView([userText('one'), ev('agent.message', { content: [{ type: 'text', text: 'two' }] }), userText('three')], { thread: PRIMARY_THREAD, agent })
    expect(request.system).toEqual([{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }])
    const tools = request.tools as { name: string; cache_control?: unknown }[]
    expect(tools.filter((t) => t.cache_control)).toEqual([tools[tools.length - 1]])
    expect(tools.map((t) => t.name)).toEqual(['bash', 'read', 'write', 'edit', 'glob', 'grep', 'web_fetch', 'web_search', 'session_history'])
    const marked = JSON.stringify(request.messages).match(/cache_control/g) ?? []
    expect(marked).toHaveLength(1)
    expect(request.messages.at(-1)).toEqual({ role: 'user', content: [{ type: 'text', text: 'three', cache_control: { type: 'ephemeral' } }] })
  })

  it('offers a thread the same tools array turn after turn, and a new one when its tools, MCP list or platform tools change', () => {
    seq = 0
    const events = [userText('one')]
    const custom = { type: 'custom', name: 'get_weather', description: 'The weather.', input_schema: { type: 'object', properties: {} } }
    const a = { ...agent, tools: [custom] }
    const mcp = [{ name: 'docs__search', description: 'Search.', input_schema: { type: 'object' as const } }]
    const platform = [{ name: 'list_agents', description: 'The roster.', input_schema: { type: 'object' as const, properties: {} } }]
    const names = (r: { tools?: unknown }) => (r.tools as { name: string }[]).map((t) => t.name)
    const first = buildContextView(events, { thread: PRIMARY_THREAD, agent: a, mcpTools: mcp, platformTools: [...platform] }).request
    const again = buildContextView(events, { thread: PRIMARY_THREAD, agent: a, mcpTools: mcp, platformTools: [...platform] }).request
    expect(again.tools).toBe(first.tools)
    expect(names(first)).toEqual(['get_weather', 'session_history', 'list_agents'])
    // the same definitions in new objects (another thread's snapshot): the same array, found by its JSON
    expect(buildContextView(events, { thread: PRIMARY_THREAD, agent: { ...a, tools: [{ ...custom }] }, mcpTools: mcp, platformTools: platform }).request.tools).toBe(first.tools)
    // no platform tools: a set without them
    expect(names(buildContextView(events, { thread: PRIMARY_THREAD, agent: a, mcpTools: mcp }).request)).toEqual(['get_weather', 'session_history'])
    // another custom tool's schema, an MCP list that changed: new sets
    const other = buildContextView(events, { thread: PRIMARY_THREAD, agent: { ...a, tools: [{ ...custom, description: 'Tomorrow.' }] }, mcpTools: mcp, platformTools: platform }).request
    expect((other.tools as { description?: string }[])[0].description).toBe('Tomorrow.')
    const withMcp = { ...a, tools: [custom, { type: 'mcp_toolset', mcp_server_name: 'docs' }] }
    const listed = buildContextView(events, { thread: PRIMARY_THREAD, agent: withMcp, mcpTools: mcp }).request
    expect(names(listed)).toEqual(['get_weather', 'docs__search', 'session_history'])
    const changed = buildContextView(events, { thread: PRIMARY_THREAD, agent: withMcp, mcpTools: [{ ...mcp[0], description: 'Search v2.' }] }).request
    expect((changed.tools as { name: string; description?: string }[]).find((t) => t.name === 'docs__search')?.description).toBe('Search v2.')
  })

  it("sizes a conversation as its JSON's length without serializing it (escapes aside)", () => {
    const values: unknown[] = [
      'plain',
      '',
      0,
      -12.5,
      1e21,
      NaN,
      true,
      false,
      null,
      [],
      {},
      [1, 'two', null, undefined, { three: [3] }],
      { a: 1, skipped: undefined, b: [true, { c: 'd', e: [] }], f: null },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'sevt_1', content: [{ type: 'text', text: 'x'.repeat(2000) }], is_error: true }], maxSeq: 12, maxEventId: 'sevt_9' },
      Object.assign(Object.create({ inherited: 'not counted' }), { own: 'counted' }),
      { at: new Date(0) },
    ]
    for (const v of values) expect(jsonSize(v), JSON.stringify(v)).toBe(JSON.stringify(v).length)
    // an escaped character counts once: "a\nb" is 4 characters of text, 6 of JSON
    expect(jsonSize('a\nb')).toBe(5)
    // the view's estimate is a quarter of it, rounded up, with the tools' and the system's
    const sized = (text: string) => {
      seq = 0
      const events = [userText(text), ev('agent.message', { content: [{ type: 'text', text: 'ok' }] })]
      return buildContextView(events, { thread: PRIMARY_THREAD, agent: { ...agent, system: undefined, tools: [] } }).estimatedTokens
    }
    expect(sized('y'.repeat(4004)) - sized('yyyy')).toBe(1000)
  })

  it('gives a call that was never answered a synthetic error result when the conversation moves on', () => {
    seq = 0
    const events = [userText('weather?'), ev('agent.custom_tool_use', { id: 'sevt_c1', name: 'get_weather', input: {} }), userText('never mind')]
    const { request } = buildContextView(events, { thread: PRIMARY_THREAD, agent: { ...agent, tools: [] } })
    const last = request.messages[2].content as unknown as Record<string, unknown>[]
    expect(last[0]).toMatchObject({ type: 'tool_result', tool_use_id: 'sevt_c1', is_error: true })
    expect(last[1]).toMatchObject({ type: 'text', text: 'never mind' })
  })

  it('orders tool results by their calls and keeps a user message sent during the calls after them', () => {
    seq = 0
    const events = [
      userText('go'),
      ev('agent.tool_use', { id: 'sevt_a', name: 'bash', input: {} }),
      ev('agent.tool_use', { id: 'sevt_b', name: 'bash', input: {} }),
      ev('agent.tool_result', { tool_use_id: 'sevt_b', content: [{ type: 'text', text: 'B' }] }),
      userText('also this'),
      ev('agent.tool_result', { tool_use_id: 'sevt_a', content: [{ type: 'text', text: 'A' }] }),
    ]
    const blocks = buildContextView(events, { thread: PRIMARY_THREAD, agent }).request.messages[2].content as unknown as Record<string, unknown>[]
    expect(blocks.map((b) => (b.type === 'tool_result' ? b.tool_use_id : b.text))).toEqual(['sevt_a', 'sevt_b', 'also this'])
  })

  it('replays thinking with its signature first in the assistant turn, and wraps system messages', () => {
    seq = 0
    const events = [
      ev('system.message', { content: [{ type: 'text', text: 'The repo moved.' }] }),
      userText('hi'),
      ev('agent.thinking', { thinking: 'hmm', signature: 'sig' }),
      ev('agent.message', { content: [{ type: 'text', text: 'hello' }] }),
    ]
    const { request } = buildContextView(events, { thread: PRIMARY_THREAD, agent })
    expect(request.messages[0].content).toEqual([
      { type: 'text', text: '<system-message>\nThe repo moved.\n</system-message>' },
      { type: 'text', text: 'hi' },
    ])
    expect((request.messages[1].content as { type: string }[]).map((b) => b.type)).toEqual(['thinking', 'text'])
  })

  it('ignores other threads and bookkeeping events', () => {
    seq = 0
    const events = [userText('main'), ev('user.message', { content: [{ type: 'text', text: 'sub' }], session_thread_id: 'sthr_1' }), ev('session.error', { error: {} }), ev('span.model_request_start')]
    expect(buildContextView(events, { thread: PRIMARY_THREAD, agent }).request.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'main', cache_control: { type: 'ephemeral' } }] }])
  })

  it('clears old tool results from the view above the threshold, leaving a pointer to session_history and the newest results intact', () => {
    seq = 0
    const events: ViewEvent[] = [userText('go')]
    for (let i = 0; i < 6; i++) {
      events.push(ev('agent.tool_use', { id: `sevt_u${i}`, name: 'bash', input: {} }))
      events.push(ev('agent.tool_result', { tool_use_id: `sevt_u${i}`, content: [{ type: 'text', text: `output ${i} `.repeat(500) }] }))
    }
    const small = buildContextView(events, { thread: PRIMARY_THREAD, agent, options: { clearThresholdTokens: 1_000_000 } })
    expect(small.clearedToolResults).toBe(0)
    const view = buildContextView(events, { thread: PRIMARY_THREAD, agent, options: { clearThresholdTokens: 2_000, keepRecentToolResults: 2 } })
    expect(view.clearedToolResults).toBe(4)
    expect(view.estimatedTokens).toBeLessThan(small.estimatedTokens)
    const results = view.request.messages.flatMap((m) => (m.content as unknown as Record<string, unknown>[]).filter((b) => b.type === 'tool_result'))
    expect(JSON.stringify(results[0].content)).toContain('session_history')
    expect(JSON.stringify(results[0].content)).toContain('sevt_u0')
    expect(JSON.stringify(results[5].content)).toContain('output 5')
    // the log itself is untouched: the events still carry the full output
    expect(JSON.stringify((events[2].event as { content?: unknown }).content)).toContain('output 0')
  })

  it('asks for compaction above its threshold with a request ending in the summary instruction, and uses the summary afterwards', () => {
    seq = 0
    const events: ViewEvent[] = [userText('start ' + 'x'.repeat(4000))]
    for (let i = 0; i < 4; i++) {
      events.push(ev('agent.message', { content: [{ type: 'text', text: `answer ${i} ` + 'y'.repeat(4000) }] }))
      events.push(userText(`question ${i + 1} ` + 'z'.repeat(4000)))
    }
    const view = buildContextView(events, { thread: PRIMARY_THREAD, agent, options: { compactThresholdTokens: 3_000, clearThresholdTokens: 1_000_000 } })
    expect(view.compaction).toBeDefined()
    const c = view.compaction!
    const lastMsg = c.request.messages.at(-1)!
    expect(lastMsg.role).toBe('user')
    expect(JSON.stringify(lastMsg.content)).toContain(COMPACTION_INSTRUCTION.slice(0, 40))
    expect(c.request.tool_choice).toEqual({ type: 'none' })
    // the summary covers everything up to the user turn before the last answer
    expect(c.throughSeq).toBe(events[events.length - 3].seq)

    const after = [...events, ev('agent.thread_context_compacted', { summary: 'SUMMARY', through_seq: c.throughSeq, through_event_id: c.throughEventId })]
    const next = buildContextView(after, { thread: PRIMARY_THREAD, agent, options: { compactThresholdTokens: 1_000_000 } })
    expect(next.request.messages).toHaveLength(3)
    expect(JSON.stringify(next.request.messages[0].content)).toContain('SUMMARY')
    expect(next.request.messages[1].role).toBe('assistant')
    expect(JSON.stringify(next.request.messages[1].content)).toContain('answer 3')
    expect(next.compaction).toBeUndefined()
  })

  it("builds the view of the thread it is given, from that thread's events only", () => {
    seq = 0
    const events = [
      userText('main question'),
      ev('user.message', { content: [{ type: 'text', text: 'sub task' }], session_thread_id: 'sthr_1' }),
      ev('agent.message', { content: [{ type: 'text', text: 'main answer' }] }),
      ev('agent.message', { content: [{ type: 'text', text: 'sub answer' }], session_thread_id: 'sthr_1' }),
      ev('user.message', { content: [{ type: 'text', text: 'other' }], session_thread_id: 'sthr_2' }),
    ]
    const texts = (thread: string | null) => buildContextView(events, { thread, agent }).request.messages.map((m) => (m.content as { text?: string }[]).map((b) => b.text).join())
    expect(texts(PRIMARY_THREAD)).toEqual(['main question', 'main answer'])
    expect(texts('sthr_1')).toEqual(['sub task', 'sub answer'])
    expect(texts('sthr_2')).toEqual(['other'])
  })
})
