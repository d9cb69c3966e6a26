/**
 * The agent editor's view of an `agent_toolset_20260401` entry: which tools are on and what
 * permission each gets. Pure (no React), so the defaults are tested as a function.
 */
import { TOOLSET_ENTRIES } from '../../../../shared/tools/toolset'
import type { Agent } from '../../api/types'

/** The editor's tool rows: every tool of the toolset table (src/shared/tools/toolset.ts), the one the hands serve. */
export const TOOLS: readonly string[] = TOOLSET_ENTRIES.map((t) => t.name)
export type Policy = 'always_allow' | 'always_ask'

export interface ToolsetState {
  enabled: boolean
  defaultPolicy: Policy
  tools: Record<string, { enabled: boolean; policy: Policy }>
}

/** Tools that only look (files and searches inside the sandbox): a new agent lets them run without asking. */
export const READ_ONLY_TOOLS: ReadonlySet<string> = new Set(TOOLSET_ENTRIES.filter((t) => t.readOnly).map((t) => t.name))

/**
 * The toolset as the editor shows it. A new agent (no `agent`): reads (read, glob, grep) are
 * allowed, everything that changes files, runs commands or reaches the network asks. An existing
 * agent shows what the engine applies: a tool's own policy, else the toolset's default, else the
 * API's default (`always_allow`).
 */
export function toolsetOf(agent: Agent | undefined): ToolsetState {
  const tools: ToolsetState['tools'] = {}
  if (!agent) {
    for (const name of TOOLS) tools[name] = { enabled: true, policy: READ_ONLY_TOOLS.has(name) ? 'always_allow' : 'always_ask' }
    return { enabled: true, defaultPolicy: 'always_ask', tools }
  }
  const ts = agent.tools.find((t) => t.type === 'agent_toolset_20260401') as
    | { default_config?: { enabled?: boolean | null; permission_policy?: { type: string } | null } | null; configs?: { name: string; enabled?: boolean | null; permission_policy?: { type: string } | null }[] }
    | undefined
  const defaultPolicy = (ts?.default_config?.permission_policy?.type as Policy | undefined) ?? 'always_allow'
  const defaultEnabled = ts?.default_config?.enabled ?? true
  for (const name of TOOLS) {
    const c = ts?.configs?.find((x) => x.name === name)
    tools[name] = { enabled: c?.enabled ?? defaultEnabled, policy: (c?.permission_policy?.type as Policy | undefined) ?? defaultPolicy }
  }
  return { enabled: !!ts, defaultPolicy, tools }
}
