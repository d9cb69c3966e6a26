import { randomBytes, randomUUID } from 'node:crypto'
import { Webhook } from 'standardwebhooks'
import { WEBHOOK_RETRY_DELAYS_MS, WEBHOOK_TIMEOUT_MS, type NewWebhookEndpoint, type WebhookDelivery, type WebhookEndpoint } from '../../shared/api/webhooks'
import type { ClaimedDelivery, WebhookEndpointCreateInput, WebhookEndpointUpdateInput, WebhookListParams, WebhookStore } from '../session/webhook-store'
import { keychainAccount, type Keychain } from '../vault/keychain'


export interface WebhookServiceOptions {
  store: WebhookStore
  /** Where signing secrets are kept (never in the database, an event or a log line). */
  keychain: Keychain
  /** Resolves once everything the log committed so far is on disk (a webhook never tells of what an OS crash could lose). */
  whenSynced?: () => Promise<void>
  /** Operator-facing lines (a delivery given up). */
  log?: (line: string) => void
  /** The clock (ms since the epoch); tests move it. */
  now?: () => number
  /** Waits before each retry (default WEBHOOK_RETRY_DELAYS_MS). */
  retryDelaysMs?: readonly number[]
  /** A delivery's whole request, at most (default WEBHOOK_TIMEOUT_MS). */
  timeoutMs?: number
  /** How long a claimed delivery is this engine's before another engine may take it over. */
  claimMs?: number
  /** The longest wait between two looks at the outbox (rows another engine enqueued and left). */
  idlePollMs?: number
}

/** Deliveries sent at once, at most. */
const IN_FLIGHT = 16

/**
 * Webhooks (docs/webhooks.md): the endpoints' management with their signing secrets, and the
 * delivery loop. An endpoint's secret (`whsec_` and 24 random bytes in base64) is made at create
 * and at regenerate, kept in the keychain and shown once. The loop claims due rows of the outbox
 * (session/webhook-store.ts), posts each as a Standard Webhooks message (`webhook-id`,
 * `webhook-timestamp`, `webhook-signature`: what `client.beta.webhooks.unwrap` verifies), and
 * records the attempt: a 2xx is delivered; anything else (another status, no answer within the
 * timeout, a refused connection, a redirect) is retried after WEBHOOK_RETRY_DELAYS_MS, then given
 * up. It is woken when rows are enqueued and otherwise sleeps until the next one is due.
 */
export class WebhookService {
  private readonly owner = `whs_${randomUUID()}`
  private readonly secrets = new Map<string, Webhook>()
  private readonly now: () => number
  private readonly retryDelays: readonly number[]
  private timer: NodeJS.Timeout | undefined
  private running = false
  private again = false
  private disposed = false
  private readonly stopWaking: () => void
  private readonly inFlight = new Set<Promise<void>>()

  constructor(private readonly o: WebhookServiceOptions) {
    this.now = o.now ?? Date.now
    this.retryDelays = o.retryDelaysMs ?? WEBHOOK_RETRY_DELAYS_MS
    this.stopWaking = o.store.onEnqueued(() => this.kick())
  }

  // ---- endpoints (the API's /v1/organizations/webhooks) ----

  async create(input: WebhookEndpointCreateInput): Promise<NewWebhookEndpoint> {
    const endpoint = this.o.store.create(input)
    try {
      return { ...endpoint, signing_secret: await this.newSecret(endpoint.id) }
    } catch (err) {
      // no secret, no endpoint: nothing could verify what it would be sent
      this.o.store.delete(endpoint.id)
      throw err
    }
  }

  retrieve(id: string): WebhookEndpoint {
    return this.o.store.retrieve(id)
  }

  list(params: WebhookListParams): ReturnType<WebhookStore['list']> {
    return this.o.store.list(params)
  }

  update(id: string, input: WebhookEndpointUpdateInput): WebhookEndpoint {
    const endpoint = this.o.store.update(id, input)
    // an endpoint enabled again may have deliveries due (none: disabling gave them up), and a new URL applies to retries
    this.kick()
    return endpoint
  }

  async delete(id: string): Promise<{ id: string; type: 'webhook_endpoint_deleted' }> {
    const out = this.o.store.delete(id)
    this.secrets.delete(id)
    await this.o.keychain.delete(keychainAccount.webhookSecret(id))
    return out
  }

  async regenerateSigningSecret(id: string): Promise<{ signing_secret: string }> {
    this.o.store.retrieve(id)
    return { signing_secret: await this.newSecret(id) }
  }

  deliveries(id: string, params: { limit?: number } = {}): { data: WebhookDelivery[] } {
    return this.o.store.deliveries(id, params)
  }

