import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, describe, expect, it } from 'vitest'
import { say, ScriptedModelServer, toolCall, toolResultsOf, type RecordedRequest, type ScriptStep } from '../../support/model-server'
import { bubblewrapProbe, requirement } from '../../support/requirements'
import { openStoresAt } from '../../../src/main/session/stores'

/*
 * A dream survives kill -9 of the engine at any instant: before its output store is made, while
 * its transcripts are written, before or after its session starts, mid-turn, after its session
 * ended and before the dream is settled. After a restart each dream completes exactly once: one
 * output store (a copy made once), one session, the result in the store.
 */

const CHILD = join(__dirname, '../../support/dream-crash-child.ts')
const DREAMER = 'claude-dream-crash'
const bwrap = requirement('bubblewrap', bubblewrapProbe)

function respond(req: RecordedRequest): ScriptStep {
  if (req.body.model !== DREAMER) return say('Noted.')
  const system = (req.body.system ?? []).map((s) => s.text).join('\n')
  const mount = /<memory_store [^>]*path="([^"]+)"/.exec(system)![1]
  // a call that a kill interrupted comes back as an error: the model does that step again
  const done = toolResultsOf(req).filter((r) => !r.is_error).length
  const delayMs = Math.floor(Math.random() * 40)
  if (done === 0) return { ...toolCall(req, 'write', { file_path: `${mount}/decisions.md`, content: '# Decisions\n- ship on Fridays\n' }), delayMs } as ScriptStep
  if (done === 1) return { ...toolCall(req, 'bash', { command: `rm -f ${mount}/old.md` }), delayMs } as ScriptStep
  return { ...say('Done.'), delayMs } as ScriptStep
}

