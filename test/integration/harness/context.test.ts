import { afterEach, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import { openHarnessFixture, type HarnessFixture } from '../../support/harness-fixture'
import { callTool, say, toolResultsOf } from '../../support/model-server'

let fx: HarnessFixture | undefined
afterEach(async () => {
  await fx?.close()
  fx = undefined
})

describe('context management against the log', () => {
  it('compacts a long conversation into agent.thread_context_compacted and sends the summary plus what follows afterwards', async () => {
    fx = await openHarnessFixture({
      harness: { context: { compactThresholdTokens: 1_500, clearThresholdTokens: 1_000_000 } },
      script: (req) => {
        const last = JSON.stringify(req.body.messages.at(-1))
        if (last.includes('Summarize the conversation so far')) return say('SUMMARY: the user asked three long questions.')
        return say('answer ' + 'a'.repeat(2000))
      },
    })
    const id = await fx.createSession('q1 ' + 'x'.repeat(2000))
    await fx.waitForIdle(id)
    await fx.send(id, [{ type: 'user.message', content: [{ type: 'text', text: 'q2 ' + 'y'.repeat(2000) }] }])
    await fx.waitForIdle(id)
    await fx.send(id, [{ type: 'user.message', content: [{ type: 'text', text: 'q3 ' + 'z'.repeat(2000) }] }])
    await fx.waitForIdle(id)
    const evs = fx.events(id)
    const compacted = evs.find((e) => e.type === 'agent.thread_context_compacted') as unknown as { summary: string; through_seq: number }
    expect(compacted.summary).toBe('SUMMARY: the user asked three long questions.')
    // the request after the compaction starts with the summary and carries no pre-summary text
    const after = fx.model.requests.at(-1)!.body
    expect(JSON.stringify(after.messages[0])).toContain('SUMMARY: the user asked')
    expect(JSON.stringify(after.messages)).not.toContain('q1 xxx')
    expect(JSON.stringify(after.messages)).toContain('q3 zzz')
    // the log still has every event: compaction added one, removed none
    expect(evs.filter((e) => e.type === 'user.message')).toHaveLength(3)
    expect(evs.filter((e) => e.type === 'agent.message')).toHaveLength(3)
  })

  it('lets the model page back through its own log with session_history', async () => {
    fx = await openHarnessFixture({ script: [callTool('session_history', { after: 0, limit: 2 }), callTool('session_history', { types: ['user.message'] }), say('I have read my history.')] })
    const id = await fx.createSession('what did I say first?')
    await fx.waitForIdle(id)
    const [first] = toolResultsOf(fx.model.requests[1])
    expect(first.is_error).toBe(false)
    const lines = first.text.split('\n')
    expect(JSON.parse(lines[0])).toMatchObject({ position: 1, type: 'user.message' })
    expect(JSON.parse(lines[1])).toMatchObject({ position: 2, type: 'session.status_running' })
    expect(lines[2]).toMatch(/positions 1\.\.2 of \d+; continue with \{"after":2\}/)
    const [, second] = toolResultsOf(fx.model.requests[2])
    expect(second.text.split('\n').slice(0, -1).map((l) => JSON.parse(l).type)).toEqual(['user.message'])
    expect(fx.router.calls).toHaveLength(0)
  })

  it('streams previews and stored events to the official SDK over the local API', async () => {
    fx = await openHarnessFixture({ script: [say('streamed through the API', { chunkSize: 6, delayMs: 50 })] })
    const server = await fx.engine.listen(0)
    const client = new Anthropic({ baseURL: server.url, apiKey: 'test-token' })
    const id = await fx.createSession()
    const stream = await client.beta.sessions.events.stream(id, { event_deltas: ['agent.message'] } as never)
    await fx.send(id, [{ type: 'user.message', content: [{ type: 'text', text: 'hi' }] }])
    const seen: { type: string; [k: string]: unknown }[] = []
    for await (const e of stream as AsyncIterable<{ type: string; [k: string]: unknown }>) {
      seen.push(e)
      if (e.type === 'session.status_idle') break
    }
    const start = seen.find((e) => e.type === 'event_start') as unknown as { event: { id: string } }
    const message = seen.find((e) => e.type === 'agent.message') as unknown as { id: string }
    expect(start.event.id).toBe(message.id)
    expect(seen.filter((e) => e.type === 'event_delta').map((e) => (e as unknown as { delta: { content: { text: string } } }).delta.content.text).join('')).toBe('streamed through the API')
    expect(seen.findIndex((e) => e.type === 'event_start')).toBeLessThan(seen.findIndex((e) => e.type === 'agent.message'))
    const listed = await client.beta.sessions.events.list(id)
    expect(listed.data.map((e) => e.type)).not.toContain('event_delta')
  })
})
