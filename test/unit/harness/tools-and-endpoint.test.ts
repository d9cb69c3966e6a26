import { describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import { modelTools, routeTool, SESSION_HISTORY_TOOL } from '../../../src/main/harness/tools'
import { classifyError, ModelRequestError, toCompatibleRequest, type ModelRequest } from '../../../src/main/harness/model-client'
import { parseSessionHistoryInput } from '../../../src/main/harness/session-history'
import { resolveModelEndpoint } from '../../../src/main/config'

const toolset = (extra: Record<string, unknown> = {}) => ({ type: 'agent_toolset_20260401', ...extra })

describe('tool permissions', () => {
  it('allows toolset calls by default and asks where the default or a per-tool policy says always_ask', () => {
    expect(routeTool([toolset()], 'bash')).toEqual({ kind: 'toolset', policy: 'always_allow', permission: 'allow' })
    const asking = [toolset({ default_config: { permission_policy: { type: 'always_ask' } }, configs: [{ name: 'read', permission_policy: { type: 'always_allow' } }] })]
    expect(routeTool(asking, 'bash')).toMatchObject({ permission: 'ask', policy: 'always_ask' })
    expect(routeTool(asking, 'read')).toMatchObject({ permission: 'allow' })
  })

  it('asks for MCP tools by default and for the auto policy, which Corral cannot judge', () => {
    const mcp = [{ type: 'mcp_toolset', mcp_server_name: 'gh', configs: [{ name: 'search', permission_policy: { type: 'always_allow' } }] }]
    expect(routeTool(mcp, 'gh__create_issue')).toMatchObject({ kind: 'mcp', permission: 'ask' })
    expect(routeTool(mcp, 'gh__search')).toMatchObject({ kind: 'mcp', permission: 'allow' })
    expect(routeTool([toolset({ configs: [{ name: 'bash', permission_policy: { type: 'auto' } }] })], 'bash')).toMatchObject({ permission: 'ask', policy: 'auto' })
  })

  it('routes custom tools to the client, session_history to the brain, and disabled or unknown tools nowhere', () => {
    const tools = [toolset({ configs: [{ name: 'bash', enabled: false }] }), { type: 'custom', name: 'lookup', description: 'd', input_schema: { type: 'object' } }]
    expect(routeTool(tools, 'lookup')).toEqual({ kind: 'custom' })
    expect(routeTool(tools, SESSION_HISTORY_TOOL)).toEqual({ kind: 'history' })
    expect(routeTool(tools, 'bash')).toEqual({ kind: 'unknown' })
    expect(routeTool(tools, 'nope')).toEqual({ kind: 'unknown' })
    expect(modelTools(tools).map((t) => t.name)).toEqual(['read', 'write', 'edit', 'glob', 'grep', 'web_fetch', 'web_search', 'lookup', 'session_history'])
  })
})

describe('the model endpoint', () => {
  it('strips cache_control, context_management and server tools for a local compatible server', () => {
    const req = {
      model: 'm',
      max_tokens: 10,
      system: [{ type: 'text', text: 's', cache_control: { type: 'ephemeral' } }],
      tools: [
        { name: 'bash', description: 'd', input_schema: { type: 'object' }, cache_control: { type: 'ephemeral' } },
        { type: 'web_search_20250305', name: 'web_search' },
      ],
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hi', cache_control: { type: 'ephemeral' } }] }],
      context_management: { edits: [] },
    } as unknown as ModelRequest
    const out = toCompatibleRequest(req)
    expect(JSON.stringify(out)).not.toContain('cache_control')
    expect(out).not.toHaveProperty('context_management')
    expect((out.tools as { name: string }[]).map((t) => t.name)).toEqual(['bash'])
    expect(JSON.stringify(req)).toContain('cache_control') // the input is not modified
  })

  it('classifies endpoint failures for the retry policy', () => {
    const api = (status: number, headers: Record<string, string> = {}) => Anthropic.APIError.generate(status, { type: 'error', error: { type: 'x', message: 'm' } }, 'm', new Headers(headers))
    expect(classifyError(api(429, { 'retry-after': '2' }))).toMatchObject({ kind: 'rate_limited', retryAfterMs: 2000, retryable: true, apiErrorType: 'model_rate_limited_error' })
    expect(classifyError(api(529))).toMatchObject({ kind: 'overloaded', apiErrorType: 'model_overloaded_error' })
    expect(classifyError(api(503))).toMatchObject({ kind: 'server', retryable: true, apiErrorType: 'model_request_failed_error' })
    expect(classifyError(api(400))).toMatchObject({ kind: 'invalid', retryable: false })
    expect(classifyError(new Error('socket hang up'))).toMatchObject({ kind: 'connection', retryable: true })
    expect(new ModelRequestError('aborted', 'x').retryable).toBe(false)
  })

  it('takes ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL over the settings, and refuses a bad timeout setting', () => {
    const settings = { model: { apiKey: 'from-settings', baseUrl: 'http://127.0.0.1:1', compatibilityMode: true } }
    expect(resolveModelEndpoint({}, settings)).toMatchObject({ apiKey: 'from-settings', baseUrl: 'http://127.0.0.1:1', compatibilityMode: true })
    expect(resolveModelEndpoint({ ANTHROPIC_API_KEY: 'env', ANTHROPIC_BASE_URL: 'http://127.0.0.1:2' }, settings)).toMatchObject({ apiKey: 'env', baseUrl: 'http://127.0.0.1:2' })
    expect(() => resolveModelEndpoint({}, { model: { stallTimeoutMs: -1 } })).toThrow(/model\.stallTimeoutMs/)
  })
})

describe('session_history input', () => {
  it('names the field and the rule for bad input', () => {
    expect(parseSessionHistoryInput({ after: -1 })).toEqual({ error: 'after: must be a non-negative integer' })
    expect(parseSessionHistoryInput({ types: 'agent.message' })).toEqual({ error: 'types: must be an array of event type strings' })
    expect(parseSessionHistoryInput({ after: 1, before: 5 })).toEqual({ error: 'after, before: give one of them, not both' })
    expect(parseSessionHistoryInput({ before: 5, limit: 3, types: ['agent.message'] })).toEqual({ before: 5, limit: 3, types: ['agent.message'] })
  })
})
