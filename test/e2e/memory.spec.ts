import { expect, test } from '@playwright/test'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { callTool, say, ScriptedModelServer, toolResultsOf, type RecordedRequest, type ScriptStep } from '../support/model-server'
import { startServe, type ServeProcess } from './support/serve'
import { shot } from './support/screenshots'

/**
 * The Memory page, a session's Files tab and the memory-store part of the new-session dialog, in
 * Chromium against the real `corral serve`, a real bubblewrap sandbox and the scripted model: an
 * agent writes a memory through its mount and an output with bash; the Memory page shows the
 * store's tree, the memory, its versions with who wrote each (the session links to it), a diff
 * between two versions, an edit saved as a new version and a redaction behind a confirmation; the
 * Files tab lists the input and the output and downloads the output; the dialog attaches a store
 * read-only with instructions.
 */

const TOKEN = 'e2e_token_memory_0123456789abcd'
const WRITE = "printf 'step one\\nstep two\\n' > /mnt/memory/notes/todo.md && mkdir -p /mnt/session/outputs && printf 'the summary\\n' > /mnt/session/outputs/summary.txt && echo DONE"

function respond(req: RecordedRequest): ScriptStep {
  if (toolResultsOf(req).length > 0) return say('Noted.')
  return callTool('bash', { command: WRITE }, 'Writing the notes.')
}

