import { expect, test } from '@playwright/test'
import AxeBuilder from '@axe-core/playwright'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startServe, type ServeProcess } from './support/serve'
import { shot } from './support/screenshots'

/**
 * The event kinds the scripted model cannot produce yet (subagent threads, a model error being
 * retried, a custom tool waiting for its result, exit codes), seeded into the session log through
 * the engine's services, drawn by the renderer.
 */

const TOKEN = 'e2e_gallery_token_0123456789'
const ROOT = join(__dirname, '..', '..')


test.describe.serial('every kind of event in the thread view', () => {
  let dataDir: string
  let serve: ServeProcess
  let seeded: { sessionId: string; threadId: string; customToolUseId: string }

  test.beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-gallery-'))
    const out = execFileSync(join(ROOT, 'node_modules/.bin/tsx'), ['test/e2e/support/seed-gallery.ts', dataDir, TOKEN], { cwd: ROOT, encoding: 'utf8' })
    seeded = JSON.parse(out.trim().split('\n').pop()!)
    serve = await startServe({ dataDir, token: TOKEN })
  })

  test.afterAll(async () => {
    await serve?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test('draws the primary thread: subagent lifecycle, diff, terminal with exit code, retried error, custom tool', async ({ page }, info) => {
    await page.setViewportSize({ width: 1360, height: 2200 })
    await page.emulateMedia({ colorScheme: 'dark' })
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions/${seeded.sessionId}`)
    await expect(page.getByRole('heading', { name: 'Fix the flaky date test' })).toBeVisible()

    // The delegation (created + its task) and the report are compact cards linking to the thread.
    await expect(page.locator('.thread-card')).toHaveCount(2)
    await expect(page.locator('.thread-card-delegation')).toContainText('Delegated to researcher')
    await expect(page.locator('.thread-card-delegation')).toContainText('Which CI runs failed')
    await expect(page.locator('.thread-card-report')).toContainText('Report from researcher')

    // Finished cards fold to one line; the turn's calls open together.
    await page.getByRole('button', { name: /Expand this turn's 3 tool calls/ }).click()
    const edit = page.locator('.tool-card').filter({ hasText: 'src/date.ts' })
    await expect(edit.locator('.diff-del')).toHaveCount(2)
    await expect(edit.locator('.diff-add')).toHaveCount(2)

    const bash = page.locator('.tool-card').filter({ hasText: 'npm test -- date' })
    await expect(bash).toHaveClass(/tool-error/)
    await expect(bash.locator('.pill-bad')).toHaveText('exit 1')
    await expect(bash.locator('.tool-duration')).toHaveText('2.1 s')
    await expect(bash.locator('.terminal .ansi-fg-red').first()).toHaveText('✗')

    // One row per failing request episode, with its attempt.
    await expect(page.locator('.event-error')).toContainText(/model overloaded error/i)
    await expect(page.locator('.event-error .pill')).toHaveText(/^retrying 1/)

    const custom = page.locator('.tool-card').filter({ hasText: 'lookup_ticket' })
    await expect(custom).toHaveClass(/tool-awaiting/)
    await expect(custom.getByPlaceholder('Result to return to the agent')).toBeVisible()
    await expect(page.locator('.session-item .count-badge')).toHaveText('1')

    const axe = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']).analyze()
    expect(axe.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.nodes.map((n) => `${n.target.join(' ')} [${n.any[0]?.message ?? ''}]`).join(', ')}`)).toEqual([])
    await shot(page, info, '13-gallery-primary')
  })

  test('opens the subagent thread from the thread tree with only its events', async ({ page }, info) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions/${seeded.sessionId}`)
    const tabs = page.getByRole('navigation', { name: 'Threads' })
    await expect(tabs.getByRole('button')).toHaveCount(2)
    await tabs.getByRole('button', { name: /researcher/ }).click()
    expect(page.url()).toContain(`/threads/${seeded.threadId}`)
    await expect(page.locator('.msg-agent')).toHaveCount(1)
    await expect(page.locator('.msg-agent')).toContainText('failures ran between 23:00 and 00:00 UTC')
    await expect(page.locator('.tool-card')).toHaveCount(0)
    // A subagent's thread is read here; messages go to the session through the primary thread.
    await expect(page.getByLabel('Message', { exact: true })).toHaveCount(0)
    await shot(page, info, '14-gallery-subagent')
    await tabs.getByRole('button', { name: /primary/ }).click()
    await expect(page.locator('.tool-card')).toHaveCount(3)
  })

  test('archives, then deletes a session with its whole log after asking', async ({ page }) => {
    const asked: string[] = []
    page.on('dialog', (d) => {
      asked.push(d.message())
      void d.accept()
    })
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions/${seeded.sessionId}`)
    await page.getByRole('button', { name: 'Archive' }).click()
    await expect(page.locator('.thread-header .status')).toHaveText('Archived')
    await expect(page.getByLabel('Message', { exact: true })).toBeDisabled()
    await page.getByRole('button', { name: 'Delete' }).click()
    await expect(page).toHaveURL(/#\/sessions$/)
    expect(asked).toEqual([expect.stringMatching(/^Archive this session/), expect.stringMatching(/^Delete this session/)])
    const res = await fetch(`${serve.url}/v1/sessions/${seeded.sessionId}`, { headers: { authorization: `Bearer ${TOKEN}` } })
    expect(res.status).toBe(404)
  })
})
