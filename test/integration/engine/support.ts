import Anthropic from '@anthropic-ai/sdk'
import type { Engine } from '../../../src/main/engine'
import type { LoggedEvent } from '../../../src/main/session/event-log'

/** Waits until the session's turn ends (idle with end_turn); returns its events. */
export async function waitForIdle(engine: Engine, sessionId: string, timeoutMs = 60_000): Promise<LoggedEvent[]> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const events = engine.services.log.read(sessionId, { after: 0, limit: 1000 }).map((r) => r.event)
    if (events.some((e) => e.type === 'session.status_idle' && (e as unknown as { stop_reason: { type: string } }).stop_reason.type === 'end_turn')) return events
    if (Date.now() > deadline) throw new Error(`the session did not finish: ${events.map((e) => e.type).join(', ')}`)
    await new Promise((r) => setTimeout(r, 25))
  }
}

/** Creates an agent with the toolset, an environment with `config` and a session, sends a message and waits for the turn to end. */
export async function runBashSession(engine: Engine, config: Record<string, unknown>): Promise<{ sessionId: string; client: Anthropic; events: LoggedEvent[] }> {
  const client = new Anthropic({ baseURL: (await engine.listen(0)).url, apiKey: 'test-token', maxRetries: 0 })
  const agent = await client.beta.agents.create({ name: 'hands', model: 'claude-sonnet-5-5', tools: [{ type: 'agent_toolset_20260401' }] })
  const environment = await client.beta.environments.create({ name: 'hands', config: config as unknown as Anthropic.Beta.BetaCloudConfigParams })
  const session = await client.beta.sessions.create({ agent: agent.id, environment_id: environment.id })
  await client.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'run it' }] }] })
  return { sessionId: session.id, client, events: await waitForIdle(engine, session.id) }
}

export function bashResult(events: LoggedEvent[]): { text: string; isError: boolean } {
  const r = events.find((e) => e.type === 'agent.tool_result') as unknown as { content: { text: string }[]; is_error: boolean } | undefined
  if (!r) throw new Error('no tool result')
  return { text: r.content.map((c) => c.text).join(''), isError: r.is_error }
}
