import { expect, test } from '@playwright/test'
import AxeBuilder from '@axe-core/playwright'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { say, ScriptedModelServer, toolResultsOf, toolUseViolations, type RecordedRequest, type ScriptStep } from '../support/model-server'
import { startServe, type ServeProcess } from './support/serve'
import { shot } from './support/screenshots'

/**
 * Threads in the desktop, in Chromium against the real `corral serve`, a real bubblewrap sandbox
 * and the scripted model: a lead consults its advisor (`ant__advisor`), then delegates to two
 * agents through the `send_to_agent` tool it is offered; the researcher reports at once, the tester's bash call asks for a confirmation, which
 * the person approves from the queue (the queue names the thread and agent); the tester then
 * reports. The view shows the thread tree with live status and per-thread cost, the delegation
 * and report cards linking to the threads, and each thread's own timeline.
 */

const TOKEN = 'e2e_token_threads_0123456789abc'
const RESEARCHER_REPORT = 'The flaky date test fails only between 23:00 and 00:00 UTC.'
const TESTER_REPORT = 'The date suite passes in the sandbox.'
const TESTER_COMMAND = 'echo date suite passes'
const ADVISOR_MODEL = 'claude-opus-4-6'
const ADVICE = 'Check how the test builds its dates around midnight UTC first.'

/** The text blocks of a request's last user turn. */
function lastUserText(req: RecordedRequest): string {
  const last = req.body.messages[req.body.messages.length - 1]
  if (typeof last.content === 'string') return last.content
  return (last.content as { type: string; text?: string }[]).filter((b) => b.type === 'text').map((b) => b.text ?? '').join('\n')
}

/** A response with several tool calls, each checked against what the request offers (field names included). */
function callTools(req: RecordedRequest, calls: { name: string; input: Record<string, unknown> }[], text: string): ScriptStep {
  for (const c of calls) {
    const problems = toolUseViolations(req.body.tools, c.name, c.input)
    if (problems.length) throw new Error(`scripted model: ${problems.join('; ')}`)
  }
  return { kind: 'message', blocks: [{ type: 'text', text }, ...calls.map((c) => ({ type: 'tool_use' as const, name: c.name, input: c.input }))], usage: { input_tokens: 1200, output_tokens: 80 } }
}

const systemOf = (req: RecordedRequest) => (req.body.system ?? []).map((s) => s.text).join('\n')

/**
 * One model for every thread, told apart by the system prompt each agent was given: the lead
 * (offered send_to_agent) delegates once and then acknowledges; the researcher reports; the
 * tester runs one bash call (its toolset asks first), then reports.
 */
function respond(req: RecordedRequest): ScriptStep {
  const system = systemOf(req)
  if (system.includes('You are the tester')) {
    if (toolResultsOf(req).length === 0) return callTools(req, [{ name: 'bash', input: { command: TESTER_COMMAND } }], 'Running the date suite.')
    return say(TESTER_REPORT, { usage: { input_tokens: 900, output_tokens: 40 } })
  }
  if (system.includes('You are the researcher')) return say(RESEARCHER_REPORT, { usage: { input_tokens: 700, output_tokens: 30 } })
  // The consultation: the advisor model, offered no tools.
  if (req.body.model === ADVISOR_MODEL) return say(ADVICE, { usage: { input_tokens: 1500, output_tokens: 25 } })
  if (req.body.tools?.some((t) => t.name === 'send_to_agent')) {
    const results = toolResultsOf(req).length
    if (/flaky/i.test(lastUserText(req)) && results === 0) return callTools(req, [{ name: 'ant__advisor', input: { question: 'Where should I look first?' } }], 'Let me ask the advisor first.')
    if (results === 1) {
      return callTools(
        req,
        [
          { name: 'send_to_agent', input: { agent: 'researcher', message: 'When does the date test fail on CI? Report the hours.' } },
          { name: 'send_to_agent', input: { agent: 'tester', message: 'Run the date suite in the sandbox and report.' } },
        ],
        'I will ask the researcher and the tester.',
      )
    }
    return say('Noted.', { usage: { input_tokens: 400, output_tokens: 10 } })
  }
  return say('OK.')
}

