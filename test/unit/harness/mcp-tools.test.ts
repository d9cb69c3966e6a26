import { describe, expect, it } from 'vitest'
import { PRIMARY_THREAD } from '../../../src/shared/api/events'
import { buildContextView, type ViewEvent } from '../../../src/main/harness/context/view'
import { decideNext, foldSession } from '../../../src/main/harness/session-state'
import { modelTools, SESSION_HISTORY_TOOL } from '../../../src/main/harness/tools'

function log(...events: [string, Record<string, unknown>?][]): ViewEvent[] {
  return events.map(([type, fields], i) => ({ seq: i + 1, event: { id: (fields?.id as string) ?? `sevt_${i + 1}`, type, ...fields } }))
}
const end = (fields: Record<string, unknown> = {}): [string, Record<string, unknown>] => ['span.model_request_end', { is_error: false, model_request_start_id: 's', stop_reason: 'tool_use', ...fields }]
const listed = [
  { name: 'docs__echo', description: 'echoes', input_schema: { type: 'object', properties: { text: { type: 'string' } } } },
  { name: 'docs__whoami', input_schema: { type: 'object' } },
  { name: 'gh__search', description: 'search', input_schema: { type: 'object' } },
  { name: 'other__tool', description: 'no toolset names this server', input_schema: { type: 'object' } },
]

describe('MCP tools offered to the model', () => {
  it('offers the listed tools its mcp_toolsets enable, honouring configs over default_config, before session_history', () => {
    const tools = [
      { type: 'mcp_toolset', mcp_server_name: 'docs', configs: [{ name: 'whoami', enabled: false }] },
      { type: 'mcp_toolset', mcp_server_name: 'gh', default_config: { enabled: false }, configs: [{ name: 'search', enabled: true }] },
    ]
    const names = modelTools(tools, listed).map((t) => t.name)
    expect(names).toEqual(['docs__echo', 'gh__search', SESSION_HISTORY_TOOL])
    expect(modelTools(tools, listed)[0]).toMatchObject({ description: 'echoes', input_schema: { properties: { text: { type: 'string' } } } })
    expect(modelTools([{ type: 'mcp_toolset', mcp_server_name: 'gh', default_config: { enabled: false } }], listed).map((t) => t.name)).toEqual([SESSION_HISTORY_TOOL])
  })

  it('lists MCP tools in the context view and maps agent.mcp_tool_use / agent.mcp_tool_result back to tool_use / tool_result blocks', () => {
    const events = log(
      ['user.message', { content: [{ type: 'text', text: 'hi' }] }],
      ['agent.mcp_tool_use', { id: 'm1', mcp_server_name: 'docs', name: 'echo', input: { text: 'a' }, evaluated_permission: 'allow' }],
      ['agent.mcp_tool_result', { mcp_tool_use_id: 'm1', content: [{ type: 'text', text: 'echo: a' }], is_error: true }],
    )
    const view = buildContextView(events, { thread: PRIMARY_THREAD, agent: { model: 'claude-sonnet-5-5', tools: [{ type: 'mcp_toolset', mcp_server_name: 'docs' }] }, options: {}, mcpTools: listed })
    expect(((view.request.tools ?? []) as unknown as { name: string }[]).map((t) => t.name)).toEqual(['docs__echo', 'docs__whoami', SESSION_HISTORY_TOOL])
    const [, assistant, user] = view.request.messages as unknown as { content: Record<string, unknown>[] }[]
    expect(assistant!.content[0]).toMatchObject({ type: 'tool_use', id: 'm1', name: 'docs__echo', input: { text: 'a' } })
    expect(user!.content[0]).toMatchObject({ type: 'tool_result', tool_use_id: 'm1', is_error: true, content: [{ type: 'text', text: 'echo: a' }] })
  })
})

describe('MCP calls in the turn loop', () => {
  const asked = log(['user.message'], ['agent.mcp_tool_use', { id: 'm1', mcp_server_name: 'docs', name: 'echo', input: { text: 'a' }, evaluated_permission: 'ask' }], end())

  it('waits with requires_action for an asking MCP call, then runs it under its full name once allowed', () => {
    expect(decideNext(foldSession(asked, PRIMARY_THREAD))).toEqual({ kind: 'idle', stopReason: { type: 'requires_action', event_ids: ['m1'] } })
    const allowed = [...asked, { seq: 4, event: { id: 'c1', type: 'user.tool_confirmation', tool_use_id: 'm1', result: 'allow' } }]
    expect(decideNext(foldSession(allowed, PRIMARY_THREAD))).toMatchObject({ kind: 'run_tools', run: [{ id: 'm1', type: 'agent.mcp_tool_use', name: 'docs__echo', input: { text: 'a' } }], deny: [] })
    const denied = [...asked, { seq: 4, event: { id: 'c1', type: 'user.tool_confirmation', tool_use_id: 'm1', result: 'deny' } }]
    expect(decideNext(foldSession(denied, PRIMARY_THREAD))).toMatchObject({ kind: 'run_tools', run: [], deny: [{ id: 'm1' }] })
  })

  it('closes the call on agent.mcp_tool_result and asks the model next', () => {
    const answered = [...asked, { seq: 4, event: { id: 'c1', type: 'user.tool_confirmation', tool_use_id: 'm1', result: 'allow' } }, { seq: 5, event: { id: 'r1', type: 'agent.mcp_tool_result', mcp_tool_use_id: 'm1', content: [] } }]
    const s = foldSession(answered, PRIMARY_THREAD)
    expect(s.openToolUses).toEqual([])
    expect(decideNext(s)).toEqual({ kind: 'model', attempt: 0 })
  })

  it('stops an open MCP call on interrupt like a toolset call', () => {
    const allowed = log(['user.message'], ['agent.mcp_tool_use', { id: 'm1', mcp_server_name: 'docs', name: 'echo', evaluated_permission: 'allow' }], end(), ['user.interrupt'])
    expect(decideNext(foldSession(allowed, PRIMARY_THREAD))).toMatchObject({ kind: 'stop_tools', toolUses: [{ id: 'm1', type: 'agent.mcp_tool_use' }] })
  })

  it("does not count an MCP server's retrying error as a failed model request", () => {
    const s = foldSession(log(['user.message'], ['session.error', { error: { type: 'mcp_connection_failed_error', mcp_server_name: 'docs', retry_status: { type: 'retrying' } } }]), PRIMARY_THREAD)
    expect(decideNext(s)).toEqual({ kind: 'model', attempt: 0 })
  })
})
