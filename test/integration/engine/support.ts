import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import Docker from 'dockerode'
import { afterAll } from 'vitest'
import { Engine } from '../../../src/main/engine'
import { dockerScopeFor } from '../../../src/main/engine-hands'
import type { LoggedEvent } from '../../../src/main/session/event-log'
import type { ScriptedModelServer } from '../../support/model-server'

/** Waits until `turns` turns of the session have ended (idle with end_turn, default 1); returns its events. */
export async function waitForIdle(engine: Engine, sessionId: string, timeoutMs = 60_000, turns = 1): Promise<LoggedEvent[]> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const events = engine.services.log.read(sessionId, { after: 0, limit: 1000 }).map((r) => r.event)
    const ended = events.filter((e) => e.type === 'session.status_idle' && (e as unknown as { stop_reason: { type: string } }).stop_reason.type === 'end_turn').length
    if (ended >= turns) return events
    if (Date.now() > deadline) throw new Error(`the session did not finish: ${events.map((e) => e.type).join(', ')}`)
    await new Promise((r) => setTimeout(r, 25))
  }
}

/** Each tool result's text, in the order the session got them. */
export function toolResultTexts(events: readonly LoggedEvent[]): string[] {
  return events.filter((e) => e.type === 'agent.tool_result').map((e) => (e as unknown as { content: { text: string }[] }).content.map((c) => c.text).join(''))
}

/**
 * An engine on one sandbox backend for a describe block: a data directory of its own whose settings
 * choose `backend`, opened against a scripted model by `open`; after the block, the engine and the
 * model are closed, the Docker containers it made are removed, and the directory is deleted.
 */
export function engineOnBackend(backend: 'docker' | 'bubblewrap', prefix: string): { dataDir: string; open(model: ScriptedModelServer): Promise<{ engine: Engine; client: Anthropic }> } {
  const dataDir = mkdtempSync(join(tmpdir(), `${prefix}-${backend}-`))
  let engine: Engine | undefined
  let model: ScriptedModelServer | undefined
  afterAll(async () => {
    await engine?.close()
    await model?.close()
    if (backend === 'docker') {
      const docker = new Docker()
      for (const c of await docker.listContainers({ all: true, filters: { label: [`corral.managed=${dockerScopeFor(dataDir)}`] } })) await docker.getContainer(c.Id).remove({ force: true }).catch(() => {})
    }
    rmSync(dataDir, { recursive: true, force: true })
  })
  return {
    dataDir,
    async open(m) {
      model = m
      writeFileSync(join(dataDir, 'settings.json'), JSON.stringify({ sandboxBackend: backend }))
      engine = Engine.open({ dataDir, token: 'test-token', env: { PATH: process.env.PATH, ANTHROPIC_BASE_URL: m.url, ANTHROPIC_API_KEY: 'k' }, harness: { backoffBaseMs: 5, backoffMaxMs: 40 }, log: () => {} })
      const client = new Anthropic({ baseURL: (await engine.listen(0)).url, apiKey: 'test-token', maxRetries: 0 })
      return { engine, client }
    },
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
