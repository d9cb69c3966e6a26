/**
 * Seeds a data dir with one session whose lead ran two workflow runs, written to the log as the
 * engine writes them (docs/workflows.md, "The events"): a run of N agents (default 1,000) in two
 * phases that completed, each agent's thread created, working, ending its turn with a reported
 * cost and archived; and a run of four agents that ended with a timeout_error while two agents
 * still worked (archived as the run ended), one having failed before (retries exhausted).
 * Run with tsx (a child of the Playwright test):
 *   tsx test/e2e/support/seed-workflow-runs.ts <dataDir> <token> [agents]
 * Prints `{"sessionId": …, "events": …, "ms": …}` on stdout.
 */
import { Engine } from '../../../src/main/engine'
import { newId, primaryThreadId } from '../../../src/shared/api/ids'

async function main(): Promise<void> {
  const [dataDir, token, countArg] = process.argv.slice(2)
  if (!dataDir || !token) throw new Error('usage: seed-workflow-runs.ts <dataDir> <token> [agents]')
  const agents = Number(countArg ?? 1000)
  const started = Date.now()
  const engine = Engine.open({ dataDir, token, env: {}, harness: { enabled: false }, log: () => {} })
  try {
    const s = engine.services
    const reviewer = s.agents.create({ name: 'reviewer', model: 'claude-sonnet-4-6', system: 'You review one file.' } as Parameters<typeof s.agents.create>[0])
    const lead = s.agents.create({
      name: 'lead',
      model: 'claude-sonnet-4-6',
      system: 'You are the lead.',
      multiagent: { type: 'multiagent_20261001', workflows: { type: 'enabled', predefined_agents: [reviewer.id] } },
    } as Parameters<typeof s.agents.create>[0])
    const env = s.environments.create({ name: 'Local sandbox', config: { type: 'cloud' } })
    const session = await s.sessions.create({ agent: lead.id, environment_id: env.id, title: `A ${agents.toLocaleString('en')}-agent workflow run` })
    const primary = primaryThreadId(session.id)
    const snapshot = { type: 'agent', id: reviewer.id, version: reviewer.version, name: 'reviewer', model: { id: 'claude-sonnet-4-6' }, system: 'You review one file.', tools: [], mcp_servers: [], skills: [] }
    let n = 0
    let batch: Record<string, unknown>[] = []
    const push = async (e: Record<string, unknown>) => {
      batch.push(e)
      n++
      if (batch.length >= 1000) await flush()
    }
    const flush = async () => {
      if (batch.length) await s.log.append(session.id, batch as never)
      batch = []
    }
    const start = async (name: string, description: string, phases: { id: string; name: string }[], program: string) => {
      const toolUse = newId('event')
      const runId = newId('workflowRun')
      await push({ id: toolUse, type: 'agent.tool_use', name: 'ant__workflow_run_start', input: { name, description, phases: phases.map((p) => ({ name: p.name })), program }, evaluated_permission: 'allow' })
      await push({ type: 'agent.tool_result', tool_use_id: toolUse, content: [{ type: 'text', text: JSON.stringify({ workflow_run_id: runId }) }], is_error: false })
      await push({ type: 'workflow_run.created', workflow_run_id: runId, name, description, phases: phases.map((p) => ({ ...p, description: null })), tool_use_id: toolUse })
      await push({ type: 'workflow_run.status_running', workflow_run_id: runId })
      return runId
    }
    const agent = async (runId: string, index: number, label: string) => {
      const tid = newId('thread')
      await push({ type: 'session.thread_created', session_thread_id: tid, agent_name: 'reviewer', workflow_run_id: runId, agent: snapshot, parent_thread_id: primary, workflow_call_index: index, workflow_label: label })
      await push({ type: 'session.thread_status_running', session_thread_id: tid, agent_name: 'reviewer' })
      await push({ type: 'agent.thread_message_received', session_thread_id: tid, from_session_thread_id: primary, from_agent_name: 'lead', content: [{ type: 'text', text: `Review ${label}` }] })
      return tid
    }
    const finish = async (tid: string, label: string) => {
      await push({ type: 'agent.message', session_thread_id: tid, content: [{ type: 'text', text: `${label} looks fine` }] })
      await push({ type: 'span.model_request_end', session_thread_id: tid, model_request_start_id: 'x', is_error: false, model_usage: { input_tokens: 30_000, output_tokens: 2_000, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 } })
      await push({ type: 'session.thread_status_idle', session_thread_id: tid, agent_name: 'reviewer', stop_reason: { type: 'end_turn' } })
      await push({ type: 'session.thread_status_terminated', session_thread_id: tid, agent_name: 'reviewer', archived: true })
    }

    await push({ type: 'user.message', content: [{ type: 'text', text: `Review the ${agents} files.` }] })
    await push({ type: 'session.status_running' })
    // The big run: "review" with every agent but the last, "summarise" with the last.
    const review = { id: newId('workflowPhase'), name: 'review' }
    const summarise = { id: newId('workflowPhase'), name: 'summarise' }
    const big = await start('review every file', `${agents} reviewers, then a summary`, [review, summarise], "return await phase('review', () => Promise.all(args.files.map((f) => agent('reviewer', 'Review ' + f, { label: f }))))")
    const reviewStart = newId('event')
    await push({ id: reviewStart, type: 'workflow_run.phase_started', workflow_run_id: big, workflow_run_phase_id: review.id })
    const tids: string[] = []
    for (let i = 0; i < agents - 1; i++) tids.push(await agent(big, i + 1, `src/file${String(i).padStart(4, '0')}.ts`))
    for (let i = 0; i < agents - 1; i++) await finish(tids[i], `src/file${String(i).padStart(4, '0')}.ts`)
    await push({ type: 'workflow_run.phase_ended', workflow_run_id: big, workflow_run_phase_id: review.id, phase_started_id: reviewStart })
    const sumStart = newId('event')
    await push({ id: sumStart, type: 'workflow_run.phase_started', workflow_run_id: big, workflow_run_phase_id: summarise.id })
    const last = await agent(big, agents, 'summary')
    await finish(last, 'summary')
    await push({ type: 'workflow_run.phase_ended', workflow_run_id: big, workflow_run_phase_id: summarise.id, phase_started_id: sumStart })
    await push({ type: 'workflow_run.status_ended', workflow_run_id: big, result: { type: 'completed' }, name: 'review every file', output: { reviewed: agents - 1, summary: 'summary looks fine' } })

    // The small run that timed out: one done, one failed, two still working when it ended.
    const slow = await start('slow checks', 'four checks with a 60 s lifetime', [], "await Promise.all([1,2,3,4].map((i) => agent('reviewer', 'Check ' + i, { label: 'check ' + i })))")
    const c = [await agent(slow, 1, 'check 1'), await agent(slow, 2, 'check 2'), await agent(slow, 3, 'check 3'), await agent(slow, 4, 'check 4')]
    await finish(c[0], 'check 1')
    await push({ type: 'session.thread_status_idle', session_thread_id: c[1], agent_name: 'reviewer', stop_reason: { type: 'retries_exhausted' } })
    await push({ type: 'session.thread_status_terminated', session_thread_id: c[1], agent_name: 'reviewer', archived: true })
    await push({ type: 'workflow_run.error', workflow_run_id: slow, error: { type: 'timeout_error', message: 'the run reached its lifetime of 60 s' } })
    await push({ type: 'workflow_run.status_ended', workflow_run_id: slow, result: { type: 'error', error: { type: 'timeout_error', message: 'the run reached its lifetime of 60 s' } }, name: 'slow checks', output: null })
    await push({ type: 'session.thread_status_terminated', session_thread_id: c[2], agent_name: 'reviewer', archived: true })
    await push({ type: 'session.thread_status_terminated', session_thread_id: c[3], agent_name: 'reviewer', archived: true })
    await push({ type: 'agent.message', content: [{ type: 'text', text: 'Both runs have ended.' }] })
    await push({ type: 'session.status_idle', stop_reason: { type: 'end_turn' }, stop_details: null })
    await flush()
    process.stdout.write(JSON.stringify({ sessionId: session.id, events: n, ms: Date.now() - started }) + '\n')
  } finally {
    await engine.close()
  }
}

main().catch((err: unknown) => {
  console.error(err)
  process.exit(1)
})
