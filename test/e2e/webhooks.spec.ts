import { expect, test } from '@playwright/test'
import AxeBuilder from '@axe-core/playwright'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { startServe, type ServeProcess } from './support/serve'
import { shot } from './support/screenshots'
import { keychainProbe, requirement } from '../support/requirements'
import { WebhookReceiver } from '../support/webhook-receiver'
import { MAX_WEBHOOK_ENDPOINTS } from '../../src/shared/api/webhooks'

/**
 * Settings → Webhooks (docs/webhooks.md), as a person uses it: an endpoint added for their own
 * program (a receiver on loopback here), its secret shown once, a session made, the signed
 * delivery verified with the official SDK and listed in the section; a bad URL named under its
 * field with the form kept; the endpoint turned off, its secret regenerated (the next delivery
 * verifies with the new one only), its events changed, deleted; the API's own refusal shown under
 * the form with the form kept. The signing secret lives in the keychain, so the spec needs one;
 * without one, the section says why no endpoint can be added.
 */

const TOKEN = 'e2e_webhooks_token_0123456789abc'
const keychain = requirement('keychain', keychainProbe)

test.describe.serial('Settings: webhooks', () => {
  test.skip(!keychain.ok, keychain.reason ?? '')
  let dataDir: string
  let serve: ServeProcess
  const receiver = new WebhookReceiver()
  const got = receiver.got
  let receiverUrl = ''
  let firstSecret = ''
  const api = <T = Record<string, any>>(method: string, path: string, body?: unknown) => serve.api<T>(method, path, body)

  test.beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-webhooks-'))
    receiverUrl = (await receiver.start()).url
    serve = await startServe({
      dataDir,
      token: TOKEN,
      env: { DBUS_SESSION_BUS_ADDRESS: process.env.DBUS_SESSION_BUS_ADDRESS, CORRAL_KEYCHAIN_SERVICE: `corral-e2e-webhooks-${process.pid}-${Date.now()}` },
    })
  })

  test.afterAll(async () => {
    // deleting the endpoints takes their secrets out of the keychain
    if (serve) for (const e of (await api<{ data: { id: string }[] }>('GET', '/v1/organizations/webhooks?limit=100').catch(() => ({ data: [] }))).data) await api('DELETE', `/v1/organizations/webhooks/${e.id}`).catch(() => {})
    await serve?.stop()
    await receiver.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test('adds an endpoint, shows its secret once, and lists the signed delivery of a new session as delivered', async ({ page }, info) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/settings`)
    const section = page.getByRole('region', { name: 'Webhooks' })
    await expect(section.getByText('No endpoint yet.')).toBeVisible()
    await section.getByRole('button', { name: 'Add an endpoint' }).click()
    const form = section.getByRole('form', { name: 'New webhook endpoint' })

    // a URL without its scheme is named under the field, and nothing is sent; the text stays
    await form.getByLabel('URL').fill('127.0.0.1:8787/hooks')
    await form.getByLabel('Name (optional)').fill('my notifier')
    await form.getByRole('button', { name: 'Add endpoint' }).click()
    await expect(form.getByText(/not a whole URL: start it with http/)).toBeVisible()
    await expect(form.getByLabel('URL')).toHaveValue('127.0.0.1:8787/hooks')
    expect((await api<{ data: unknown[] }>('GET', '/v1/organizations/webhooks')).data).toEqual([])

    // the default events say when an agent stops or needs you; session creation is added
    // (each checkbox is named by its label and its wire name)
    await expect(form.getByRole('checkbox', { name: /session\.status_idled$/ })).toBeChecked()
    await expect(form.getByRole('checkbox', { name: /session\.requires_action$/ })).toBeChecked()
    await expect(form.getByRole('checkbox', { name: /session\.created$/ })).not.toBeChecked()
    await form.getByRole('checkbox', { name: /session\.created$/ }).check()
    await form.getByLabel('URL').fill(receiverUrl)
    await form.getByRole('button', { name: 'Add endpoint' }).click()

    const once = section.getByTestId('webhook-secret')
    await expect(once).toContainText('shown once')
    const secret = (await once.locator('pre').first().innerText()).trim()
    expect(secret).toMatch(/^whsec_/)
    firstSecret = secret
    const row = section.getByTestId('webhook-endpoint')
    await expect(row).toContainText(receiverUrl)
    await expect(row).toContainText('my notifier')
    await expect(row).toContainText('On')
    await section.scrollIntoViewIfNeeded()
    await once.scrollIntoViewIfNeeded()
    await shot(page, info, 'settings-webhooks')
    const a11y = await new AxeBuilder({ page }).include('[aria-labelledby="s-webhooks"]').analyze()
    expect(a11y.violations.map((v) => `${v.id}: ${v.help}`)).toEqual([])
    await once.getByRole('button', { name: 'Done' }).click()
    await expect(once).toHaveCount(0)
    // the secret is never shown again, nor sent back by the API
    expect(JSON.stringify(await api('GET', '/v1/organizations/webhooks'))).not.toContain(secret)

    // a session made through the API: its creation is posted to the receiver, signed
    const agent = await api<{ id: string }>('POST', '/v1/agents', { name: 'hooked', model: 'claude-sonnet-4-6' })
    const env = await api<{ id: string }>('POST', '/v1/environments', { name: 'hooked' })
    const session = await api<{ id: string }>('POST', '/v1/sessions', { agent: agent.id, environment_id: env.id })
    await expect.poll(() => got.length, { timeout: 10_000 }).toBe(1)
    const event = new Anthropic({ apiKey: 'unused' }).beta.webhooks.unwrap(got[0].body, { headers: got[0].headers, key: secret })
    expect(event.data).toMatchObject({ type: 'session.created', id: session.id })

    // the section lists it as delivered
    await row.getByRole('button', { name: 'Deliveries' }).click()
    const delivery = row.getByTestId('webhook-delivery')
    await expect(delivery).toContainText('session.created')
    await expect(delivery).toContainText(session.id)
    await expect(delivery).toContainText('delivered')
    await delivery.scrollIntoViewIfNeeded()
    await shot(page, info, 'settings-webhooks-deliveries')
  })

  test('turns the endpoint off and on, regenerates its secret, changes its events, and deletes it after a confirmation', async ({ page }) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/settings`)
    const section = page.getByRole('region', { name: 'Webhooks' })
    const row = section.getByTestId('webhook-endpoint')
    await row.getByRole('button', { name: 'Turn off' }).click()
    await expect(row).toContainText('Off')
    expect((await api<{ data: { state: string }[] }>('GET', '/v1/organizations/webhooks')).data[0].state).toBe('disabled')
    await row.getByRole('button', { name: 'Turn on' }).click()
    await expect(row.getByRole('button', { name: 'Turn off' })).toBeVisible()
    await expect(row).toContainText('On')

    // a new secret, shown once after a confirmation: the next delivery is signed with it, not the old one
    page.once('dialog', (d) => void d.accept())
    await row.getByRole('button', { name: 'New secret' }).click()
    const once = section.getByTestId('webhook-secret')
    await expect(once).toContainText('shown once')
    const secret = (await once.locator('pre').first().innerText()).trim()
    expect(secret).toMatch(/^whsec_/)
    expect(secret).not.toBe(firstSecret)
    const before = got.length
    const agent = await api<{ id: string }>('POST', '/v1/agents', { name: 'rehooked', model: 'claude-sonnet-4-6' })
    const env = await api<{ id: string }>('POST', '/v1/environments', { name: 'rehooked' })
    const session = await api<{ id: string }>('POST', '/v1/sessions', { agent: agent.id, environment_id: env.id })
    const sdk = new Anthropic({ apiKey: 'unused' })
    await expect.poll(() => got.length, { timeout: 10_000 }).toBeGreaterThan(before)
    const delivery = got.slice(before).find((g) => JSON.parse(g.body).data?.id === session.id)
    expect(delivery).toBeDefined()
    expect(sdk.beta.webhooks.unwrap(delivery!.body, { headers: delivery!.headers, key: secret }).data).toMatchObject({ type: 'session.created', id: session.id })
    expect(() => sdk.beta.webhooks.unwrap(delivery!.body, { headers: delivery!.headers, key: firstSecret })).toThrow()

    await row.getByRole('button', { name: 'Events…' }).click()
    const events = row.getByRole('form', { name: /Events of/ })
    const checked = events.getByRole('checkbox', { checked: true })
    await expect(checked).toHaveCount(4)
    while ((await checked.count()) > 0) await checked.first().uncheck()
    await expect(events.getByText('Pick at least one event.')).toBeVisible()
    await expect(events.getByRole('button', { name: 'Save events' })).toBeDisabled()
    await events.getByRole('checkbox', { name: /deployment_run\.failed$/ }).check()
    await events.getByRole('button', { name: 'Save events' }).click()
    await expect(row).toContainText('deployment run: a run failed')
    expect((await api<{ data: { enabled_events: string[] }[] }>('GET', '/v1/organizations/webhooks')).data[0].enabled_events).toEqual(['deployment_run.failed'])

    // the secret still on screen goes with its endpoint
    await expect(once).toHaveCount(1)
    page.once('dialog', (d) => void d.accept())
    await row.getByRole('button', { name: 'Delete' }).click()
    await expect(section.getByText('No endpoint yet.')).toBeVisible()
    await expect(once).toHaveCount(0)
    expect((await api<{ data: unknown[] }>('GET', '/v1/organizations/webhooks')).data).toEqual([])
  })

  test("shows the API's refusal under the form and keeps what was typed; at the limit, adding is off", async ({ page }) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/settings`)
    const section = page.getByRole('region', { name: 'Webhooks' })
    await section.getByRole('button', { name: 'Add an endpoint' }).click()
    const form = section.getByRole('form', { name: 'New webhook endpoint' })
    await form.getByLabel('URL').fill(receiverUrl)
    await form.getByLabel('Name (optional)').fill('one too many')
    await form.getByRole('checkbox', { name: /session\.created$/ }).check()
    // meanwhile another program fills the endpoints up to the limit, so the engine refuses this one
    for (let i = 0; i < MAX_WEBHOOK_ENDPOINTS; i++) await api('POST', '/v1/organizations/webhooks', { url: `${receiverUrl}/${i}`, enabled_events: ['deployment_run.failed'] })
    await form.getByRole('button', { name: 'Add endpoint' }).click()
    await expect(form.getByRole('alert')).toContainText(`at most ${MAX_WEBHOOK_ENDPOINTS} webhook endpoints`)
    await expect(form.getByLabel('URL')).toHaveValue(receiverUrl)
    await expect(form.getByLabel('Name (optional)')).toHaveValue('one too many')
    await expect(form.getByRole('checkbox', { name: /session\.created$/ })).toBeChecked()
    await expect(form.getByRole('button', { name: 'Add endpoint' })).toBeEnabled()
    expect((await api<{ data: { name: string | null }[] }>('GET', '/v1/organizations/webhooks?limit=100')).data.map((e) => e.name)).not.toContain('one too many')

    await page.reload()
    await expect(section.getByTestId('webhook-endpoint')).toHaveCount(MAX_WEBHOOK_ENDPOINTS)
    await expect(section.getByRole('button', { name: 'Add an endpoint' })).toBeDisabled()
    await expect(section.getByText(`${MAX_WEBHOOK_ENDPOINTS} endpoints at most: delete one to add another.`)).toBeVisible()
  })
})

test.describe.serial('Settings: webhooks without a keychain', () => {
  let dataDir: string
  let serve: ServeProcess

  test.beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-webhooks-nokc-'))
    // startServe's default: no session bus, so no keychain answers
    serve = await startServe({ dataDir, token: TOKEN })
  })

  test.afterAll(async () => {
    await serve?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test('says why no endpoint can be added instead of offering a form the engine would refuse', async ({ page }, info) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/settings`)
    const section = page.getByRole('region', { name: 'Webhooks' })
    await expect(section.getByRole('status')).toContainText('Endpoints cannot be added here: no OS keychain is available')
    await expect(section.getByText('No endpoint yet.')).toBeVisible()
    await expect(section.getByRole('button', { name: 'Add an endpoint' })).toBeDisabled()
    await expect(section.getByRole('alert')).toHaveCount(0)
    await section.scrollIntoViewIfNeeded()
    await shot(page, info, 'settings-webhooks-no-keychain')
    // what the engine would answer: the secret has nowhere to go
    await expect(serve.api('POST', '/v1/organizations/webhooks', { url: 'http://127.0.0.1:9/hooks', enabled_events: ['session.created'] })).rejects.toThrow(/keychain/)
  })
})
