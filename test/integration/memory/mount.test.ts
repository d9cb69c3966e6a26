import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import Docker from 'dockerode'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Engine } from '../../../src/main/engine'
import { dockerScopeFor } from '../../../src/main/engine-hands'
import type { LoggedEvent } from '../../../src/main/session/event-log'
import { say, ScriptedModelServer, toolCall, type RecordedRequest } from '../../support/model-server'
import { bwrapReq, dockerReq } from '../hands/support'
import { waitForIdle } from '../engine/support'

/*
 * Memory stores mounted in real sandboxes: a session's bash call writes under
 * /mnt/memory/<slug>, the change becomes a version by that session before the call's result
 * returns, a second session attached to the same store reads it and changes it, the version
 * history names both sessions, and a read_only mount refuses writes.
 */

/**
 * The scripted model runs the user's latest message as one bash command (built from the offered
 * schema), or, for `TOOL <name> <json input>`, calls that tool with that input; then ends its turn.
 */
function runsUserCommand(req: RecordedRequest) {
  const last = req.body.messages.at(-1)!
  const blocks = typeof last.content === 'string' ? [{ type: 'text', text: last.content }] : last.content
  if (blocks.some((b) => b.type === 'tool_result')) return say('Done.')
  const text = blocks.filter((b) => b.type === 'text').map((b) => String(b.text)).join('')
  const tool = /^TOOL (\w+) (.*)$/s.exec(text)
  if (tool) return toolCall(req, tool[1], JSON.parse(tool[2]) as Record<string, unknown>)
  return toolCall(req, 'bash', { command: text })
}

const backends = [
  { name: 'bubblewrap', req: bwrapReq() },
  { name: 'docker', req: dockerReq() },
] as const

