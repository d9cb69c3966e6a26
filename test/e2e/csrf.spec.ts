import { expect, test } from '@playwright/test'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startServe, type ServeProcess } from './support/serve'
import { openSection } from './support/navigate'

/**
 * Red-team issue #15, finding 1, in a real Chromium: the browser is signed in to `corral serve`,
 * then opens a page served by ANOTHER HTTP server on another loopback port (any dev server or
 * notebook) that tries the attacks with the browser's cookie: blind text/plain forms and no-cors
 * fetches that change the model endpoint and create an agent, and a fetch with the renderer's
 * headers (which needs a CORS preflight). Nothing changes server-side. The renderer itself still
 * saves settings and creates agents.
 */

const TOKEN = 'e2e_csrf_token_0123456789abcdef'
const EVIL_ENDPOINT = 'http://127.0.0.1:9/attacker'

/** The attacker's page: every attempt it makes, and what the browser told it, in window.results. */
function attackerPage(corral: string): string {
  const agent = JSON.stringify({ name: 'made by another page', model: 'claude-sonnet-4-5' })
  const settings = JSON.stringify({ model: { base_url: EVIL_ENDPOINT } })
  // A text/plain form body is `name=value`: the JSON is split so that the '=' lands in a string.
  const formAgent = { name: '{"name":"made by a form","model":"claude-sonnet-4-5","description":"', value: '"}' }
  const formSettings = { name: `{"model":{"base_url":"${EVIL_ENDPOINT}","default_model":"`, value: '"}}' }
  return `<!doctype html><html><head><meta charset="utf-8"><title>another local app</title></head><body>
<iframe name="sink1"></iframe><iframe name="sink2"></iframe>
<form id="f1" method="POST" enctype="text/plain" target="sink1" action="${corral}/v1/agents"><input name='${formAgent.name}' value='${formAgent.value}'></form>
<form id="f2" method="POST" enctype="text/plain" target="sink2" action="${corral}/v1/corral/settings"><input name='${formSettings.name}' value='${formSettings.value}'></form>
<script>
window.results = {}
const loaded = (name) => new Promise((r) => document.querySelector('iframe[name=' + name + ']').addEventListener('load', r, { once: true }))
const attempt = async (label, run) => {
  try { const res = await run(); window.results[label] = res.type === 'opaque' ? 'opaque' : res.status }
  catch (e) { window.results[label] = 'blocked: ' + e.name }
}
;(async () => {
  const s1 = loaded('sink1'), s2 = loaded('sink2')
  document.getElementById('f1').submit()
  document.getElementById('f2').submit()
  await Promise.all([s1, s2])
  window.results.forms = 'submitted'
  await attempt('no-cors agent', () => fetch('${corral}/v1/agents', { method: 'POST', mode: 'no-cors', credentials: 'include', headers: { 'content-type': 'text/plain' }, body: ${JSON.stringify(agent)} }))
  await attempt('no-cors settings', () => fetch('${corral}/v1/corral/settings', { method: 'POST', mode: 'no-cors', credentials: 'include', headers: { 'content-type': 'text/plain' }, body: ${JSON.stringify(settings)} }))
  await attempt('preflighted agent', () => fetch('${corral}/v1/agents', { method: 'POST', credentials: 'include', headers: { 'content-type': 'application/json', 'x-corral-csrf': '1' }, body: ${JSON.stringify(agent)} }))
  await attempt('preflighted settings', () => fetch('${corral}/v1/corral/settings', { method: 'POST', credentials: 'include', headers: { 'content-type': 'application/json', 'x-corral-csrf': '1' }, body: ${JSON.stringify(settings)} }))
  window.done = true
})()
</script></body></html>`
}

test.describe.serial('CSRF from another loopback origin', () => {
  let dataDir: string
  let serve: ServeProcess
  let other: Server
  let otherUrl: string
  const api = <T = Record<string, any>>(method: string, path: string, body?: unknown) => serve.api<T>(method, path, body)
  const agentNames = async () => ((await api('GET', '/v1/agents?limit=100')).data as { name: string }[]).map((a) => a.name)

  test.beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-csrf-'))
    serve = await startServe({ dataDir, token: TOKEN })
    other = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
      res.end(attackerPage(serve.url))
    })
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', () => r()))
    otherUrl = `http://127.0.0.1:${(other.address() as AddressInfo).port}`
  })

  test.afterAll(async () => {
    await new Promise<void>((r) => (other ? other.close(() => r()) : r()))
    await serve?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test('a page on another local port cannot change the model endpoint or create an agent with the signed-in cookie', async ({ page, context }) => {
    await page.goto(`${serve.url}/?token=${TOKEN}`)
    expect((await context.cookies(serve.url)).map((c) => c.name)).toContain('corral_token')
    const before = { settings: await api('GET', '/v1/corral/settings'), agents: await agentNames() }

    const attacker = await context.newPage()
    await attacker.goto(otherUrl)
    await attacker.waitForFunction(() => (window as unknown as { done?: boolean }).done === true)
    const results = await attacker.evaluate(() => (window as unknown as { results: Record<string, unknown> }).results)
    // The preflight is refused, so the browser never sends the real request.
    expect(results['preflighted agent']).toBe('blocked: TypeError')
    expect(results['preflighted settings']).toBe('blocked: TypeError')
    expect(results.forms).toBe('submitted')

    expect((await api('GET', '/v1/corral/settings')).model).toEqual(before.settings.model)
    expect(await agentNames()).toEqual(before.agents)
  })

  test('the renderer itself still saves settings and creates agents with its cookie', async ({ page }) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/settings`)
    const endpoint = 'http://127.0.0.1:11434'
    await page.getByLabel('Model endpoint (base URL)').fill(endpoint)
    await page.getByRole('button', { name: 'Save settings' }).click()
    await expect(page.getByText('Saved.')).toBeVisible()
    expect((await api('GET', '/v1/corral/settings')).model.base_url).toBe(endpoint)
    await api('POST', '/v1/corral/settings', { model: { base_url: null } })

    await openSection(page, 'Agents')
    await page.getByRole('button', { name: 'New', exact: true }).click()
    await page.getByLabel('Name').fill('from the renderer')
    await page.getByLabel('Model').fill('claude-sonnet-4-5')
    await page.getByRole('button', { name: 'Create agent' }).click()
    await expect(page.getByRole('heading', { name: 'from the renderer' })).toBeVisible()
    expect(await agentNames()).toContain('from the renderer')
  })
})
