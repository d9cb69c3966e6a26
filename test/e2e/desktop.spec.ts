import { expect, test, type Page } from '@playwright/test'
import AxeBuilder from '@axe-core/playwright'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ScriptedModelServer, type RecordedRequest, type ScriptStep } from '../support/model-server'
import { startServe, type ServeProcess } from './support/serve'
import { shot } from './support/screenshots'
import { openSection } from './support/navigate'

/**
 * The whole loop a person goes through, in Chromium against the real `corral serve` and the
 * scripted model: sign in, make an agent, start a session and watch the reply stream in, approve
 * one tool call and deny another, interrupt a turn, restart the server and find the history.
 */

const TOKEN = 'e2e_token_0123456789abcdef'

const HELLO = [
  'Hello! I am **Corral**, running on your machine.',
  '',
  'Here is a snippet:',
  '',
  '```ts',
  'export function greet(name: string): string {',
  '  return `hello, ${name}` // friendly',
  '}',
  '```',
  '',
  '- streamed as markdown',
  '- with highlighted code',
].join('\n')

function lastUserText(req: RecordedRequest): { text: string; toolResults: number } {
  const last = req.body.messages[req.body.messages.length - 1]
  if (typeof last.content === 'string') return { text: last.content, toolResults: 0 }
  const blocks = last.content as { type: string; text?: string }[]
  // Consecutive user turns (one interrupted before any reply) arrive as one message: the newest text decides.
  const texts = blocks.filter((b) => b.type === 'text').map((b) => b.text ?? '')
  return { text: texts[texts.length - 1] ?? '', toolResults: blocks.filter((b) => b.type === 'tool_result').length }
}

/** Holds the greeting back until the test has the thread open, so the streaming is seen live. */
let helloGate: Promise<void> = Promise.resolve()

async function respond(req: RecordedRequest): Promise<ScriptStep> {
  const { text, toolResults } = lastUserText(req)
  if (toolResults === 0 && /hello/i.test(text)) await helloGate
  const usage = { input_tokens: 1200, output_tokens: 180, cache_read_input_tokens: 400 }
  if (toolResults > 0) return { kind: 'message', blocks: [{ type: 'text', text: 'Both calls are settled: one ran and one was denied.' }], usage, chunkDelayMs: 10 }
  if (/hello/i.test(text)) return { kind: 'message', blocks: [{ type: 'thinking', thinking: 'The user wants a greeting.' }, { type: 'text', text: HELLO }], usage, chunkDelayMs: 25, chunkSize: 6 }
  if (/two tools/i.test(text)) {
    return {
      kind: 'message',
      blocks: [
        { type: 'text', text: 'I will run a command and write a file.' },
        { type: 'tool_use', name: 'bash', input: { command: 'ls -la /workspace && echo done' } },
        { type: 'tool_use', name: 'write', input: { file_path: '/workspace/notes.md', content: '# Notes\n\n- first\n- second\n' } },
      ],
      stopReason: 'tool_use',
      usage,
    }
  }
  if (/ticket/i.test(text)) return { kind: 'message', blocks: [{ type: 'tool_use', name: 'lookup_ticket', input: { ticket: 'QA-142' } }], stopReason: 'tool_use', usage }
  if (/long task/i.test(text)) return { kind: 'stall', blocks: [{ type: 'text', text: 'Starting a very long piece of work that will take a while' }], afterEvents: 5 }
  return { kind: 'message', blocks: [{ type: 'text', text: 'OK.' }], usage }
}

/** Signs this browser context in (each test has a fresh one) and opens `hash` ('#/sessions/…'). */
async function open(page: Page, base: string, hash = ''): Promise<void> {
  // The 303 that strips the token has no fragment, so the browser keeps this one.
  await page.goto(`${base}/?token=${TOKEN}${hash}`)
}


async function expectNoSeriousA11yViolations(page: Page, view: string): Promise<void> {
  const result = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']).analyze()
  const serious = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
  expect(serious.map((v) => `${view}: ${v.id} (${v.impact}) ${v.help} — ${v.nodes.slice(0, 3).map((n) => `${n.target.join(' ')} [${n.any[0]?.message ?? ''}]`).join(', ')}`)).toEqual([])
}