describe.skipIf(!bwrap.ok)('dreams across kill -9 of the engine', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-dream-crash-'))
  writeFileSync(join(dataDir, 'settings.json'), JSON.stringify({ sandboxBackend: 'bubblewrap' }))
  let child: ChildProcess | undefined
  let model: ScriptedModelServer | undefined

  afterAll(async () => {
    child?.kill('SIGKILL')
    await model?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  const start = (env: NodeJS.ProcessEnv = {}): Promise<Anthropic> =>
    new Promise((resolve, reject) => {
      const c = (child = spawn(process.execPath, ['--import', 'tsx', CHILD, dataDir, model!.url], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } }))
      let out = ''
      let err = ''
      c.stderr!.on('data', (b: Buffer) => (err += b.toString()))
      c.stdout!.on('data', (b: Buffer) => {
        out += b.toString()
        const m = /ready (\S+)/.exec(out)
        if (m) resolve(new Anthropic({ baseURL: m[1], apiKey: 'crash-token', maxRetries: 0 }))
      })
      c.once('exit', (code, signal) => {
        if (signal !== 'SIGKILL') reject(new Error(`the engine exited (${code ?? signal}):\n${err}`))
      })
    })

  const kill = async () => {
    const c = child
    if (!c || c.exitCode !== null || c.signalCode !== null) return
    await new Promise<void>((resolve) => {
      c.once('exit', () => resolve())
      c.kill('SIGKILL')
    })
  }

  it('completes every dream exactly once across 12 kills at random instants', async () => {
    model = await ScriptedModelServer.start(respond)
    let client = await start()
    const agent = await client.beta.agents.create({ name: 'helper', model: 'claude-sonnet-5-5' })
    const env = await client.beta.environments.create({ name: 'plain' })
    const s = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id, title: 'remember: ship on Fridays' })
    await client.beta.sessions.events.send(s.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'remember: ship on Fridays' }] }] })
    for (let i = 0; i < 400 && (await client.beta.sessions.retrieve(s.id)).status !== 'idle'; i++) await new Promise((r) => setTimeout(r, 25))

    const dreams: { id: string; store: string }[] = []
    const kills: number[] = []
    for (let round = 0; round < 12; round++) {
      const store = await client.beta.memoryStores.create({ name: `notes ${round}` })
      await client.beta.memoryStores.memories.create(store.id, { path: '/old.md', content: 'ship on Mondays\n' })
      const d = await client.beta.dreams.create({
        inputs: [
          { type: 'memory_store', memory_store_id: store.id },
          { type: 'sessions', session_ids: [s.id] },
        ],
        model: DREAMER,
        ...(round % 3 === 2 ? { output_behavior: { type: 'update_existing' as const, memory_store_id: store.id } } : {}),
      })
      dreams.push({ id: d.id, store: store.id })
      const after = Math.floor(Math.random() * 700)
      kills.push(after)
      await new Promise((r) => setTimeout(r, after))
      await kill()
      client = await start()
    }

    // every dream ends, completed, after the restarts
    const deadline = Date.now() + 90_000
    for (const d of dreams) {
      for (;;) {
        const got = await client.beta.dreams.retrieve(d.id)
        if (got.status !== 'pending' && got.status !== 'running') {
          expect(got.status, `dream ${d.id} (kill after ${kills[dreams.indexOf(d)]} ms): ${JSON.stringify(got.error)}`).toBe('completed')
          break
        }
        if (Date.now() > deadline) throw new Error(`dream ${d.id} is still ${got.status} (kill after ${kills[dreams.indexOf(d)]} ms)`)
        await new Promise((r) => setTimeout(r, 50))
      }
    }
    await kill()
    // what the database holds: one output store and one session per dream, each result in place
    const stores = openStoresAt(join(dataDir, 'corral.db'))
    try {
      for (const [i, d] of dreams.entries()) {
        const dream = stores.dreams.retrieve(d.id)
        const copies = stores.db.prepare("SELECT COUNT(*) FROM memory_stores WHERE json_extract(data, '$.metadata.corral_dream_id') = ?").pluck().get(d.id)
        const sessions = stores.db.prepare("SELECT COUNT(*) FROM sessions WHERE json_extract(data, '$.metadata.corral_dream_id') = ?").pluck().get(d.id)
        expect(copies, `output stores of dream ${i}`).toBe(i % 3 === 2 ? 0 : 1)
        expect(sessions, `sessions of dream ${i}`).toBe(1)
        const out = dream.outputs[0].memory_store_id
        expect(out === d.store).toBe(i % 3 === 2)
        expect(stores.memory.snapshot(out).map((m) => [m.path, m.content])).toEqual([['/decisions.md', '# Decisions\n- ship on Fridays\n']])
        expect(stores.sessions.retrieve(dream.session_id!).archived_at).not.toBeNull()
      }
    } finally {
      stores.close()
    }
  }, 240_000)

  it('completes a dream whose session a killed process archived before it released its hands, with the sandbox\'s last changes in the store', async () => {
    model ??= await ScriptedModelServer.start(respond)
    await kill()
    let client = await start({ CORRAL_TEST_KILL_AFTER_DREAM_ARCHIVE: '1' })
    const agent = await client.beta.agents.create({ name: 'helper 2', model: 'claude-sonnet-5-5' })
    const env = await client.beta.environments.create({ name: 'plain 2' })
    const s = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id, title: 'remember: ship on Fridays' })
    const store = await client.beta.memoryStores.create({ name: 'archived before release' })
    await client.beta.memoryStores.memories.create(store.id, { path: '/old.md', content: 'ship on Mondays\n' })
    const exited = new Promise<void>((resolve) => child!.once('exit', () => resolve()))
    const d = await client.beta.dreams.create({ inputs: [{ type: 'memory_store', memory_store_id: store.id }, { type: 'sessions', session_ids: [s.id] }], model: DREAMER })
    await exited // the dream ran, its session ended and was archived, and the process died there
    client = await start()
    let got = await client.beta.dreams.retrieve(d.id)
    for (let i = 0; i < 600 && (got.status === 'pending' || got.status === 'running'); i++) {
      await new Promise((r) => setTimeout(r, 50))
      got = await client.beta.dreams.retrieve(d.id)
    }
    expect(got.status).toBe('completed')
    const out: string[] = []
    for await (const m of client.beta.memoryStores.memories.list(got.outputs[0].memory_store_id, { limit: 100 })) if (m.type === 'memory') out.push(m.path)
    // the rm of old.md waited its 30 s in the killed process; the release here applied it
    expect(out).toEqual(['/decisions.md'])
    await kill()
  }, 120_000)
})