test.describe.serial('threads: a lead delegating to two agents', () => {
  let dataDir: string
  let model: ScriptedModelServer
  let serve: ServeProcess
  let sessionId: string

  const api = <T = Record<string, any>>(method: string, path: string, body?: unknown) => serve.api<T>(method, path, body)

  test.beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-threads-'))
    model = await ScriptedModelServer.start(respond)
    serve = await startServe({ dataDir, token: TOKEN, modelUrl: model.url })
    const allow = [{ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_allow' } } }]
    const ask = [{ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_ask' } } }]
    const researcher = await api('POST', '/v1/agents', { name: 'researcher', description: 'Reads CI history', model: 'claude-sonnet-4-6', system: 'You are the researcher.', tools: allow })
    const tester = await api('POST', '/v1/agents', { name: 'tester', description: 'Runs test suites', model: 'claude-sonnet-4-6', system: 'You are the tester.', tools: ask })
    const lead = await api('POST', '/v1/agents', {
      name: 'lead',
      model: 'claude-sonnet-4-6',
      system: 'You are the lead.',
      tools: allow,
      multiagent: { type: 'multiagent_20261001', subagents: { type: 'enabled', predefined_agents: [researcher.id, tester.id] }, workflows: { type: 'disabled' }, advisor: { type: 'enabled', model: ADVISOR_MODEL } },
    })
    const env = await api('POST', '/v1/environments', { name: 'bwrap', config: { type: 'cloud', corral: { backend: 'bubblewrap' } } })
    sessionId = (await api('POST', '/v1/sessions', { agent: lead.id, environment_id: env.id, title: 'Fix the flaky date test' })).id
  })

  test.afterAll(async () => {
    await serve?.stop()
    await model?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test("shows the lead's delegations as cards and the threads in a tree, and the tester's confirmation, named by thread and agent, approved from the queue", async ({ page }, info) => {
    await page.emulateMedia({ colorScheme: 'dark' })
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions/${sessionId}`)
    await expect(page.getByRole('heading', { name: 'Fix the flaky date test' })).toBeVisible()
    await page.getByLabel('Message', { exact: true }).fill('The date test is flaky on CI. Find out why and check the suite.')
    await page.getByLabel('Message', { exact: true }).press('Enter')

    // The consultation and its advice are cards too; the advisor's thread is in the tree under "Advisor".
    await expect(page.locator('.thread-card-delegation').filter({ hasText: 'Consulted the advisor' })).toHaveCount(1)
    await expect(page.locator('.thread-card-report').filter({ hasText: 'Advice from the advisor' })).toContainText(ADVICE)
    // Two delegations, each a card linking to its thread.
    await expect(page.locator('.thread-card-delegation').filter({ hasText: 'Delegated to' })).toHaveCount(2)
    await expect(page.locator('.thread-card-delegation').filter({ hasText: 'Delegated to researcher' })).toContainText('When does the date test fail')
    await expect(page.locator('.thread-card-delegation').filter({ hasText: 'Delegated to tester' })).toContainText('Run the date suite')

    // The tree: the primary, both subagents by agent name, then the advisor consultation.
    const tree = page.getByRole('navigation', { name: 'Threads' })
    await expect(tree.getByRole('button')).toHaveCount(4)
    await expect(tree.getByRole('button', { name: /lead · primary/ })).toBeVisible()
    await expect(tree.locator('.thread-tree-group')).toHaveText('Advisor · 1')
    const advisorNode = tree.getByRole('button', { name: new RegExp(`^Advisor ${ADVISOR_MODEL}`) })
    await expect(advisorNode.locator('.thread-node-status')).toHaveText('terminated')
    await expect(tree.locator('.thread-node-btn').last()).toHaveAttribute('data-thread', /^sthr_/)
    const researcherNode = tree.getByRole('button', { name: /^researcher/ })
    const testerNode = tree.getByRole('button', { name: /^tester/ })

    // The researcher reports: a report card on the primary; its thread goes idle with its own cost.
    await expect(page.locator('.thread-card-report').filter({ hasText: 'Report from researcher' })).toContainText(RESEARCHER_REPORT)
    await expect(researcherNode.locator('.thread-node-status')).toHaveText('idle')

    // The tester's bash call waits for the person: the queue names its thread and agent.
    await expect(testerNode.locator('.count-badge')).toContainText('1')
    await page.getByRole('button', { name: 'Confirmation queue: 1 waiting' }).click()
    const queue = page.getByRole('complementary', { name: 'Confirmation queue' })
    await expect(queue.locator('.queue-item')).toHaveCount(1)
    await expect(queue.locator('.queue-thread')).toContainText(/tester · thread …/)
    await expect(queue.locator('.queue-from')).toContainText('Asked by tester in thread sthr_')
    await expect(queue.locator('.queue-detail')).toContainText(TESTER_COMMAND)
    const axeQueue = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']).analyze()
    expect(axeQueue.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => v.id)).toEqual([])
    await shot(page, info, '40-threads-queue')
    await queue.getByRole('button', { name: 'Approve' }).click()
    await expect(queue.locator('.queue-item')).toHaveCount(0)
    await page.getByRole('button', { name: 'Close the queue' }).click()

    // Approved: the tester runs its call and reports; both threads idle; the lead acknowledges.
    await expect(page.locator('.thread-card-report').filter({ hasText: 'Report from tester' })).toContainText(TESTER_REPORT)
    await expect(testerNode.locator('.thread-node-status')).toHaveText('idle')
    await expect(page.locator('.thread-header .status')).toHaveText('Idle', { timeout: 30_000 })
    // Per-thread cost: each child thread shows its own, as the engine reports it (the thread's usage.list_cost), not an estimate ("≈").
    for (const node of [researcherNode, testerNode]) {
      await expect(node.locator('.thread-node-cost')).toHaveText(/^\$|^<\$/)
      await expect(node.locator('.thread-node-cost')).toHaveAttribute('title', "This thread's list cost, reported by the engine")
    }
    const axe = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']).analyze()
    expect(axe.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`)).toEqual([])
    await shot(page, info, '41-threads-primary')

    // The answer went to the session endpoint and was routed to the tester's thread by its id.
    const threads = await api<{ data: { id: string; agent: { name?: string } }[] }>('GET', `/v1/sessions/${sessionId}/threads`)
    const testerThread = threads.data.find((t) => t.agent.name === 'tester')!
    const own = await api<{ data: { type: string; tool_use_id?: string; result?: string }[] }>('GET', `/v1/sessions/${sessionId}/threads/${testerThread.id}/events?limit=100`)
    expect(own.data.filter((e) => e.type === 'user.tool_confirmation').map((e) => e.result)).toEqual(['allow'])
  })

  test("opens a child thread from its card: its own timeline, with the call that was approved and its report", async ({ page }, info) => {
    await page.emulateMedia({ colorScheme: 'dark' })
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions/${sessionId}`)
    await page.locator('.thread-card-report').filter({ hasText: 'Report from tester' }).getByRole('button', { name: 'Open thread' }).click()
    await expect(page).toHaveURL(/\/threads\/sthr_/)
    await expect(page.getByLabel('Selected thread')).toContainText('tester')
    const card = page.locator('.tool-card').filter({ hasText: TESTER_COMMAND })
    await expect(card).toHaveCount(1)
    await expect(card).not.toHaveClass(/tool-awaiting/)
    await expect(page.locator('.msg-thread').first()).toContainText('Task from the lead')
    await expect(page.locator('.msg-thread').first()).toContainText('Run the date suite')
    await expect(page.locator('.msg-thread').last()).toContainText('Report to the lead')
    await expect(page.locator('.msg-thread').last()).toContainText(TESTER_REPORT)
    await expect(page.locator('.divider-requires_action')).toHaveCount(1)
    // The lead's composer is not offered inside a child thread.
    await expect(page.getByLabel('Message', { exact: true })).toHaveCount(0)
    await shot(page, info, '42-threads-tester')
    // The task's link goes back to the lead's view (the session's own route).
    await page.locator('.msg-thread').first().getByRole('button', { name: 'Open thread' }).click()
    await expect(page).toHaveURL(new RegExp(`#/sessions/${sessionId}$`))
    await expect(page.locator('.thread-card')).toHaveCount(6)
  })

  test('shows an archived thread as archived in the tree', async ({ page }, info) => {
    const threads = await api<{ data: { id: string; agent: { name?: string } }[] }>('GET', `/v1/sessions/${sessionId}/threads`)
    const researcher = threads.data.find((t) => t.agent.name === 'researcher')!
    const r = await fetch(`${serve.url}/v1/sessions/${sessionId}/threads/${researcher.id}/archive`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } })
    expect(r.status).toBe(200)
    await page.emulateMedia({ colorScheme: 'dark' })
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions/${sessionId}`)
    const node = page.getByRole('navigation', { name: 'Threads' }).getByRole('button', { name: /^researcher/ })
    await expect(node.locator('.thread-node-status')).toHaveText('archived')
    await expect(page.locator('.thread-node.archived')).toHaveCount(1)
    await expect(page.locator('.thread-event').filter({ hasText: 'researcher' }).last()).toContainText('Subagent researcher archived')
    await shot(page, info, '43-threads-archived')
  })
})
