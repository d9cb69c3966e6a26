import { execFileSync } from 'node:child_process'
import { chmodSync, chownSync, existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import Docker from 'dockerode'
import { afterAll, describe, expect, it } from 'vitest'
import { Engine } from '../../../src/main/engine'
import type { ChangesRevertResponse, SessionChangesResponse, WorkspaceListing } from '../../../src/shared/api/workspace'
import { callTool, type RecordedRequest, say, type ScriptStep, ScriptedModelServer } from '../../support/model-server'
import { waitForIdle } from '../engine/support'
import { bwrapReq, dockerReq, removeScopeContainers } from './support'

/*
 * The Changes API of a read-write host folder, end to end: the scripted model's tool calls (built
 * with the offered schemas' field names: bash {command}, write {file_path, content}, edit
 * {file_path, old_string, new_string}) create, modify and delete files; the API lists them per
 * turn with diffs; reverting a file, a turn, everything puts the folder's bytes and modes back;
 * the change store holds only what changed.
 */

/** The tool calls of each turn; a turn is one user message. */
function turnScript(turns: ((req: RecordedRequest) => ScriptStep)[][]): Promise<ScriptedModelServer> {
  return ScriptedModelServer.start((req) => {
    const msgs = req.body.messages
    const userTexts = msgs.filter((m) => m.role === 'user' && (typeof m.content === 'string' || m.content.some((b) => b.type === 'text')))
    const turn = userTexts.length - 1
    const lastText = msgs.lastIndexOf(userTexts[userTexts.length - 1])
    const step = msgs.slice(lastText + 1).filter((m) => m.role === 'user').length
    const steps = turns[turn] ?? []
    return step < steps.length ? steps[step](req) : say(`turn ${turn + 1} done`)
  })
}

/** The tool named `name` from the request's `tools` array: calls use its schema's field names. */
function tool(req: RecordedRequest, name: string, input: Record<string, unknown>): ScriptStep {
  const offered = (req.body.tools ?? []) as { name: string; input_schema?: { properties?: Record<string, unknown> } }[]
  const t = offered.find((x) => x.name === name)
  if (!t) throw new Error(`the request offers no ${name} tool`)
  for (const k of Object.keys(input)) if (t.input_schema?.properties && !(k in t.input_schema.properties)) throw new Error(`${name} offers no field ${k}`)
  return callTool(name, input)
}

/** Every file's bytes and mode under `dir` (not .git). */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {}
  const walk = (d: string, rel: string) => {
    for (const name of readdirSync(d).sort()) {
      if (name === '.git') continue
      const full = join(d, name)
      const r = rel ? `${rel}/${name}` : name
      const st = lstatSync(full)
      if (st.isDirectory()) walk(full, r)
      else out[r] = `${(st.mode & 0o7777).toString(8)} ${readFileSync(full).toString('base64')}`
    }
  }
  walk(dir, '')
  return out
}

