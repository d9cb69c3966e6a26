import { expect, test } from '@playwright/test'
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startServe, type ServeProcess } from './support/serve'

/**
 * A 100,000-event session in the renderer: it opens showing its latest turn, older events load
 * as the reader scrolls up, and the page keeps drawing frames while it does. The figures (open
 * time, frame times while scrolling) are measured in the page and written to
 * test-results/e2e/large-session.json; the test asserts behaviour, not timings (the figures are
 * a benchmark, reported, not a pass/fail line on a shared 2-core machine).
 */

const TOKEN = 'e2e_large_token_0123456789'
const EVENTS = Number(process.env.CORRAL_LARGE_EVENTS ?? 100_000)
const ROOT = join(__dirname, '..', '..')

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]
}

test.describe.serial(`a ${EVENTS.toLocaleString('en')}-event session`, () => {
  let dataDir: string
  let serve: ServeProcess
  let seeded: { sessionId: string; events: number; lastTurn: number; ms: number }

  test.beforeAll(async () => {
    test.setTimeout(120_000)
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-large-'))
    const out = execFileSync(join(ROOT, 'node_modules/.bin/tsx'), ['test/e2e/support/seed-large-session.ts', dataDir, TOKEN, String(EVENTS)], { cwd: ROOT, encoding: 'utf8' })
    seeded = JSON.parse(out.trim().split('\n').pop()!)
    serve = await startServe({ dataDir, token: TOKEN })
  })

  test.afterAll(async () => {
    await serve?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test('opens at its latest turn and scrolls back through older events while drawing frames', async ({ page }, info) => {
    test.setTimeout(120_000)
    await page.goto(`${serve.url}/?token=${TOKEN}#/agents`)
    await expect(page.locator('.sidebar-title', { hasText: 'Agents' })).toBeVisible()
    const lastText = `Step ${seeded.lastTurn} done.`

    // Open the session several times; each time measure, in the page, from the navigation to the
    // first frame where its last message is on screen.
    const opens: number[] = []
    for (let i = 0; i < 7; i++) {
      await page.evaluate(() => (window.location.hash = '#/agents'))
      await expect(page.locator('.sidebar-title', { hasText: 'Agents' })).toBeVisible()
      const ms = await page.evaluate(
        ({ id, text }) =>
          new Promise<number>((resolve, reject) => {
            const t0 = performance.now()
            window.location.hash = `#/sessions/${id}`
            const deadline = t0 + 20_000
            const check = () => {
              const found = [...document.querySelectorAll('.msg-agent')].some((el) => el.textContent?.includes(text) && el.getBoundingClientRect().height > 0)
              if (found) resolve(performance.now() - t0)
              else if (performance.now() > deadline) reject(new Error('the last message never appeared'))
              else requestAnimationFrame(check)
            }
            requestAnimationFrame(check)
          }),
        { id: seeded.sessionId, text: lastText },
      )
      opens.push(ms)
    }
    await expect(page.locator('.msg-agent').filter({ hasText: lastText })).toBeVisible()
    // Virtualized: a handful of rows in the DOM, not the whole session.
    const rows = await page.locator('.timeline-row').count()
    expect(rows).toBeLessThan(80)

    // Scroll up for 600 frames, 300 px a frame, recording every frame's duration; older pages
    // load and are put in front on the way.
    const scroll = await page.evaluate(
      () =>
        new Promise<{ frames: number[]; loadedRows: number; scrolledPx: number }>((resolve) => {
          const el = document.querySelector('.timeline') as HTMLElement
          const frames: number[] = []
          let last = performance.now()
          let scrolled = 0
          let count = 0
          const step = () => {
            const now = performance.now()
            frames.push(now - last)
            last = now
            const before = el.scrollTop
            el.scrollTop = Math.max(0, el.scrollTop - 300)
            scrolled += before - el.scrollTop
            if (++count < 600) requestAnimationFrame(step)
            else resolve({ frames: frames.slice(1), loadedRows: Number((el.firstElementChild as HTMLElement).style.height.replace('px', '')), scrolledPx: scrolled })
          }
          requestAnimationFrame(step)
        }),
    )
    const o = [...opens].sort((a, b) => a - b)
    const f = [...scroll.frames].sort((a, b) => a - b)
    const figures = {
      events: seeded.events,
      seedMs: seeded.ms,
      open: { runs: opens.map((x) => Math.round(x)), medianMs: Math.round(quantile(o, 0.5)), p95Ms: Math.round(quantile(o, 0.95)), maxMs: Math.round(o[o.length - 1]) },
      scroll: {
        frames: f.length,
        medianFrameMs: +quantile(f, 0.5).toFixed(1),
        p95FrameMs: +quantile(f, 0.95).toFixed(1),
        maxFrameMs: +f[f.length - 1].toFixed(1),
        framesOver50ms: f.filter((x) => x > 50).length,
        scrolledPx: Math.round(scroll.scrolledPx),
      },
      domRows: rows,
    }
    const dir = join(ROOT, 'test-results', 'e2e')
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, 'large-session.json'), JSON.stringify(figures, null, 2))
    await info.attach('large-session.json', { body: JSON.stringify(figures, null, 2), contentType: 'application/json' })
    console.log(`[large session] ${JSON.stringify(figures)}`)
    // It really moved back through history, past the first page it opened with.
    expect(scroll.scrolledPx).toBeGreaterThan(100_000)
    await expect(page.locator('.msg-user').first()).toBeVisible()
    const stepNumbers = await page.locator('.msg-user').allTextContents()
    const oldest = Math.min(...stepNumbers.map((t) => Number(/Step (\d+)/.exec(t)?.[1] ?? Infinity)))
    console.log(`[large session] oldest turn on screen after scrolling: ${oldest} of ${seeded.lastTurn}`)
    // The first page holds ~17 turns: 40 turns back means older pages were read and put in front.
    expect(oldest).toBeLessThan(seeded.lastTurn - 40)

    mkdirSync(join(ROOT, 'test-results', 'screenshots'), { recursive: true })
    await page.screenshot({ path: join(ROOT, 'test-results', 'screenshots', '12-large-session.png'), animations: 'disabled' })
  })
})
