import { expect, test } from '@playwright/test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startServe, type ServeProcess } from './support/serve'
import { shot } from './support/screenshots'

/**
 * The Settings page has forms over one settings read: the model connection, the advisor
 * tiers, the default budget and the dream time limit. Saving one reads the settings again; what the person has typed in
 * the others and not saved yet must survive that read, and each form's own save must send what is
 * on screen.
 */

const TOKEN = 'e2e_settings_token_0123456789ab'

test.describe.serial('Settings: three forms over one read', () => {
  let dataDir: string
  let serve: ServeProcess
  const api = <T = Record<string, any>>(method: string, path: string, body?: unknown) => serve.api<T>(method, path, body)

  test.beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-settings-'))
    serve = await startServe({ dataDir, token: TOKEN })
  })

  test.afterAll(async () => {
    await serve?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test('saving one form keeps what was typed and not yet saved in the others', async ({ page }) => {
    await api('POST', '/v1/corral/settings', { model: { base_url: 'http://127.0.0.1:8080', default_model: 'local-small' } })
    await page.goto(`${serve.url}/?token=${TOKEN}#/settings`)
    const endpoint = page.getByLabel('Model endpoint (base URL)')
    const model = page.getByLabel('Default model')
    const budget = page.getByLabel('Budget for new sessions, in USD')
    // the saved values are in the fields as soon as the form can be typed in
    await expect(endpoint).toHaveValue('http://127.0.0.1:8080')
    await expect(model).toHaveValue('local-small')

    await endpoint.fill('http://127.0.0.1:11434')
    await budget.fill('2.50')
    const tiers = page.getByRole('region', { name: 'Advisor tiers' })
    await tiers.getByLabel('Your tier entries').fill('qwen-3-235b 5')
    const reread = page.waitForResponse((r) => r.url().endsWith('/v1/corral/settings') && r.request().method() === 'GET')
    await tiers.getByRole('button', { name: 'Save tiers' }).click()
    await expect(tiers.getByText('Saved.')).toBeVisible()
    await reread
    expect((await api('GET', '/v1/corral/settings')).advisor_tiers).toEqual({ 'qwen-3-235b': 5 })
    // the read after the tiers' save did not put the saved endpoint back over the typed one
    await expect(endpoint).toHaveValue('http://127.0.0.1:11434')
    await expect(model).toHaveValue('local-small')
    await expect(budget).toHaveValue('2.50')

    await page.getByRole('button', { name: 'Save settings' }).click()
    await expect(page.getByRole('region', { name: 'Connect a model' }).getByText('Saved.')).toBeVisible()
    const saved = await api('GET', '/v1/corral/settings')
    expect(saved.model.base_url).toBe('http://127.0.0.1:11434')
    expect(saved.model.default_model).toBe('local-small')
    expect(saved.default_budget).toBeFalsy()
    await expect(budget).toHaveValue('2.50')
    await expect(tiers.getByLabel('Your tier entries')).toHaveValue('qwen-3-235b 5')

    // a field the person edits after a save is theirs again until the next save
    await page.getByRole('region', { name: 'Default budget' }).getByRole('button', { name: 'Save default budget' }).click()
    await expect(page.getByRole('region', { name: 'Default budget' }).getByText('Saved.')).toBeVisible()
    expect((await api('GET', '/v1/corral/settings')).default_budget.max_list_cost.amount).toBe('250')
    await expect(endpoint).toHaveValue('http://127.0.0.1:11434')
  })

  test('a read that lands after the page opened fills the fields once, before they can be typed in', async ({ page }) => {
    await api('POST', '/v1/corral/settings', { model: { base_url: null, default_model: null } })
    let release!: () => void
    const held = new Promise<void>((r) => (release = r))
    await page.route('**/v1/corral/settings', async (route) => {
      if (route.request().method() === 'GET') await held
      await route.continue()
    })
    await page.goto(`${serve.url}/?token=${TOKEN}#/settings`)
    const endpoint = page.getByLabel('Model endpoint (base URL)')
    await expect(endpoint).toBeDisabled()
    release()
    await endpoint.fill('http://127.0.0.1:11434')
    await page.getByRole('button', { name: 'Save settings' }).click()
    await expect(page.getByRole('region', { name: 'Connect a model' }).getByText('Saved.')).toBeVisible()
    expect((await api('GET', '/v1/corral/settings')).model.base_url).toBe('http://127.0.0.1:11434')
  })

  test('sets the dream time limit: a bad value is named under the field and not saved, empty restores the hour', async ({ page }, info) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/settings`)
    const section = page.getByRole('region', { name: 'Dream time limit' })
    const field = section.getByLabel('Time limit, in minutes')
    await expect(field).toBeEnabled()
    await expect(field).toHaveValue('')
    await field.fill('1h')
    await expect(section.getByText('write a number of minutes, e.g. 90')).toBeVisible()
    await expect(section.getByRole('button', { name: 'Save time limit' })).toBeDisabled()
    await field.fill('90')
    await section.getByRole('button', { name: 'Save time limit' }).click()
    await expect(section.getByText('Saved.')).toBeVisible()
    expect((await api('GET', '/v1/corral/settings')).dream_time_limit_minutes).toBe(90)
    await page.reload()
    await expect(page.getByRole('region', { name: 'Dream time limit' }).getByLabel('Time limit, in minutes')).toHaveValue('90')
    await page.getByRole('region', { name: 'Dream time limit' }).scrollIntoViewIfNeeded()
    await shot(page, info, 'settings-dream-limit')
    await page.getByRole('region', { name: 'Dream time limit' }).getByLabel('Time limit, in minutes').fill('')
    await page.getByRole('region', { name: 'Dream time limit' }).getByRole('button', { name: 'Save time limit' }).click()
    await expect(page.getByRole('region', { name: 'Dream time limit' }).getByText('Saved.')).toBeVisible()
    expect((await api('GET', '/v1/corral/settings')).dream_time_limit_minutes).toBe(60)
  })
})
