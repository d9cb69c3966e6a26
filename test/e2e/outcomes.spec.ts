import { expect, test } from '@playwright/test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { forcedToolCall, forcedToolName, say, ScriptedModelServer, toolCall, toolResultsOf, type RecordedRequest, type ScriptStep } from '../support/model-server'
import { startServe, type ServeProcess } from './support/serve'
import { shot } from './support/screenshots'

/**
 * Outcomes and budgets in the desktop, in Chromium against the real `corral serve`, a bubblewrap
 * sandbox and the scripted model: an outcome whose first evaluation asks for a revision and whose
 * second is satisfied, drawn as the outcome card (rubric, each evaluation's verdict and gaps, the
 * result); a session paused at its budget, raised from its header, which then finishes; and the
 * default budget for new sessions in Settings, which the new-session dialog starts with.
 */

const TOKEN = 'e2e_token_outcomes_0123456789ab'
const RUBRIC = '- The report has a "## Summary" heading\n- It names the quarter'

const lastUser = (req: RecordedRequest) => req.body.messages[req.body.messages.length - 1]
const systemOf = (req: RecordedRequest) => (req.body.system ?? []).map((s) => s.text).join('\n')
let graded = 0

function respond(req: RecordedRequest): ScriptStep {
  if (forcedToolName(req)) {
    graded++
    return graded === 1
      ? forcedToolCall(req, { result: 'needs_revision', explanation: 'The report has no summary section yet.', gaps: [{ criterion: 'The report has a "## Summary" heading', gap: 'There is no "## Summary" heading' }] })
      : forcedToolCall(req, { result: 'satisfied', explanation: 'Both criteria are met: a summary heading and the quarter (Q3).', gaps: [] })
  }
  if (systemOf(req).includes('You are the spender')) {
    // one expensive look at its own history ($3.00 at Sonnet's list price), then a cheap answer
    if (toolResultsOf(req).length === 0) return { ...toolCall(req, 'session_history', {}), usage: { input_tokens: 10, output_tokens: 200_000 } } as ScriptStep
    return say('Done within the new budget.', { usage: { input_tokens: 10, output_tokens: 10 } })
  }
  // anything else (the Settings page's Test connection) offers no tools
  if (!req.body.tools?.length) return say('OK.')
  const last = lastUser(req)
  const blocks = typeof last.content === 'string' ? [{ type: 'text', text: last.content }] : last.content
  const result = blocks.find((b) => b.type === 'tool_result')
  const revision = JSON.stringify(req.body.messages).includes('<outcome_evaluation ')
  if (!result) return toolCall(req, 'write', { file_path: '/workspace/report.md', content: revision ? '# Q3 report\n## Summary\nRevenue grew.\n' : '# Q3 report\nRevenue grew.\n' })
  if (!JSON.stringify(result.content).includes('The grader will read')) return toolCall(req, 'ant__name_deliverables', { paths: ['/workspace/report.md'] })
  return say(revision ? 'Added the summary section.' : 'The Q3 report is in /workspace/report.md.')
}

