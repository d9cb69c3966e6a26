import { describe, expect, it } from 'vitest'
import { agentCreateSchema } from '../../../src/shared/api/schemas'
import { mcpParamsOf, mcpRowsOf, mcpRowsProblem } from '../../../src/renderer/src/features/agents/mcp-servers'

describe('the agent editor’s MCP servers', () => {
  it('reads each server with its toolset, keeps per-tool configs and the other tools, and writes what the API accepts', () => {
    const agent = {
      mcp_servers: [
        { type: 'url' as const, name: 'docs', url: 'https://docs.example.com/mcp' },
        { type: 'url' as const, name: 'quiet', url: 'https://quiet.example.com/mcp' },
      ],
      tools: [
        { type: 'agent_toolset_20260401' },
        { type: 'mcp_toolset', mcp_server_name: 'docs', default_config: { enabled: true, permission_policy: { type: 'always_allow' } }, configs: [{ name: 'delete_page', permission_policy: { type: 'always_ask' } }] },
        { type: 'custom', name: 'lookup', description: 'd', input_schema: { type: 'object' } },
      ],
    } as never
    const { rows, otherTools } = mcpRowsOf(agent)
    expect(rows.map(({ toolset: _t, ...r }) => r)).toEqual([
      { name: 'docs', url: 'https://docs.example.com/mcp', offered: true, policy: 'always_allow' },
      { name: 'quiet', url: 'https://quiet.example.com/mcp', offered: false, policy: 'always_ask' },
    ])
    expect(otherTools).toEqual([{ type: 'custom', name: 'lookup', description: 'd', input_schema: { type: 'object' } }])
    // renamed and set to ask: the per-tool config stays on its toolset
    const out = mcpParamsOf([{ ...rows[0], name: ' handbook ', policy: 'always_ask' }, { ...rows[1], offered: true }])
    expect(out.mcp_servers).toEqual([
      { type: 'url', name: 'handbook', url: 'https://docs.example.com/mcp' },
      { type: 'url', name: 'quiet', url: 'https://quiet.example.com/mcp' },
    ])
    expect(out.tools).toEqual([
      { type: 'mcp_toolset', mcp_server_name: 'handbook', default_config: { enabled: true, permission_policy: { type: 'always_ask' } }, configs: [{ name: 'delete_page', permission_policy: { type: 'always_ask' } }] },
      { type: 'mcp_toolset', mcp_server_name: 'quiet', default_config: { permission_policy: { type: 'always_ask' } } },
    ])
    const params = { name: 'a', model: 'claude-sonnet-5-5', mcp_servers: out.mcp_servers, tools: [...out.tools, ...otherTools] }
    expect(agentCreateSchema.safeParse(params).success).toBe(true)
  })

  it('reads an agent without MCP servers as no rows, and names a row that is not ready', () => {
    expect(mcpRowsOf(undefined)).toEqual({ rows: [], otherTools: [] })
    const row = { name: 'docs', url: 'https://x', offered: true, policy: 'always_ask' as const }
    expect(mcpRowsProblem([row])).toBeUndefined()
    expect(mcpRowsProblem([{ ...row, name: ' ' }])).toBe('MCP server 1: a name')
    expect(mcpRowsProblem([{ ...row, url: 'mcp.example.com' }])).toBe('MCP server docs: an http(s) URL')
    expect(mcpRowsProblem([row, row])).toBe('MCP server docs: the name is used twice')
  })
})
