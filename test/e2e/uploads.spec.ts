import { expect, test, type JSHandle, type Locator, type Page } from '@playwright/test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { callTool, say, ScriptedModelServer, toolResultsOf, type RecordedRequest, type ScriptStep } from '../support/model-server'
import { startServe, type ServeProcess } from './support/serve'
import { shot } from './support/screenshots'

/**
 * Upload into a session by drag and drop (issue #16 §2), in Chromium against the real
 * `corral serve`, a real bubblewrap sandbox and the scripted model: files dropped on a running
 * session and on the new-session dialog go to `POST /v1/files` (with their progress), become the
 * session's `file` resources, and the agent reads them at /mnt/session/uploads; a file over the
 * cap shows the engine's 413 message. The drop is a real DOM drop with a DataTransfer.
 */

const TOKEN = 'e2e_token_uploads_0123456789abc'
const CAP = 48 * 1024 * 1024

function lastText(req: RecordedRequest): string {
  const last = req.body.messages[req.body.messages.length - 1]
  if (typeof last.content === 'string') return last.content
  const texts = (last.content as { type: string; text?: string }[]).filter((b) => b.type === 'text').map((b) => b.text ?? '')
  return texts[texts.length - 1] ?? ''
}

function respond(req: RecordedRequest): ScriptStep {
  if (toolResultsOf(req).length > 0) return say('I read it.')
  const m = /read the upload (\S+)/i.exec(lastText(req))
  return m ? callTool('bash', { command: `cat /mnt/session/uploads/${m[1]}` }, 'Reading the upload.') : say('OK.')
}

/** A DataTransfer in the page holding one file of `size` bytes (the text, repeated), named `name`. */
function fileTransfer(page: Page, name: string, text: string, size?: number): Promise<JSHandle<DataTransfer>> {
  return page.evaluateHandle(
    ([n, t, s]) => {
      const dt = new DataTransfer()
      const body = s ? new Uint8Array(s).fill(120) : t
      dt.items.add(new File([body], n, { type: 'text/plain' }))
      return dt
    },
    [name, text, size ?? 0] as const,
  )
}

/** Drags the transfer onto `target` (enter, over) and drops it, as a person's drag does. */
async function drop(target: Locator, dataTransfer: JSHandle<DataTransfer>, { pause }: { pause?: () => Promise<void> } = {}) {
  await target.dispatchEvent('dragenter', { dataTransfer })
  await target.dispatchEvent('dragover', { dataTransfer })
  await pause?.()
  await target.dispatchEvent('drop', { dataTransfer })
}