  private async newSecret(id: string): Promise<string> {
    const secret = `whsec_${randomBytes(24).toString('base64')}`
    await this.o.keychain.set(keychainAccount.webhookSecret(id), secret)
    this.secrets.set(id, new Webhook(secret))
    return secret
  }

  private async signer(endpointId: string): Promise<Webhook> {
    let s = this.secrets.get(endpointId)
    if (s) return s
    const secret = await this.o.keychain.get(keychainAccount.webhookSecret(endpointId))
    if (!secret) throw new Error('its signing secret is not in the keychain (regenerate it)')
    s = new Webhook(secret)
    this.secrets.set(endpointId, s)
    return s
  }

  // ---- delivery ----

  /** Starts delivering (what is due now, then as rows are enqueued and come due). */
  start(): void {
    this.kick()
  }

  /** Stops the loop; resolves once the deliveries in flight have been recorded. */
  async dispose(): Promise<void> {
    this.disposed = true
    this.stopWaking()
    if (this.timer) clearTimeout(this.timer)
    await Promise.allSettled([...this.inFlight])
  }

  /** Looks at the outbox now (or right after the pass running). */
  kick(): void {
    if (this.disposed) return
    if (this.running) {
      this.again = true
      return
    }
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
    this.running = true
    void this.pass().finally(() => {
      this.running = false
      if (this.disposed) return
      if (this.again) {
        this.again = false
        this.kick()
      } else this.sleep()
    })
  }

  /** Sleeps until the next delivery is due (or idlePollMs, for rows another engine enqueued). */
  private sleep(): void {
    const idle = this.o.idlePollMs ?? 30_000
    const next = this.o.store.nextDueMs()
    const wait = next === undefined ? idle : Math.min(idle, Math.max(0, next - this.now()))
    this.timer = setTimeout(() => this.kick(), wait)
    this.timer.unref()
  }

  private async pass(): Promise<void> {
    // secrets are read again once per pass: another engine on this data directory may have regenerated one
    this.secrets.clear()
    try {
      await this.o.whenSynced?.()
      for (;;) {
        const free = IN_FLIGHT - this.inFlight.size
        const due = free > 0 && !this.disposed ? this.o.store.claimDue(this.owner, this.now(), free, this.o.claimMs ?? 60_000) : []
        for (const d of due) {
          const p = this.deliver(d).finally(() => this.inFlight.delete(p))
          this.inFlight.add(p)
        }
        if (this.inFlight.size === 0) return
        await Promise.race(this.inFlight)
      }
    } catch (err) {
      this.o.log?.(`[corral] webhook delivery stopped for a moment: ${(err as Error).message}`)
    }
  }

  private async deliver(d: ClaimedDelivery): Promise<void> {
    let status: number | null = null
    let error: string
    try {
      const signer = await this.signer(d.endpointId)
      const at = new Date(this.now())
      const res = await fetch(d.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'Corral-Webhooks/1',
          'webhook-id': d.eventId,
          'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
          'webhook-signature': signer.sign(d.eventId, at, d.payload),
        },
        body: d.payload,
        redirect: 'manual',
        signal: AbortSignal.timeout(this.o.timeoutMs ?? WEBHOOK_TIMEOUT_MS),
      })
      status = res.status
      const text = await res.text().catch(() => '')
      if (res.status >= 200 && res.status < 300) return this.o.store.recordDelivered(d.rid, this.owner, res.status)
      error = `answered ${res.status}${res.status >= 300 && res.status < 400 ? ' (a redirect: webhooks are not redirected)' : ''}${text ? `: ${text.slice(0, 200)}` : ''}`
    } catch (err) {
      error = describe(err, this.o.timeoutMs ?? WEBHOOK_TIMEOUT_MS)
    }
    const delay = this.retryDelays[d.attempts]
    const retryAtMs = delay === undefined ? undefined : this.now() + delay
    this.o.store.recordFailure(d.rid, this.owner, { status, error, retryAtMs })
    if (retryAtMs === undefined) this.o.log?.(`[corral] webhook ${d.eventId} (${d.eventType}) to ${d.url} given up after ${d.attempts + 1} attempts: ${error}`)
  }
}

/** A failed request in a line ("connection refused", "no answer within 15 s"). */
function describe(err: unknown, timeoutMs: number): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } }
  if (e?.name === 'TimeoutError') return `no answer within ${Math.round(timeoutMs / 1000)} s`
  const code = e?.cause?.code
  if (code === 'ECONNREFUSED') return 'connection refused'
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host not found'
  if (code === 'ECONNRESET') return 'connection reset'
  return e?.cause?.message ?? e?.message ?? String(err)
}
