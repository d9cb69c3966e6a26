import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import { Engine } from '../../../src/main/engine'
import { MemoryKeychain } from '../../../src/main/vault/memory-keychain'
import { WebhookReceiver } from '../../support/webhook-receiver'

// Webhook deliveries outlive the engine (orchestrator/webhooks.ts, docs/webhooks.md): an event whose
// delivery failed while one engine ran is delivered by the next engine on the same data directory,
// once, signed with the secret the keychain keeps.

let dir: string | undefined
let receiver: WebhookReceiver | undefined
afterEach(async () => {
  await receiver?.close()
  receiver = undefined
  if (dir) rmSync(dir, { recursive: true, force: true })
})

/** A free port on loopback (nothing listens on it once this returns). */
async function freePort(): Promise<number> {
  const s = createServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r))
  const port = (s.address() as AddressInfo).port
  await new Promise<void>((r) => s.close(() => r()))
  return port
}

describe('webhook deliveries across a restart', () => {
  it('retries at the next start what failed before the engine stopped, and delivers it once', async () => {
    dir = mkdtempSync(join(tmpdir(), 'corral-webhooks-restart-'))
    const keychain = new MemoryKeychain()
    const port = await freePort()
    const open = async (clockShiftMs: number) => {
      const engine = Engine.open({ dataDir: dir!, token: 'tok', env: {}, log: () => {}, keychain, harness: { enabled: false }, webhooks: { retryDelaysMs: [60_000], now: () => Date.now() + clockShiftMs, idlePollMs: 100 } })
      const listening = await engine.listen(0)
      return { engine, client: new Anthropic({ baseURL: listening.url, apiKey: 'tok', maxRetries: 0 }) }
    }

    // nothing listens at the endpoint's URL yet: the first attempt is refused, its retry is a minute away
    const a = await open(0)
    const created = await a.client.beta.organization.webhooks.create({ url: `http://127.0.0.1:${port}/hooks`, enabled_events: ['session.created'] as never })
    const agent = await a.client.beta.agents.create({ name: 'a', model: 'claude-sonnet-4-6' })
    const env = await a.client.beta.environments.create({ name: 'e' })
    const session = await a.client.beta.sessions.create({ agent: agent.id, environment_id: env.id })
    const deliveries = async (c: Anthropic) => ((await c.get(`/v1/corral/webhooks/${created.id}/deliveries`)) as { data: { status: string; attempts: number; last_error: string | null }[] }).data
    await expect.poll(() => deliveries(a.client).then((d) => d[0]?.attempts), { timeout: 5_000 }).toBe(1)
    expect((await deliveries(a.client))[0]).toMatchObject({ status: 'pending', last_error: 'connection refused' })
    await a.engine.close()

    // the receiver is up; the next engine starts after the retry came due
    receiver = new WebhookReceiver()
    receiver.answer = () => 200
    await receiver.start(port)
    const got = receiver.got
    const b = await open(120_000)
    try {
      await expect.poll(() => got.length, { timeout: 5_000 }).toBe(1)
      const event = b.client.beta.webhooks.unwrap(got[0].body, { headers: got[0].headers, key: created.signing_secret })
      expect(event.data).toMatchObject({ type: 'session.created', id: session.id })
      await expect.poll(() => deliveries(b.client).then((d) => d[0]), { timeout: 5_000 }).toMatchObject({ status: 'delivered', attempts: 2 })
      await new Promise((r) => setTimeout(r, 300))
      expect(got).toHaveLength(1)
    } finally {
      await b.engine.close()
    }
  })
})
