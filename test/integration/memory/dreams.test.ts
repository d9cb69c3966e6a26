import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { Engine } from '../../../src/main/engine'
import { say, ScriptedModelServer, toolCall, type RecordedRequest, type ScriptStep } from '../../support/model-server'
import { bubblewrapProbe, requirement } from '../../support/requirements'

/*
 * Dreams through the official SDK (spec resources.md §11, docs/dreams.md): a dream reads a memory
 * store and past sessions' transcripts and writes a reorganized store, in a Corral session of its
 * own on real hands (bubblewrap), with the scripted model doing the dreaming from what it is
 * offered: the memory store's path from the system prompt, the transcripts' paths from the
 * message, each tool call built from the offered schemas.
 */

const DREAM_MODEL = 'claude-dream-test'
const bwrap = requirement('bubblewrap', bubblewrapProbe)

type Block = { type: string; text?: string; content?: unknown }
const blocksOf = (m: RecordedRequest['body']['messages'][number]) => (typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : (m.content as Block[]))
const textOf = (b: Block): string => (typeof b.text === 'string' ? b.text : Array.isArray(b.content) ? (b.content as Block[]).map(textOf).join('') : typeof b.content === 'string' ? b.content : '')

/**
 * Holds the dream's model requests (from the one that carries `from` tool results on) from
 * `close()` until `open()`, a dream kept running for a test; it can be closed again after.
 */
class Gate {
  private release: () => void = () => {}
  private opened = Promise.resolve()
  closed = false
  private from = 0
  wait = (results: number): Promise<void> => (this.closed && results >= this.from ? this.opened : Promise.resolve())
  close(from = 0): void {
    this.closed = true
    this.from = from
    this.opened = new Promise<void>((r) => (this.release = r))
  }
  open(): void {
    this.closed = false
    this.release()
  }
}

/**
 * The model. A past session's turn: "Noted." A dream: read the first transcript, write what its
 * user asked to remember into decisions.md in the store, remove old.md, then end its turn.
 */
function model(gate: Gate) {
  return async (req: RecordedRequest): Promise<ScriptStep> => {
    if (req.body.model !== DREAM_MODEL) return say('Noted.')
    const results = req.body.messages.flatMap((m) => blocksOf(m).filter((b) => b.type === 'tool_result'))
    await gate.wait(results.length)
    const system = (req.body.system ?? []).map((s) => s.text).join('\n')
    const mount = /<memory_store [^>]*path="([^"]+)"/.exec(system)?.[1]
    if (!mount) throw new Error(`dream model: no memory store path in the system prompt:\n${system}`)
    const ask = blocksOf(req.body.messages[0]).map(textOf).join('\n')
    const transcripts = ask.match(/\/mnt\/session\/uploads\/transcripts\/\S+\.md/g) ?? []
    switch (results.length) {
      case 0:
        return toolCall(req, 'read', { file_path: transcripts[0] })
      case 1: {
        const remembered = [...new Set([...textOf(results[0]).matchAll(/remember: ([^\n]+)/g)].map((m) => m[1].trim()))]
        return toolCall(req, 'write', { file_path: `${mount}/decisions.md`, content: `# Decisions\n${remembered.map((r) => `- ${r}`).join('\n')}\n` })
      }
      case 2:
        return toolCall(req, 'bash', { command: `rm ${mount}/old.md && ls ${mount}` })
      default:
        return say('Merged what the sessions decided into decisions.md and removed old.md.')
    }
  }
}

