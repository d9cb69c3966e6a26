import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startApiServer, type TestApiServer } from '../../support/api-server'

/*
 * Corral's message search (GET /v1/corral/search): what was said in sessions, found by a query
 * over the log, newest first, a page at a time. Real engine and SQLite file, raw HTTP.
 */

let t: TestApiServer
let a: string
let b: string

const text = (s: string) => [{ type: 'text', text: s }]
type Page = { data: { session_id: string; event_id: string; type: string; snippet: string }[]; next_page: string | null }
const search = async (qs: string) => {
  const res = await t.fetch(`/v1/corral/search?${qs}`)
  return { status: res.status, body: (await res.json()) as Page & { type?: string; error?: { type: string; message: string } } }
}

beforeAll(async () => {
  t = await startApiServer()
  const agent = (await t.client.beta.agents.create({ name: 'a', model: 'claude-sonnet-4-6' })).id
  const env = (await t.client.beta.environments.create({ name: 'e' })).id
  a = (await t.client.beta.sessions.create({ agent, environment_id: env, title: 'alpha' })).id
  b = (await t.client.beta.sessions.create({ agent, environment_id: env, title: 'beta' })).id
  const { log } = t.engine.stores
  await log.append(a, [{ type: 'user.message', content: text('Please fix the Flaky date test in utils') }])
  await log.append(a, [{ type: 'agent.message', content: text('The flaky test fails at midnight UTC.') }])
  await log.append(b, [{ type: 'user.message', content: text('Nothing about it here; a "quoted" word') }])
  for (let i = 0; i < 25; i++) await log.append(b, [{ type: 'agent.message', content: text(`note ${i} about a flaky build`) }])
  // Field names and other event types never match.
  await log.append(b, [{ type: 'agent.tool_use', name: 'bash', input: { command: 'echo flaky' } }])
})
afterAll(() => t.close())

describe('searching messages across sessions', () => {
  it("finds user and agent messages by their text, case-insensitively, newest first, with the text around the match", async () => {
    const { status, body } = await search('q=midnight')
    expect(status).toBe(200)
    expect(body.data).toEqual([{ session_id: a, event_id: expect.stringMatching(/^sevt_/), type: 'agent.message', processed_at: expect.any(String), snippet: 'The flaky test fails at midnight UTC.' }])
    const user = await search('q=FLAKY%20DATE')
    expect(user.body.data.map((h) => [h.session_id, h.type])).toEqual([[a, 'user.message']])
  })

  it('pages through many matches with next_page, each hit once', async () => {
    const seen: string[] = []
    let page: string | null = null
    let pages = 0
    do {
      const { body } = await search(`q=flaky&limit=10${page ? `&page=${page}` : ''}`)
      seen.push(...body.data.map((h) => h.event_id))
      page = body.next_page
      pages++
    } while (page)
    expect(pages).toBe(3)
    expect(seen).toHaveLength(27) // 25 notes in b, 2 messages in a; not the tool call
    expect(new Set(seen).size).toBe(27)
  })

  it('matches quotes as typed and never matches a field name', async () => {
    expect((await search('q=%22quoted%22')).body.data.map((h) => h.session_id)).toEqual([b])
    expect((await search('q=text')).body.data).toEqual([])
  })

  it('refuses a query shorter than 2 characters and a foreign cursor with a 400 naming the field', async () => {
    const short = await search('q=a')
    expect(short.status).toBe(400)
    expect(short.body.error?.message).toMatch(/q/)
    const bad = await search('q=flaky&page=bm90LWEtY3Vyc29y')
    expect(bad.status).toBe(400)
    expect(bad.body.error?.message).toMatch(/^page: /)
  })
})
