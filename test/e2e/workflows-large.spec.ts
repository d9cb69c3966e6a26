import { expect, test } from '@playwright/test'
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startServe, type ServeProcess } from './support/serve'
import { shot } from './support/screenshots'

/**
 * A session whose lead ran a 1,000-agent workflow run (and a small one that timed out), seeded
 * into the log as the engine writes runs (support/seed-workflow-runs.ts), in Chromium against the
 * real `corral serve`: the run card folds the whole run, its grid keeps a few rows in the DOM and
 * scrolls to the last agent while drawing frames, the tree folds the 1,000 threads under the run;
 * the timed-out run reads its error, its failed and stopped agents. The figures (open time, grid
 * frame times, DOM rows) are measured in the page and written to test-results/e2e/workflows-large.json;
 * the test asserts behaviour, not timings (a shared 2-core machine).
 */

const TOKEN = 'e2e_wflarge_token_0123456789'
const AGENTS = Number(process.env.CORRAL_LARGE_RUN_AGENTS ?? 1000)
const ROOT = join(__dirname, '..', '..')

function quantile(sorted: number[], q: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] : NaN
}

test.describe.serial(`a ${AGENTS.toLocaleString('en')}-agent workflow run`, () => {
  let dataDir: string
  let serve: ServeProcess
  let seeded: { sessionId: string; events: number; ms: number }

  test.beforeAll(async () => {
    test.setTimeout(120_000)
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-wflarge-'))
    const out = execFileSync(join(ROOT, 'node_modules/.bin/tsx'), ['test/e2e/support/seed-workflow-runs.ts', dataDir, TOKEN, String(AGENTS)], { cwd: ROOT, encoding: 'utf8' })
    seeded = JSON.parse(out.trim().split('\n').pop()!)
    serve = await startServe({ dataDir, token: TOKEN })
  })

  test.afterAll(async () => {
    await serve?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test('folds the whole run into its card, keeps a few grid rows in the DOM and scrolls the grid to its last agent', async ({ page }, info) => {
    test.setTimeout(120_000)
    await page.emulateMedia({ colorScheme: 'dark' })
    await page.goto(`${serve.url}/?token=${TOKEN}#/agents`)
    await expect(page.locator('.sidebar-title', { hasText: 'Agents' })).toBeVisible()
    // From the navigation to the first frame where the newest run's card is drawn with its counts,
    // then, scrolling up as a reader does (older pages load), to the big run's card counting every agent done.
    const opens: number[] = []
    const reaches: number[] = []
    for (let i = 0; i < 3; i++) {
      await page.evaluate(() => (window.location.hash = '#/agents'))
      await expect(page.locator('.sidebar-title', { hasText: 'Agents' })).toBeVisible()
      const t = await page.evaluate(
        ({ id, done }) =>
          new Promise<{ open: number; reach: number }>((resolve, reject) => {
            const t0 = performance.now()
            let open = 0
            window.location.hash = `#/sessions/${id}`
            const counted = (name: string, text: string) => document.querySelector(`[aria-label="Workflow run ${name}"]`)?.querySelector('[data-count=done]')?.textContent === text
            const check = () => {
              if (!open && counted('slow checks', '1 done')) open = performance.now() - t0
              if (open) {
                if (counted('review every file', `${done} done`)) return resolve({ open, reach: performance.now() - t0 })
                const el = document.querySelector('.timeline') as HTMLElement | null
                if (el) el.scrollTop = 0
              }
              if (performance.now() - t0 > 60_000) reject(new Error(open ? 'the big card never counted every agent' : 'the newest card never showed'))
              else requestAnimationFrame(check)
            }
            requestAnimationFrame(check)
          }),
        { id: seeded.sessionId, done: AGENTS },
      )
      opens.push(t.open)
      reaches.push(t.reach)
    }
    const card = page.getByRole('region', { name: 'Workflow run review every file' })
    await card.scrollIntoViewIfNeeded()
    await expect(card.getByLabel('Run status')).toHaveText('Completed')
    await expect(card.locator('.run-count-started')).toHaveText(`of ${AGENTS} started`)
    const phases = card.getByRole('list', { name: 'Phases' }).locator('.run-phase')
    await expect(phases.nth(0)).toContainText(`${AGENTS - 1}/${AGENTS - 1} agents done`)
    await expect(phases.nth(1)).toContainText('1/1 agent done')
    const grid = card.getByRole('table', { name: 'Agents of review every file' })
    await expect(grid).toHaveAttribute('aria-rowcount', String(AGENTS + 1))
    const domRows = await grid.locator('.run-agent').count()
    expect(domRows).toBeLessThan(40)

    // Scroll the grid's pane to its end, 120 px a frame, recording every frame's duration.
    const scroll = await grid.locator('.run-grid-scroll').evaluate(
      (el) =>
        new Promise<{ frames: number[] }>((resolve) => {
          const frames: number[] = []
          let last = performance.now()
          const step = () => {
            const now = performance.now()
            frames.push(now - last)
            last = now
            el.scrollTop += 120
            if (el.scrollTop + el.clientHeight < el.scrollHeight - 1) requestAnimationFrame(step)
            else resolve({ frames: frames.slice(1) })
          }
          requestAnimationFrame(step)
        }),
    )
    await expect(grid.getByRole('button', { name: 'summary', exact: true })).toBeVisible()
    expect(await grid.locator('.run-agent').count()).toBeLessThan(40)
    await expect(grid.locator('.run-agent').filter({ hasText: 'summary' }).locator('.run-agent-cost')).toHaveText('$0.12')

    // The tree: the 1,000 threads under one collapsed row; expanded, the first 100 and a pointer to the card.
    const tree = page.getByRole('navigation', { name: 'Threads' })
    const group = tree.getByRole('button', { name: /review every file/ })
    await expect(group).toContainText(`workflow · ${AGENTS}/${AGENTS} done`)
    await expect(group).toHaveAttribute('aria-expanded', 'false')
    await group.click()
    await expect(tree.locator('.thread-node.depth-2')).toHaveCount(Math.min(100, AGENTS))
    if (AGENTS > 100) await expect(tree.locator('.thread-run-more')).toHaveText(`and ${AGENTS - 100} more in the run's card`)
    await shot(page, info, 'workflow-05-large')

    const o = [...opens].sort((a, b) => a - b)
    const f = [...scroll.frames].sort((a, b) => a - b)
    const figures = {
      agents: AGENTS,
      events: seeded.events,
      open: { runs: opens.map((x) => Math.round(x)), medianMs: Math.round(quantile(o, 0.5)), maxMs: Math.round(o[o.length - 1]) },
      scrolledUpToBigCardMs: reaches.map((x) => Math.round(x)),
      gridScroll: { frames: f.length, medianFrameMs: +quantile(f, 0.5).toFixed(1), p95FrameMs: +quantile(f, 0.95).toFixed(1), maxFrameMs: +f[f.length - 1].toFixed(1) },
      gridDomRows: domRows,
    }
    const dir = join(ROOT, 'test-results', 'e2e')
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, 'workflows-large.json'), JSON.stringify(figures, null, 2))
    await info.attach('workflows-large.json', { body: JSON.stringify(figures, null, 2), contentType: 'application/json' })
    console.log(`[workflows large] ${JSON.stringify(figures)}`)
  })

  test("reads a run that timed out: its error's type and message, its failed agent and the ones it stopped", async ({ page }, info) => {
    await page.emulateMedia({ colorScheme: 'dark' })
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions/${seeded.sessionId}`)
    const card = page.getByRole('region', { name: 'Workflow run slow checks' })
    await expect(card.getByLabel('Run status')).toHaveText('Error: timeout error')
    await expect(card.getByRole('status', { name: 'Run result' })).toContainText('Error: timeout error')
    await expect(card.getByRole('status', { name: 'Run result' })).toContainText('the run reached its lifetime of 60 s')
    const counter = card.getByRole('status', { name: 'Agents of the run' })
    await expect(counter.locator('[data-count=done]')).toHaveText('1 done')
    await expect(counter.locator('[data-count=failed]')).toHaveText('1 failed')
    await expect(counter.locator('[data-count=stopped]')).toHaveText('2 stopped')
    await expect(counter.locator('[data-count=working]')).toHaveText('0 working')
    const grid = card.getByRole('table', { name: 'Agents of slow checks' })
    await expect(grid.locator('.run-agent-failed')).toContainText('failed (retries exhausted)')
    await expect(grid.locator('.run-agent-stopped')).toHaveCount(2)
    // It returned nothing: no output section.
    await expect(card.locator('.run-output')).toHaveCount(0)
    await card.scrollIntoViewIfNeeded()
    await shot(page, info, 'workflow-06-timeout')
  })
})
