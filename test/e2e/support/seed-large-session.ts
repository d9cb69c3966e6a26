/**
 * Seeds a data dir with one session of N events (default 100,000) shaped like a long agent run:
 * turns of user message, status, model spans with usage, thinking, markdown replies, bash tool
 * calls with ANSI output, and idles. Run with tsx (a child of the Playwright test):
 *   tsx test/e2e/support/seed-large-session.ts <dataDir> <token> [events]
 * Prints `{"sessionId": …, "events": …, "ms": …}` on stdout.
 */
import { Engine } from '../../../src/main/engine'

async function main(): Promise<void> {
  const [dataDir, token, countArg] = process.argv.slice(2)
  if (!dataDir || !token) throw new Error('usage: seed-large-session.ts <dataDir> <token> [events]')
  const total = Number(countArg ?? 100_000)
  const started = Date.now()
  const engine = Engine.open({ dataDir, token, env: {}, harness: { enabled: false }, log: () => {} })
  try {
    const s = engine.services
    const agent = s.agents.create({ name: 'Long runner', model: 'claude-sonnet-4-5', tools: [{ type: 'agent_toolset_20260401' }] } as Parameters<typeof s.agents.create>[0])
    const env = s.environments.create({ name: 'Local sandbox', config: { type: 'cloud' } })
    const session = await s.sessions.create({ agent: agent.id, environment_id: env.id, title: `A ${total.toLocaleString('en')}-event session` })
    let n = 0
    let turn = 0
    let batch: Record<string, unknown>[] = []
    const push = async (e: Record<string, unknown>) => {
      batch.push(e)
      n++
      if (batch.length >= 1000) {
        await s.log.append(session.id, batch as never)
        batch = []
      }
    }
    while (n < total) {
      turn++
      await push({ type: 'user.message', content: [{ type: 'text', text: `Step ${turn}: check the build and fix what fails.` }] })
      await push({ type: 'session.status_running' })
      for (let k = 0; k < 3 && n < total - 2; k++) {
        await push({ type: 'span.model_request_start' })
        await push({ type: 'agent.thinking' })
        await push({
          type: 'agent.message',
          content: [{ type: 'text', text: `Running the tests for **step ${turn}.${k}**:\n\n\`\`\`bash\nnpm test -- --grep "case ${k}"\n\`\`\`\n\nThen I will look at \`src/module${k}.ts\`.` }],
        })
        const use = `sevt_seed${turn}x${k}`
        await push({ id: use, type: 'agent.tool_use', name: 'bash', input: { command: `npm test -- --grep "case ${k}"` }, evaluated_permission: 'allow' })
        await push({
          type: 'agent.tool_result',
          tool_use_id: use,
          content: [{ type: 'text', text: `\u001b[32m✓\u001b[0m case ${k}.1 (3 ms)\n\u001b[32m✓\u001b[0m case ${k}.2 (5 ms)\n\u001b[1mTests:\u001b[0m 2 passed` }],
          is_error: false,
        })
        await push({ type: 'span.model_request_end', model_request_start_id: 'x', is_error: false, model_usage: { input_tokens: 900, output_tokens: 120, cache_read_input_tokens: 800, cache_creation_input_tokens: 0 } })
      }
      await push({ type: 'agent.message', content: [{ type: 'text', text: `Step ${turn} done.` }] })
      await push({ type: 'session.status_idle', stop_reason: { type: 'end_turn' }, stop_details: null })
    }
    if (batch.length) await s.log.append(session.id, batch as never)
    process.stdout.write(JSON.stringify({ sessionId: session.id, events: n, lastTurn: turn, ms: Date.now() - started }) + '\n')
  } finally {
    await engine.close()
  }
}

main().catch((err: unknown) => {
  console.error(err)
  process.exit(1)
})
