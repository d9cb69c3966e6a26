import { expect, test } from '@playwright/test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startServe, type ServeProcess } from './support/serve'

/**
 * The agent and environment editors sit over lists the app polls. A change saved elsewhere (here
 * through the API, as the SDK or another window would) while someone edits must not wipe what
 * they typed: the editor says so and offers to load the saved version or keep the edits.
 */

const TOKEN = 'e2e_editors_token_0123456789ab'

test.describe.serial('editors: a change saved elsewhere while editing', () => {
  let dataDir: string
  let serve: ServeProcess
  const api = <T = Record<string, any>>(method: string, path: string, body?: unknown) => serve.api<T>(method, path, body)

  test.beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-editors-'))
    serve = await startServe({ dataDir, token: TOKEN })
  })

  test.afterAll(async () => {
    await serve?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test('agent: keeps what was typed over a newer version, then saves over it or loads it', async ({ page }) => {
    const agent = await api('POST', '/v1/agents', { name: 'Writer', model: 'claude-sonnet-4-6', description: 'first' })
    await page.goto(`${serve.url}/?token=${TOKEN}#/agents/${agent.id}`)
    const desc = page.locator('#ag-desc')
    const notice = page.getByRole('status', { name: 'Changed elsewhere' })
    const save = page.getByRole('button', { name: 'Save as new version' })
    await expect(desc).toHaveValue('first')

    // nothing typed: a version saved elsewhere simply shows
    await api('POST', `/v1/agents/${agent.id}`, { version: 1, description: 'second' })
    await expect(desc).toHaveValue('second')
    await expect(notice).toBeHidden()

    // typed, not saved: the next version saved elsewhere keeps the edits and is announced
    await desc.fill('mine')
    await api('POST', `/v1/agents/${agent.id}`, { version: 2, description: 'third' })
    await expect(notice).toContainText('version 3 is newer than version 2')
    await expect(desc).toHaveValue('mine')
    // a save now names version 2, which the API refuses as stale, and says why
    await save.click()
    await expect(page.getByRole('alert')).toContainText('at version 3, not 2')
    expect((await api('GET', `/v1/agents/${agent.id}`)).description).toBe('third')

    // keeping the edits saves them over version 3
    await notice.getByRole('button', { name: 'Keep my edits' }).click()
    await expect(notice).toBeHidden()
    await save.click()
    await expect(page.getByText('Saved.')).toBeVisible()
    const kept = await api('GET', `/v1/agents/${agent.id}`)
    expect([kept.version, kept.description]).toEqual([4, 'mine'])
    // our own save is not announced as a change from elsewhere when the list brings it back
    await page.waitForResponse((r) => r.url().includes('/v1/agents?') && r.request().method() === 'GET')
    await expect(notice).toBeHidden()

    // loading the newer version drops the edits
    await desc.fill('scratch')
    await api('POST', `/v1/agents/${agent.id}`, { version: 4, description: 'fifth' })
    await notice.getByRole('button', { name: 'Load version 5' }).click()
    await expect(desc).toHaveValue('fifth')
    await expect(notice).toBeHidden()
    await expect(save).toBeDisabled()
  })

  test('environment: keeps what was typed over a change saved elsewhere, and loads it on request', async ({ page }) => {
    const env = await api('POST', '/v1/environments', { name: 'tools', description: 'first', config: { type: 'cloud' } })
    await page.goto(`${serve.url}/?token=${TOKEN}#/environments/${env.id}`)
    const desc = page.locator('#env-desc')
    const notice = page.getByRole('status', { name: 'Changed elsewhere' })
    await expect(desc).toHaveValue('first')

    await desc.fill('mine')
    await api('POST', `/v1/environments/${env.id}`, { description: 'theirs' })
    await expect(notice).toContainText('saved elsewhere')
    await expect(desc).toHaveValue('mine')

    await notice.getByRole('button', { name: 'Load the saved version' }).click()
    await expect(desc).toHaveValue('theirs')
    await expect(notice).toBeHidden()
  })
})
