import { expect, test } from '@playwright/test'
import AxeBuilder from '@axe-core/playwright'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startServe, type ServeProcess } from './support/serve'
import { shot } from './support/screenshots'
import { openSection } from './support/navigate'

/**
 * The Schedules page against `corral serve`: a deployment whose hourly runs passed while Corral was
 * closed shows the one catch-up run, marked as missed; a new schedule is made with the cron helper
 * (presets, the next five runs in words, a broken expression named), run now with a link to its
 * session, paused and resumed. No model is configured: sessions are created and wait, nothing
 * leaves the machine.
 */

const TOKEN = 'e2e_schedules_token_0123456789'
const ROOT = join(__dirname, '..', '..')

test.describe.serial('schedules page', () => {
  let dataDir: string
  let serve: ServeProcess
  let seeded: string
  const api = <T = Record<string, any>>(method: string, path: string, body?: unknown) => serve.api<T>(method, path, body)

  test.beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-schedules-'))
    const out = execFileSync(join(ROOT, 'node_modules/.bin/tsx'), ['test/e2e/support/seed-schedules.ts', dataDir], { cwd: ROOT, encoding: 'utf8' })
    seeded = (JSON.parse(out.trim().split('\n').pop()!) as { deploymentId: string }).deploymentId
    serve = await startServe({ dataDir, token: TOKEN, noApiKey: true })
  })

  test.afterAll(async () => {
    await serve?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test('shows the one run caught up after Corral was closed, marked as missed, with its session', async ({ page }, info) => {
    await expect.poll(async () => (await api('GET', `/v1/deployment_runs?deployment_id=${seeded}`)).data.length).toBe(1)
    await page.goto(`${serve.url}/?token=${TOKEN}#/schedules`)
    await openSection(page, 'Schedules')
    await page.getByRole('button', { name: /Hourly digest/ }).click()
    await expect(page.getByRole('heading', { name: 'Hourly digest' })).toBeVisible()
    const runs = page.getByRole('region', { name: 'Runs' })
    await expect(runs.locator('.schedule-run')).toHaveCount(1)
    await expect(runs.locator('.schedule-run.missed')).toContainText('missed while Corral was closed: caught up once')
    await expect(runs.locator('.schedule-run')).toContainText(/runs since .* were skipped/)
    await expect(page.getByRole('region', { name: 'Schedule' }).locator('.schedule-next li')).toHaveCount(5)
    const axe = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa']).analyze()
    expect(axe.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => v.id)).toEqual([])
    await shot(page, info, 'schedules-01-missed-while-closed')
    await runs.getByRole('link', { name: 'Open session' }).click()
    await expect(page).toHaveURL(/#\/sessions\/sesn_/)
    const sessionId = /#\/sessions\/(sesn_\w+)/.exec(page.url())![1]
    expect((await api('GET', `/v1/sessions/${sessionId}`)).deployment_id).toBe(seeded)
  })

  test('creates a schedule with the cron helper: presets, the next five runs in words, a broken expression named', async ({ page }, info) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/schedules/new`)
    await expect(page.getByRole('heading', { name: 'New schedule' })).toBeVisible()
    await page.getByLabel('Name').fill('Morning report')
    await page.getByLabel('Task').fill("Compile yesterday's orders into report.md.")
    await page.getByLabel('Time zone').fill('Europe/Berlin')
    await page.getByLabel('Cron expression').fill('0 9 L * *')
    await expect(page.locator('#sched-preview').getByRole('alert')).toContainText('day-of-month field "L": the special characters L, W, # and ? are not supported')
    await expect(page.getByRole('button', { name: 'Create schedule' })).toBeDisabled()
    await page.getByRole('button', { name: 'Every weekday at 9:00' }).click()
    await expect(page.getByLabel('Cron expression')).toHaveValue('0 9 * * 1-5')
    const next = page.locator('#sched-preview .schedule-next li')
    await expect(next).toHaveCount(5)
    for (const text of await next.allTextContents()) expect(text).toMatch(/(Mon|Tue|Wed|Thu|Fri)\b.* at 09:00, in \d+ (minutes?|hours?|days?)$/)
    await shot(page, info, 'schedules-02-cron-helper')
    await page.getByRole('button', { name: 'Create schedule' }).click()
    await expect(page.getByRole('heading', { name: 'Morning report' })).toBeVisible()
    await expect(page).toHaveURL(/#\/schedules\/depl_/)
    const id = /#\/schedules\/(depl_\w+)/.exec(page.url())![1]
    expect((await api('GET', `/v1/deployments/${id}`)).schedule).toMatchObject({ expression: '0 9 * * 1-5', timezone: 'Europe/Berlin' })
  })

  test('runs now with a link to the new session, pauses and resumes', async ({ page }, info) => {
    const list = await api('GET', '/v1/deployments')
    const d = (list.data as { id: string; name: string }[]).find((x) => x.name === 'Morning report')!
    await page.goto(`${serve.url}/?token=${TOKEN}#/schedules/${d.id}`)
    await expect(page.getByRole('heading', { name: 'Morning report' })).toBeVisible()
    await page.getByRole('button', { name: 'Run now' }).click()
    const runs = page.getByRole('region', { name: 'Runs' })
    await expect(runs.locator('.schedule-run')).toHaveCount(1)
    await expect(runs.locator('.schedule-run')).toContainText('Run now')
    await page.getByRole('button', { name: 'Pause' }).click()
    await expect(page.locator('.thread-sub .pill')).toHaveText('Paused')
    await expect(page.getByRole('region', { name: 'Schedule' })).toContainText('Would run next (resume to let it):')
    await shot(page, info, 'schedules-03-paused-with-a-run')
    expect((await api('GET', `/v1/deployments/${d.id}`)).paused_reason).toEqual({ type: 'manual' })
    await page.getByRole('button', { name: 'Resume' }).click()
    await expect(page.locator('.thread-sub .pill')).toHaveText('Active')
    await runs.getByRole('link', { name: 'Open session' }).click()
    await expect(page).toHaveURL(/#\/sessions\/sesn_/)
  })
})
