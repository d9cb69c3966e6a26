import { expect, test } from '@playwright/test'
import AxeBuilder from '@axe-core/playwright'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startServe, type ServeProcess } from './support/serve'

/**
 * The environment editor and an environment's packages: where they stand, installing them from
 * the editor, what a failed install says, and that saving the form keeps what only the API set.
 * (This serve has no keychain, so an install cannot get its egress proxy: it fails, and says so.)
 */

const TOKEN = 'e2e_env_token_0123456789abcdef'
const SHOTS = join(__dirname, '..', '..', 'test-results', 'screenshots')

test.describe.serial('environments: packages status and the editor', () => {
  let dataDir: string
  let serve: ServeProcess
  let envId: string
  const api = <T = Record<string, any>>(method: string, path: string, body?: unknown) => serve.api<T>(method, path, body)

  test.beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-env-'))
    serve = await startServe({ dataDir, token: TOKEN })
    const env = await api('POST', '/v1/environments', {
      name: 'data tools',
      config: { type: 'cloud', packages: { pip: ['pandas'], gem: ['rake'] }, corral: { pool_size: 0, package_sources: { pip: 'http://pypi.mirror.invalid/simple/' } } },
    })
    envId = env.id
  })

  test.afterAll(async () => {
    await serve?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test('shows packages not installed yet, installs on request, and shows why the install failed', async ({ page }) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/environments/${envId}`)
    await expect(page.getByRole('heading', { name: 'data tools' })).toBeVisible()
    const status = page.locator('.packages-status')
    await expect(status).toContainText(/Not installed yet \((docker|bubblewrap)\)/)
    await status.getByRole('button', { name: 'Install now' }).click()
    await expect(status.getByRole('alert')).toContainText(`installing the packages of environment ${envId} failed`)
    await expect(status.getByRole('button', { name: 'Try again' })).toBeVisible()
    const axe = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa']).analyze()
    expect(axe.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => v.id)).toEqual([])
    mkdirSync(SHOTS, { recursive: true })
    await page.screenshot({ path: join(SHOTS, '20-environment-packages-failed.png') })
  })

  test('saving the form keeps the fields only the API set (other package managers, mirrors, pool size)', async ({ page }) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/environments/${envId}`)
    await page.getByLabel('npm').fill('left-pad')
    await page.getByRole('button', { name: 'Save' }).click()
    await expect.poll(async () => ((await api('GET', `/v1/environments/${envId}`)).config.packages.npm as string[]).join(' ')).toBe('left-pad')
    const config = (await api('GET', `/v1/environments/${envId}`)).config
    expect(config.packages.gem).toEqual(['rake'])
    expect(config.packages.pip).toEqual(['pandas'])
    expect(config.corral).toMatchObject({ pool_size: 0, package_sources: { pip: 'http://pypi.mirror.invalid/simple/' } })
    // Saving a list of packages installs them at once: the status is that install's.
    await expect(page.locator('.packages-status')).toContainText(/installing the packages|Installing/)
  })
})
