import { expect, test, type Page } from '@playwright/test'
import AxeBuilder from '@axe-core/playwright'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startServe, type ServeProcess } from './support/serve'
import { shot } from './support/screenshots'
import { openSection } from './support/navigate'
import { keychainProbe, requirement } from '../support/requirements'
import { ACCESS_NEW, ACCESS_OLD, BEARER, CLIENT_SECRET, REFRESH, mcpTestServer } from '../support/mcp-server'
import { callTool, say, ScriptedModelServer, toolResultsOf, type RecordedRequest, type ScriptStep } from '../support/model-server'

/**
 * The Vaults page against `corral serve` with a real OS keychain (the test runner's private
 * D-Bus session with gnome-keyring), a real MCP server that demands a bearer token and refreshes
 * OAuth tokens, and the scripted model: a person makes a vault, adds an MCP token, an MCP OAuth
 * credential with refresh and a sandbox secret, checks the OAuth ones against the server, replaces
 * a rejected token, starts a session with the vault from the new-session dialog and sees the
 * agent's MCP call go through with the vault's token; no secret is ever on the page or in an answer.
 */

const TOKEN = 'e2e_vaults_token_0123456789abcd'
const ENV_SECRET = 'canary-e2e-sandbox-secret-5e1'
const WRONG_ACCESS = 'canary-e2e-wrong-access-7c2'
const SECRETS = [BEARER, ACCESS_OLD, ACCESS_NEW, REFRESH, CLIENT_SECRET, ENV_SECRET, WRONG_ACCESS]
const keychain = requirement('keychain', keychainProbe)

function respond(req: RecordedRequest): ScriptStep {
  // the MCP server's tools are offered only once Corral could connect to it with the vault's token
  const offered = (req.body.tools ?? []).some((t) => t.name === 'docs__echo')
  if (!offered) return say('The docs are out of reach.')
  return toolResultsOf(req).length === 0 ? callTool('docs__echo', { text: 'from the vault' }, 'Reading the docs.') : say('Done.')
}

