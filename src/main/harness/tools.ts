/**
 * Which tools an agent offers the model, how each is routed, and what permission a call gets.
 * Pure functions of the agent snapshot a session pinned.
 */
import { TOOLSET_DEFINITIONS as SHARED_TOOLSET_DEFINITIONS } from '../../shared/tools/toolset'

/** The permission a call was evaluated to, as `agent.tool_use.evaluated_permission` reports it. */
export type EvaluatedPermission = 'allow' | 'ask'

/** How the harness handles a tool the model called. */
export type ToolRoute =
  | { kind: 'toolset'; permission: EvaluatedPermission; policy: 'always_allow' | 'always_ask' | 'auto' }
  | { kind: 'mcp'; serverName: string; permission: EvaluatedPermission; policy: 'always_allow' | 'always_ask' | 'auto' }
  | { kind: 'custom' }
  | { kind: 'history' }
  | { kind: 'unknown' }

/** The tool the model may call to read its own session log (Corral's addition). */
export const SESSION_HISTORY_TOOL = 'session_history'

export interface ModelToolDefinition {
  name: string
  description: string
  input_schema: { type: 'object'; properties?: Record<string, unknown>; required?: string[]; [k: string]: unknown }
  type?: string
  [k: string]: unknown
}

type Policy = { type: 'always_allow' | 'always_ask' | 'auto' } | null | undefined
interface ToolsetConfig {
  type: 'agent_toolset_20260401'
  default_config?: { enabled?: boolean | null; permission_policy?: Policy } | null
  configs?: { name: string; enabled?: boolean | null; permission_policy?: Policy }[]
}
interface McpToolsetConfig {
  type: 'mcp_toolset'
  mcp_server_name: string
  default_config?: { enabled?: boolean | null; permission_policy?: Policy } | null
  configs?: { name: string; enabled?: boolean | null; permission_policy?: Policy }[]
}
interface CustomToolConfig {
  type: 'custom'
  name: string
  description: string
  input_schema: Record<string, unknown>
}
export type AgentToolConfig = ToolsetConfig | McpToolsetConfig | CustomToolConfig | { type: string; [k: string]: unknown }

const str = (description: string) => ({ type: 'string', description })
const int = (description: string) => ({ type: 'integer', description })

/**
 * Model-facing definitions of the toolset tools (agent_toolset_20260401), by name: derived from the
 * one toolset table (src/shared/tools/toolset.ts) from which the hands also validate and
 * dispatch each call and the runner learns which fields it reads (DESIGN invariant 7).
 */
export const TOOLSET_DEFINITIONS: Readonly<Record<string, ModelToolDefinition>> = SHARED_TOOLSET_DEFINITIONS

/** Anthropic's server-side web search, offered for the toolset's web_search (stripped for local servers). */
export const WEB_SEARCH_SERVER_TOOL: ModelToolDefinition = {
  type: 'web_search_20250305',
  name: 'web_search',
  description: '',
  input_schema: { type: 'object' },
}

/**
 * Whether the model endpoint gets the toolset's `web_search` (as its own server-side search tool):
 * Anthropic's API runs it; a local Anthropic-compatible server (compatibility mode) has none, so
 * the request drops it (toCompatibleRequest). The reason is what `corral doctor` shows.
 */
export function webSearchOffer(endpoint: { compatibilityMode?: boolean; baseUrl?: string }): { offered: boolean; reason: string } {
  if (endpoint.compatibilityMode) {
    return { offered: false, reason: 'not offered: the model endpoint is in compatibility mode (a local Anthropic-compatible server has no server-side web search); agents still have web_fetch' }
  }
  return { offered: true, reason: `offered as the endpoint's server-side search tool (${WEB_SEARCH_SERVER_TOOL.type}) at ${endpoint.baseUrl ?? 'https://api.anthropic.com'}` }
}

export const SESSION_HISTORY_DEFINITION: ModelToolDefinition = {
  name: SESSION_HISTORY_TOOL,
  description:
    "Read this session's own event log by position, including parts no longer in your context (cleared tool results, compacted history). " +
    'Use `after` to continue reading forward from a position, `before` with `limit` for the events before a position, `event_id` to locate one event, and `types` to filter.',
  input_schema: {
    type: 'object',
    properties: {
      after: int('Return events with position greater than this'),
      before: int('Return the events just before this position (newest last)'),
      event_id: str('Return the event with this id and its position'),
      types: { type: 'array', items: { type: 'string' }, description: 'Only these event types, e.g. ["agent.tool_result"]' },
      limit: int('At most this many events (default 20, max 100)'),
    },
  },
}