test.describe.serial('outcomes and budgets in the desktop', () => {
  let dataDir: string
  let model: ScriptedModelServer
  let serve: ServeProcess
  let writer: { id: string }
  let spender: { id: string }
  let envId: string

  const api = <T = Record<string, any>>(method: string, path: string, body?: unknown) => serve.api<T>(method, path, body)

  test.beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-outcomes-'))
    model = await ScriptedModelServer.start(respond)
    serve = await startServe({ dataDir, token: TOKEN, modelUrl: model.url })
    const tools = [{ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_allow' } } }]
    writer = await api('POST', '/v1/agents', { name: 'writer', model: 'claude-sonnet-4-6', system: 'You are the writer.', tools })
    spender = await api('POST', '/v1/agents', { name: 'spender', model: 'claude-sonnet-4-6', system: 'You are the spender.' })
    envId = (await api('POST', '/v1/environments', { name: 'bwrap', config: { type: 'cloud', corral: { backend: 'bubblewrap' } } })).id
  })

  test.afterAll(async () => {
    await serve?.stop()
    await model?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test("draws the outcome card: the rubric, each evaluation's verdict, explanation and gaps, and the final result", async ({ page }, info) => {
    const session = await api('POST', '/v1/sessions', {
      agent: writer.id,
      environment_id: envId,
      title: 'Q3 report',
      initial_events: [{ type: 'user.define_outcome', description: 'Write the Q3 report to /workspace/report.md', rubric: { type: 'text', content: RUBRIC } }],
    })
    await page.emulateMedia({ colorScheme: 'dark' })
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions/${session.id}`)
    const card = page.getByRole('region', { name: 'Outcome' })
    await expect(card.getByLabel('Outcome result')).toHaveText('Satisfied', { timeout: 30_000 })
    await expect(card).toContainText('Write the Q3 report to /workspace/report.md')
    const evaluations = card.getByRole('list', { name: 'Evaluations' }).locator(':scope > li')
    await expect(evaluations).toHaveCount(2)
    await expect(evaluations.nth(0)).toContainText('Evaluation 1 of at most 3: Needs revision')
    await expect(evaluations.nth(0)).toContainText('The report has no summary section yet.')
    await expect(evaluations.nth(0)).toContainText('There is no "## Summary" heading')
    await expect(evaluations.nth(1)).toContainText('Evaluation 2 of at most 3: Satisfied')
    await card.getByText('Rubric').click()
    await expect(card.locator('.outcome-rubric-text')).toContainText('It names the quarter')
    await shot(page, info, 'outcome-card')
  })

  test('shows spend against the cap, says a session is paused at its budget, and a raise from the header resumes it', async ({ page }, info) => {
    const session = await api('POST', '/v1/sessions', { agent: spender.id, environment_id: envId, title: 'Spend check', budget: { type: 'limit', max_list_cost: { amount: '250', currency: 'USD' } } })
    await api('POST', `/v1/sessions/${session.id}/events`, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'Look at your history.' }] }] })
    await page.emulateMedia({ colorScheme: 'dark' })
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions/${session.id}`)
    const paused = page.getByRole('status', { name: 'Paused at its budget' })
    await expect(paused).toContainText('Paused at its budget — raise it to continue')
    await expect(page.getByLabel('Spend against the budget')).toContainText('of $2.50')
    // a raise at or below the spend: the engine's own 400 is shown, nothing changes
    await paused.getByLabel('New budget in USD').fill('3')
    await paused.getByRole('button', { name: 'Raise budget' }).click()
    await expect(paused).toContainText("must be greater than the session's consumed list cost")
    await shot(page, info, 'budget-paused')
    await paused.getByLabel('New budget in USD').fill('10')
    await paused.getByRole('button', { name: 'Raise budget' }).click()
    await expect(page.locator('.msg-agent').filter({ hasText: 'Done within the new budget.' })).toBeVisible()
    await expect(page.getByRole('status', { name: 'Paused at its budget' })).toHaveCount(0)
    await expect(page.getByLabel('Spend against the budget')).toContainText('of $10.00')
    await shot(page, info, 'budget-raised')
  })

  test('keeps a default budget for new sessions in Settings, which the new-session dialog starts with', async ({ page }, info) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/settings`)
    await page.getByLabel('Budget for new sessions, in USD').fill('7.50')
    await page.getByRole('button', { name: 'Save default budget' }).click()
    await expect(page.getByRole('region', { name: 'Default budget' }).getByText('Saved.')).toBeVisible()
    expect((await api<{ default_budget: unknown }>('GET', '/v1/corral/settings')).default_budget).toEqual({ type: 'limit', max_list_cost: { amount: '750', currency: 'USD' } })
    await shot(page, info, 'settings-default-budget')
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions`)
    await page.getByRole('button', { name: /^New session/ }).last().click()
    const dialog = page.getByRole('dialog', { name: 'New session' })
    await expect(dialog.getByLabel('Budget in USD (optional)')).toHaveValue('7.50')
  })
})