test.describe.serial('vaults page', () => {
  test.skip(!keychain.ok, keychain.reason ?? '')
  let dataDir: string
  let serve: ServeProcess
  let mcp: Awaited<ReturnType<typeof mcpTestServer>>
  let model: ScriptedModelServer
  const api = <T = Record<string, any>>(method: string, path: string, body?: unknown) => serve.api<T>(method, path, body)
  /** Nothing secret in the page (its DOM, inputs included) or in any answer the page read. */
  const noSecretShown = async (page: Page, answers: string[]) => {
    const html = await page.content()
    const values = await page.locator('input').evaluateAll((els) => els.map((e) => (e as HTMLInputElement).value).join('\n'))
    for (const s of SECRETS) {
      expect(html).not.toContain(s)
      expect(values).not.toContain(s)
      for (const a of answers) expect(a).not.toContain(s)
    }
  }

  test.beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-vaults-'))
    mcp = await mcpTestServer()
    model = await ScriptedModelServer.start(respond)
    serve = await startServe({
      dataDir,
      token: TOKEN,
      modelUrl: model.url,
      env: { DBUS_SESSION_BUS_ADDRESS: process.env.DBUS_SESSION_BUS_ADDRESS, CORRAL_KEYCHAIN_SERVICE: `corral-e2e-vaults-${process.pid}-${Date.now()}` },
    })
  })

  test.afterAll(async () => {
    // deleting the vaults takes their secrets out of the keychain
    if (serve) for (const v of (await api<{ data: { id: string }[] }>('GET', '/v1/vaults?include_archived=true').catch(() => ({ data: [] }))).data) await api('DELETE', `/v1/vaults/${v.id}`).catch(() => {})
    await serve?.stop()
    await model?.close()
    await mcp?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test('makes a vault and adds an MCP token, an MCP OAuth credential with refresh and a sandbox secret; no secret is shown back', async ({ page }, info) => {
    const answers: string[] = []
    page.on('response', (r) => void (r.url().includes('/v1/') ? r.text().then((t) => answers.push(t), () => {}) : undefined))
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions`)
    await openSection(page, 'Vaults')
    await expect(page.getByRole('heading', { name: 'Vaults' }).last()).toBeVisible()
    await page.getByRole('complementary', { name: 'Vaults' }).getByRole('button', { name: 'New' }).click()
    await page.getByLabel('Name').fill('Project X')
    await page.getByRole('button', { name: 'Create vault' }).click()
    await expect(page.getByRole('heading', { name: 'Project X' })).toBeVisible()
    await expect(page).toHaveURL(/#\/vaults\/vlt_/)

    const add = page.getByRole('region', { name: 'Add a credential' })
    // an MCP server's static token
    await add.getByLabel('Display name (optional)').fill('Docs server')
    await add.getByLabel('MCP server URL').fill(`${mcp.url}/mcp`)
    await expect(add.getByText('Still needed: the token.')).toBeVisible()
    await add.getByLabel('Token', { exact: true }).fill(BEARER)
    await add.getByRole('button', { name: 'Add credential' }).click()
    await expect(add.getByRole('status')).toHaveText('Added Docs server. Its secret is in the keychain.')
    await expect(add.getByLabel('Token', { exact: true })).toHaveValue('')
    const credentials = page.getByRole('region', { name: 'Credentials' })
    await expect(credentials.getByRole('listitem', { name: 'Docs server' })).toContainText(`${mcp.url}/mcp`)

    // an MCP OAuth credential whose access token has expired, with a refresh token
    await add.getByLabel('Kind').selectOption('mcp_oauth')
    await add.getByLabel('Display name (optional)').fill('Docs OAuth')
    await add.getByLabel('MCP server URL').fill(`${mcp.url}/oauth`)
    await add.getByLabel('Access token', { exact: true }).fill(ACCESS_OLD)
    await add.getByLabel('Refresh the access token when the server refuses it').check()
    await add.getByLabel('Token endpoint').fill(`${mcp.url}/token`)
    await add.getByLabel('Client ID').fill('corral-client')
    await add.getByLabel('Refresh token', { exact: true }).fill(REFRESH)
    await add.getByLabel('Client authentication').selectOption('client_secret_basic')
    await expect(add.getByText('Still needed: the client secret.')).toBeVisible()
    await add.getByLabel('Client secret', { exact: true }).fill(CLIENT_SECRET)
    await add.getByRole('button', { name: 'Add credential' }).click()
    await expect(credentials.getByRole('listitem', { name: 'Docs OAuth' })).toContainText('refreshes itself')

    // a secret the sandbox's programs send to one host
    await add.getByLabel('Kind').selectOption('environment_variable')
    await add.getByLabel('Variable name').fill('GITHUB_TOKEN')
    await add.getByLabel('Secret value').fill(ENV_SECRET)
    await add.getByLabel('Hosts', { exact: true }).fill('api.github.com')
    await add.getByRole('button', { name: 'Add credential' }).click()
    await expect(credentials.getByRole('listitem', { name: '$GITHUB_TOKEN' })).toContainText('$GITHUB_TOKEN → api.github.com (headers)')

    const vault = (await api<{ data: { id: string; display_name: string }[] }>('GET', '/v1/vaults')).data[0]
    expect(vault.display_name).toBe('Project X')
    const listed = await api<{ data: { auth: { type: string } }[] }>('GET', `/v1/vaults/${vault.id}/credentials`)
    expect(listed.data.map((c) => c.auth.type).sort()).toEqual(['environment_variable', 'mcp_oauth', 'static_bearer'])
    answers.push(JSON.stringify(listed))
    const axe = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa']).analyze()
    expect(axe.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => v.id)).toEqual([])
    await shot(page, info, 'vaults-01-credentials')
    await noSecretShown(page, answers)
  })

  test('checks the OAuth credential against its server: refreshed and working; a rejected token says so until it is replaced', async ({ page }, info) => {
    const vault = (await api<{ data: { id: string }[] }>('GET', '/v1/vaults')).data[0]
    // a second OAuth credential, without refresh, whose token the server does not know
    await api('POST', `/v1/vaults/${vault.id}/credentials`, { display_name: 'Stale OAuth', auth: { type: 'mcp_oauth', mcp_server_url: `${mcp.url}/stale`, access_token: WRONG_ACCESS } })
    await page.goto(`${serve.url}/?token=${TOKEN}#/vaults/${vault.id}`)
    const credentials = page.getByRole('region', { name: 'Credentials' })

    const oauth = credentials.getByRole('listitem', { name: 'Docs OAuth' })
    await oauth.getByRole('button', { name: 'Check' }).click()
    const result = oauth.getByRole('status', { name: 'Check result' })
    await expect(result).toContainText('Works: the MCP server accepted the access token.')
    await expect(result).toContainText('The access token was refreshed, and the new one is kept in the keychain.')
    expect(mcp.refreshCalls).toEqual(['refresh_token'])

    const stale = credentials.getByRole('listitem', { name: 'Stale OAuth' })
    await stale.getByRole('button', { name: 'Check' }).click()
    await expect(stale.getByRole('status', { name: 'Check result' })).toContainText('Rejected: the MCP server refused the access token.')
    await expect(stale.getByRole('status', { name: 'Check result' })).toContainText('The server answered initialize with HTTP 401: {"error":"unauthorized"}')
    await expect(stale.getByRole('status', { name: 'Check result' })).toContainText('No refresh token is stored')
    await shot(page, info, 'vaults-02-checks')

    await stale.getByRole('button', { name: 'Replace secret' }).click()
    await stale.getByLabel('New access token').fill(ACCESS_NEW)
    await stale.getByRole('button', { name: 'Save the new secret' }).click()
    await expect(stale.getByLabel('New access token')).toHaveCount(0)
    await stale.getByRole('button', { name: 'Check' }).click()
    await expect(stale.getByRole('status', { name: 'Check result' })).toContainText('Works: the MCP server accepted the access token.')
    await noSecretShown(page, [])
  })

  test("a session started with the vault from the new-session dialog reaches the agent's MCP server with the vault's token", async ({ page }, info) => {
    const vault = (await api<{ data: { id: string }[] }>('GET', '/v1/vaults')).data[0]
    // the agent, with its MCP server, made in the agent editor
    await page.goto(`${serve.url}/?token=${TOKEN}#/agents/new`)
    await page.getByLabel('Name', { exact: true }).fill('Docs reader')
    await page.getByRole('button', { name: 'MCP server', exact: true }).click()
    await page.getByLabel('MCP server 1 name').fill('docs')
    await page.getByLabel('MCP server 1 URL').fill(`${mcp.url}/mcp`)
    await page.getByLabel('MCP server 1 permission').selectOption('always_allow')
    await expect(page.getByText('Credential in Project X: pick that vault when you start a session.')).toBeVisible()
    await page.getByLabel('MCP server 1 URL').fill(`${mcp.url}/elsewhere`)
    await expect(page.getByText('No vault holds a credential for this URL')).toBeVisible()
    await page.getByLabel('MCP server 1 URL').fill(`${mcp.url}/mcp/`)
    await expect(page.getByText('Credential in Project X: pick that vault when you start a session.')).toBeVisible()
    await page.getByLabel('MCP server 1 URL').fill(`${mcp.url}/mcp`)
    await page.getByRole('button', { name: 'Create agent' }).click()
    await expect(page).toHaveURL(/#\/agents\/agent_/)
    const agent = (await api<{ data: { name: string; mcp_servers: unknown[]; tools: { type: string }[] }[] }>('GET', '/v1/agents')).data.find((a) => a.name === 'Docs reader')!
    expect(agent.mcp_servers).toEqual([{ type: 'url', name: 'docs', url: `${mcp.url}/mcp` }])
    expect(agent.tools.find((t) => t.type === 'mcp_toolset')).toMatchObject({ mcp_server_name: 'docs', default_config: { permission_policy: { type: 'always_allow' } } })
    await page.getByRole('group', { name: 'MCP servers' }).scrollIntoViewIfNeeded()
    await shot(page, info, 'vaults-03a-agent-mcp')
    await api('POST', '/v1/environments', { name: 'Local', config: { type: 'cloud', networking: { type: 'limited', allow_mcp_servers: true } } })
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions`)
    await page.getByRole('button', { name: 'New session' }).first().click()
    const dialog = page.getByRole('dialog', { name: 'New session' })
    await dialog.getByLabel('Project X').check()
    await dialog.getByLabel('First message').fill('Read the docs.')
    await dialog.getByRole('button', { name: 'Start session' }).click()
    await expect(page).toHaveURL(/#\/sessions\/sesn_/)
    const sessionId = /sesn_[A-Za-z0-9]+/.exec(page.url())![0]
    expect((await api<{ vault_ids: string[] }>('GET', `/v1/sessions/${sessionId}`)).vault_ids).toEqual([vault.id])
    await expect(page.getByRole('link', { name: 'Project X' })).toHaveAttribute('href', `#/vaults/${vault.id}`)
    await expect(page.getByRole('article', { name: 'Tool call echo: Done' })).toBeVisible({ timeout: 30_000 })
    await expect(page.getByText('Done.')).toBeVisible({ timeout: 30_000 })
    const events = await api<{ data: { type: string; content?: { text?: string }[] }[] }>('GET', `/v1/sessions/${sessionId}/events?limit=100`)
    const result = events.data.find((e) => e.type === 'agent.mcp_tool_result')
    expect(result?.content?.[0]?.text).toBe('echo: from the vault')
    await shot(page, info, 'vaults-03b-session')
    await noSecretShown(page, [JSON.stringify(events)])
  })

  test("a schedule's sessions get the vaults ticked in its form, and unticking one saves only that", async ({ page }) => {
    const vault = (await api<{ data: { id: string }[] }>('GET', '/v1/vaults')).data[0]
    await page.goto(`${serve.url}/?token=${TOKEN}#/schedules/new`)
    await page.getByLabel('Name').fill('Nightly docs')
    await page.getByLabel('Task').fill('Read the docs.')
    await page.getByRole('group', { name: 'Vaults the session may use' }).getByLabel('Project X').check()
    await page.getByRole('button', { name: 'Create schedule' }).click()
    await expect(page).toHaveURL(/#\/schedules\/depl_/)
    const id = /#\/schedules\/(depl_\w+)/.exec(page.url())![1]
    expect((await api<{ vault_ids: string[] }>('GET', `/v1/deployments/${id}`)).vault_ids).toEqual([vault.id])
    const box = page.getByRole('group', { name: 'Vaults the session may use' }).getByLabel('Project X')
    await expect(box).toBeChecked()
    await box.uncheck()
    await page.getByRole('button', { name: 'Save', exact: true }).click()
    await expect.poll(async () => (await api<{ vault_ids: string[]; name: string }>('GET', `/v1/deployments/${id}`)).vault_ids).toEqual([])
    expect((await api<{ name: string }>('GET', `/v1/deployments/${id}`)).name).toBe('Nightly docs')
    await api('POST', `/v1/deployments/${id}/archive`)
  })

  test('a vault whose token the MCP server refuses: the session says so, with the way to the Vaults page', async ({ page }, info) => {
    const wrong = await api<{ id: string }>('POST', '/v1/vaults', { display_name: 'Wrong token' })
    await api('POST', `/v1/vaults/${wrong.id}/credentials`, { auth: { type: 'static_bearer', mcp_server_url: `${mcp.url}/mcp`, token: WRONG_ACCESS } })
    const agent = (await api<{ data: { id: string; name: string }[] }>('GET', '/v1/agents')).data.find((a) => a.name === 'Docs reader')!
    const env = (await api<{ data: { id: string }[] }>('GET', '/v1/environments')).data[0]
    const session = await api<{ id: string }>('POST', '/v1/sessions', { agent: agent.id, environment_id: env.id, vault_ids: [wrong.id], title: 'Refused', initial_events: [{ type: 'user.message', content: [{ type: 'text', text: 'Read the docs.' }] }] })
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions/${session.id}`)
    const error = page.getByRole('alert').filter({ hasText: 'mcp authentication failed error' })
    await expect(error).toContainText('rejected the credential from the session', { timeout: 30_000 })
    await expect(error.getByRole('link', { name: 'Open Vaults' })).toHaveAttribute('href', '#/vaults')
    await shot(page, info, 'vaults-05-refused')
    await noSecretShown(page, [JSON.stringify(await api('GET', `/v1/sessions/${session.id}/events?limit=100`))])
    await api('DELETE', `/v1/vaults/${wrong.id}`)
  })

  test('deletes the vault, and its credentials with it', async ({ page }) => {
    const vault = (await api<{ data: { id: string }[] }>('GET', '/v1/vaults')).data[0]
    await page.goto(`${serve.url}/?token=${TOKEN}#/vaults/${vault.id}`)
    page.once('dialog', (d) => void d.accept())
    await page.getByRole('button', { name: 'Delete', exact: true }).click()
    await expect(page).toHaveURL(/#\/vaults$/)
    expect((await api<{ data: unknown[] }>('GET', '/v1/vaults?include_archived=true')).data).toEqual([])
  })
})

test.describe.serial('vaults page without a keychain', () => {
  let dataDir: string
  let serve: ServeProcess

  test.beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-vaults-nokc-'))
    // startServe's default: no session bus, so no keychain answers
    serve = await startServe({ dataDir, token: TOKEN })
  })

  test.afterAll(async () => {
    await serve?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test('says why no secret can be stored, refuses the credential with the engine’s reason and keeps what was typed', async ({ page }, info) => {
    const vault = await serve.api<{ id: string }>('POST', '/v1/vaults', { display_name: 'Headless' })
    await page.goto(`${serve.url}/?token=${TOKEN}#/vaults/${vault.id}`)
    await expect(page.getByRole('status').filter({ hasText: 'Credentials cannot be stored here: no OS keychain is available.' })).toBeVisible()
    const add = page.getByRole('region', { name: 'Add a credential' })
    await add.getByLabel('MCP server URL').fill('https://mcp.example.com/mcp')
    await add.getByLabel('Token', { exact: true }).fill('canary-e2e-headless-token')
    await add.getByRole('button', { name: 'Add credential' }).click()
    await expect(add.getByRole('alert')).toContainText(/keychain/i)
    await expect(add.getByLabel('MCP server URL')).toHaveValue('https://mcp.example.com/mcp')
    expect((await serve.api<{ data: unknown[] }>('GET', `/v1/vaults/${vault.id}/credentials`)).data).toEqual([])
    await shot(page, info, 'vaults-04-no-keychain')
  })
})