function resolvePolicy(p: Policy, fallback: 'always_allow' | 'always_ask'): 'always_allow' | 'always_ask' | 'auto' {
  return p?.type ?? fallback
}

// `auto` asks: Corral has no classifier to judge a call on its own, and asking is the safe reading.
const permissionOf = (policy: 'always_allow' | 'always_ask' | 'auto'): EvaluatedPermission => (policy === 'always_allow' ? 'allow' : 'ask')

/** A tool an MCP server lists, named as the model calls it (`<server>__<tool>`). */
export interface McpToolDefinition {
  name: string
  description?: string
  input_schema: Record<string, unknown>
}

/**
 * The tools the model sees for an agent: enabled toolset tools, custom tools, the listed MCP
 * tools its `mcp_toolset` entries enable, and `session_history`. `mcpTools` is what the
 * session's MCP servers listed (the harness asks its McpToolSource).
 */
export function modelTools(tools: readonly AgentToolConfig[], mcpTools: readonly McpToolDefinition[] = []): ModelToolDefinition[] {
  const out: ModelToolDefinition[] = []
  for (const t of tools) {
    if (t.type === 'agent_toolset_20260401') {
      const ts = t as ToolsetConfig
      for (const name of [...Object.keys(TOOLSET_DEFINITIONS), 'web_search']) {
        const c = ts.configs?.find((x) => x.name === name)
        const enabled = c?.enabled ?? ts.default_config?.enabled ?? true
        if (!enabled) continue
        out.push(name === 'web_search' ? WEB_SEARCH_SERVER_TOOL : TOOLSET_DEFINITIONS[name])
      }
    } else if (t.type === 'custom') {
      const c = t as CustomToolConfig
      out.push({ name: c.name, description: c.description, input_schema: c.input_schema as ModelToolDefinition['input_schema'] })
    }
  }
  for (const m of mcpTools) {
    if (routeTool(tools, m.name).kind !== 'mcp') continue
    const schema = m.input_schema && m.input_schema.type === 'object' ? m.input_schema : { ...m.input_schema, type: 'object' }
    out.push({ name: m.name, description: m.description ?? '', input_schema: schema as ModelToolDefinition['input_schema'] })
  }
  out.push(SESSION_HISTORY_DEFINITION)
  return out
}

/** How a call to `name` is routed and what permission it gets under the agent's tool config. */
export function routeTool(tools: readonly AgentToolConfig[], name: string): ToolRoute {
  if (name === SESSION_HISTORY_TOOL) return { kind: 'history' }
  for (const t of tools) {
    if (t.type === 'custom' && (t as CustomToolConfig).name === name) return { kind: 'custom' }
  }
  for (const t of tools) {
    if (t.type === 'agent_toolset_20260401' && (name in TOOLSET_DEFINITIONS || name === 'web_search')) {
      const ts = t as ToolsetConfig
      const c = ts.configs?.find((x) => x.name === name)
      if (!(c?.enabled ?? ts.default_config?.enabled ?? true)) return { kind: 'unknown' }
      const policy = resolvePolicy(c?.permission_policy ?? ts.default_config?.permission_policy, 'always_allow')
      return { kind: 'toolset', policy, permission: permissionOf(policy) }
    }
  }
  for (const t of tools) {
    if (t.type === 'mcp_toolset') {
      const m = t as McpToolsetConfig
      const prefix = `${m.mcp_server_name}__`
      if (!name.startsWith(prefix)) continue
      const c = m.configs?.find((x) => x.name === name.slice(prefix.length))
      if (!(c?.enabled ?? m.default_config?.enabled ?? true)) return { kind: 'unknown' }
      const policy = resolvePolicy(c?.permission_policy ?? m.default_config?.permission_policy, 'always_ask')
      return { kind: 'mcp', serverName: m.mcp_server_name, policy, permission: permissionOf(policy) }
    }
  }
  return { kind: 'unknown' }
}
