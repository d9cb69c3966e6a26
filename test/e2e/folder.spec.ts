import { expect, test, type Page } from '@playwright/test'
import AxeBuilder from '@axe-core/playwright'
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { callTool, say, ScriptedModelServer, type RecordedRequest, type ScriptStep } from '../support/model-server'
import { startServe, type ServeProcess } from './support/serve'

/**
 * A session on a folder of this machine (a host_folder resource): chosen in the new-session
 * dialog (browser mode: a path field), the agent edits two files through the sandbox, the
 * Changes view lists them with diffs, and the person reverts one: the file on disk is restored,
 * the other keeps the agent's edit. The dialog says which folder was refused and why.
 */

const TOKEN = 'e2e_folder_token_0123456789abcdef'
const SHOTS = join(__dirname, '..', '..', 'test-results', 'screenshots')
const GREETING = 'export const greeting = "hello"\n'
const README = '# Project\n\nSome words.\n'

/** The edit tool when it offers Claude Code's field names, else the same change through bash. */
function editFile(req: RecordedRequest, file: string, from: string, to: string): ScriptStep {
  const edit = ((req.body.tools ?? []) as { name: string; input_schema?: { properties?: Record<string, unknown> } }[]).find((t) => t.name === 'edit')
  const props = edit?.input_schema?.properties ?? {}
  if ('file_path' in props && 'old_string' in props && 'new_string' in props) return callTool('edit', { file_path: `/workspace/${file}`, old_string: from, new_string: to })
  return callTool('bash', { command: `sed -i 's/${from}/${to}/' ${file}` })
}

function respond(req: RecordedRequest): ScriptStep {
  const results = req.body.messages.filter((m) => m.role === 'user' && typeof m.content !== 'string' && m.content.some((b) => b.type === 'tool_result')).length
  if (results === 0) return editFile(req, 'src/greeting.ts', 'hello', 'hello, world')
  if (results === 1) return editFile(req, 'README.md', 'Some words.', 'Some better words.')
  return say('I edited src/greeting.ts and README.md.')
}

async function shot(page: Page, name: string): Promise<void> {
  mkdirSync(SHOTS, { recursive: true })
  await page.screenshot({ path: join(SHOTS, `${name}.png`) })
}