test.describe.serial('uploads by drag and drop', () => {
  let dataDir: string
  let model: ScriptedModelServer
  let serve: ServeProcess
  let agentId: string
  let envId: string

  const api = <T = Record<string, any>>(method: string, path: string, body?: unknown) => serve.api<T>(method, path, body)
  const send = async (page: Page, text: string) => {
    await page.getByLabel('Message', { exact: true }).fill(text)
    await page.getByLabel('Message', { exact: true }).press('Enter')
  }

  test.beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-uploads-'))
    writeFileSync(join(dataDir, 'settings.json'), JSON.stringify({ maxFileBytes: CAP }))
    model = await ScriptedModelServer.start(respond)
    serve = await startServe({ dataDir, token: TOKEN, modelUrl: model.url })
    agentId = (await api('POST', '/v1/agents', { name: 'Reader', model: 'claude-sonnet-4-6', tools: [{ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_allow' } } }] })).id
    envId = (await api('POST', '/v1/environments', { name: 'bwrap', config: { type: 'cloud', corral: { backend: 'bubblewrap', pool_size: 0 } } })).id
  })

  test.afterAll(async () => {
    await serve?.stop()
    await model?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test('a file dropped on a running session is uploaded, added to it, and the agent reads it at /mnt/session/uploads', async ({ page }, info) => {
    const session = await api('POST', '/v1/sessions', { agent: agentId, environment_id: envId, title: 'Dropping' })
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions/${session.id}`)
    await expect(page.getByRole('heading', { name: 'Dropping' })).toBeVisible()
    // A first exchange, so the session has run before the file arrives.
    await send(page, 'hello')
    await expect(page.locator('.msg-agent').filter({ hasText: 'OK.' })).toBeVisible({ timeout: 30_000 })
    const view = page.locator('section.thread-view')
    const dt = await fileTransfer(page, 'notes.txt', 'hello from the drop\n')
    await drop(view, dt, {
      pause: async () => {
        await expect(page.locator('.drop-overlay')).toHaveText(/Drop to upload into this session/)
        await shot(page, info, 'upload-01-drag-over-session')
      },
    })
    await expect(page.locator('.drop-overlay')).toHaveCount(0)
    const row = page.getByRole('list', { name: 'Uploads' }).getByRole('listitem').filter({ hasText: 'notes.txt' })
    await expect(row.locator('.upload-where')).toHaveText('at /mnt/session/uploads/notes.txt')
    const resources = await api<{ data: { type: string; file_id: string; mount_path: string }[] }>('GET', `/v1/sessions/${session.id}/resources`)
    expect(resources.data.map((r) => [r.type, r.mount_path])).toEqual([['file', '/mnt/session/uploads/notes.txt']])
    await send(page, 'read the upload notes.txt')
    const card = page.getByRole('article', { name: /Tool call bash/ })
    await expect(card).toHaveAttribute('aria-label', 'Tool call bash: Done', { timeout: 30_000 })
    await card.getByRole('button', { expanded: false }).click()
    expect(await card.locator('.terminal-out').innerText()).toBe('hello from the drop')
    await shot(page, info, 'upload-02-agent-read-the-drop')
  })

  test('a large file shows its progress while it uploads, and a file over the cap shows the engine\'s 413 message and is not added', async ({ page }, info) => {
    const session = await api('POST', '/v1/sessions', { agent: agentId, environment_id: envId, title: 'Big files' })
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions/${session.id}`)
    await expect(page.getByRole('heading', { name: 'Big files' })).toBeVisible()
    // Every value the progress bar takes (no sampling to miss one).
    await page.evaluate(() => {
      const w = window as unknown as { __progress: number[] }
      w.__progress = []
      new MutationObserver(() => {
        for (const p of document.querySelectorAll('.upload-list progress')) w.__progress.push(Number((p as HTMLProgressElement).value))
      }).observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ['value'] })
    })
    const view = page.locator('section.thread-view')
    await drop(view, await fileTransfer(page, 'big.log', '', 40 * 1024 * 1024))
    const uploads = page.getByRole('list', { name: 'Uploads' })
    await expect(uploads.getByRole('listitem').filter({ hasText: 'big.log' }).locator('.upload-where')).toHaveText('at /mnt/session/uploads/big.log', { timeout: 60_000 })
    const seen = await page.evaluate(() => (window as unknown as { __progress: number[] }).__progress)
    expect(seen.some((v) => v > 0 && v < 100)).toBe(true)

    await drop(view, await fileTransfer(page, 'too-big.log', '', CAP + 1024))
    const refused = uploads.getByRole('listitem').filter({ hasText: 'too-big.log' })
    await expect(refused.getByRole('alert')).toHaveText(new RegExp(`the file size limit of ${CAP} bytes \\(settings: max_file_bytes\\)`), { timeout: 60_000 })
    await shot(page, info, 'upload-03-progress-and-over-cap')
    const resources = await api<{ data: { mount_path: string }[] }>('GET', `/v1/sessions/${session.id}/resources`)
    expect(resources.data.map((r) => r.mount_path)).toEqual(['/mnt/session/uploads/big.log'])
  })

  test('files dropped on the new-session dialog are uploaded before it starts and included at creation; the agent reads one', async ({ page }, info) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions`)
    await page.getByRole('button', { name: 'New session', exact: true }).click()
    const dialog = page.getByRole('dialog', { name: 'New session' })
    const area = dialog.getByTestId('file-drop')
    await drop(area, await fileTransfer(page, 'brief.txt', 'the brief, dropped on the dialog\n'), {
      pause: async () => {
        await expect(area).toHaveClass(/drop-over/)
      },
    })
    await expect(dialog.getByRole('listitem').filter({ hasText: 'brief.txt' }).locator('.upload-where')).toHaveText('will be at /mnt/session/uploads/brief.txt')
    await expect(dialog.getByLabel('Mount path')).toHaveValue('brief.txt')
    await dialog.getByLabel('First message').fill('read the upload brief.txt')
    await shot(page, info, 'upload-04-new-session-dialog')
    await dialog.getByRole('button', { name: 'Start session' }).click()
    const card = page.getByRole('article', { name: /Tool call bash/ })
    await expect(card).toHaveAttribute('aria-label', 'Tool call bash: Done', { timeout: 30_000 })
    await card.getByRole('button', { expanded: false }).click()
    expect(await card.locator('.terminal-out').innerText()).toBe('the brief, dropped on the dialog')
    await shot(page, info, 'upload-05-new-session-agent-read')
  })
})
