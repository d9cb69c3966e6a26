import { expect, test, type Page } from '@playwright/test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { OPERATIONS } from '../../src/shared/api/operations'
import { startServe, type ServeProcess } from './support/serve'
import { shot } from './support/screenshots'

/**
 * The folder picker of the new-session dialog, both of the renderer's branches, in Chromium
 * against the real `corral serve`:
 * - desktop: the renderer finds the preload's bridge on `window.corral` (CorralBridge: call,
 *   subscribe, info, pickFolder) and its "Choose…" asks the bridge's pickFolder, whose answer fills
 *   the path. The Electron binary cannot run here, so the bridge is a stand-in speaking the
 *   preload's contract: its `call` sends each operation of the shared table to the same HTTP API
 *   (what the IPC adapter dispatches to in-process), its pickFolder answers the folder the system
 *   dialog would have (the main-process handler is tested in test/unit/api/folder-picker.test.ts
 *   and test/integration/desktop/electron-shell.test.ts);
 * - browser mode: no bridge, no "Choose…", the path is typed.
 * Either way the created session mounts that folder.
 */

const TOKEN = 'e2e_token_folder_picker_012345'

/** The preload's bridge, as a page script: `call` over this origin's HTTP API, pickFolder answering `chosen`. */
async function installBridge(page: Page, chosen: string): Promise<void> {
  await page.addInitScript(
    ([ops, folder]) => {
      const w = window as unknown as { corral: unknown; __picks: number }
      w.__picks = 0
      const query = (payload: unknown) => {
        const sp = new URLSearchParams()
        for (const [k, v] of Object.entries((payload ?? {}) as Record<string, unknown>)) {
          if (v === undefined || v === null) continue
          if (Array.isArray(v)) for (const item of v) sp.append(`${k}[]`, String(item))
          else sp.append(k, String(v))
        }
        const s = sp.toString()
        return s ? `?${s}` : ''
      }
      w.corral = {
        call: async (op: string, path: Record<string, string>, payload?: unknown) => {
          const spec = (ops as Record<string, { method: string; path: string }>)[op]
          const url = spec.path.replace(/:([A-Za-z]+)/g, (_m, n: string) => path[n])
          const res = await fetch(spec.method === 'GET' ? url + query(payload) : url, {
            method: spec.method,
            headers: { 'content-type': 'application/json', 'x-corral-csrf': '1' },
            body: spec.method === 'GET' || payload === undefined ? undefined : JSON.stringify(payload),
          })
          const body = await res.json()
          return res.ok ? { ok: true, data: body } : { ok: false, status: res.status, error: body.error }
        },
        subscribe: async () => ({ ok: false, status: 503, error: { type: 'api_error', message: 'no live stream in this stand-in' } }),
        info: async () => ({ version: 'test', platform: 'linux', apiUrl: location.origin }),
        pickFolder: async () => {
          w.__picks++
          return { ok: true, data: folder }
        },
      }
    },
    [OPERATIONS, chosen] as const,
  )
}

test.describe.serial('the folder picker', () => {
  let dataDir: string
  let folder: string
  let serve: ServeProcess

  const api = <T = Record<string, any>>(method: string, path: string, body?: unknown) => serve.api<T>(method, path, body)
  const sessionFolders = async (): Promise<string[]> => {
    const list = await api<{ data: { resources: { type: string; host_path?: string }[] }[] }>('GET', '/v1/sessions')
    return list.data.flatMap((s) => s.resources.filter((r) => r.type === 'host_folder').map((r) => r.host_path ?? ''))
  }

  test.beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-picker-'))
    folder = mkdtempSync(join(tmpdir(), 'corral-e2e-picked-'))
    serve = await startServe({ dataDir, token: TOKEN })
    await api('POST', '/v1/environments', { name: 'Project sandbox', config: { type: 'cloud', corral: { backend: 'bubblewrap', pool_size: 0 } } })
    await api('POST', '/v1/agents', { name: 'Editor', model: 'claude-sonnet-4-5', tools: [{ type: 'agent_toolset_20260401' }] })
  })

  test.afterAll(async () => {
    await serve?.stop()
    rmSync(dataDir, { recursive: true, force: true })
    rmSync(folder, { recursive: true, force: true })
  })

  test('in the desktop, "Choose…" asks the preload bridge\'s pickFolder and the chosen folder is the one the session mounts', async ({ page }, info) => {
    await installBridge(page, folder)
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions`)
    await page.getByRole('button', { name: 'New session', exact: true }).click()
    const dialog = page.getByRole('dialog', { name: 'New session' })
    await dialog.getByRole('button', { name: 'Folder' }).click()
    await dialog.getByRole('button', { name: 'Choose…' }).click()
    await expect(dialog.getByLabel('Folder on this machine')).toHaveValue(folder)
    expect(await page.evaluate(() => (window as unknown as { __picks: number }).__picks)).toBe(1)
    await shot(page, info, 'picker-01-desktop-chosen')
    await dialog.getByRole('button', { name: 'Start session' }).click()
    await expect(dialog).toHaveCount(0)
    expect(await sessionFolders()).toEqual([folder])
  })

  test('in browser mode there is no "Choose…": the path is typed in the field, and the session mounts it', async ({ page }, info) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions`)
    await page.getByRole('button', { name: 'New session', exact: true }).click()
    const dialog = page.getByRole('dialog', { name: 'New session' })
    await dialog.getByRole('button', { name: 'Folder' }).click()
    await expect(dialog.getByLabel('Folder on this machine')).toBeVisible()
    await expect(dialog.getByRole('button', { name: 'Choose…' })).toHaveCount(0)
    await dialog.getByLabel('Folder on this machine').fill(folder)
    await shot(page, info, 'picker-02-browser-typed')
    await dialog.getByRole('button', { name: 'Start session' }).click()
    await expect(dialog).toHaveCount(0)
    expect(await sessionFolders()).toEqual([folder, folder])
  })
})
