import { describe, expect, it } from 'vitest'
import { DEFAULT_WEBHOOK_EVENTS, parseWebhookUrl, retryText, webhookEventGroups, webhookEventLabel, webhookEventsSummary } from '../../../src/renderer/src/features/settings/webhook-form'
import { SENT_WEBHOOK_EVENTS } from '../../../src/shared/api/webhooks'

describe("the Webhooks section's form", () => {
  it('takes an absolute http or https URL, trimmed, and names what is wrong with anything else', () => {
    expect(parseWebhookUrl('  http://127.0.0.1:8787/hooks ')).toEqual({ url: 'http://127.0.0.1:8787/hooks' })
    expect(parseWebhookUrl('https://hooks.example.com/corral?x=1')).toEqual({ url: 'https://hooks.example.com/corral?x=1' })
    expect(parseWebhookUrl('')).toEqual({ error: expect.stringMatching(/Type the URL/) })
    expect(parseWebhookUrl('127.0.0.1:8787/hooks')).toEqual({ error: expect.stringMatching(/not a whole URL: start it with http/) })
    expect(parseWebhookUrl('localhost/hooks')).toEqual({ error: expect.stringMatching(/not a whole URL/) })
    expect(parseWebhookUrl('ftp://example.com/x')).toEqual({ error: 'Webhooks go over http or https, not ftp.' })
    expect(parseWebhookUrl('[::1]:8787/hooks')).toEqual({ error: expect.stringMatching(/not a whole URL: start it with http/) })
  })

  it('names a missing scheme as such when the host reads like one (localhost:8787 parses with "localhost" as its scheme)', () => {
    expect(parseWebhookUrl('localhost:8787/hooks')).toEqual({ error: 'localhost:8787/hooks is not a whole URL: start it with http:// or https://.' })
    expect(parseWebhookUrl('hooks.example.com:443/corral')).toEqual({ error: expect.stringMatching(/not a whole URL: start it with http/) })
    expect(parseWebhookUrl('mailto:me@example.com')).toEqual({ error: expect.stringMatching(/not a whole URL: start it with http/) })
    expect(parseWebhookUrl('http://localhost:8787/hooks')).toEqual({ url: 'http://localhost:8787/hooks' })
  })

  it('says what is wrong after the scheme instead of asking for one the URL has', () => {
    expect(parseWebhookUrl('http://my host/hooks')).toEqual({ error: 'http://my host/hooks is not a URL: after http:// comes a host name without spaces, e.g. 127.0.0.1:8787 or hooks.example.com.' })
    expect(parseWebhookUrl('https://')).toEqual({ error: expect.stringMatching(/^https:\/\/ is not a URL: after https:\/\/ comes a host name/) })
    expect(parseWebhookUrl(`nothing-like-a-url-${'x'.repeat(80)}`)).toEqual({ error: expect.stringMatching(/^nothing-like-a-url-x+… is not a whole URL/) })
    expect(parseWebhookUrl('http://me:secret@127.0.0.1/x')).toEqual({ error: expect.stringMatching(/user name and password out of the URL/) })
    expect(parseWebhookUrl(`http://example.com/${'a'.repeat(2050)}`)).toEqual({ error: expect.stringMatching(/longer than 2048/) })
  })

  it('offers every type Corral sends once, in groups, each with a label, and a default that says when an agent stops or needs you', () => {
    const offered = webhookEventGroups().flatMap((g) => g.types)
    expect([...offered].sort()).toEqual([...SENT_WEBHOOK_EVENTS].sort())
    expect(new Set(offered).size).toBe(offered.length)
    for (const g of webhookEventGroups()) expect(g.types.length).toBeGreaterThan(0)
    for (const t of SENT_WEBHOOK_EVENTS) expect(webhookEventLabel(t)).not.toBe(t)
    expect(DEFAULT_WEBHOOK_EVENTS.every((t) => (SENT_WEBHOOK_EVENTS as readonly string[]).includes(t))).toBe(true)
    expect(webhookEventLabel('external_key.failed')).toBe('external_key.failed')
  })

  it("sums an endpoint's types up in a line", () => {
    expect(webhookEventsSummary(['session.status_idled'])).toBe('session: goes idle')
    expect(webhookEventsSummary(['session.status_idled', 'session.requires_action', 'session.status_terminated', 'agent.created', 'vault.created'])).toBe(
      'session: goes idle, session: needs you (a confirmation or a tool result), session: ends for good and 2 more',
    )
  })

  it("says when a pending delivery is tried again, ahead of now, and that it is due once that time has passed", () => {
    const now = Date.parse('2026-12-08T10:00:00Z')
    expect(retryText('2026-12-08T10:00:40Z', now)).toBe('retry in 40s')
    expect(retryText('2026-12-08T10:05:00Z', now)).toBe('retry in 5m')
    expect(retryText('2026-12-08T12:00:00Z', now)).toBe('retry in 2h')
    expect(retryText('2026-12-08T09:59:59Z', now)).toBe('retry due')
    expect(retryText('not a time', now)).toBe('')
  })
})
