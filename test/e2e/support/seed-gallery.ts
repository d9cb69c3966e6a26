/**
 * Seeds a data dir with one session holding every kind of event the thread view draws that the
 * scripted model cannot produce on its own yet: a subagent thread, an edit shown as a diff, bash
 * output with ANSI colours and an exit code, a model error being retried, and a custom tool call
 * waiting for its result. Events go through the engine's own services (the session log), exactly
 * as the harness appends them. Run with tsx:
 *   tsx test/e2e/support/seed-gallery.ts <dataDir> <token>
 * Prints `{"sessionId": …, "threadId": …, "customToolUseId": …}`.
 */
import { Engine } from '../../../src/main/engine'

async function main(): Promise<void> {
  const [dataDir, token] = process.argv.slice(2)
  if (!dataDir || !token) throw new Error('usage: seed-gallery.ts <dataDir> <token>')
  const engine = Engine.open({ dataDir, token, env: {}, harness: { enabled: false }, log: () => {} })
  try {
    const s = engine.services
    const agent = s.agents.create({
      name: 'Coordinator',
      model: 'claude-opus-4-5',
      tools: [{ type: 'agent_toolset_20260401' }, { type: 'custom', name: 'lookup_ticket', description: 'Look a ticket up', input_schema: { type: 'object' } }],
    } as Parameters<typeof s.agents.create>[0])
    const env = s.environments.create({ name: 'Local sandbox', config: { type: 'cloud' } })
    const session = await s.sessions.create({ agent: agent.id, environment_id: env.id, title: 'Fix the flaky date test' })
    const thread = 'sthr_01GALLERYRESEARCHER000000'
    const edit = 'sevt_gallery_edit'
    const bash = 'sevt_gallery_bash'
    const custom = 'sevt_gallery_custom'
    await s.log.append(session.id, [
      { type: 'user.message', content: [{ type: 'text', text: 'The date test fails on CI about once a day. Find out why and fix it.' }] },
      { type: 'session.status_running' },
      { type: 'span.model_request_start' },
      { type: 'agent.message', content: [{ type: 'text', text: 'I will ask a researcher to look at the CI history while I read the test.' }] },
      { type: 'session.thread_created', session_thread_id: thread, agent_name: 'researcher', workflow_run_id: null },
      { type: 'agent.thread_message_sent', to_session_thread_id: thread, to_agent_name: 'researcher', content: [{ type: 'text', text: 'Which CI runs failed `date.test.ts` this month, and at what time of day?' }] },
      { type: 'session.thread_status_running', session_thread_id: thread, agent_name: 'researcher' },
      { type: 'agent.message', session_thread_id: thread, content: [{ type: 'text', text: 'All **7** failures ran between 23:00 and 00:00 UTC.' }] },
      { type: 'session.thread_status_idle', session_thread_id: thread, agent_name: 'researcher', stop_reason: { type: 'end_turn' }, stop_details: null },
      { type: 'agent.thread_message_received', from_session_thread_id: thread, from_agent_name: 'researcher', content: [{ type: 'text', text: 'All 7 failures ran between 23:00 and 00:00 UTC.' }] },
      { id: edit, type: 'agent.tool_use', name: 'edit', evaluated_permission: 'allow', input: { file_path: 'src/date.ts', old_string: 'export function today(): string {\n  return new Date().toLocaleDateString()\n}', new_string: 'export function today(now = new Date()): string {\n  return now.toISOString().slice(0, 10)\n}' } },
      { type: 'agent.tool_result', tool_use_id: edit, content: [{ type: 'text', text: 'Edited src/date.ts' }], is_error: false },
      { id: bash, type: 'agent.tool_use', name: 'bash', evaluated_permission: 'allow', input: { command: 'npm test -- date' } },
      { type: 'agent.tool_result', tool_use_id: bash, is_error: true, exit_code: 1, duration_ms: 2140, content: [{ type: 'text', text: '\u001b[1m> vitest run date\u001b[0m\n\n \u001b[32m✓\u001b[39m today() uses UTC\n \u001b[31m✗\u001b[39m formats midnight\n\n\u001b[31mAssertionError\u001b[39m: expected \u001b[32m"2026-01-02"\u001b[39m to be \u001b[31m"2026-01-01"\u001b[39m\n\nTests: \u001b[31m1 failed\u001b[39m, \u001b[32m1 passed\u001b[39m' }] },
      { type: 'session.error', error: { type: 'model_overloaded_error', message: 'The model is overloaded; retrying in 2 s.', retry_status: { type: 'retrying' } } },
      { id: custom, type: 'agent.custom_tool_use', name: 'lookup_ticket', input: { ticket: 'QA-142' } },
      { type: 'span.model_request_end', model_request_start_id: 'x', is_error: false, model_usage: { input_tokens: 5400, output_tokens: 900, cache_read_input_tokens: 3000, cache_creation_input_tokens: 1200 } },
      { type: 'session.status_idle', stop_reason: { type: 'requires_action', event_ids: [custom] }, stop_details: null },
    ] as never)
    process.stdout.write(JSON.stringify({ sessionId: session.id, threadId: thread, customToolUseId: custom }) + '\n')
  } finally {
    await engine.close()
  }
}

main().catch((err: unknown) => {
  console.error(err)
  process.exit(1)
})
