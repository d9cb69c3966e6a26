import { expect, test } from '@playwright/test'
import AxeBuilder from '@axe-core/playwright'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { say, ScriptedModelServer, toolCall, toolResultsOf, type RecordedRequest, type ScriptStep } from '../support/model-server'
import { startServe, type ServeProcess } from './support/serve'
import { shot } from './support/screenshots'

/**
 * A workflow run in the desktop (issue #12), in Chromium against the real `corral serve`, a real
 * bubblewrap sandbox and the scripted model: the lead starts a run (`ant__workflow_run_start`, as
 * offered) whose program fans out to two reviewers and a checker in a "review" phase, then one
 * inline writer in a "summarise" phase. The checker's bash call asks first: the person approves it
 * from the queue while the run card shows the run in progress; the run then completes and the lead
 * reads its output. The card (phases, counter, grid, result, output), the thread tree's run group,
 * the session list's progress and a thread opened from the grid are checked and photographed.
 */

const TOKEN = 'e2e_token_workflows_0123456789a'
const LEAD = 'You are the lead.'
const REVIEWER = 'You review one file.'
const CHECKER = 'You run the checks.'
const WRITER = 'You summarise reviews.'
const CHECK_COMMAND = 'echo all checks pass'
const RUN_NAME = 'review the change'

const PROGRAM = `
  const reviews = await phase('review', () => Promise.all([
    ...args.files.map((f) => agent('reviewer', 'Review ' + f, { label: f })),
    agent('checker', 'Run the checks', { label: 'checks' }),
  ]))
  log('reviewed', reviews.length, 'parts')
  const summary = await phase('summarise', () => agent({ name: 'writer', system: ${JSON.stringify(WRITER)} }, 'Summarise: ' + reviews.join(' / '), { label: 'summary' }))
  return { summary, reviews }
`

const systemOf = (req: RecordedRequest) => (req.body.system ?? []).map((s) => s.text).join('\n')
const firstUserText = (req: RecordedRequest) => {
  const c = req.body.messages[0]?.content
  return typeof c === 'string' ? c : ((c as { type: string; text?: string }[] | undefined) ?? []).map((b) => b.text ?? '').join('')
}

/** One model for every thread, told apart by the system prompt each agent was given. */
function respond(req: RecordedRequest): ScriptStep {
  const system = systemOf(req)
  const usage = { input_tokens: 30_000, output_tokens: 2_000 }
  if (system.includes(REVIEWER)) return say(`${firstUserText(req).replace('Review ', '')} looks fine`, { usage, delayMs: 300 })
  if (system.includes(CHECKER)) {
    if (toolResultsOf(req).length === 0) return toolCall(req, 'bash', { command: CHECK_COMMAND }, 'Running the checks.')
    return say('The checks pass.', { usage })
  }
  if (system.includes(WRITER)) return say('All three parts are fine.', { usage })
  if (system.includes(LEAD)) {
    if (JSON.stringify(req.body.messages).includes('<workflow_run')) return say('The review run is done: all parts are fine.', { usage })
    if (toolResultsOf(req).length === 0)
      return toolCall(req, 'ant__workflow_run_start', {
        name: RUN_NAME,
        description: 'two reviewers and the checks, then a summary',
        phases: [{ name: 'review', description: 'each file and the checks' }, { name: 'summarise' }],
        args: { files: ['a.ts', 'b.ts'] },
        program: PROGRAM,
      })
    return say('I started a workflow run to review the change.', { usage })
  }
  return say('OK.')
}