test.describe.serial('memory page and session files', () => {
  let dataDir: string
  let model: ScriptedModelServer
  let serve: ServeProcess
  let storeId: string
  let sessionId: string
  let agentId: string
  let envId: string

  const api = <T = Record<string, any>>(method: string, path: string, body?: unknown) => serve.api<T>(method, path, body)

  test.beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-memory-'))
    model = await ScriptedModelServer.start(respond)
    serve = await startServe({ dataDir, token: TOKEN, modelUrl: model.url })
    agentId = (await api('POST', '/v1/agents', { name: 'Note taker', model: 'claude-sonnet-4-6', tools: [{ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_allow' } } }] })).id
    envId = (await api('POST', '/v1/environments', { name: 'bwrap', config: { type: 'cloud', corral: { backend: 'bubblewrap', pool_size: 0 } } })).id
    storeId = (await api('POST', '/v1/memory_stores', { name: 'notes', description: 'What the project learned' })).id
    await api('POST', `/v1/memory_stores/${storeId}/memories`, { path: '/todo.md', content: 'step one\n' })
    await api('POST', `/v1/memory_stores/${storeId}/memories`, { path: '/projects/corral/decisions.md', content: 'use SQLite\n' })
    const form = new FormData()
    form.append('file', new Blob(['city,people\nOslo,709000\n'], { type: 'text/csv' }), 'data.csv')
    const up = await fetch(`${serve.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` }, body: form })
    const file = (await up.json()) as { id: string }
    const session = await api('POST', '/v1/sessions', {
      agent: agentId,
      environment_id: envId,
      title: 'Taking notes',
      resources: [
        { type: 'memory_store', memory_store_id: storeId, access: 'read_write' },
        { type: 'file', file_id: file.id, mount_path: '/data.csv' },
      ],
    })
    sessionId = session.id
    await api('POST', `/v1/sessions/${sessionId}/events`, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'take notes' }] }] })
    const deadline = Date.now() + 60_000
    for (;;) {
      const ev = await api<{ data: { type: string }[] }>('GET', `/v1/sessions/${sessionId}/events?limit=100`)
      if (ev.data.some((e) => e.type === 'session.status_idle') && ev.data.some((e) => e.type === 'agent.tool_result')) break
      if (Date.now() > deadline) throw new Error(`the session did not finish: ${ev.data.map((e) => e.type).join(', ')}`)
      await new Promise((r) => setTimeout(r, 200))
    }
  })

  test.afterAll(async () => {
    await serve?.stop()
    await model?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test('shows a store as a tree, a memory, who wrote each version (the session links to it) and the diff between two versions', async ({ page }, info) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/memory`)
    await page.getByRole('link', { name: /notes/ }).click()
    const tree = page.getByRole('tree')
    await expect(tree.getByRole('treeitem').filter({ hasText: 'projects/' })).toBeVisible()
    await expect(tree.getByRole('treeitem').filter({ hasText: 'corral/' })).toBeVisible()
    await tree.getByRole('link', { name: 'todo.md' }).click()
    await expect(page.getByLabel('Content of /todo.md')).toHaveValue('step one\nstep two\n')
    const rows = page.getByRole('table', { name: 'Versions' }).locator('tbody tr')
    await expect(rows).toHaveCount(2)
    await expect(rows.filter({ hasText: `session ${sessionId}` })).toHaveCount(1)
    await expect(rows.filter({ hasText: 'you (Corral API token)' })).toHaveCount(1)
    for (const box of await rows.getByRole('checkbox').all()) await box.check()
    const diff = page.getByRole('region', { name: 'Changes between the two versions' })
    await expect(diff.locator('.diff-add')).toHaveText([/step two/])
    await shot(page, info, 'memory-01-tree-history-diff')
    await rows.getByRole('link', { name: `session ${sessionId}` }).click()
    await expect(page).toHaveURL(new RegExp(`#/sessions/${sessionId}$`))
    await expect(page.getByRole('heading', { name: 'Taking notes' })).toBeVisible()
  })

  test('saves an edit as a new version, and redacts a version only after a confirmation, keeping who wrote it', async ({ page }, info) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/memory/${storeId}`)
    await page.getByRole('tree').getByRole('link', { name: 'todo.md' }).click()
    const editor = page.getByLabel('Content of /todo.md')
    await expect(editor).toHaveValue('step one\nstep two\n')
    await editor.fill('step one\nstep two\nstep three\n')
    await page.getByRole('button', { name: 'Save' }).click()
    const rows = page.getByRole('table', { name: 'Versions' }).locator('tbody tr')
    await expect(rows).toHaveCount(3)
    const memories = await api<{ data: { id: string; path: string }[] }>('GET', `/v1/memory_stores/${storeId}/memories`)
    const todo = memories.data.find((m) => m.path === '/todo.md')!
    expect((await api<{ content: string }>('GET', `/v1/memory_stores/${storeId}/memories/${todo.id}`)).content).toBe('step one\nstep two\nstep three\n')

    const first = rows.filter({ hasText: 'created' })
    await first.getByRole('button', { name: 'Redact' }).click()
    const dialog = page.getByRole('dialog', { name: 'Redact this version?' })
    await expect(dialog).toContainText('erased for good')
    await shot(page, info, 'memory-02-redact-confirmation')
    await dialog.getByRole('button', { name: 'Cancel' }).click()
    await expect(first).not.toContainText('redacted')
    await first.getByRole('button', { name: 'Redact' }).click()
    await page.getByRole('dialog', { name: 'Redact this version?' }).getByRole('button', { name: 'Redact' }).click()
    await expect(first).toContainText('redacted')
    await expect(first).toContainText('you (Corral API token)')
    const versions = await api<{ data: { operation: string; content: string | null; redacted_at: string | null; created_by: { type: string } }[] }>('GET', `/v1/memory_stores/${storeId}/memory_versions?memory_id=${todo.id}&view=full`)
    const created = versions.data.find((v) => v.operation === 'created')!
    expect(created.redacted_at).not.toBeNull()
    expect(created.content).toBeNull()
    expect(created.created_by.type).toBe('api_actor')
    await shot(page, info, 'memory-03-redacted')
  })

  test("lists a session's input and output files in its Files tab and downloads the output", async ({ page }, info) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions/${sessionId}`)
    await page.getByRole('navigation', { name: 'Session views' }).getByRole('link', { name: 'Files' }).click()
    const inputs = page.getByRole('region', { name: 'Inputs' })
    await expect(inputs.locator('.file-row')).toHaveText([/\/mnt\/session\/uploads\/data\.csv/])
    const outputs = page.getByRole('region', { name: 'Outputs' })
    await expect(outputs.locator('.file-row')).toHaveText([/summary\.txt/])
    await shot(page, info, 'memory-04-session-files')
    const [download] = await Promise.all([page.waitForEvent('download'), outputs.getByRole('button', { name: 'Download summary.txt' }).click()])
    expect(download.suggestedFilename()).toBe('summary.txt')
    expect(readFileSync(await download.path())).toEqual(Buffer.from('the summary\n'))
  })

  test('the new-session dialog attaches a memory store read-only with instructions', async ({ page }, info) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions`)
    await page.getByRole('button', { name: /New session/ }).first().click()
    const dialog = page.getByRole('dialog', { name: 'New session' })
    await dialog.getByRole('button', { name: 'Memory store' }).click()
    await dialog.getByLabel('Memory store', { exact: true }).selectOption({ label: 'notes' })
    await dialog.getByLabel('Memory store access').selectOption('read_only')
    await dialog.getByLabel('Memory store instructions').fill('Read the decisions first.')
    await dialog.getByLabel('Title (optional)').fill('Reading notes')
    await shot(page, info, 'memory-05-new-session-store')
    await dialog.getByRole('button', { name: 'Start session' }).click()
    await expect(page.getByRole('heading', { name: 'Reading notes' })).toBeVisible()
    const sessions = await api<{ data: { title: string; resources: { type: string; memory_store_id?: string; access?: string; instructions?: string }[] }[] }>('GET', '/v1/sessions')
    const created = sessions.data.find((s) => s.title === 'Reading notes')!
    expect(created.resources).toEqual([expect.objectContaining({ type: 'memory_store', memory_store_id: storeId, access: 'read_only', instructions: 'Read the decisions first.' })])
  })
})
