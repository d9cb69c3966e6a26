import { expect, test, type Page } from '@playwright/test'
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startServe, type ServeProcess } from './support/serve'
import { ScriptedModelServer, say } from '../support/model-server'

/**
 * A first run that cannot dead-end (issue #16 §3), in a real browser against `corral serve`:
 * no model yet → the home screen and a new session say so → Connect a model → Test connection
 * (a closed port shows the error text; the scripted model server answers) → the first reply.
 * Then the sandbox banner: Docker down (DOCKER_HOST at a socket with nothing behind it), and the
 * image missing (a throwaway image name) built from the app with its progress lines.
 */

const TOKEN = 'e2e_first_run_token_0123456789'
const SHOTS = join(__dirname, '..', '..', 'test-results', 'screenshots')
const shot = async (page: Page, name: string) => {
  mkdirSync(SHOTS, { recursive: true })
  await page.screenshot({ path: join(SHOTS, `${name}.png`) })
}

async function closedPort(): Promise<number> {
  const srv = createServer()
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r))
  const port = (srv.address() as { port: number }).port
  await new Promise((r) => srv.close(r))
  return port
}

test.describe.serial('first run: connect a model, test it, get a first reply', () => {
  let dataDir: string
  let serve: ServeProcess
  let model: ScriptedModelServer
  let sessionId: string
  const api = <T = Record<string, any>>(method: string, path: string, body?: unknown) => serve.api<T>(method, path, body)

  test.beforeAll(async () => {
    model = await ScriptedModelServer.start(() => say('Hello from the scripted model: connected.'))
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-first-run-'))
    // No key, no endpoint, no keychain (the serve helper points D-Bus nowhere): a fresh machine.
    serve = await startServe({ dataDir, token: TOKEN, noApiKey: true })
    const agent = await api('POST', '/v1/agents', { name: 'First agent', model: 'claude-sonnet-4-6' })
    const env = await api('POST', '/v1/environments', { name: 'local', config: { type: 'cloud' } })
    sessionId = (await api('POST', '/v1/sessions', { agent: agent.id, environment_id: env.id})).id
  })

  test.afterAll(async () => {
    await serve?.stop()
    await model?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test('without a model the home screen and a new session say so, and point to Connect a model', async ({ page }) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions`)
    await expect(page.getByRole('status', { name: 'Model' })).toContainText('No model is connected yet')
    await shot(page, '30-first-run-home-no-model')
    await page.goto(`${serve.url}/#/sessions/${sessionId}`)
    const notice = page.getByRole('status', { name: 'Model' })
    await expect(notice).toContainText('sessions cannot run until one answers')
    await shot(page, '31-first-run-session-no-model')
    await notice.getByRole('button', { name: 'Connect a model' }).click()
    await expect(page.getByRole('heading', { name: 'Connect a model' })).toBeVisible()
  })

  test('Test connection shows the error text against a closed port, and success against the model server', async ({ page }) => {
    const port = await closedPort()
    await page.goto(`${serve.url}/?token=${TOKEN}#/settings`)
    await expect(page.getByRole('heading', { name: 'Connect a model' })).toBeVisible()
    // No keychain on this machine: the key field says what is missing and how to fix it.
    await expect(page.locator('.key-problem')).toContainText('no OS keychain is available')
    await expect(page.locator('.key-problem')).toContainText('dbus-run-session')
    await page.getByLabel('Model endpoint (base URL)').fill(`http://127.0.0.1:${port}`)
    await page.getByLabel('Anthropic API key').fill('sk-e2e-first-run-key')
    await page.getByRole('button', { name: 'Test connection' }).click()
    const result = page.getByRole('status', { name: 'Test connection result' })
    await expect(result).toContainText(`connection refused to http://127.0.0.1:${port}`)
    await shot(page, '32-first-run-test-connection-refused')

    await page.getByLabel('Model endpoint (base URL)').fill(model.url)
    await page.getByRole('button', { name: 'Test connection' }).click()
    await expect(result).toContainText('Connected.')
    await expect(result).toContainText(model.url)
    expect(model.requests.at(-1)!.headers.authorization).toBe('Bearer sk-e2e-first-run-key')
    await shot(page, '33-first-run-test-connection-ok')

    await page.getByRole('button', { name: 'Save settings' }).click()
    await expect(page.getByText('Saved.')).toBeVisible()
    expect((await api('GET', '/v1/corral/settings')).model.base_url).toBe(model.url)
  })

  test('the session gets its first reply from the connected model, and the notice is gone', async ({ page }) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions/${sessionId}`)
    await expect(page.getByRole('status', { name: 'Model' })).toHaveCount(0)
    await page.getByLabel('Message').fill('Hello?')
    await page.keyboard.press('Enter')
    await expect(page.locator('.msg-agent').filter({ hasText: 'Hello from the scripted model' })).toBeVisible()
    await expect(page.locator('.thread-header .status')).toHaveText('Idle')
    await shot(page, '34-first-run-first-reply')
  })
})

test.describe.serial('sandbox availability banner', () => {
  const dirs: string[] = []
  const serves: ServeProcess[] = []
  const BUILD_REPO = `corral-e2e-build-${process.pid}`
  test.afterAll(async () => {
    for (const s of serves) await s.stop()
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
    const tags = execFileSync('docker', ['image', 'ls', BUILD_REPO, '--format', '{{.Repository}}:{{.Tag}}'], { encoding: 'utf8' }).split('\n').filter(Boolean)
    if (tags.length) execFileSync('docker', ['image', 'rm', ...tags], { stdio: 'ignore' })
  })
  const open = async (env: NodeJS.ProcessEnv) => {
    const dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-sandbox-'))
    dirs.push(dataDir)
    const serve = await startServe({ dataDir, token: TOKEN, env })
    serves.push(serve)
    return serve
  }

  test('Docker down: the banner says so, with the fix for this platform', async ({ page }) => {
    const serve = await open({ DOCKER_HOST: 'unix:///nonexistent/corral-e2e-docker.sock' })
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions`)
    const banner = page.getByRole('alert', { name: 'Sandbox' })
    await expect(banner).toContainText('Docker is not available.')
    await expect(banner).toContainText('/nonexistent/corral-e2e-docker.sock')
    if (process.platform === 'linux') await expect(banner).toContainText('sudo apt-get install docker.io')
    await expect(banner).not.toContainText('scripts/')
    await shot(page, '35-sandbox-docker-down')
  })

  test('the image missing: the banner builds it from the app and shows the build’s progress', async ({ page }) => {
    test.setTimeout(180_000)
    const serve = await open({ CORRAL_SANDBOX_IMAGE_REPO: BUILD_REPO })
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions`)
    const banner = page.getByRole('alert', { name: 'Sandbox' })
    await expect(banner).toContainText(`The sandbox image ${BUILD_REPO}:`)
    await shot(page, '36-sandbox-image-missing')
    await banner.getByRole('button', { name: 'Build the image' }).click()
    const lines = page.getByLabel('Image build progress')
    await expect(lines).toContainText('[sandbox:image', { timeout: 30_000 })
    await shot(page, '37-sandbox-image-building')
    await expect(page.getByRole('status', { name: 'Sandbox' })).toContainText('is built', { timeout: 150_000 })
    await shot(page, '38-sandbox-image-built')
    const tags = execFileSync('docker', ['image', 'ls', BUILD_REPO, '--format', '{{.Tag}}'], { encoding: 'utf8' })
    expect(tags).toMatch(/[0-9a-f]{12}/)
  })
})
