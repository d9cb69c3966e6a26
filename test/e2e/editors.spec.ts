import { expect, test } from '@playwright/test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startServe, type ServeProcess } from './support/serve'

/**
 * The agent, environment and schedule editors sit over lists the app polls. A change saved
 * elsewhere (here through the API, as the SDK or another window would) while someone edits must
 * not wipe what they typed: the editor says so and offers to load the saved version or keep the
 * edits. A schedule's pause or run is not a change of what its form edits: it keeps the edits quietly.
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

  test('schedule: a pause keeps what was typed; a change saved elsewhere is announced, and a save sends only the edited fields', async ({ page }) => {
    const agent = await api('POST', '/v1/agents', { name: 'Reporter', model: 'claude-sonnet-4-6' })
    const env = await api('POST', '/v1/environments', { name: 'reports', config: { type: 'cloud' } })
    const task = (text: string) => [{ type: 'user.message', content: [{ type: 'text', text }] }]
    const d = await api('POST', '/v1/deployments', {
      name: 'Morning',
      agent: agent.id,
      environment_id: env.id,
      initial_events: task('first task'),
      schedule: { type: 'cron', expression: '0 9 * * 1-5', timezone: 'UTC' },
    })
    await page.goto(`${serve.url}/?token=${TOKEN}#/schedules/${d.id}`)
    const name = page.locator('#sched-name')
    const taskBox = page.locator('#sched-task')
    const notice = page.getByRole('status', { name: 'Changed elsewhere' })
    await expect(name).toHaveValue('Morning')

    // typed, then paused from the page: the list is read again with a newer updated_at, the edits stay, nothing is announced
    await name.fill('Morning digest')
    await page.getByRole('button', { name: 'Pause' }).click()
    await expect(page.locator('.thread-sub .pill')).toHaveText('Paused')
    await expect(name).toHaveValue('Morning digest')
    await expect(notice).toBeHidden()

    // the task changed elsewhere (the list is read again at the resume): announced, the typed name kept
    await api('POST', `/v1/deployments/${d.id}`, { initial_events: task('their task') })
    await page.getByRole('button', { name: 'Resume' }).click()
    await expect(notice).toContainText('changed elsewhere')
    await expect(name).toHaveValue('Morning digest')
    await expect(taskBox).toHaveValue('first task')
    // saving sends the name only: their task stays
    await page.getByRole('button', { name: 'Save', exact: true }).click()
    await expect.poll(async () => (await api('GET', `/v1/deployments/${d.id}`)).name).toBe('Morning digest')
    const saved = await api('GET', `/v1/deployments/${d.id}`)
    expect(saved.initial_events[0].content[0].text).toBe('their task')
    await expect(notice).toBeHidden()
    await expect(taskBox).toHaveValue('their task')

    // keeping the edits shows the newer version's other fields under them
    await name.fill('Evening digest')
    await api('POST', `/v1/deployments/${d.id}`, { initial_events: task('task three') })
    await page.getByRole('button', { name: 'Pause' }).click()
    await notice.getByRole('button', { name: 'Keep my edits' }).click()
    await expect(notice).toBeHidden()
    await expect(name).toHaveValue('Evening digest')
    await expect(taskBox).toHaveValue('task three')
    await page.getByRole('button', { name: 'Save', exact: true }).click()
    await expect.poll(async () => (await api('GET', `/v1/deployments/${d.id}`)).name).toBe('Evening digest')
    expect((await api('GET', `/v1/deployments/${d.id}`)).initial_events[0].content[0].text).toBe('task three')

    // loading a newer version drops the edits
    await name.fill('scratch')
    await api('POST', `/v1/deployments/${d.id}`, { name: 'Their name' })
    await page.getByRole('button', { name: 'Resume' }).click()
    await notice.getByRole('button', { name: 'Load the saved schedule' }).click()
    await expect(name).toHaveValue('Their name')
    await expect(notice).toBeHidden()
  })
})
