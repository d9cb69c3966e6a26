import { expect, test } from '@playwright/test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { say, ScriptedModelServer, toolCall, toolResultsOf, type RecordedRequest, type ScriptStep } from '../support/model-server'
import { startServe, type ServeProcess } from './support/serve'
import { shot } from './support/screenshots'
import { openSection } from './support/navigate'

/**
 * Dreams from the Memory page, in Chromium against the real `corral serve`, a real bubblewrap
 * sandbox and the scripted model: a person picks past sessions and starts a dream over a store,
 * watches it finish, opens the store it wrote (the decision the sessions made is there, the stale
 * note gone) and archives it; a second dream, slow to answer, is canceled from the page.
 */

const TOKEN = 'e2e_token_dreams_0123456789abcdef'
const DREAMER = 'claude-dream-e2e'
const SLOW_DREAMER = 'claude-dream-slow'

type Block = { type: string; text?: string; content?: unknown }
const textOf = (b: Block): string => (typeof b.text === 'string' ? b.text : Array.isArray(b.content) ? (b.content as Block[]).map(textOf).join('') : '')

/** Past sessions: "Noted." The dream: read the transcripts, write decisions.md, remove old.md, done (from the offered schemas). */
function respond(req: RecordedRequest): ScriptStep {
  if (req.body.model === SLOW_DREAMER) return { kind: 'message', blocks: [{ type: 'text', text: 'Still thinking.' }], delayMs: 30_000 }
  if (req.body.model !== DREAMER) return say('Noted.')
  const system = (req.body.system ?? []).map((s) => s.text).join('\n')
  const mount = /<memory_store [^>]*path="([^"]+)"/.exec(system)![1]
  const first = req.body.messages[0]
  const ask = (typeof first.content === 'string' ? first.content : (first.content as Block[]).map(textOf).join('\n')) ?? ''
  const transcripts = ask.match(/\/mnt\/session\/uploads\/transcripts\/\S+\.md/g) ?? []
  const results = toolResultsOf(req)
  if (results.length === 0) return toolCall(req, 'bash', { command: `cat ${transcripts.join(' ')}` })
  if (results.length === 1) {
    const read = JSON.stringify(req.body.messages.at(-1)!.content)
    const decided = [...new Set([...read.matchAll(/remember: ([a-z ]+)/g)].map((m) => m[1].trim()))].sort()
    return toolCall(req, 'write', { file_path: `${mount}/decisions.md`, content: `# Decisions\n${decided.map((d) => `- ${d}`).join('\n')}\n` })
  }
  if (results.length === 2) return toolCall(req, 'bash', { command: `rm ${mount}/old.md` })
  return say('Merged the decisions into decisions.md and removed old.md.')
}

