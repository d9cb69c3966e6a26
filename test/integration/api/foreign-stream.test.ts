import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { take } from '../../support/polling'
import { Engine } from '../../../src/main/engine'
import { startApiServer, type TestApiServer } from '../../support/api-server'

// Two engines on one data directory, as the desktop beside `corral run` or `corral serve`: a
// session's event stream on the one shows what the other appends to that session (each engine
// has its own connection to the file; the stream's log polls for what another one committed).

let dir: string
let served: TestApiServer
let other: Engine

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'corral-foreign-stream-'))
  served = await startApiServer({ dataDir: dir, harness: { enabled: false }, defaultHands: false })
  other = Engine.open({ dataDir: dir, token: 'other', env: {}, harness: { enabled: false }, defaultHands: false, log: () => {} })
})
afterAll(async () => {
  await other?.close()
  await served?.close()
  rmSync(dir, { recursive: true, force: true })
})


const userMessage = (text: string) => ({ type: 'user.message' as const, content: [{ type: 'text' as const, text }] })
const textOf = (e: { content?: unknown }) => ((e.content as { text?: string }[] | undefined) ?? []).map((b) => b.text ?? '').join('')

describe("a session's event stream and another engine on the same data directory", () => {
  it('streams the events the other engine appends, each once and in order, beside its own', async () => {
    const client = served.client
    const agent = await client.beta.agents.create({ name: 'watched', model: 'claude-sonnet-4-6' })
    const env = await client.beta.environments.create({ name: 'shared' })
    const sid = (await client.beta.sessions.create({ agent: agent.id, environment_id: env.id })).id
    const stream = await client.beta.sessions.events.stream(sid)
    const received = take(stream, 4)
    await other.services.sessions.sendEvents(sid, [userMessage('from the other engine')])
    await client.beta.sessions.events.send(sid, { events: [userMessage('from this one')] })
    await other.services.log.append(sid, [{ type: 'agent.message', content: [{ type: 'text', text: 'an answer written there' }] }, { type: 'session.status_idle', stop_reason: { type: 'end_turn' }, stop_details: null }])
    const got = (await received) as unknown as { id: string; type: string; content?: unknown }[]
    expect(got.map((e) => [e.type, textOf(e)])).toEqual([
      ['user.message', 'from the other engine'],
      ['user.message', 'from this one'],
      ['agent.message', 'an answer written there'],
      ['session.status_idle', ''],
    ])
    const listed = (await client.beta.sessions.events.list(sid, { limit: 100 })).data
    expect(got.map((e) => e.id)).toEqual(listed.slice(-4).map((e) => e.id))
  })
})