for (const backend of ['bubblewrap', 'docker'] as const) {
  const req = backend === 'docker' ? dockerReq() : bwrapReq()
  describe.skipIf(!req.ok)(`folder changes on ${backend}`, () => {
    const owner = backend === 'docker' ? 1000 : process.getuid!()
    const dataDir = mkdtempSync(join(tmpdir(), `corral-changes-${backend}-`))
    const engines: Engine[] = []
    const models: ScriptedModelServer[] = []
    afterAll(async () => {
      for (const e of engines) await e.close()
      for (const m of models) await m.close()
      if (backend === 'docker') {
        const api = new Docker()
        await removeScopeContainers(api, dataDir)
      }
      rmSync(dataDir, { recursive: true, force: true })
    })

    function project(git: boolean): string {
      const dir = mkdtempSync(join(tmpdir(), 'corral-changes-project-'))
      writeFileSync(join(dir, 'app.py'), 'def main():\n    print("hello")\n')
      writeFileSync(join(dir, 'old.txt'), 'to be deleted\n')
      writeFileSync(join(dir, 'run.sh'), '#!/bin/sh\necho run\n')
      chmodSync(join(dir, 'run.sh'), 0o644)
      writeFileSync(join(dir, 'big.bin'), Buffer.alloc(1024 * 1024, 7)) // never touched: never stored
      if (git) {
        const g = (...args: string[]) => execFileSync('git', ['-C', dir, '-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { stdio: 'ignore' })
        g('init', '-q')
        g('add', '-A')
        g('commit', '-q', '-m', 'start')
      }
      execFileSync('chown', ['-R', `${owner}:${owner}`, dir])
      chownSync(dir, owner, owner)
      return dir
    }

    async function start(folder: string, turns: ((req: RecordedRequest) => ScriptStep)[][]) {
      const model = await turnScript(turns)
      models.push(model)
      const engine = Engine.open({ dataDir, token: 'test-token', env: { PATH: process.env.PATH, ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k' }, harness: { backoffBaseMs: 5 }, log: () => {} })
      engines.push(engine)
      const url = (await engine.listen(0)).url
      const client = new Anthropic({ baseURL: url, apiKey: 'test-token', maxRetries: 0 })
      const env = await client.beta.environments.create({ name: backend, config: { type: 'cloud', corral: { backend, pool_size: 0 } } as never })
      const agent = await client.beta.agents.create({ name: 'changes', model: 'claude-sonnet-5-5', tools: [{ type: 'agent_toolset_20260401' }] })
      const session = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id, resources: [{ type: 'host_folder', host_path: folder }] as never })
      const api = async <T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> => {
        const res = await fetch(`${url}/v1/corral/sessions/${session.id}${path}`, { method, headers: { authorization: 'Bearer test-token', 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) })
        return { status: res.status, body: (await res.json()) as T }
      }
      const turn = async (text: string) => {
        const before = engine.services.log.read(session.id, { after: 0, limit: 1000 }).filter((e) => e.event.type === 'session.status_idle').length
        await client.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text }] }] })
        for (;;) {
          const events = await waitForIdle(engine, session.id)
          if (events.filter((e) => e.type === 'session.status_idle').length > before) return events
          await new Promise((r) => setTimeout(r, 20))
        }
      }
      return { engine, url, session, api, turn, client }
    }

    it('lists what bash created, modified and deleted per turn with diffs, says which changes of a non-git folder cannot be reverted and why, and stores only the changed content', async () => {
      const folder = project(false)
      const { api, turn } = await start(folder, [
        [(r) => tool(r, 'bash', { command: 'printf "a new note\\n" > notes.txt' })],
        [(r) => tool(r, 'bash', { command: 'rm old.txt && chmod +x run.sh && mkdir -p src/lib && echo x > src/lib/mod.py' })],
      ])
      await turn('first')
      await turn('second')
      const { status, body } = await api<SessionChangesResponse>('GET', '/changes')
      expect(status).toBe(200)
      const [f] = body.folders
      expect(f.mount_path).toBe('/workspace')
      const summary = f.changes.map((c) => `${c.turn} ${c.kind} ${c.path} ${c.revertable ? 'revertable' : 'not revertable'}`)
      expect(summary).toEqual(['1 created notes.txt revertable', '2 deleted old.txt not revertable', '2 modified run.sh not revertable', '2 created src/lib/mod.py revertable'])
      expect(f.changes.find((c) => c.path === 'notes.txt')!.diff).toContain('+a new note')
      // why, and what would make it revertable
      expect(f.changes.find((c) => c.path === 'old.txt')!.reason).toMatch(/^this folder is not a git repository: bash changed this file before Corral had seen its content.*git init && git add -A && git commit -m start/)
      // only the changed content is stored (the 1 MiB file nobody touched is not): the note, mod.py, run.sh after
      const stored = ['a new note\n', 'x\n', '#!/bin/sh\necho run\n'].reduce((n, x) => n + Buffer.byteLength(x), 0)
      expect(f.store_bytes).toBe(stored)

      const refused = await api<{ error: { type: string; message: string } }>('POST', '/changes/revert', { scope: 'turn', turn: 2 })
      expect(refused.status).toBe(409)
      expect(refused.body.error.message).toMatch(/old\.txt: its content before record \d+ is unknown, so it cannot be put back \(this folder is not a git repository/)
      expect(existsSync(join(folder, 'src/lib/mod.py'))).toBe(true) // nothing half-done

      const created = await api<ChangesRevertResponse>('POST', '/changes/revert', { scope: 'file', path: 'src/lib/mod.py' })
      expect(created.status).toBe(200)
      expect(created.body.reverted.map((c) => `${c.kind} ${c.path}`)).toEqual(['deleted src/lib/mod.py'])
      expect(existsSync(join(folder, 'src'))).toBe(false) // the directories the agent made go with it
      const bad = await api<{ error: { message: string } }>('POST', '/changes/revert', { scope: 'sideways' })
      expect(bad.status).toBe(400)
      expect(bad.body.error.message).toMatch(/scope/)
      const after = (await api<SessionChangesResponse>('GET', '/changes')).body.folders[0].changes
      expect(after.find((c) => c.path === 'src/lib/mod.py' && c.kind === 'created')!.reverted).toBe(true)
    }, 120_000)

    it('keeps the bytes a write or an edit replaces, so a file of a non-git folder the agent edits reverts to its bytes and mode', async () => {
      const folder = project(false)
      const original = snapshot(folder)
      const { api, turn } = await start(folder, [
        [
          (r) => tool(r, 'write', { file_path: '/workspace/notes.txt', content: 'a new note\n' }),
          (r) => tool(r, 'edit', { file_path: '/workspace/app.py', old_string: 'print("hello")', new_string: 'print("hello, world")' }),
          (r) => tool(r, 'edit', { file_path: 'run.sh', old_string: 'echo run', new_string: 'echo ran' }),
        ],
      ])
      await turn('first')
      const changes = (await api<SessionChangesResponse>('GET', '/changes')).body.folders[0].changes
      expect(changes.map((c) => `${c.turn} ${c.kind} ${c.path} ${c.revertable}`)).toEqual(['1 created notes.txt true', '1 modified app.py true', '1 modified run.sh true'])
      const edit = changes.find((c) => c.path === 'app.py')!
      expect(edit.diff).toContain('-    print("hello")')
      expect(edit.diff).toContain('+    print("hello, world")')
      const r = await api<ChangesRevertResponse>('POST', '/changes/revert', { scope: 'file', path: 'app.py' })
      expect(r.status).toBe(200)
      expect(readFileSync(join(folder, 'app.py'), 'utf8')).toBe('def main():\n    print("hello")\n')
      const all = await api<ChangesRevertResponse>('POST', '/changes/revert', { scope: 'all' })
      expect(all.status).toBe(200)
      expect(snapshot(folder)).toEqual(original)
    }, 120_000)

    it('reverts a turn and then everything in a git folder, including what bash changed and deleted, back to the bytes and modes it had', async () => {
      const folder = project(true)
      const original = snapshot(folder)
      const { api, turn } = await start(folder, [
        [(r) => tool(r, 'bash', { command: 'sed -i s/hello/bonjour/ app.py && rm old.txt && chmod 755 run.sh' })],
        [(r) => tool(r, 'bash', { command: 'echo second turn > notes.txt' })],
      ])
      await turn('first')
      await turn('second')
      const changes = (await api<SessionChangesResponse>('GET', '/changes')).body.folders[0].changes
      expect(changes.map((c) => `${c.turn} ${c.kind} ${c.path} ${c.revertable}`)).toEqual(['1 modified app.py true', '1 deleted old.txt true', '1 modified run.sh true', '2 created notes.txt true'])
      expect(changes[0].diff).toContain('+    print("bonjour")')

      const t1 = await api<ChangesRevertResponse>('POST', '/changes/revert', { scope: 'turn', turn: 1 })
      expect(t1.status).toBe(200)
      expect(readFileSync(join(folder, 'old.txt'), 'utf8')).toBe('to be deleted\n')
      expect(statSync(join(folder, 'run.sh')).mode & 0o777).toBe(0o644)
      expect(existsSync(join(folder, 'notes.txt'))).toBe(true)

      const all = await api<ChangesRevertResponse>('POST', '/changes/revert', { scope: 'all' })
      expect(all.status).toBe(200)
      expect(snapshot(folder)).toEqual(original)
      expect(execFileSync('git', ['-C', folder, '-c', 'safe.directory=*', 'status', '--porcelain'], { encoding: 'utf8' })).toBe('')
    }, 120_000)

    it('does not write outside the folder when the agent replaced a directory with a symlink to the host before a revert', async () => {
      const folder = project(true)
      const original = snapshot(folder)
      const outside = mkdtempSync(join(tmpdir(), 'corral-changes-victim-'))
      execFileSync('mkdir', ['-p', join(folder, 'lib')])
      writeFileSync(join(folder, 'lib/util.py'), 'X = 1\n')
      execFileSync('git', ['-C', folder, '-c', 'safe.directory=*', '-c', 'user.name=t', '-c', 'user.email=t@t', 'add', '-A'])
      execFileSync('git', ['-C', folder, '-c', 'safe.directory=*', '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'lib'])
      execFileSync('chown', ['-R', `${owner}:${owner}`, folder])
      const withLib = snapshot(folder)
      const { api, turn, session, client, engine } = await start(folder, [
        [(r) => tool(r, 'bash', { command: 'sed -i s/1/2/ lib/util.py' })],
        // inside the sandbox this link leads nowhere; on the host it names a real directory
        [(r) => tool(r, 'bash', { command: `rm -rf lib && ln -s ${outside} lib` })],
      ])
      await turn('first')
      await turn('second')
      const refused = await api<{ error: { message: string } }>('POST', '/changes/revert', { scope: 'turn', turn: 1 })
      expect(refused.status).toBe(409)
      expect(refused.body.error.message).toMatch(/lib\/util\.py changed again later/)
      const file = await api<{ error: { message: string } }>('POST', '/changes/revert', { scope: 'file', path: 'lib/util.py' })
      expect(file.status).toBe(409)
      expect(file.body.error.message).toMatch(/cannot revert lib\/util\.py: lib is a symlink now/)
      expect(readdirSync(outside)).toEqual([])
      const all = await api<ChangesRevertResponse>('POST', '/changes/revert', { scope: 'all' })
      expect(all.status).toBe(200)
      expect(readdirSync(outside)).toEqual([])
      expect(snapshot(folder)).toEqual(withLib)
      expect(original['app.py']).toBe(withLib['app.py'])
      rmSync(outside, { recursive: true, force: true })
      // deleting the session deletes its change records (the folder itself stays as it is)
      expect(existsSync(join(dataDir, 'changes', session.id))).toBe(true)
      await client.beta.sessions.delete(session.id)
      await engine.handsSettled()
      expect(existsSync(join(dataDir, 'changes', session.id))).toBe(false)
      expect(snapshot(folder)).toEqual(withLib)
    }, 120_000)

    it('lists and downloads the folder through the file browser routes, and refuses a symlink that leads out of it', async () => {
      const folder = project(false)
      const outside = mkdtempSync(join(tmpdir(), 'corral-changes-outside-'))
      writeFileSync(join(outside, 'secret'), 'not yours')
      execFileSync('ln', ['-s', join(outside, 'secret'), join(folder, 'leak')])
      const { api, url, session } = await start(folder, [])
      const listing = await api<WorkspaceListing>('GET', '/files')
      expect(listing.status).toBe(200)
      expect(listing.body.entries.map((e) => `${e.kind} ${e.path}`)).toEqual(['file /workspace/app.py', 'file /workspace/big.bin', 'symlink /workspace/leak', 'file /workspace/old.txt', 'file /workspace/run.sh'])
      const dl = await fetch(`${url}/v1/corral/sessions/${session.id}/files/content?path=${encodeURIComponent('/workspace/app.py')}`, { headers: { authorization: 'Bearer test-token' } })
      expect(dl.status).toBe(200)
      expect(dl.headers.get('content-disposition')).toContain("filename*=UTF-8''app.py")
      expect(await dl.text()).toBe('def main():\n    print("hello")\n')
      const leak = await fetch(`${url}/v1/corral/sessions/${session.id}/files/content?path=/workspace/leak`, { headers: { authorization: 'Bearer test-token' } })
      expect(leak.status).toBe(403)
      expect(((await leak.json()) as { error: { message: string } }).error.message).toMatch(/resolves outside the mounted folder/)
      const up = await api<{ error: { message: string } }>('GET', `/files?path=${encodeURIComponent('/workspace/../etc')}`)
      expect(up.status).toBe(400)
      rmSync(outside, { recursive: true, force: true })
    }, 60_000)
  })
}
