import { describe, expect, it } from 'vitest'
import { sameMcpUrl } from '../../../src/shared/api/mcp-url'

describe('sameMcpUrl (which credential serves an MCP server)', () => {
  it('matches the same origin and path, a trailing slash, query and fragment aside', () => {
    expect(sameMcpUrl('https://mcp.example.com/mcp', 'https://mcp.example.com/mcp/')).toBe(true)
    expect(sameMcpUrl('https://MCP.example.com:443/mcp?x=1', 'https://mcp.example.com/mcp#top')).toBe(true)
    expect(sameMcpUrl('https://mcp.example.com/mcp', 'https://mcp.example.com/other')).toBe(false)
    expect(sameMcpUrl('https://mcp.example.com/mcp', 'http://mcp.example.com/mcp')).toBe(false)
    expect(sameMcpUrl('https://mcp.example.com:8443/mcp', 'https://mcp.example.com/mcp')).toBe(false)
    expect(sameMcpUrl('not a url', 'not a url')).toBe(true)
    expect(sameMcpUrl('not a url', 'https://x/')).toBe(false)
  })
})
