import { _electron as electron, expect, test } from '@playwright/test'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/**
 * The desktop app itself, through Playwright's Electron driver: the window loads the renderer from
 * corral://app with the preload's bridge (IPC transport), and the hardening holds. Needs the
 * Electron binary (node_modules/electron/dist); where it is missing (it cannot be downloaded on
 * these machines) the tests are skipped with the reason printed.
 */

const ROOT = join(__dirname, '..', '..')

function electronBinary(): string | undefined {
  const pkg = join(ROOT, 'node_modules', 'electron')
  const pathFile = join(pkg, 'path.txt')
  if (!existsSync(pathFile)) return undefined
  const bin = join(pkg, 'dist', readFileSync(pathFile, 'utf8').trim())
  return existsSync(bin) ? bin : undefined
}

const binary = electronBinary()
if (!binary) console.log('[electron e2e] skipped: the Electron binary is not installed (node_modules/electron/dist is missing; install electron with network access to its download server)')

test.describe('the Electron shell', () => {
  test.skip(!binary, 'the Electron binary is not installed (node_modules/electron/dist is missing)')

  test('loads the renderer over corral:// with the IPC bridge and refuses navigation and new windows', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'corral-electron-'))
    const app = await electron.launch({
      executablePath: binary,
      args: [ROOT, '--no-sandbox'],
      env: { ...process.env, CORRAL_DATA_DIR: dataDir, ELECTRON_RENDERER_URL: '' },
    })
    try {
      const win = await app.firstWindow()
      await expect(win.getByRole('navigation', { name: 'Sections' })).toBeVisible()
      expect(new URL(win.url()).protocol).toBe('corral:')
      // Only the contract is exposed; no Node in the page.
      expect(await win.evaluate(() => Object.keys((window as unknown as { corral: object }).corral).sort())).toEqual(['call', 'info', 'subscribe'])
      expect(await win.evaluate(() => typeof (globalThis as { require?: unknown }).require)).toBe('undefined')
      // The same operations as the HTTP API, validated on the main side.
      const bad = await win.evaluate(() => (window as unknown as { corral: { call: (op: string, p: object, b: unknown) => Promise<unknown> } }).corral.call('agents.create', {}, { name: '' }))
      expect(bad).toMatchObject({ ok: false, status: 400, error: { type: 'invalid_request_error' } })
      // Navigation away and window.open are refused.
      const before = win.url()
      await win.evaluate(() => window.location.assign('https://example.com/'))
      await win.waitForTimeout(300)
      expect(win.url()).toBe(before)
      expect(await win.evaluate(() => window.open('https://example.com/') === null)).toBe(true)
      expect(app.windows()).toHaveLength(1)
      const fuses = await app.evaluate(({ app: a }) => ({ packaged: a.isPackaged, locked: a.hasSingleInstanceLock() }))
      expect(fuses.locked).toBe(true)
    } finally {
      await app.close()
      rmSync(dataDir, { recursive: true, force: true })
    }
  })
})
