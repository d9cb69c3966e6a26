import { expect, test, type Page } from '@playwright/test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { callTool, say, ScriptedModelServer, toolResultsOf, type RecordedRequest, type ScriptStep } from '../support/model-server'
import { startServe, type ServeProcess } from './support/serve'
import { shot } from './support/screenshots'

/**
 * What a person sees while work runs, in Chromium against the real `corral serve`, a real
 * bubblewrap sandbox and the scripted model: a bash call's output appears line by line while it
 * runs, with its elapsed time; finished cards fold to one line; an interrupted call says so; the
 * header's buttons do not move a destructive one under the pointer.
 */

const TOKEN = 'e2e_token_live_tools_0123456789'
const COUNT = 'for i in 1 2 3 4 5; do echo $i; sleep 1; done'
const WARN = 'echo compiling; sleep 1; echo "warning: unused variable x" >&2; sleep 1; echo linked'

function lastText(req: RecordedRequest): string {
  const last = req.body.messages[req.body.messages.length - 1]
  if (typeof last.content === 'string') return last.content
  const texts = (last.content as { type: string; text?: string }[]).filter((b) => b.type === 'text').map((b) => b.text ?? '')
  return texts[texts.length - 1] ?? ''
}

function respond(req: RecordedRequest): ScriptStep {
  const text = lastText(req)
  if (/twice/i.test(text) || toolResultsOf(req).some((r) => r.text.includes('twice'))) {
    // Two calls of the same command, one per turn step.
    return toolResultsOf(req).length < 2 ? callTool('bash', { command: 'echo twice' }) : say('Twice done.')
  }
  if (toolResultsOf(req).length > 0) return say('Finished.')
  if (/count/i.test(text)) return callTool('bash', { command: COUNT }, 'Counting to five.')
  if (/compile/i.test(text)) return callTool('bash', { command: WARN }, 'Compiling.')
  if (/sleep/i.test(text)) return callTool('bash', { command: 'echo started; sleep 60' }, 'Sleeping.')
  return say('OK.')
}


