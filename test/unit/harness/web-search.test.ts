import { describe, expect, it } from 'vitest'
import { toCompatibleRequest } from '../../../src/main/harness/model-client'
import { modelTools, webSearchOffer } from '../../../src/main/harness/tools'

describe('web_search', () => {
  const tools = modelTools([{ type: 'agent_toolset_20260401' }])

  it("is offered to Anthropic's API as its server-side search tool", () => {
    expect(tools.find((t) => t.name === 'web_search')).toMatchObject({ type: 'web_search_20250305', name: 'web_search' })
    expect(webSearchOffer({ baseUrl: 'https://api.anthropic.com' })).toEqual({ offered: true, reason: expect.stringContaining('server-side search tool (web_search_20250305)') })
  })

  it('is not offered to a compatible local server, and says why', () => {
    const sent = toCompatibleRequest({ model: 'm', max_tokens: 10, messages: [], tools } as unknown as Parameters<typeof toCompatibleRequest>[0])
    expect(sent.tools?.map((t) => (t as { name?: string }).name)).not.toContain('web_search')
    expect(sent.tools?.map((t) => (t as { name?: string }).name)).toContain('web_fetch')
    expect(webSearchOffer({ compatibilityMode: true })).toEqual({ offered: false, reason: expect.stringContaining('compatibility mode') })
  })
})
