/**
 * The toolset tools a self-hosted environment's worker runs (the SDK's EnvironmentWorker
 * implements exactly these: `tools/agent-toolset/node.js`, spec resources.md §5). In a session on
 * a `self_hosted` environment they go out as `agent.tool_use` for the worker to answer with
 * `user.tool_result`; the others (`web_fetch`, `web_search`) and MCP tools stay on Corral's side.
 */
export const WORKER_TOOLSET: ReadonlySet<string> = new Set(['bash', 'read', 'write', 'edit', 'glob', 'grep'])
