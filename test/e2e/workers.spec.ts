import { expect, test } from '@playwright/test'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startServe, type ServeProcess } from './support/serve'

/**
 * A self_hosted environment's workers in the editor: "Add a worker" mints a key, shows it once
 * with the command that serves the queue; the queue line says when no worker polls and counts
 * one once it does (a poll with the key, as a worker would send it); Revoke ends the key.
 */

const TOKEN = 'e2e_workers_token_0123456789abcdef'
const SHOTS = join(__dirname, '..', '..', 'test-results', 'screenshots')

test.describe.serial('environments: workers of a self-hosted environment', () => {
  let dataDir: string
  let serve: ServeProcess
  let envId: string
  const api = async (method: string, path: string, body?: unknown, token = TOKEN) => {
    const r = await fetch(`${serve.url}${path}`, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...(token === TOKEN ? {} : { 'anthropic-worker-id': 'e2e-worker' }) }, body: body === undefined ? undefined : JSON.stringify(body) })
    return { status: r.status, body: (await r.json()) as Record<string, any> | null }
  }

  test.beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-workers-'))
    serve = await startServe({ dataDir, token: TOKEN })
    envId = (await api('POST', '/v1/environments', { name: 'build farm', config: { type: 'self_hosted' } })).body!.id
  })
  test.afterAll(async () => {
    await serve?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test('adds a worker: the key once, the command, then the worker counted; revoke ends the key', async ({ page }) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/environments/${envId}`)
    const panel = page.getByRole('group', { name: 'Workers' })
    await expect(panel.getByTestId('queue-stats')).toContainText('No worker is polling')
    await panel.getByRole('button', { name: 'Add a worker' }).click()
    const key = (await panel.getByTestId('new-key').textContent())!.trim()
    expect(key).toMatch(/^corral_envkey_/)
    await expect(panel.getByTestId('worker-command')).toContainText(`worker --url ${serve.url} --environment ${envId} --key-file`)
    mkdirSync(SHOTS, { recursive: true })
    await page.screenshot({ path: join(SHOTS, '60-workers-add.png') })

    // a worker polls with the key
    expect((await api('GET', `/v1/environments/${envId}/work/poll`, undefined, key)).status).toBe(200)
    await expect(panel.getByTestId('queue-stats')).toContainText('1 worker polling', { timeout: 10_000 })
    await panel.getByRole('button', { name: 'Done' }).click()
    await expect(panel.getByTestId('new-key')).toHaveCount(0)
    await expect(panel.locator('.key-list li')).toHaveCount(1)
    await expect(panel.locator('.key-list li')).toContainText('last used')
    await page.screenshot({ path: join(SHOTS, '61-workers-polling.png') })

    page.once('dialog', (d) => void d.accept())
    await panel.getByRole('button', { name: 'Revoke' }).click()
    await expect(panel.locator('.key-list li')).toContainText('revoked')
    expect((await api('GET', `/v1/environments/${envId}/work/poll`, undefined, key)).status).toBe(401)
  })

  test('a session on the environment says it is waiting for a worker while none polls', async ({ page }) => {
    const agent = (await api('POST', '/v1/agents', { name: 'remote', model: 'claude-sonnet-4-6', tools: [{ type: 'agent_toolset_20260401' }] })).body!
    // an environment of its own: the first test's worker still counts as polling on envId for 30 s
    const env2 = (await api('POST', '/v1/environments', { name: 'quiet farm', config: { type: 'self_hosted' } })).body!.id as string
    const session = (await api('POST', '/v1/sessions', { agent: agent.id, environment_id: env2 })).body!
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions/${session.id}`)
    const pill = page.getByLabel('Worker status')
    await expect(pill).toContainText('waiting for a worker')
    await expect(pill).toContainText('1 queued')
    await page.screenshot({ path: join(SHOTS, '62-session-waiting-for-worker.png') })
    // a worker with a new key polls: the pill counts it
    const key = (await api('POST', `/v1/corral/environments/${env2}/keys`)).body!.key as string
    expect((await api('GET', `/v1/environments/${env2}/work/poll`, undefined, key)).status).toBe(200)
    await expect(pill).toContainText('1 worker polling', { timeout: 10_000 })
  })
})