test.describe.serial('dreams from the Memory page', () => {
  let dataDir: string
  let model: ScriptedModelServer
  let serve: ServeProcess
  let storeId: string
  const api = <T = Record<string, any>>(method: string, path: string, body?: unknown) => serve.api<T>(method, path, body)

  test.beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-dreams-'))
    // the dreams' environment runs on the engine's default hands: bubblewrap here
    writeFileSync(join(dataDir, 'settings.json'), JSON.stringify({ sandboxBackend: 'bubblewrap' }))
    model = await ScriptedModelServer.start(respond)
    serve = await startServe({ dataDir, token: TOKEN, modelUrl: model.url })
    const agent = (await api('POST', '/v1/agents', { name: 'Helper', model: 'claude-sonnet-4-6' })).id
    const env = (await api('POST', '/v1/environments', { name: 'plain', config: { type: 'cloud', corral: { backend: 'bubblewrap', pool_size: 0 } } })).id
    storeId = (await api('POST', '/v1/memory_stores', { name: 'team notes' })).id
    await api('POST', `/v1/memory_stores/${storeId}/memories`, { path: '/old.md', content: 'We deploy on Mondays.\n' })
    await api('POST', `/v1/memory_stores/${storeId}/memories`, { path: '/keep.md', content: 'Team: blue.\n' })
    for (const text of ['remember: we deploy on fridays', 'remember: reviews need two approvals']) {
      const s = await api('POST', '/v1/sessions', { agent, environment_id: env, title: text })
      await api('POST', `/v1/sessions/${s.id}/events`, { events: [{ type: 'user.message', content: [{ type: 'text', text }] }] })
      for (let i = 0; i < 200 && (await api('GET', `/v1/sessions/${s.id}`)).status !== 'idle'; i++) await new Promise((r) => setTimeout(r, 100))
    }
  })

  test.afterAll(async () => {
    await serve?.stop()
    await model?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test('a person starts a dream over past sessions, sees it done, and opens the store it wrote', async ({ page }, info) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/memory/${storeId}`)
    const dreams = page.getByRole('region', { name: 'Dreams' })
    await expect(dreams).toContainText('No dreams over this store yet.')
    await dreams.getByRole('button', { name: 'Dream…' }).click()
    const dialog = page.getByRole('dialog', { name: 'Dream over team notes' })
    await expect(dialog.getByRole('button', { name: 'Start the dream' })).toBeDisabled()
    await expect(dialog).toContainText('Choose at least one session for the dream to read.')
    await dialog.getByRole('checkbox', { name: /remember: we deploy on fridays/ }).check()
    await dialog.getByRole('checkbox', { name: /remember: reviews need two approvals/ }).check()
    await dialog.getByLabel('Model').fill(DREAMER)
    await dialog.getByLabel('Guidance (optional)').fill('Keep one file of decisions.')
    await shot(page, info, 'dreams-01-new-dream')
    await dialog.getByRole('button', { name: 'Start the dream' }).click()
    await expect(dialog).toBeHidden()

    const row = dreams.getByRole('listitem').first()
    await expect(row).toContainText('Done', { timeout: 60_000 })
    await expect(row).toContainText('2 sessions · writes a new store')
    // the store it wrote joins the page's list of stores
    await expect(page.getByRole('complementary', { name: 'Memory stores' }).getByText('team notes (dream)', { exact: true })).toBeVisible()
    await shot(page, info, 'dreams-02-done')

    const listed = await api<{ data: { id: string; outputs: { memory_store_id: string }[]; instructions: string; session_id: string }[] }>('GET', '/v1/dreams')
    expect(listed.data).toHaveLength(1)
    expect(listed.data[0].instructions).toBe('Keep one file of decisions.')
    await row.getByRole('link', { name: 'Open the store it wrote' }).click()
    await expect(page).toHaveURL(new RegExp(`#/memory/${listed.data[0].outputs[0].memory_store_id}$`))
    const tree = page.getByRole('tree')
    await expect(tree.getByRole('link')).toHaveText(['decisions.md', 'keep.md'])
    await tree.getByRole('link', { name: 'decisions.md' }).click()
    await expect(page.getByLabel('Content of /decisions.md')).toHaveValue('# Decisions\n- reviews need two approvals\n- we deploy on fridays\n')
    await shot(page, info, 'dreams-03-output-store')

    // the agent and environment Corral ran the dream with are not offered for a new session
    await openSection(page, 'Sessions')
    await page.keyboard.press('n')
    const newSession = page.getByRole('dialog', { name: 'New session' })
    await expect(newSession.getByLabel('Agent').locator('option')).toHaveText([/^Helper · /])
    await expect(newSession.getByLabel('Environment').locator('option')).toHaveText([/^plain/])
    expect((await api<{ data: { name: string }[] }>('GET', '/v1/agents')).data.map((a) => a.name)).toContain('Corral dreams')
    await page.keyboard.press('Escape')

    // the store it read is as it was; the finished dream is archived from the page
    await page.goto(`${serve.url}/?token=${TOKEN}#/memory/${storeId}`)
    await expect(page.getByRole('tree').getByRole('link')).toHaveText(['keep.md', 'old.md'])
    await page.getByRole('region', { name: 'Dreams' }).getByRole('button', { name: 'Archive' }).click()
    await expect(page.getByRole('region', { name: 'Dreams' })).toContainText('No dreams over this store yet.')
    expect((await api<{ data: unknown[] }>('GET', '/v1/dreams')).data).toHaveLength(0)
  })

  test('a slow dream is canceled from the page, and a bad model name is answered in the dialog with the form kept', async ({ page }, info) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/memory/${storeId}`)
    const dreams = page.getByRole('region', { name: 'Dreams' })
    await dreams.getByRole('button', { name: 'Dream…' }).click()
    let dialog = page.getByRole('dialog', { name: 'Dream over team notes' })
    await dialog.getByRole('button', { name: 'The 10 most recent' }).click()
    await dialog.getByLabel('Model').fill('x'.repeat(257))
    await dialog.getByRole('button', { name: 'Start the dream' }).click()
    await expect(dialog.getByRole('alert')).toContainText('model')
    await expect(dialog.getByRole('checkbox', { checked: true })).toHaveCount(2)
    await dialog.getByLabel('Model').fill(SLOW_DREAMER)
    await dialog.getByText('This store, rewritten in place').click()
    await dialog.getByRole('button', { name: 'Start the dream' }).click()
    await expect(dialog).toBeHidden()
    const row = dreams.getByRole('listitem').first()
    await expect(row).toContainText('Dreaming', { timeout: 30_000 })
    await expect(row).toContainText('updates this store')
    // how long it has run, against the time limit in the settings
    await expect(row).toContainText('running under a minute of its 60-minute limit')
    await expect(row.getByRole('link', { name: 'Watch its session' })).toBeVisible()
    // its session says it is a dream's and leads back to the store
    await row.getByRole('link', { name: 'Watch its session' }).click()
    await expect(page.getByRole('link', { name: 'Dream', exact: true })).toHaveAttribute('href', `#/memory/${storeId}`)
    await page.getByRole('link', { name: 'Dream', exact: true }).click()
    await row.getByRole('button', { name: 'Cancel' }).click()
    await expect(row).toContainText('Canceled')
    await shot(page, info, 'dreams-04-canceled')
    const d = (await api<{ data: { status: string; session_id: string }[] }>('GET', '/v1/dreams')).data[0]
    expect(d.status).toBe('canceled')
    await expect.poll(async () => (await api('GET', `/v1/sessions/${d.session_id}`)).archived_at, { timeout: 20_000 }).not.toBeNull()
    dialog = page.getByRole('dialog', { name: 'Dream over team notes' })
    await expect(dialog).toBeHidden()
  })
})