test.describe.serial('live tool calls', () => {
  let dataDir: string
  let model: ScriptedModelServer
  let serve: ServeProcess
  let agentId: string
  let askerId: string
  let envId: string

  const api = <T = Record<string, any>>(method: string, path: string, body?: unknown) => serve.api<T>(method, path, body)
  const openSession = async (page: Page, title: string, agent = agentId): Promise<string> => {
    const session = await api('POST', '/v1/sessions', { agent, environment_id: envId, title })
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions/${session.id}`)
    await expect(page.getByRole('heading', { name: title })).toBeVisible()
    return session.id
  }
  const send = async (page: Page, text: string) => {
    await page.getByLabel('Message', { exact: true }).fill(text)
    await page.getByLabel('Message', { exact: true }).press('Enter')
  }

  test.beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-live-'))
    model = await ScriptedModelServer.start(respond)
    serve = await startServe({ dataDir, token: TOKEN, modelUrl: model.url })
    agentId = (await api('POST', '/v1/agents', { name: 'Counter', model: 'claude-sonnet-4-6', tools: [{ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_allow' } } }] })).id
    askerId = (await api('POST', '/v1/agents', { name: 'Asker', model: 'claude-sonnet-4-6', tools: [{ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_ask' } } }] })).id
    envId = (await api('POST', '/v1/environments', { name: 'bwrap', config: { type: 'cloud', corral: { backend: 'bubblewrap' } } })).id
  })

  test.afterAll(async () => {
    await serve?.stop()
    await model?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test("a running bash call shows its output line by line before it ends, with its elapsed time, then folds to one line with exit and duration", async ({ page }, info) => {
    await openSession(page, 'Counting')
    const card = page.getByRole('article', { name: /Tool call bash/ })
    // Record in the page every state of the card the DOM goes through (no sampling to miss one).
    await page.evaluate(() => {
      const w = window as unknown as { __seen: { lines: string; state: string; elapsed: string }[] }
      w.__seen = []
      const record = () => {
        const el = [...document.querySelectorAll('article.tool-card')].find((a) => a.getAttribute('aria-label')?.startsWith('Tool call bash'))
        if (!el) return
        const out = (el.querySelector('.terminal-out') as HTMLElement | null)?.innerText.trim() ?? ''
        w.__seen.push({ lines: out.split('\n').filter(Boolean).join(','), state: el.getAttribute('aria-label') ?? '', elapsed: el.querySelector('.tool-elapsed')?.textContent ?? '' })
      }
      new MutationObserver(record).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true, attributeFilter: ['aria-label'] })
    })
    await send(page, 'count to five')
    // The usage strip follows a model request as it ends (20 output tokens), not the list's next poll.
    const outputTokens = page.getByLabel('Usage').locator('div', { has: page.locator('dt', { hasText: 'Output' }) }).locator('dd')
    await expect(card).toBeVisible({ timeout: 30_000 })
    await expect(outputTokens).toHaveText('20', { timeout: 700 })
    // A picture of the card mid-run (the proof is the record above, which misses no state).
    await expect.poll(async () => (await card.getAttribute('aria-label'))?.endsWith('Done') || (await card.locator('.terminal-line').count()) >= 2, { timeout: 30_000 }).toBe(true)
    if ((await card.getAttribute('aria-label'))?.endsWith('Running')) {
      await expect(card.locator('.tool-elapsed')).toHaveText(/^\d+(\.\d)? s$/)
      await shot(page, info, 'live-01-bash-running')
    }
    await expect(card).toHaveAttribute('aria-label', 'Tool call bash: Done', { timeout: 30_000 })
    const seen = await page.evaluate(() => (window as unknown as { __seen: { lines: string; state: string; elapsed: string }[] }).__seen)
    const running = seen.filter((s) => s.state.endsWith('Running'))
    const partials = [...new Set(running.map((s) => s.lines))]
    // The lines appeared one at a time while the call was still running.
    // (A saturated machine may deliver two lines in one frame: at least three steps, in order.)
    const prefixes = ['', '1', '1,2', '1,2,3', '1,2,3,4', '1,2,3,4,5']
    expect(partials.every((p) => prefixes.includes(p))).toBe(true)
    expect(partials.filter((p) => p !== '' && p !== '1,2,3,4,5').length).toBeGreaterThanOrEqual(3)
    // ...each with the time the call has been running.
    expect(running.filter((r) => r.lines !== '').every((r) => /^\d+(\.\d)? s$/.test(r.elapsed))).toBe(true)
    expect(seen[seen.length - 1].state).toMatch(/Done/)
    // Finished: one line with the command, exit and duration; the output opens on a click.
    await expect(card.locator('.tool-summary')).toHaveText(COUNT)
    await expect(card.getByText('exit 0', { exact: true })).toBeVisible()
    await expect(card.locator('.tool-duration')).toHaveText(/^[4-9]\.\d s$/)
    await expect(card.locator('.tool-body')).toHaveCount(0)
    await expect(page.locator('.divider-end_turn')).toBeVisible()
    await expect(outputTokens).toHaveText('40', { timeout: 700 })
    await card.getByRole('button', { expanded: false }).click()
    expect(await card.locator('.terminal-out').innerText()).toBe('1\n2\n3\n4\n5')
    await shot(page, info, 'live-02-bash-done')
  })

  test("a bash call's stderr is told apart from its stdout, live while it runs and on the finished card", async ({ page }, info) => {
    await openSession(page, 'Compiling')
    await send(page, 'compile it')
    const card = page.getByRole('article', { name: /Tool call bash/ })
    // While it runs: the warning arrives marked as stderr, the stdout line before it is not.
    const liveErr = card.locator('.terminal-out [data-stream="stderr"]')
    await expect(liveErr).toHaveText('warning: unused variable x', { timeout: 30_000 })
    if ((await card.getAttribute('aria-label'))?.endsWith('Running')) {
      await expect(card.locator('.terminal-line').first()).toHaveText('compiling')
      await expect(card.locator('.terminal-line').first().locator('[data-stream="stderr"]')).toHaveCount(0)
      await shot(page, info, 'live-09-stderr-running')
    }
    await expect(card).toHaveAttribute('aria-label', 'Tool call bash: Done', { timeout: 30_000 })
    await card.getByRole('button', { expanded: false }).click()
    expect(await card.locator('.terminal-out').innerText()).toBe('compiling\nwarning: unused variable x\nlinked')
    await expect(card.locator('.terminal-out [data-stream="stderr"]')).toHaveText('warning: unused variable x')
    await expect(card.locator('.terminal-line-stderr')).toHaveCount(1)
    await expect(card.locator('.terminal-legend')).toContainText('stderr')
    // Drawn apart: the stderr line's colour is not the stdout lines'.
    const colours = await card.locator('.terminal-line').evaluateAll((lines) => lines.map((l) => getComputedStyle((l.querySelector('span[data-stream]') ?? l) as Element).color))
    expect(colours[1]).not.toBe(colours[0])
    expect(colours[2]).toBe(colours[0])
    // The model read plain text, both streams, no marks.
    const results = model.requests.flatMap((r) => toolResultsOf(r)).filter((r) => r.text.includes('unused variable'))
    expect(results[0]?.text).toBe('compiling\nwarning: unused variable x\nlinked')
    await shot(page, info, 'live-10-stderr-done')
  })

  test('an interrupted call reads Interrupted, without an exit code or a path inside the sandbox, and Delete does not appear under the pointer', async ({ page }, info) => {
    await openSession(page, 'Sleeping')
    await send(page, 'sleep a minute')
    const card = page.getByRole('article', { name: /Tool call bash/ })
    await expect(card.locator('.terminal-out')).toHaveText('started')
    const interrupt = page.getByRole('button', { name: 'Interrupt' })
    const box = (await interrupt.boundingBox())!
    const x = box.x + box.width / 2
    const y = box.y + box.height / 2
    await page.mouse.move(x, y)
    await page.mouse.down()
    await page.mouse.up()
    await expect(card).toHaveAttribute('aria-label', 'Tool call bash: Interrupted')
    await expect(page.getByRole('button', { name: 'Delete' })).toBeVisible()
    // What is under the pointer now is not Delete (nor any other button).
    const under = await page.evaluate(([px, py]) => {
      const el = document.elementFromPoint(px, py)
      return el?.closest('button')?.textContent?.trim() ?? ''
    }, [x, y])
    expect(under).not.toMatch(/Delete|Archive/)
    await expect(card.getByText(/exit \d+/)).toHaveCount(0)
    await card.getByRole('button', { expanded: false }).click()
    expect(await card.locator('.terminal-out').innerText()).toBe('started')
    await expect(card).not.toContainText('/tmp')
    await expect(card).not.toContainText('exit code')
    await shot(page, info, 'live-03-interrupted')
  })

  test('"Allow this command for this session" runs the same command again without asking; the deny box in the queue is one row high', async ({ page }, info) => {
    await openSession(page, 'Twice', askerId)
    await send(page, 'run it twice')
    const cards = page.getByRole('article', { name: /Tool call bash/ })
    await expect(cards.first()).toHaveAttribute('aria-label', 'Tool call bash: Waiting for you')
    // The queue drawer: Deny opens a message box of its own height, not the drawer's.
    await page.getByLabel('Message', { exact: true }).press('Escape')
    await page.keyboard.press('c')
    const drawer = page.getByRole('complementary', { name: 'Confirmation queue' })
    await expect(drawer).toBeVisible()
    await drawer.getByRole('button', { name: /^Deny/ }).click()
    const form = drawer.locator('form.confirm-deny')
    await expect(form).toBeVisible()
    const formBox = (await form.boundingBox())!
    const drawerBox = (await drawer.boundingBox())!
    expect(formBox.height).toBeLessThan(60)
    expect(formBox.height).toBeLessThan(drawerBox.height / 4)
    await shot(page, info, 'live-04-queue-deny-box')
    await page.keyboard.press('Escape')
    await page.keyboard.press('Escape')
    await expect(drawer).toHaveCount(0)

    await cards.first().getByRole('button', { name: 'Allow this command for this session' }).click()
    await expect(cards).toHaveCount(2)
    const second = cards.nth(1)
    await expect(second).toHaveAttribute('aria-label', 'Tool call bash: Done')
    await expect(second.getByText('allowed for session')).toBeVisible()
    await expect(page.locator('.msg-agent').filter({ hasText: 'Twice done.' })).toBeVisible()
    await shot(page, info, 'live-05-allowed-for-session')
  })

  test('at 900 px wide the new-session "+" is fully visible, and a message is shown as typed', async ({ page }, info) => {
    await page.setViewportSize({ width: 900, height: 700 })
    await openSession(page, 'Narrow')
    const plus = page.getByRole('button', { name: 'New session' })
    await expect(plus).toBeVisible()
    const box = (await plus.boundingBox())!
    const sidebar = (await page.getByRole('complementary', { name: 'Sessions' }).boundingBox())!
    expect(box.x).toBeGreaterThanOrEqual(sidebar.x)
    expect(box.x + box.width).toBeLessThanOrEqual(sidebar.x + sidebar.width)
    expect(box.width).toBeGreaterThanOrEqual(28)
    // Nothing covers or clips it: a point near each corner (inside the rounded border) is the button.
    const corners = await plus.evaluate((el) => {
      const r = el.getBoundingClientRect()
      const pts = [
        [r.left + 4, r.top + 4],
        [r.right - 4, r.top + 4],
        [r.left + 4, r.bottom - 4],
        [r.right - 4, r.bottom - 4],
      ]
      return pts.map(([x, y]) => el.contains(document.elementFromPoint(x, y)))
    })
    expect(corners).toEqual([true, true, true, true])

    const typed = 'first line\nsecond line with __init__ and *stars*'
    await page.getByLabel('Message', { exact: true }).fill(typed)
    await page.getByLabel('Message', { exact: true }).press('Enter')
    const bubble = page.locator('.msg-user .msg-text').last()
    await expect(bubble).toContainText('__init__')
    expect(await bubble.innerText()).toBe(typed)
    await expect(page.locator('.msg-user strong, .msg-user em')).toHaveCount(0)
    await shot(page, info, 'live-06-narrow')
  })

  test("the sessions search finds what was said in a session's messages, not only titles, and opens it", async ({ page }, info) => {
    await openSession(page, 'Elsewhere')
    await page.getByLabel('Search sessions').fill('count to fi')
    const hit = page.locator('.session-hit').filter({ hasText: 'You: count to five' })
    await expect(hit).toBeVisible()
    await expect(hit.locator('.session-title')).toHaveText('Counting')
    await shot(page, info, 'live-07-message-search')
    await hit.click()
    await expect(page.getByRole('heading', { name: 'Counting' })).toBeVisible()
    // Find in the session: Ctrl+F opens the bar; each match is brought into the virtualized view.
    await page.locator('.msg-agent').first().waitFor()
    await page.keyboard.press('Control+f')
    const find = page.getByRole('search', { name: 'Find in session' })
    await find.getByLabel('Find in session').fill('counting to')
    await expect(find.getByRole('status')).toHaveText('1 of 1')
    await expect(page.locator('.find-current')).toContainText('Counting to five.')
    await find.getByLabel('Find in session').fill('five')
    await expect(find.getByRole('status')).toHaveText(/^1 of [2-9]$/)
    await find.getByLabel('Find in session').press('Enter')
    await expect(find.getByRole('status')).toHaveText(/^2 of [2-9]$/)
    await expect(page.locator('.find-current')).toBeVisible()
    await shot(page, info, 'live-08-find-in-session')
    await find.getByLabel('Find in session').press('Escape')
    await expect(find).toHaveCount(0)
  })
})