for (const backend of backends) {
  describe.skipIf(!backend.req.ok)(`memory stores mounted in ${backend.name}`, () => {
    const dataDir = mkdtempSync(join(tmpdir(), `corral-memory-${backend.name}-`))
    let model: ScriptedModelServer
    let engine: Engine
    let client: Anthropic
    let agentId: string
    let envId: string

    beforeAll(async () => {
      model = await ScriptedModelServer.start(runsUserCommand)
      engine = Engine.open({ dataDir, token: 'test-token', env: { PATH: process.env.PATH, ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k' }, harness: { backoffBaseMs: 5, backoffMaxMs: 40 }, log: () => {} })
      client = new Anthropic({ baseURL: (await engine.listen(0)).url, apiKey: 'test-token', maxRetries: 0 })
      agentId = (await client.beta.agents.create({ name: 'mem', model: 'claude-sonnet-5-5', tools: [{ type: 'agent_toolset_20260401' }] })).id
      envId = (await client.beta.environments.create({ name: 'mem', config: { type: 'cloud', corral: { backend: backend.name, pool_size: 0 } } as unknown as Anthropic.Beta.BetaCloudConfigParams })).id
    }, 120_000)
    afterAll(async () => {
      await engine?.close()
      await model?.close()
      if (backend.name === 'docker') {
        const api = new Docker()
        for (const c of await api.listContainers({ all: true, filters: { label: [`corral.managed=${dockerScopeFor(dataDir)}`] } })) await api.getContainer(c.Id).remove({ force: true }).catch(() => {})
      }
      rmSync(dataDir, { recursive: true, force: true })
    })

    const newSession = async (storeId: string, access: 'read_write' | 'read_only') =>
      (await client.beta.sessions.create({ agent: agentId, environment_id: envId, resources: [{ type: 'memory_store', memory_store_id: storeId, access }] })).id

    /** Sends `command` as the user's message; resolves with the bash result of that turn. */
    async function run(sessionId: string, command: string): Promise<{ text: string; isError: boolean }> {
      const before = engine.services.log.read(sessionId, { after: 0, limit: 1000 }).length
      await client.beta.sessions.events.send(sessionId, { events: [{ type: 'user.message', content: [{ type: 'text', text: command }] }] })
      let events: LoggedEvent[] = []
      const deadline = Date.now() + 90_000
      for (;;) {
        events = (await waitForIdle(engine, sessionId)).slice(before)
        if (events.some((e) => e.type === 'session.status_idle')) break
        if (Date.now() > deadline) throw new Error('the turn did not end')
        await new Promise((r) => setTimeout(r, 50))
      }
      const r = events.find((e) => e.type === 'agent.tool_result') as unknown as { content: { text: string }[]; is_error: boolean }
      return { text: r.content.map((c) => c.text).join(''), isError: r.is_error }
    }

    const memoriesOf = async (storeId: string) => {
      const out = []
      for await (const m of client.beta.memoryStores.memories.list(storeId, { view: 'full', limit: 20 })) if (m.type === 'memory') out.push(m)
      return out
    }

    it('syncs a bash write as a version by the session, shows it to a second session, keeps both writers in the history and refuses writes on a read_only mount', async () => {
      const store = await client.beta.memoryStores.create({ name: 'notes' })
      const first = await newSession(store.id, 'read_write')
      const wrote = await run(first, "printf 'buy milk\\n' > /mnt/memory/notes/todo.md && echo wrote")
      expect(wrote).toEqual({ text: expect.stringContaining('wrote'), isError: false })
      // The version exists as soon as the call's result does (synced before the result returns).
      expect((await memoriesOf(store.id)).map((m) => [m.path, m.content])).toEqual([['/todo.md', 'buy milk\n']])

      const second = await newSession(store.id, 'read_write')
      const read = await run(second, "cat /mnt/memory/notes/todo.md && printf 'call mom\\n' >> /mnt/memory/notes/todo.md")
      expect(read.text).toContain('buy milk')
      expect((await memoriesOf(store.id))[0].content).toBe('buy milk\ncall mom\n')

      const versions = []
      for await (const v of client.beta.memoryStores.memoryVersions.list(store.id)) versions.push(v)
      expect(versions.map((v) => [v.operation, v.created_by])).toEqual([
        ['modified', { type: 'session_actor', session_id: second }],
        ['created', { type: 'session_actor', session_id: first }],
      ])
      const bySecond = []
      for await (const v of client.beta.memoryStores.memoryVersions.list(store.id, { session_id: second })) bySecond.push(v.id)
      expect(bySecond).toEqual([versions[0].id])

      // The second session's change reaches the first, still running, at its next sync.
      const seen = await run(first, 'cat /mnt/memory/notes/todo.md')
      expect(seen.text).toContain('call mom')

      // Redaction empties the first write's content but keeps who wrote it.
      const redacted = await client.beta.memoryStores.memoryVersions.redact(versions[1].id, { memory_store_id: store.id })
      expect(redacted).toMatchObject({ content: null, path: null, created_by: { type: 'session_actor', session_id: first } })

      const reader = await newSession(store.id, 'read_only')
      const refused = await run(reader, "cat /mnt/memory/notes/todo.md; printf 'overwrite\\n' > /mnt/memory/notes/todo.md; echo rc=$?")
      expect(refused.text).toContain('call mom')
      expect(refused.text).toMatch(/Read-only file system/)
      expect(refused.text).not.toContain('rc=0')
      expect((await memoriesOf(store.id))[0].content).toBe('buy milk\ncall mom\n')

      // Archiving releases the sandboxes: a last sync, then the host folders go.
      for (const id of [first, second, reader]) await client.beta.sessions.archive(id)
      await engine.handsSettled()
      expect((await memoriesOf(store.id))[0].content).toBe('buy milk\ncall mom\n')
    }, 240_000)

    it('lets the file tools reach the mounted stores: read and glob a memory, edit it on a read_write mount (a version by the session), and a read_only mount refuses the edit', async () => {
      const store = await client.beta.memoryStores.create({ name: 'Team Notes' })
      await client.beta.memoryStores.memories.create(store.id, { path: '/plan.md', content: 'step one\n' })
      const writer = await newSession(store.id, 'read_write')
      const read = await run(writer, `TOOL read ${JSON.stringify({ file_path: '/mnt/memory/team-notes/plan.md' })}`)
      expect(read).toEqual({ text: expect.stringContaining('step one'), isError: false })
      const globbed = await run(writer, `TOOL glob ${JSON.stringify({ pattern: '*.md', path: '/mnt/memory/team-notes' })}`)
      expect(globbed).toEqual({ text: expect.stringContaining('/mnt/memory/team-notes/plan.md'), isError: false })
      const edited = await run(writer, `TOOL edit ${JSON.stringify({ file_path: '/mnt/memory/team-notes/plan.md', old_string: 'step one', new_string: 'step two' })}`)
      expect(edited.isError).toBe(false)
      expect((await memoriesOf(store.id)).map((m) => [m.path, m.content])).toEqual([['/plan.md', 'step two\n']])
      const versions = []
      for await (const v of client.beta.memoryStores.memoryVersions.list(store.id, { session_id: writer })) versions.push(v.operation)
      expect(versions).toEqual(['modified'])

      const reader = await newSession(store.id, 'read_only')
      const refused = await run(reader, `TOOL edit ${JSON.stringify({ file_path: '/mnt/memory/team-notes/plan.md', old_string: 'step two', new_string: 'step three' })}`)
      expect(refused.isError).toBe(true)
      expect(refused.text).toMatch(/read-only/i)
      expect((await memoriesOf(store.id))[0].content).toBe('step two\n')
      for (const id of [writer, reader]) await client.beta.sessions.archive(id)
      await engine.handsSettled()
    }, 240_000)
  })
}
