/**
 * The hands' side of the toolset: the model-facing definitions (derived from the one table in
 * src/shared/tools/toolset.ts), which tools run in the sandbox and which on the host, the input
 * check every call passes before it runs, and web_fetch (host-side, through the session's
 * egress proxy).
 */
import { TOOLSET } from '../../../shared/tools/toolset'

export { parseToolsetInput, toolsetFields, toolsetTool, TOOLSET, TOOLSET_DEFINITIONS } from '../../../shared/tools/toolset'
export type { ToolsetInputResult, ToolsetModelDefinition, ToolsetToolSpec } from '../../../shared/tools/toolset'
export { webFetch } from './web-fetch'
export type { WebFetchParams, WebFetchResult } from './web-fetch'

/** The toolset tools that run inside a session's sandbox (through the runner). */
export const SANDBOX_TOOLS: ReadonlySet<string> = new Set(TOOLSET.filter((t) => t.place === 'sandbox').map((t) => t.name))

/** The toolset tools the host runs itself (web_fetch), never the sandbox. */
export const HOST_TOOLS: ReadonlySet<string> = new Set(TOOLSET.filter((t) => t.place === 'host').map((t) => t.name))