test.describe.serial('desktop renderer against corral serve', () => {
  let dataDir: string
  let model: ScriptedModelServer
  let serve: ServeProcess
  let sessionUrl: string

  test.beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-'))
    model = await ScriptedModelServer.start(respond)
    serve = await startServe({ dataDir, token: TOKEN, modelUrl: model.url })
  })

  test.afterAll(async () => {
    await serve?.stop()
    await model?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test('opening the address with ?token= signs the browser in with an HttpOnly cookie and strips the token', async ({ page, context }, info) => {
    const res = await page.goto(`${serve.url}/?token=${TOKEN}`)
    expect(new URL(page.url()).search).toBe('')
    expect(res?.headers()['content-security-policy']).toContain("script-src 'self'")
    const cookie = (await context.cookies()).find((c) => c.name === 'corral_token')
    expect(cookie?.httpOnly).toBe(true)
    expect(cookie?.sameSite).toBe('Strict')
    await expect(page.getByRole('navigation', { name: 'Sections' })).toBeVisible()
    expect(await page.evaluate(() => document.cookie)).not.toContain('corral_token')
    // First start: the sessions page says what to do first.
    await expect(page.getByText('Create an agent')).toBeVisible()
    await shot(page, info, '00-first-run')
  })

  test('a wrong token is refused and the sign-in form is shown without a cookie', async ({ browser }, info) => {
    const ctx = await browser.newContext()
    const page = await ctx.newPage()
    const res = await page.goto(`${serve.url}/?token=wrong`)
    expect(res?.status()).toBe(401)
    await page.goto(serve.url)
    await expect(page.getByRole('heading', { name: 'Sign in to this Corral' })).toBeVisible()
    await shot(page, info, '00-sign-in')
    await page.getByLabel('API token').fill(TOKEN)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await expect(page.getByRole('navigation', { name: 'Sections' })).toBeVisible()
    await ctx.close()
  })

  test('creates an agent, starts a session and watches the reply stream in', async ({ page }, info) => {
    await page.goto(`${serve.url}/?token=${TOKEN}`)
    await openSection(page, 'Agents')
    await page.getByRole('button', { name: 'New', exact: true }).click()
    await page.getByLabel('Name').fill('Helper')
    await page.getByLabel('Model').fill('claude-sonnet-4-5')
    await page.getByLabel('System prompt').fill('You help with small tasks.')
    await expect(page.getByLabel('bash permission')).toHaveValue('always_ask')
    await page.getByRole('button', { name: 'Create agent' }).click()
    await expect(page.getByRole('heading', { name: 'Helper' })).toBeVisible()
    await expect(page.getByRole('button', { name: /^v1/ })).toBeVisible()
    await shot(page, info, '01-agent-editor')

    await openSection(page, 'Sessions')
    await page.keyboard.press('n')
    const dialog = page.getByRole('dialog', { name: 'New session' })
    await expect(dialog).toBeVisible()
    await dialog.getByRole('button', { name: 'Create a local sandbox environment' }).click()
    await expect(dialog.getByLabel('Environment')).not.toHaveValue('')
    await dialog.getByLabel('First message').fill('Say hello, please')
    let releaseHello!: () => void
    helloGate = new Promise((resolve) => (releaseHello = resolve))
    await dialog.getByRole('button', { name: 'Start session' }).click()
    await expect(page.locator('.msg-user')).toContainText('Say hello, please')
    releaseHello()

    // The reply streams: a streaming message appears before the stored one replaces it.
    await expect(page.locator('.msg-agent.streaming')).toBeVisible()
    await shot(page, info, '02-streaming')
    const reply = page.locator('.msg-agent').filter({ hasText: 'running on your machine' })
    await expect(reply).toBeVisible()
    await expect(page.locator('.msg-agent.streaming')).toHaveCount(0)
    await expect(reply.locator('.code-block .tok-keyword').first()).toHaveText('export')
    await expect(page.getByRole('button', { name: 'Thought' })).toBeVisible()
    await expect(page.locator('.thread-header .status')).toHaveText('Idle')
    await expect(page.locator('.usage dd').first()).toHaveText('1.2k')
    sessionUrl = page.url()
    await shot(page, info, '03-reply')
  })

  test('approves one tool call and denies another from the confirmation queue', async ({ page }, info) => {
    await open(page, serve.url, new URL(sessionUrl).hash)
    await page.getByLabel('Message', { exact: true }).fill('Now use two tools')
    await page.keyboard.press('Enter')
    const cards = page.locator('.tool-card.tool-awaiting')
    await expect(cards).toHaveCount(2)
    await expect(page.getByRole('button', { name: 'Confirmation queue: 2 waiting' })).toBeVisible()
    await expect(page.locator('.session-item.selected .count-badge')).toHaveText('2')
    await expect(page.locator('.diff-add').first()).toBeVisible()
    await shot(page, info, '04-awaiting-confirmation')

    await page.keyboard.press('Escape') // leave the composer
    await page.keyboard.press('c')
    const drawer = page.getByRole('complementary', { name: 'Confirmation queue' })
    await expect(drawer).toBeVisible()
    await expect(drawer.locator('.queue-item')).toHaveCount(2)
    await shot(page, info, '05-queue')
    await expect(drawer.locator('.queue-item.selected .queue-tool')).toHaveText('bash')
    await page.keyboard.press('a')
    await expect(drawer.locator('.queue-item')).toHaveCount(1)
    await expect(drawer.locator('.queue-item.selected .queue-tool')).toHaveText('write')
    await page.keyboard.press('d')
    await drawer.getByLabel('Message to the agent').fill('not in this folder')
    await page.keyboard.press('Enter')
    await expect(drawer.getByRole('heading', { name: 'All clear' })).toBeVisible()
    await page.keyboard.press('Escape')

    await expect(page.locator('.tool-card.tool-denied')).toContainText('Denied: not in this folder')
    const bash = page.locator('.tool-card').filter({ hasText: 'ls -la /workspace' })
    // Settled, the card folds to one line with its exit code; a click opens the terminal.
    await expect(bash.getByText('exit 0', { exact: true })).toBeVisible()
    await expect(bash.locator('.terminal')).toHaveCount(0)
    await bash.getByRole('button', { expanded: false }).click()
    await expect(bash.locator('.terminal')).toBeVisible()
    await expect(bash).not.toHaveClass(/tool-awaiting/)
    await expect(page.locator('.msg-agent').filter({ hasText: 'Both calls are settled' })).toBeVisible()
    await shot(page, info, '06-after-confirmations')
  })

  test('interrupts a running turn', async ({ page }, info) => {
    await open(page, serve.url, new URL(sessionUrl).hash)
    await page.getByLabel('Message', { exact: true }).fill('Start a long task')
    await page.keyboard.press('Enter')
    await expect(page.locator('.thread-header .status')).toHaveText('Running')
    // The list row follows the open thread's live stream at once, not at its next poll (2.5 s).
    await expect(page.locator('.session-item.selected .status')).toHaveText('Running', { timeout: 250 })
    await expect(page.locator('.msg-agent.streaming')).toContainText('Starting a very long')
    await shot(page, info, '07-running')
    await page.getByRole('button', { name: 'Interrupt' }).click()
    await expect(page.locator('.divider-interrupt')).toBeVisible()
    await expect(page.locator('.thread-header .status')).toHaveText('Idle')
    await expect(page.locator('.session-item.selected .status')).toHaveText('Idle', { timeout: 250 })
    await expect(page.getByRole('button', { name: 'Interrupt' })).toHaveCount(0)
  })

  test('the main views have no serious accessibility violations, in both themes', async ({ page }, info) => {
    await page.emulateMedia({ colorScheme: 'dark' })
    await open(page, serve.url, new URL(sessionUrl).hash)
    await expect(page.locator('.msg-agent').first()).toBeVisible()
    await expect(page.locator('html')).toHaveAttribute('data-theme', 'dark')
    await expectNoSeriousA11yViolations(page, 'thread (dark)')
    await shot(page, info, '08-thread-dark')
    await page.getByRole('button', { name: 'Switch to the light theme' }).click()
    await expect(page.locator('html')).toHaveAttribute('data-theme', 'light')
    await expectNoSeriousA11yViolations(page, 'thread (light)')
    await shot(page, info, '08-thread-light')
    await page.keyboard.press('c')
    await expectNoSeriousA11yViolations(page, 'confirmation queue')
    await page.keyboard.press('Escape')
    await page.getByRole('button', { name: 'Switch to the dark theme' }).click()
    for (const [name, heading] of [
      ['Agents', 'Helper'],
      ['Environments', 'Local sandbox'],
      ['Settings', 'Settings'],
    ] as const) {
      await openSection(page, name)
      if (name === 'Agents') await page.getByRole('button', { name: /Helper/ }).click()
      if (name === 'Environments') await page.getByRole('button', { name: /Local sandbox/ }).click()
      await expect(page.getByRole('heading', { name: heading }).first()).toBeVisible()
      await expectNoSeriousA11yViolations(page, name)
      await shot(page, info, `09-${name.toLowerCase()}`)
    }
    await openSection(page, 'Sessions')
    await page.keyboard.press('n')
    const dialog = page.getByRole('dialog', { name: 'New session' })
    await expect(dialog).toBeVisible()
    await dialog.getByRole('button', { name: 'Repository' }).click()
    await expect(dialog.getByLabel('Repository URL')).toBeVisible()
    await expectNoSeriousA11yViolations(page, 'new session dialog')
    await shot(page, info, '10-new-session')
  })

  test('after a restart of the server the open page reconnects and the whole history is there', async ({ page }, info) => {
    // Tall enough that the virtualized timeline renders every row of this short session.
    await page.setViewportSize({ width: 1360, height: 4000 })
    const hash = new URL(sessionUrl).hash
    await open(page, serve.url, hash)
    await expect(page.locator('.msg-user')).toHaveCount(3)
    const port = Number(new URL(serve.url).port)

    await serve.stop()
    await expect(page.getByText('Corral is not reachable — retrying…')).toBeVisible()
    serve = await startServe({ dataDir, token: TOKEN, modelUrl: model.url, port })
    await expect(page.getByText('Corral is not reachable — retrying…')).toHaveCount(0, { timeout: 20_000 })

    // A fresh load reads everything back from the log.
    await page.reload()
    await expect(page.locator('.msg-user')).toHaveCount(3)
    await expect(page.locator('.msg-agent').filter({ hasText: 'running on your machine' })).toBeVisible()
    await expect(page.locator('.tool-card')).toHaveCount(2)
    await expect(page.locator('.tool-card.tool-denied')).toContainText('not in this folder')
    await expect(page.locator('.divider-interrupt')).toBeVisible()
    await expect(page.locator('.session-item')).toHaveCount(1)
    await shot(page, info, '11-after-restart')
  })

  test('an open thread picks its live stream back up after the server restarts', async ({ page }) => {
    await open(page, serve.url, new URL(sessionUrl).hash)
    await expect(page.locator('.msg-user')).not.toHaveCount(0)
    const port = Number(new URL(serve.url).port)
    await serve.stop()
    await expect(page.getByRole('status').filter({ hasText: 'Reconnecting to the live stream' })).toBeVisible()
    serve = await startServe({ dataDir, token: TOKEN, modelUrl: model.url, port })
    await expect(page.getByRole('status').filter({ hasText: 'Reconnecting to the live stream' })).toHaveCount(0, { timeout: 20_000 })
    // Another client sends a message; the reply streams into the page that never reloaded.
    const sessionId = new URL(sessionUrl).hash.split('/')[2]
    await fetch(`${serve.url}/v1/sessions/${sessionId}/events`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ events: [{ type: 'user.message', content: [{ type: 'text', text: 'are you still there?' }] }] }),
    })
    await expect(page.locator('.msg-user').filter({ hasText: 'are you still there?' })).toBeVisible()
    await expect(page.locator('.msg-agent').last()).toContainText('OK.')
    await expect(page.locator('.thread-header .status')).toHaveText('Idle')
  })

  test('a confirmation that arrives while the window is in the background raises a desktop notification', async ({ page, context }) => {
    await context.grantPermissions(['notifications'])
    // Record notifications instead of showing them, and say the window has no focus.
    await page.addInitScript(() => {
      const shown: { title: string; body?: string }[] = []
      ;(window as unknown as { __shown: typeof shown }).__shown = shown
      class RecordingNotification {
        static permission = 'granted'
        static requestPermission = async () => 'granted'
        onclick: (() => void) | null = null
        constructor(title: string, options?: { body?: string }) {
          shown.push({ title, body: options?.body })
        }
        close() {}
      }
      Object.defineProperty(window, 'Notification', { value: RecordingNotification })
      document.hasFocus = () => false
    })
    await open(page, serve.url, '#/sessions')
    await expect(page.locator('.session-item')).toHaveCount(1)
    const sessionId = new URL(sessionUrl).hash.split('/')[2]
    // Another client (the SDK, the CLI) sends the message; this window only watches.
    const res = await fetch(`${serve.url}/v1/sessions/${sessionId}/events`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ events: [{ type: 'user.message', content: [{ type: 'text', text: 'use two tools again' }] }] }),
    })
    expect(res.status).toBe(200)
    await expect.poll(() => page.evaluate(() => (window as unknown as { __shown: { title: string; body?: string }[] }).__shown.length), { timeout: 15_000 }).toBe(2)
    const shown = await page.evaluate(() => (window as unknown as { __shown: { title: string; body?: string }[] }).__shown)
    expect(shown.map((n) => n.title)).toEqual(['Corral needs you', 'Corral needs you'])
    expect(shown.map((n) => n.body).sort()).toEqual(['Say hello, please: approve bash', 'Say hello, please: approve write'])
    await expect(page.locator('.session-item .count-badge')).toHaveText('2')
  })

  test('renames a session from its header', async ({ page }) => {
    await open(page, serve.url, new URL(sessionUrl).hash)
    await page.locator('.thread-header .title-btn').click()
    await page.getByLabel('Session title').fill('Greetings and tools')
    await page.keyboard.press('Enter')
    await expect(page.getByRole('heading', { name: 'Greetings and tools' })).toBeVisible()
    await expect(page.locator('.session-item .session-title')).toHaveText('Greetings and tools')
  })

  test('answers a custom tool call from its card and the turn goes on', async ({ page }, info) => {
    const api = (path: string, body: unknown) =>
      fetch(`${serve.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) }).then((r) => r.json() as Promise<{ id: string }>)
    const agent = await api('/v1/agents', {
      name: 'Ticket agent',
      model: 'claude-sonnet-4-5',
      tools: [{ type: 'custom', name: 'lookup_ticket', description: 'Look a ticket up in the tracker', input_schema: { type: 'object', properties: { ticket: { type: 'string' } } } }],
    })
    const envs = (await fetch(`${serve.url}/v1/environments`, { headers: { authorization: `Bearer ${TOKEN}` } }).then((r) => r.json())) as { data: { id: string }[] }
    const session = await api('/v1/sessions', { agent: agent.id, environment_id: envs.data[0].id, title: 'Ticket lookup', initial_events: [{ type: 'user.message', content: [{ type: 'text', text: 'What does ticket QA-142 say?' }] }] })
    await open(page, serve.url, `#/sessions/${session.id}`)
    const card = page.locator('.tool-card').filter({ hasText: 'lookup_ticket' })
    await expect(card).toHaveClass(/tool-awaiting/)
    await card.getByPlaceholder('Result to return to the agent').fill('QA-142: the date test fails at midnight UTC')
    await shot(page, info, '15-custom-tool')
    await card.getByRole('button', { name: 'Send result' }).click()
    await expect(card).toHaveClass(/tool-done/)
    await card.getByRole('button', { expanded: false }).click()
    await expect(card).toContainText('the date test fails at midnight UTC')
    await expect(page.locator('.msg-agent').filter({ hasText: 'Both calls are settled' })).toBeVisible()
    const request = model.requests[model.requests.length - 1]
    expect(JSON.stringify(request.body.messages)).toContain('the date test fails at midnight UTC')
  })
})
