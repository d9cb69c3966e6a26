import Anthropic from '@anthropic-ai/sdk'
import { afterEach, describe, expect, it } from 'vitest'
import { openHarnessFixture, type HarnessFixture } from '../../support/harness-fixture'
import { say } from '../../support/model-server'

let fx: HarnessFixture | undefined
afterEach(async () => {
  await fx?.close()
  fx = undefined
})

async function sdkFor(f: HarnessFixture): Promise<Anthropic> {
  return new Anthropic({ baseURL: (await f.engine.listen(0)).url, apiKey: 'test-token', maxRetries: 0 })
}

/** The Corral addition on the session object, as the SDK hands it back. */
const modelErrorOf = (s: unknown) => (s as { corral?: { model_error: Record<string, unknown> | null } }).corral?.model_error

describe('a session’s model-failure state (corral.model_error on the session object)', () => {
  it('is failed, with the endpoint’s error and attempts, in retrieve and list once a turn ends on retries_exhausted, and none again after a turn that answers', async () => {
    fx = await openHarnessFixture({ harness: { maxRetries: 2 }, script: [{ kind: 'error', status: 529 }, { kind: 'error', status: 529 }, { kind: 'error', status: 529 }, say('back again')] })
    const client = await sdkFor(fx)
    const id = await fx.createSession('hello')
    expect((await fx.waitForIdle(id)).stop_reason).toEqual({ type: 'retries_exhausted' })
    const failed = { state: 'failed', type: 'model_overloaded_error', attempt: 3, max_attempts: 3 }
    expect(modelErrorOf(await client.beta.sessions.retrieve(id))).toMatchObject(failed)
    const listed = (await client.beta.sessions.list()).data.find((s) => s.id === id)
    expect(modelErrorOf(listed)).toMatchObject(failed)

    // (counted before the send: the answering turn can be idle again before the send's promise resolves here)
    const idles = fx.idleCount(id)
    await client.beta.sessions.events.send(id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'try again' }] }] })
    expect((await fx.waitForIdle(id, undefined, idles)).stop_reason.type).toBe('end_turn')
    expect(modelErrorOf(await client.beta.sessions.retrieve(id))).toBeNull()
  })

  it('is retrying while a failed model request waits for its next attempt, and none once the retry answers', async () => {
    // a long backoff leaves the session between attempts long enough to read it there
    fx = await openHarnessFixture({ harness: { backoffBaseMs: 3000, backoffMaxMs: 3000 }, script: [{ kind: 'error', status: 529 }, say('recovered')] })
    const client = await sdkFor(fx)
    const id = await fx.createSession('hello')
    await fx.waitFor(id, (evs) => evs.some((e) => e.type === 'session.error'))
    const during = await client.beta.sessions.retrieve(id)
    // waiting for its next attempt, the session is rescheduling (spec multiagent §4.4; it was 'running' before)
    expect(during.status).toBe('rescheduling')
    expect(modelErrorOf(during)).toMatchObject({ state: 'retrying', type: 'model_overloaded_error', attempt: 1, max_attempts: 6 })
    expect((await fx.waitForIdle(id)).stop_reason.type).toBe('end_turn')
    expect(modelErrorOf(await client.beta.sessions.retrieve(id))).toBeNull()
  })

  it('is none on a session whose model answers', async () => {
    fx = await openHarnessFixture({ script: [say('hi')] })
    const client = await sdkFor(fx)
    const id = await fx.createSession('hello')
    await fx.waitForIdle(id)
    expect((await client.beta.sessions.retrieve(id) as unknown as { corral: unknown }).corral).toEqual({ model_error: null })
  })
})
