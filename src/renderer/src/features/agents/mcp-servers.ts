/**
 * The agent editor's MCP servers as rows (pure, unit-tested): each row is one `mcp_servers` entry
 * and the `mcp_toolset` tool that offers its tools, with the permission its calls get. What the
 * rows do not describe (a toolset's per-tool `configs`, custom tools) is kept: per-tool configs
 * stay on the row's toolset, other tools go to the advanced JSON field unchanged.
 */
import type { Agent } from '../../../../shared/api/types'

export type McpPolicy = 'always_ask' | 'always_allow'

export interface McpRow {
  name: string
  url: string
  /** Whether the model is offered the server's tools (its mcp_toolset). */
  offered: boolean
  policy: McpPolicy
  /** The row's mcp_toolset as the agent had it (per-tool configs kept on save), if any. */
  toolset?: Record<string, unknown>
}

type Tool = { type: string; [k: string]: unknown }

/** The rows of an agent's MCP servers, and its tools other than the agent toolset and those rows' toolsets. */
export function mcpRowsOf(agent: Pick<Agent, 'mcp_servers' | 'tools'> | undefined): { rows: McpRow[]; otherTools: Tool[] } {
  const tools = (agent?.tools ?? []) as unknown as Tool[]
  const servers = agent?.mcp_servers ?? []
  const rowOf = new Map<string, Tool>()
  for (const t of tools) if (t.type === 'mcp_toolset' && servers.some((s) => s.name === t.mcp_server_name) && !rowOf.has(String(t.mcp_server_name))) rowOf.set(String(t.mcp_server_name), t)
  const rows = servers.map((s): McpRow => {
    const t = rowOf.get(s.name)
    const policy = (t?.default_config as { permission_policy?: { type?: string } | null } | null | undefined)?.permission_policy?.type
    return { name: s.name, url: s.url, offered: t !== undefined, policy: policy === 'always_allow' ? 'always_allow' : 'always_ask', ...(t ? { toolset: t } : {}) }
  })
  const taken = new Set(rowOf.values())
  return { rows, otherTools: tools.filter((t) => t.type !== 'agent_toolset_20260401' && !taken.has(t)) }
}

/** What the rows add to an agent's parameters: `mcp_servers`, and one mcp_toolset per offered row. */
export function mcpParamsOf(rows: readonly McpRow[]): { mcp_servers: { type: 'url'; name: string; url: string }[]; tools: Record<string, unknown>[] } {
  return {
    mcp_servers: rows.map((r) => ({ type: 'url', name: r.name.trim(), url: r.url.trim() })),
    tools: rows
      .filter((r) => r.offered)
      .map((r) => {
        const kept = r.toolset ?? {}
        const defaults = (kept.default_config ?? {}) as Record<string, unknown>
        return { ...kept, type: 'mcp_toolset', mcp_server_name: r.name.trim(), default_config: { ...defaults, permission_policy: { type: r.policy } } }
      }),
  }
}

/** The first problem of the rows (a name or URL missing or repeated), or undefined. */
export function mcpRowsProblem(rows: readonly McpRow[]): string | undefined {
  const seen = new Set<string>()
  for (const [i, r] of rows.entries()) {
    const n = r.name.trim()
    if (!n) return `MCP server ${i + 1}: a name`
    if (!/^https?:\/\//i.test(r.url.trim())) return `MCP server ${n}: an http(s) URL`
    if (seen.has(n)) return `MCP server ${n}: the name is used twice`
    seen.add(n)
  }
  return undefined
}
