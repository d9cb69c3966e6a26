import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { probeModel } from '../../../src/main/harness/model-probe'

/** A fetch that records where each request would go and answers 401 without any network. */
function recordingFetch(urls: string[]): typeof fetch {
  return (async (input: string | URL | Request) => {
    urls.push(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url)
    return new Response(JSON.stringify({ type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } }), {
      status: 401,
      headers: { 'content-type': 'application/json' },
    })
  }) as typeof fetch
}

describe('probeModel (Test connection, doctor)', () => {
  let saved: string | undefined
  beforeEach(() => {
    saved = process.env.ANTHROPIC_BASE_URL
    process.env.ANTHROPIC_BASE_URL = 'http://127.0.0.1:9/elsewhere'
  })
  afterEach(() => {
    if (saved === undefined) delete process.env.ANTHROPIC_BASE_URL
    else process.env.ANTHROPIC_BASE_URL = saved
  })

  it('asks the endpoint it reports: with no base URL, Anthropic\'s API, whatever ANTHROPIC_BASE_URL the process has', async () => {
    const urls: string[] = []
    const result = await probeModel({ apiKey: 'sk-test', fetch: recordingFetch(urls) })
    expect(result.base_url).toBe('https://api.anthropic.com')
    expect(urls).toHaveLength(1)
    expect(urls[0].startsWith('https://api.anthropic.com/')).toBe(true)
    expect(result).toMatchObject({ ok: false, status: 401 })
  })

  it('asks the base URL it is given and names it', async () => {
    const urls: string[] = []
    const result = await probeModel({ apiKey: 'sk-test', baseURL: 'http://127.0.0.1:4999', fetch: recordingFetch(urls) })
    expect(result.base_url).toBe('http://127.0.0.1:4999')
    expect(urls.map((u) => new URL(u).origin)).toEqual(['http://127.0.0.1:4999'])
  })
})