describe.skipIf(!bwrap.ok)('dreams (bubblewrap hands)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-dreams-'))
  const gate = new Gate()
  let server: ScriptedModelServer
  let engine: Engine
  let url: string
  let client: Anthropic
  let pastSessions: string[]

  const open = async () => {
    engine = Engine.open({ dataDir, token: 'test-token', env: { PATH: process.env.PATH, ANTHROPIC_BASE_URL: server.url, ANTHROPIC_API_KEY: 'k' }, harness: { backoffBaseMs: 5, backoffMaxMs: 20 }, log: () => {} })
    url = (await engine.listen(0)).url
    client = new Anthropic({ baseURL: url, apiKey: 'test-token', maxRetries: 0 })
  }

  const until = async (id: string, statuses: string[], timeoutMs = 60_000) => {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const d = await client.beta.dreams.retrieve(id)
      if (statuses.includes(d.status)) return d
      if (Date.now() > deadline) throw new Error(`dream ${id} is still ${d.status}`)
      await new Promise((r) => setTimeout(r, 50))
    }
  }

  const memories = async (storeId: string) => {
    const out: [string, string][] = []
    for await (const m of client.beta.memoryStores.memories.list(storeId, { view: 'full', limit: 100 })) if (m.type === 'memory') out.push([m.path, m.content ?? ''])
    return out.sort()
  }

  const storeWithNotes = async (name: string) => {
    const store = await client.beta.memoryStores.create({ name })
    await client.beta.memoryStores.memories.create(store.id, { path: '/old.md', content: 'We deploy on Mondays.\n' })
    await client.beta.memoryStores.memories.create(store.id, { path: '/keep.md', content: 'Team: blue.\n' })
    return store
  }

  beforeAll(async () => {
    // the dream's environment takes the engine's default hands: bubblewrap here
    writeFileSync(join(dataDir, 'settings.json'), JSON.stringify({ sandboxBackend: 'bubblewrap' }))
    server = await ScriptedModelServer.start(model(gate))
    await open()
    const agent = await client.beta.agents.create({ name: 'helper', model: 'claude-sonnet-5-5' })
    const env = await client.beta.environments.create({ name: 'plain' })
    pastSessions = []
    for (const text of ['remember: we deploy on Fridays', 'remember: reviews need two approvals']) {
      const s = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id, title: text })
      await client.beta.sessions.events.send(s.id, { events: [{ type: 'user.message', content: [{ type: 'text', text }] }] })
      pastSessions.push(s.id)
    }
    for (const id of pastSessions) {
      for (let i = 0; i < 400 && (await client.beta.sessions.retrieve(id)).status !== 'idle'; i++) await new Promise((r) => setTimeout(r, 25))
    }
  }, 120_000)

  afterEach(() => {
    if (gate.closed) gate.open()
  })

  afterAll(async () => {
    await engine?.close()
    await server?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  it('writes a reorganized copy of the store from the sessions, leaving the input store as it was', async () => {
    const store = await storeWithNotes('team notes')
    const created = await client.beta.dreams.create({
      inputs: [
        { type: 'memory_store', memory_store_id: store.id },
        { type: 'sessions', session_ids: [...pastSessions].reverse() },
      ],
      model: DREAM_MODEL,
      instructions: 'Keep it short.',
    })
    expect(created).toMatchObject({
      type: 'dream',
      id: expect.stringMatching(/^drm_/),
      status: 'pending',
      inputs: [
        { type: 'memory_store', memory_store_id: store.id },
        { type: 'sessions', session_ids: [...pastSessions].sort() },
      ],
      model: { id: DREAM_MODEL, speed: 'standard' },
      instructions: 'Keep it short.',
      output_behavior: { type: 'create_new' },
      outputs: [],
      session_id: null,
      error: null,
      usage: { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
      ended_at: null,
      archived_at: null,
    })

    const done = await until(created.id, ['completed', 'failed', 'canceled'])
    expect(done).toMatchObject({ status: 'completed', error: null, session_id: expect.stringMatching(/^sesn_/), ended_at: expect.any(String) })
    expect(done.usage.output_tokens).toBeGreaterThan(0)
    expect(done.outputs).toHaveLength(1)
    const output = done.outputs[0].memory_store_id
    expect(output).not.toBe(store.id)
    expect(await memories(output)).toEqual([
      ['/decisions.md', '# Decisions\n- we deploy on Fridays\n'],
      ['/keep.md', 'Team: blue.\n'],
    ])
    expect(await memories(store.id)).toEqual([
      ['/keep.md', 'Team: blue.\n'],
      ['/old.md', 'We deploy on Mondays.\n'],
    ])
    expect((await client.beta.memoryStores.retrieve(output)).name).toBe('team notes (dream)')

    // the dream's session: archived once done, the store and the two transcripts as its resources
    const session = await client.beta.sessions.retrieve(done.session_id!)
    expect(session.archived_at).not.toBeNull()
    expect(session.resources.map((r) => r.type).sort()).toEqual(['file', 'file', 'memory_store'])
    const ask = server.requests.find((r) => r.body.model === DREAM_MODEL)!
    const askText = blocksOf(ask.body.messages[0]).map(textOf).join('\n')
    for (const id of pastSessions) expect(askText).toContain(`/mnt/session/uploads/transcripts/${id}.md`)
    expect(askText).toContain('Keep it short.')
    // what the dream read: the first session's transcript, its message and the answer
    const read = server.requests.filter((r) => r.body.model === DREAM_MODEL)[1]
    const transcript = read.body.messages.flatMap((m) => blocksOf(m)).filter((b) => b.type === 'tool_result').map(textOf).join('')
    expect(transcript).toContain(`Session ${[...pastSessions].sort()[0]}`)
    expect(transcript).toMatch(/## User \([^)]+\)\n\s+\d+\t\n\s+\d+\tremember: we deploy on Fridays\n\s+\d+\t\n\s+\d+\t## Agent \([^)]+\)\n\s+\d+\t\n\s+\d+\tNoted\./)
    expect(transcript).toContain('Noted.')

    const listed = await client.beta.dreams.list({ statuses: ['completed'] })
    expect(listed.data.map((d) => d.id)).toContain(done.id)
    expect((await client.beta.dreams.list({ statuses: ['pending', 'running'] })).data.map((d) => d.id)).not.toContain(done.id)
    // ended: it cannot be canceled; archived, it leaves the default list and stays retrievable
    await expect(client.beta.dreams.cancel(done.id)).rejects.toThrow(/has completed: only a pending or running dream can be canceled/)
    expect((await client.beta.dreams.archive(done.id)).archived_at).not.toBeNull()
    expect((await client.beta.dreams.archive(done.id)).archived_at).toBe((await client.beta.dreams.retrieve(done.id)).archived_at)
    expect((await client.beta.dreams.list()).data.map((d) => d.id)).not.toContain(done.id)
    expect((await client.beta.dreams.list({ include_archived: true })).data.map((d) => d.id)).toContain(done.id)
  }, 90_000)

  it("puts back the dream agent's tools, and its environment's closed network, when someone changed them", async () => {
    const store = await storeWithNotes('edited notes')
    const dream = async () => {
      const d = await client.beta.dreams.create({ inputs: [{ type: 'memory_store', memory_store_id: store.id }, { type: 'sessions', session_ids: [pastSessions[0]] }], model: DREAM_MODEL })
      return until(d.id, ['completed', 'failed', 'canceled'])
    }
    // (a dream made them)
    expect((await dream()).status).toBe('completed')
    const agents = (await client.beta.agents.list({ limit: 100 })).data.filter((a) => a.metadata?.corral_role === 'dreams')
    const envs = (await client.beta.environments.list({ limit: 100 })).data.filter((e) => e.metadata?.corral_role === 'dreams')
    expect(agents).toHaveLength(1)
    expect(envs).toHaveLength(1)
    const [agent] = agents
    // someone edits them: no bash (the prompt as it was); the network opened
    const edited = await client.beta.agents.update(agent.id, {
      version: agent.version,
      tools: [{ type: 'agent_toolset_20260401', default_config: { enabled: true, permission_policy: { type: 'always_allow' } }, configs: [{ name: 'bash', enabled: false }] }],
    })
    await client.beta.environments.update(envs[0].id, { config: { type: 'cloud', networking: { type: 'unrestricted' } } })
    // the scripted model calls bash (it removes old.md with it): offered again, so the dream completes
    expect((await dream()).status).toBe('completed')
    const mended = await client.beta.agents.retrieve(agent.id)
    expect(mended.version).toBe(edited.version + 1)
    expect(mended.system).toBe(agent.system)
    expect(mended.tools).toEqual(agent.tools)
    expect((await client.beta.environments.retrieve(envs[0].id)).config).toMatchObject({ networking: { type: 'limited', allowed_hosts: [], allow_package_managers: false, allow_mcp_servers: false } })
    // a dream over an agent that is as it should be makes no new version
    expect((await dream()).status).toBe('completed')
    expect((await client.beta.agents.retrieve(agent.id)).version).toBe(mended.version)
  }, 90_000)

  it('updates the input store in place, one such dream at a time (409, not to be retried), and survives an engine restart while it runs', async () => {
    const store = await storeWithNotes('ops notes')
    gate.close()
    const params = {
      inputs: [
        { type: 'memory_store' as const, memory_store_id: store.id },
        { type: 'sessions' as const, session_ids: pastSessions },
      ],
      model: { id: DREAM_MODEL, speed: 'standard' as const },
      output_behavior: { type: 'update_existing' as const, memory_store_id: store.id },
    }
    const first = await client.beta.dreams.create(params)
    const running = await until(first.id, ['running'])
    expect(running.outputs).toEqual([{ type: 'memory_store', memory_store_id: store.id }])

    const refused = await fetch(`${url}/v1/dreams`, { method: 'POST', headers: { 'x-api-key': 'test-token', 'content-type': 'application/json' }, body: JSON.stringify(params) })
    expect(refused.status).toBe(409)
    expect(refused.headers.get('x-should-retry')).toBe('false')
    expect(await refused.json()).toEqual({ type: 'error', error: { type: 'conflict_error', message: expect.stringContaining(`being updated by dream ${first.id}`) } })
    await expect(client.beta.dreams.archive(first.id)).rejects.toThrow(/is running: only a completed, failed or canceled dream can be archived/)

    // the engine stops while the dream's model request is held; the next one finishes the dream
    await engine.close()
    gate.open()
    await open()
    const done = await until(first.id, ['completed', 'failed', 'canceled'])
    expect(done.status).toBe('completed')
    expect(await memories(store.id)).toEqual([
      ['/decisions.md', '# Decisions\n- we deploy on Fridays\n'],
      ['/keep.md', 'Team: blue.\n'],
    ])
    // once it has stopped, the store can be dreamed over again
    const again = await client.beta.dreams.create(params)
    await until(again.id, ['completed', 'failed'])
  }, 120_000)

  it('cancels a running dream: its session is stopped and archived, and a second cancel returns it unchanged', async () => {
    const store = await storeWithNotes('scratch')
    gate.close()
    const d = await client.beta.dreams.create({ inputs: [{ type: 'memory_store', memory_store_id: store.id }, { type: 'sessions', session_ids: [pastSessions[0]] }], model: DREAM_MODEL })
    const running = await until(d.id, ['running'])
    const canceled = await client.beta.dreams.cancel(d.id)
    expect(canceled).toMatchObject({ status: 'canceled', ended_at: expect.any(String), outputs: running.outputs })
    expect(await client.beta.dreams.cancel(d.id)).toEqual(canceled)
    gate.open()
    for (let i = 0; i < 400 && !(await client.beta.sessions.retrieve(running.session_id!)).archived_at; i++) await new Promise((r) => setTimeout(r, 25))
    expect((await client.beta.sessions.retrieve(running.session_id!)).archived_at).not.toBeNull()
    expect((await client.beta.dreams.retrieve(d.id)).status).toBe('canceled')
    expect((await client.beta.dreams.archive(d.id)).archived_at).not.toBeNull()
  }, 60_000)

  it('refuses a bad request naming what is wrong, and keeps nothing of it', async () => {
    const store = await storeWithNotes('checked')
    const other = await client.beta.memoryStores.create({ name: 'other' })
    const before = (await client.beta.dreams.list({ include_archived: true, limit: 100 })).data.length
    const sessions = { type: 'sessions' as const, session_ids: [pastSessions[0]] }
    const mem = { type: 'memory_store' as const, memory_store_id: store.id }
    const bad: [unknown, RegExp][] = [
      [{ inputs: [mem], model: DREAM_MODEL }, /inputs: exactly one sessions input is required \(found 0\)/],
      [{ inputs: [mem, mem, sessions], model: DREAM_MODEL }, /inputs: exactly one memory_store input is required \(found 2\)/],
      [{ inputs: [mem, { type: 'sessions', session_ids: [pastSessions[0], pastSessions[0]] }], model: DREAM_MODEL }, /inputs\[1\]\.session_ids\[1\]: .* is listed twice/],
      [{ inputs: [mem, { type: 'sessions', session_ids: [] }], model: DREAM_MODEL }, /inputs\[1\]\.session_ids: at least 1 session/],
      [{ inputs: [mem, sessions], model: { id: DREAM_MODEL, speed: 'fast' } }, /model/],
      [{ inputs: [mem, sessions], model: DREAM_MODEL, output_behavior: { type: 'update_existing', memory_store_id: other.id } }, /output_behavior\.memory_store_id: must be the memory store of inputs/],
      [{ inputs: [mem, sessions], model: DREAM_MODEL, instructions: 'x'.repeat(4097) }, /instructions/],
    ]
    for (const [body, message] of bad) {
      const err = await client.beta.dreams.create(body as Anthropic.Beta.DreamCreateParams).catch((e: unknown) => e)
      expect(err, JSON.stringify(body).slice(0, 200)).toBeInstanceOf(Anthropic.BadRequestError)
      expect((err as Error).message).toMatch(message)
    }
    await expect(client.beta.dreams.create({ inputs: [{ type: 'memory_store', memory_store_id: 'memstore_nope' }, sessions], model: DREAM_MODEL })).rejects.toThrow(
      /inputs\[0\]\.memory_store_id: memory store .*memstore_nope.* was not found/,
    )
    await expect(client.beta.dreams.create({ inputs: [mem, { type: 'sessions', session_ids: [pastSessions[0], 'sesn_nope'] }], model: DREAM_MODEL })).rejects.toBeInstanceOf(Anthropic.NotFoundError)
    await client.beta.memoryStores.archive(other.id)
    await expect(client.beta.dreams.create({ inputs: [sessions, { type: 'memory_store', memory_store_id: other.id }], model: DREAM_MODEL })).rejects.toThrow(/inputs\[1\]\.memory_store_id: memory store .* is archived/)
    await expect(client.beta.dreams.retrieve('drm_nope')).rejects.toBeInstanceOf(Anthropic.NotFoundError)
    expect((await client.beta.dreams.list({ include_archived: true, limit: 100 })).data.length).toBe(before)
  })

  it('fails a dream that runs past its time limit with `timeout`: its session is stopped and archived, what it wrote is kept; a limit set while it runs holds at once, and across an engine restart', async () => {
    const setLimit = async (minutes: number | null) => {
      const res = await fetch(`${url}/v1/corral/settings`, { method: 'POST', headers: { 'x-api-key': 'test-token', 'content-type': 'application/json' }, body: JSON.stringify({ dream_time_limit_minutes: minutes }) })
      expect(res.status).toBe(200)
      return ((await res.json()) as { dream_time_limit_minutes: number }).dream_time_limit_minutes
    }
    const LIMIT_MS = 3000
    try {
      // the dream reads a transcript and writes decisions.md, then its next model request is held
      const store = await storeWithNotes('slow notes')
      gate.close(2)
      const d = await client.beta.dreams.create({ inputs: [{ type: 'memory_store', memory_store_id: store.id }, { type: 'sessions', session_ids: [pastSessions[0]] }], model: DREAM_MODEL })
      const running = await until(d.id, ['running'])
      // the default hour would let it wait; the limit set now applies to it
      expect(await setLimit(LIMIT_MS / 60_000)).toBe(LIMIT_MS / 60_000)
      const failed = await until(d.id, ['completed', 'failed', 'canceled'], 30_000)
      expect(failed).toMatchObject({
        status: 'failed',
        error: { type: 'timeout', message: expect.stringMatching(/did not finish within its time limit of 3 seconds \(Settings → Dream time limit; dream_time_limit_minutes in the settings API\).*kept in memory store/) },
        outputs: running.outputs,
        session_id: running.session_id,
      })
      expect(Date.parse(failed.ended_at!) - Date.parse(failed.created_at)).toBeGreaterThanOrEqual(LIMIT_MS)
      expect((await client.beta.sessions.retrieve(running.session_id!)).archived_at).not.toBeNull()
      // what the session wrote before it was stopped is in the output store; the input store is untouched
      expect(await memories(running.outputs[0].memory_store_id)).toEqual([
        ['/decisions.md', '# Decisions\n- we deploy on Fridays\n'],
        ['/keep.md', 'Team: blue.\n'],
        ['/old.md', 'We deploy on Mondays.\n'],
      ])
      expect(await memories(store.id)).toEqual([
        ['/keep.md', 'Team: blue.\n'],
        ['/old.md', 'We deploy on Mondays.\n'],
      ])

      // a dream whose engine stopped before its limit is timed out by the next engine once the limit has passed
      gate.close(0)
      const second = await client.beta.dreams.create({ inputs: [{ type: 'memory_store', memory_store_id: store.id }, { type: 'sessions', session_ids: [pastSessions[1]] }], model: DREAM_MODEL })
      const secondRunning = await until(second.id, ['running'])
      await engine.close()
      await new Promise((r) => setTimeout(r, LIMIT_MS + 200))
      await open()
      const late = await until(second.id, ['completed', 'failed', 'canceled'], 30_000)
      expect(late).toMatchObject({ status: 'failed', error: { type: 'timeout' } })
      expect((await client.beta.sessions.retrieve(secondRunning.session_id!)).archived_at).not.toBeNull()
    } finally {
      gate.open()
      expect(await setLimit(null)).toBe(60)
    }
    // with the default hour a dream runs to its end as before
    const store = await storeWithNotes('quick notes')
    const quick = await client.beta.dreams.create({ inputs: [{ type: 'memory_store', memory_store_id: store.id }, { type: 'sessions', session_ids: [pastSessions[0]] }], model: DREAM_MODEL })
    expect((await until(quick.id, ['completed', 'failed', 'canceled'])).status).toBe('completed')
  }, 120_000)
})