test.describe.serial('workflows: a lead running a workflow of four agents in two phases', () => {
  let dataDir: string
  let model: ScriptedModelServer
  let serve: ServeProcess
  let sessionId: string

  const api = <T = Record<string, any>>(method: string, path: string, body?: unknown) => serve.api<T>(method, path, body)

  test.beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-workflows-'))
    model = await ScriptedModelServer.start(respond)
    serve = await startServe({ dataDir, token: TOKEN, modelUrl: model.url })
    const allow = [{ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_allow' } } }]
    const ask = [{ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_ask' } } }]
    const reviewer = await api('POST', '/v1/agents', { name: 'reviewer', model: 'claude-sonnet-4-6', system: REVIEWER, tools: allow })
    const checker = await api('POST', '/v1/agents', { name: 'checker', model: 'claude-sonnet-4-6', system: CHECKER, tools: ask })
    const lead = await api('POST', '/v1/agents', {
      name: 'lead',
      model: 'claude-sonnet-4-6',
      system: LEAD,
      tools: allow,
      multiagent: { type: 'multiagent_20261001', workflows: { type: 'enabled', predefined_agents: [reviewer.id, checker.id] } },
    })
    const env = await api('POST', '/v1/environments', { name: 'bwrap', config: { type: 'cloud', corral: { backend: 'bubblewrap' } } })
    sessionId = (await api('POST', '/v1/sessions', { agent: lead.id, environment_id: env.id, title: 'Review the change' })).id
  })

  test.afterAll(async () => {
    await serve?.stop()
    await model?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test("draws the run as a card in the lead's timeline, live: phases, the counter, the agents grid; the checker's confirmation approved from the queue; the run's result and output", async ({ page }, info) => {
    await page.emulateMedia({ colorScheme: 'dark' })
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions/${sessionId}`)
    await expect(page.getByRole('heading', { name: 'Review the change' })).toBeVisible()
    await page.getByLabel('Message', { exact: true }).fill('Review the change in a.ts and b.ts and run the checks.')
    await page.getByLabel('Message', { exact: true }).press('Enter')

    const card = page.getByRole('region', { name: `Workflow run ${RUN_NAME}` })
    // (generous first waits: the lead's turn, the run's start and its agents' first turns on a loaded machine)
    await expect(card).toBeVisible({ timeout: 45_000 })
    await expect(card).toContainText('two reviewers and the checks, then a summary', { timeout: 45_000 })
    // Styled: the card's rules apply (a rule left open above them in styles.css nested them all away).
    await expect(card).toHaveCSS('border-left-width', '4px')
    const grid = card.getByRole('table', { name: `Agents of ${RUN_NAME}` })
    // The two reviewers finish; the checker waits on the person; nothing of the summary phase yet.
    const row = (label: string) => grid.locator('.run-agent').filter({ has: page.getByRole('button', { name: label, exact: true }) })
    await expect(row('a.ts')).toContainText('done', { timeout: 45_000 })
    await expect(row('b.ts')).toContainText('done', { timeout: 45_000 })
    await expect(row('checks')).toContainText('waiting on you', { timeout: 45_000 })
    const counter = card.getByRole('status', { name: 'Agents of the run' })
    await expect(counter.locator('[data-count=working]')).toContainText('0 working')
    await expect(counter.locator('[data-count=waiting]')).toContainText('1 waiting on you')
    await expect(counter.locator('[data-count=done]')).toContainText('2 done')
    await expect(counter.locator('[data-count=failed]')).toContainText('0 failed')
    await expect(card.getByLabel('Run status')).toHaveText('Waiting on you')
    const phases = card.getByRole('list', { name: 'Phases' }).locator('.run-phase')
    await expect(phases).toHaveCount(2)
    await expect(phases.nth(0)).toContainText('review')
    await expect(phases.nth(0)).toContainText('running')
    await expect(phases.nth(0)).toContainText('2/3 agents done')
    await expect(phases.nth(1)).toContainText('not started')
    // Nothing logged yet: the program logs once the review phase is done.
    await card.locator('.run-log summary').click()
    await expect(card.locator('.run-log')).toContainText('The program has logged nothing yet.')

    // The thread tree gathers the run's threads under the run, collapsed, with its counter.
    const tree = page.getByRole('navigation', { name: 'Threads' })
    const group = tree.getByRole('button', { name: new RegExp(RUN_NAME) })
    await expect(group).toHaveAttribute('aria-expanded', 'false')
    await expect(group).toContainText('workflow · 2/3 done')
    await expect(tree.locator('.thread-node')).toHaveCount(1)
    await group.click()
    await expect(tree.locator('.thread-node.depth-2')).toHaveCount(3)
    await expect(tree.locator('.thread-node.depth-2').first()).toContainText('a.ts')
    // The session list shows the run in progress.
    await expect(page.getByRole('complementary', { name: 'Sessions' }).locator('.session-run')).toHaveText('workflow · 2/3 done')
    const axe = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']).analyze()
    expect(axe.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`)).toEqual([])
    await shot(page, info, 'workflow-01-running')

    // The checker's bash call, from the queue: named by its agent and thread.
    await page.getByRole('button', { name: 'Confirmation queue: 1 waiting' }).click()
    const queue = page.getByRole('complementary', { name: 'Confirmation queue' })
    await expect(queue.locator('.queue-item')).toHaveCount(1)
    await expect(queue.locator('.queue-detail')).toContainText(CHECK_COMMAND)
    await expect(queue.locator('.queue-from')).toContainText('checker')
    await queue.getByRole('button', { name: 'Approve' }).click()
    await expect(queue.locator('.queue-item')).toHaveCount(0)
    await page.getByRole('button', { name: 'Close the queue' }).click()

    // The run completes: both phases ended, four agents done, the result and the output.
    await expect(card.getByRole('status', { name: 'Run result' })).toContainText('Completed', { timeout: 30_000 })
    await expect(card.getByLabel('Run status')).toHaveText('Completed')
    await expect(counter.locator('[data-count=done]')).toContainText('4 done')
    await expect(counter.locator('[data-count=waiting]')).toContainText('0 waiting on you')
    await expect(phases.nth(0)).toContainText('ended')
    await expect(phases.nth(0)).toContainText('3/3 agents done')
    await expect(phases.nth(1)).toContainText('1/1 agent done')
    await expect(row('summary')).toContainText('done')
    // The log's tail arrives while the section is open: the program's line, as it logged it.
    await expect(card.getByLabel('Log lines')).toHaveText('reviewed 3 parts', { timeout: 10_000 })
    await expect(card.locator('.run-log summary')).toHaveText('Log · 1 line')
    await card.locator('.run-output summary').click()
    await expect(card.locator('.run-output-json')).toContainText('"summary": "All three parts are fine."')
    await expect(card.locator('.run-output-json')).toContainText('a.ts looks fine')
    await expect(group).toContainText('workflow · 4/4 done')
    await expect(page.locator('.msg-agent').last()).toContainText('The review run is done', { timeout: 30_000 })
    await expect(page.locator('.thread-header .status')).toHaveText('Idle', { timeout: 30_000 })
    // No run in progress any more: the list's progress is gone.
    await expect(page.getByRole('complementary', { name: 'Sessions' }).locator('.session-run')).toHaveCount(0, { timeout: 10_000 })
    // Each agent's cost is its thread's, as the engine reports it.
    // (a reviewer's one request: 30,000 input and 2,000 output tokens at the model's list price, $0.12)
    await expect(row('a.ts').locator('.run-agent-cost')).toHaveText('$0.12')
    await expect(row('a.ts').locator('.run-agent-cost')).toHaveAttribute('title', "This thread's list cost, reported by the engine")
    // The run's cost is the sum of its threads': at least the four agents' $0.12.
    await expect(card.locator('.run-cost')).toHaveText(/^\$0\.(4[89]|[5-9]\d)$/)
    await card.scrollIntoViewIfNeeded()
    await shot(page, info, 'workflow-02-done')
    await grid.screenshot({ path: join(__dirname, '..', '..', 'test-results', 'screenshots', 'workflow-03-grid.png') })
    await info.attach('workflow-03-grid', { path: join(__dirname, '..', '..', 'test-results', 'screenshots', 'workflow-03-grid.png'), contentType: 'image/png' })
    // The run's threads make no rows of their own on the lead's timeline.
    await expect(page.locator('.thread-card')).toHaveCount(0)
    await expect(page.locator('.thread-event')).toHaveCount(0)
  })

  test("opens an agent's thread from the run's grid: its own timeline with the call that was approved", async ({ page }, info) => {
    await page.emulateMedia({ colorScheme: 'dark' })
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions/${sessionId}`)
    const card = page.getByRole('region', { name: `Workflow run ${RUN_NAME}` })
    await expect(card.getByRole('status', { name: 'Run result' })).toContainText('Completed')
    await card.getByRole('table', { name: `Agents of ${RUN_NAME}` }).getByRole('button', { name: 'checks', exact: true }).click()
    await expect(page).toHaveURL(/\/threads\/sthr_/)
    await expect(page.getByLabel('Selected thread')).toContainText('Agent checks (checker) of the workflow run review the change')
    await expect(page.getByLabel('Selected thread')).toContainText('done')
    await expect(page.locator('.msg-thread').first()).toContainText('Task from the workflow run')
    await expect(page.locator('.msg-thread').first()).toContainText('Run the checks')
    const tool = page.locator('.tool-card').filter({ hasText: CHECK_COMMAND })
    await expect(tool).toHaveCount(1)
    await expect(tool).not.toHaveClass(/tool-awaiting/)
    await expect(page.locator('.msg-agent').last()).toContainText('The checks pass.')
    // The tree opens the run's group of the selected thread and marks it.
    const tree = page.getByRole('navigation', { name: 'Threads' })
    await expect(tree.getByRole('button', { name: new RegExp(RUN_NAME) })).toHaveAttribute('aria-expanded', 'true')
    await expect(tree.locator('.thread-node-btn.active')).toContainText('checks')
    await shot(page, info, 'workflow-04-thread')
  })
})