test.describe.serial('a session on a folder of this machine', () => {
  let dataDir: string
  let folder: string
  let model: ScriptedModelServer
  let serve: ServeProcess
  const api = <T = Record<string, any>>(method: string, path: string, body?: unknown) => serve.api<T>(method, path, body)

  test.beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-folder-'))
    folder = mkdtempSync(join(tmpdir(), 'corral-e2e-project-'))
    mkdirSync(join(folder, 'src'))
    writeFileSync(join(folder, 'src/greeting.ts'), GREETING)
    writeFileSync(join(folder, 'README.md'), README)
    // A git work tree: a file bash changes is revertable from git's objects (and edit's pre-image otherwise).
    const git = (...args: string[]) => execFileSync('git', ['-C', folder, '-c', 'user.name=e2e', '-c', 'user.email=e2e@example.invalid', ...args], { stdio: 'ignore' })
    git('init', '-q')
    git('add', '-A')
    git('commit', '-q', '-m', 'start')
    model = await ScriptedModelServer.start(respond)
    serve = await startServe({ dataDir, token: TOKEN, modelUrl: model.url })
    // bubblewrap maps the sandbox user to the user running Corral, who owns the folder.
    await api('POST', '/v1/environments', { name: 'Project sandbox', config: { type: 'cloud', networking: { type: 'limited' }, corral: { backend: 'bubblewrap', pool_size: 0 } } })
    await api('POST', '/v1/agents', { name: 'Editor', model: 'claude-sonnet-4-5', tools: [{ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_allow' } } }] })
  })

  test.afterAll(async () => {
    await serve?.stop()
    await model?.close()
    rmSync(dataDir, { recursive: true, force: true })
    rmSync(folder, { recursive: true, force: true })
  })

  test('refuses a system folder in the new-session dialog and says which and why', async ({ page }) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions`)
    await page.getByRole('button', { name: 'New session', exact: true }).click()
    const dialog = page.getByRole('dialog', { name: 'New session' })
    await dialog.getByRole('button', { name: 'Folder' }).click()
    await dialog.getByLabel('Folder on this machine').fill('/etc')
    await dialog.getByRole('button', { name: 'Start session' }).click()
    await expect(dialog.getByText(/resources\[0\]\.host_path: "\/etc" cannot be mounted: it is inside the system directory \/etc/)).toBeVisible()
    await shot(page, '30-folder-refused')
  })

  test('a dialog opened before the agents and environments arrive still starts with the first of each', async ({ page }) => {
    // a slow first load (a busy machine): the session list's agents and environments answer only
    // after the dialog is open (the sign-in probe, agents?limit=1, is not held)
    let release: () => void = () => {}
    const held = new Promise<void>((r) => (release = r))
    await page.route(/\/v1\/(agents|environments)\?(.*&)?limit=200/, async (route) => {
      await held
      await route.continue()
    })
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions`)
    await page.getByRole('button', { name: 'New session', exact: true }).click()
    const dialog = page.getByRole('dialog', { name: 'New session' })
    await expect(dialog).toBeVisible()
    release()
    await expect(dialog.getByRole('combobox', { name: 'Agent' })).toContainText('Editor')
    await expect(dialog.getByRole('combobox', { name: 'Environment' })).toContainText('Project sandbox')
    await expect(dialog.getByRole('button', { name: 'Start session' })).toBeEnabled()
    await dialog.getByRole('button', { name: 'Cancel' }).click()
  })

  test('the agent edits two files of the folder and the person reverts one from the Changes view', async ({ page }) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions`)
    await page.getByRole('button', { name: 'New session', exact: true }).click()
    const dialog = page.getByRole('dialog', { name: 'New session' })
    await dialog.getByRole('button', { name: 'Folder' }).click()
    await dialog.getByLabel('Folder on this machine').fill(folder)
    await expect(dialog.getByText(/Corral records what it changes/)).toBeVisible()
    await dialog.getByLabel('First message').fill('Polish the greeting and the README')
    await shot(page, '31-new-session-folder')
    await dialog.getByRole('button', { name: 'Start session' }).click()
    await expect(page.locator('.msg-agent').filter({ hasText: 'I edited src/greeting.ts and README.md.' })).toBeVisible({ timeout: 60_000 })
    expect(readFileSync(join(folder, 'src/greeting.ts'), 'utf8')).toBe('export const greeting = "hello, world"\n')

    await page.getByRole('link', { name: 'Changes' }).click()
    const changes = page.getByRole('region', { name: 'Changes' })
    const greeting = changes.getByRole('listitem', { name: 'Modified src/greeting.ts' })
    const readme = changes.getByRole('listitem', { name: 'Modified README.md' })
    await expect(greeting).toBeVisible()
    await expect(readme).toBeVisible()
    await expect(changes.getByRole('group', { name: 'Turn 1' })).toBeVisible()
    await greeting.getByRole('button', { name: 'Modified src/greeting.ts' }).click()
    await expect(greeting.getByRole('table', { name: 'Changes to src/greeting.ts' })).toContainText('hello, world')
    const axe = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa']).analyze()
    expect(axe.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => v.id)).toEqual([])
    await shot(page, '32-changes-view')

    await greeting.getByRole('button', { name: 'Revert src/greeting.ts' }).click()
    await expect(changes.getByRole('status')).toHaveText('Reverted src/greeting.ts: 1 file put back.')
    await expect.poll(() => readFileSync(join(folder, 'src/greeting.ts'), 'utf8')).toBe(GREETING)
    expect(readFileSync(join(folder, 'README.md'), 'utf8')).toBe('# Project\n\nSome better words.\n')
    await expect(greeting.getByText('reverted')).toBeVisible()
    await shot(page, '33-changes-reverted')

    await page.getByRole('link', { name: 'Files' }).click()
    const files = page.getByRole('region', { name: 'Files' })
    await expect(files.getByRole('button', { name: 'Download README.md' })).toBeVisible()
    await files.getByRole('button', { name: /src\// }).click()
    const download = page.waitForEvent('download')
    await files.getByRole('button', { name: 'Download greeting.ts' }).click()
    const d = await download
    expect(d.suggestedFilename()).toBe('greeting.ts')
    expect(readFileSync(await d.path(), 'utf8')).toBe(GREETING)
    await shot(page, '34-files-view')
  })
})
