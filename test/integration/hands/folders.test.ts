import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync, existsSync } from 'node:fs'
import { homedir, tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import Docker from 'dockerode'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Engine } from '../../../src/main/engine'
import { callTool, say, ScriptedModelServer, toolResultsOf } from '../../support/model-server'
import { waitForIdle } from '../engine/support'
import { bwrapReq, dockerReq, removeScopeContainers } from './support'

/*
 * host_folder resources (a Corral addition): a folder of this machine bound into the sandbox,
 * read-write or read-only, on Docker and on bubblewrap, driven end to end (official SDK → API →
 * harness → scripted model → sandbox). The sandbox user is uid 1000 on Docker; bubblewrap maps it
 * to the user who runs Corral. The test folders belong to that user.
 */

/** A model that runs `commands` as bash calls, one per step, then says it is done. */
function bashScript(commands: string[]): Promise<ScriptedModelServer> {
  return ScriptedModelServer.start((req) => {
    const n = toolResultsOf(req).length
    return n < commands.length ? callTool('bash', { command: commands[n] }) : say('Done.')
  })
}

let owner = 1000
function ownedDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  chownSync(dir, owner, owner)
  return dir
}

function writeOwned(path: string, content: string): void {
  writeFileSync(path, content)
  chownSync(path, owner, owner)
}

const messageOf = (err: unknown) => (err as { error?: { error?: { message?: string } } }).error?.error?.message ?? String(err)

async function bashOutputs(engine: Engine, client: Anthropic, p: { env: string; resources: Record<string, unknown>[] }): Promise<{ text: string; isError: boolean }[]> {
  const agent = await client.beta.agents.create({ name: 'folder', model: 'claude-sonnet-5-5', tools: [{ type: 'agent_toolset_20260401' }] })
  const session = await client.beta.sessions.create({ agent: agent.id, environment_id: p.env, resources: p.resources as never })
  await client.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'go' }] }] })
  const events = await waitForIdle(engine, session.id)
  return events
    .filter((e) => e.type === 'agent.tool_result')
    .map((e) => {
      const r = e as unknown as { content: { text: string }[]; is_error: boolean }
      return { text: r.content.map((c) => c.text).join(''), isError: r.is_error }
    })
}

for (const backend of ['docker', 'bubblewrap'] as const) {
  const req = backend === 'docker' ? dockerReq() : bwrapReq()
  describe.skipIf(!req.ok)(`host folders on ${backend}`, () => {
    const dataDir = mkdtempSync(join(tmpdir(), `corral-folders-${backend}-`))
    const outside = mkdtempSync(join(tmpdir(), 'corral-folders-outside-'))
    const engines: Engine[] = []
    const models: ScriptedModelServer[] = []
    let envId: string
    afterAll(async () => {
      for (const e of engines) await e.close()
      for (const m of models) await m.close()
      if (backend === 'docker') {
        const api = new Docker()
        await removeScopeContainers(api, dataDir)
      }
      rmSync(dataDir, { recursive: true, force: true })
      rmSync(outside, { recursive: true, force: true })
    })
    beforeAll(() => {
      owner = backend === 'docker' ? 1000 : process.getuid!()
      writeFileSync(join(outside, 'secret.txt'), 'host secret outside the folder\n')
    })

    async function open(commands: string[]): Promise<{ engine: Engine; client: Anthropic }> {
      const model = await bashScript(commands)
      models.push(model)
      const engine = Engine.open({ dataDir, token: 'test-token', env: { PATH: process.env.PATH, ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k' }, harness: { backoffBaseMs: 5 }, log: () => {} })
      engines.push(engine)
      const client = new Anthropic({ baseURL: (await engine.listen(0)).url, apiKey: 'test-token', maxRetries: 0 })
      envId = (await client.beta.environments.create({ name: backend, config: { type: 'cloud', corral: { backend, pool_size: 0 } } as never })).id
      return { engine, client }
    }

    it('mounts a folder read-write at /workspace: the agent reads and changes the real files, and its own bookkeeping stays out of the folder', async () => {
      const folder = ownedDir('corral-folder-rw-')
      writeOwned(join(folder, 'README.md'), 'hello from the host\n')
      const { engine, client } = await open(['cat README.md; pwd; id -u', 'echo made in the sandbox > new.txt && sed -i s/hello/HELLO/ README.md && ls -a'])
      const out = await bashOutputs(engine, client, { env: envId, resources: [{ type: 'host_folder', host_path: folder }] })
      expect(out[0]).toEqual({ text: 'hello from the host\n/workspace\n1000', isError: false })
      expect(out[1].isError).toBe(false)
      expect(readFileSync(join(folder, 'new.txt'), 'utf8')).toBe('made in the sandbox\n')
      expect(readFileSync(join(folder, 'README.md'), 'utf8')).toBe('HELLO from the host\n')
      expect(existsSync(join(folder, '.corral'))).toBe(false)
      expect(out[1].text.split('\n')).not.toContain('.corral')
    }, 90_000)

    it('mounts a folder read-only at a path inside /workspace: reads work, writes fail and the host folder is unchanged', async () => {
      const folder = ownedDir('corral-folder-ro-')
      writeOwned(join(folder, 'data.csv'), 'a,b\n1,2\n')
      const { engine, client } = await open(['cat /workspace/ref/data.csv', 'echo x > /workspace/ref/data.csv; echo y > /workspace/ref/other; ls /workspace/ref'])
      const out = await bashOutputs(engine, client, { env: envId, resources: [{ type: 'host_folder', host_path: folder, mount_path: '/workspace/ref', read_only: true }] })
      expect(out[0].text).toBe('a,b\n1,2')
      expect(out[1].text).toMatch(/Read-only file system/)
      expect(out[1].text).toMatch(/data\.csv$/)
      expect(readFileSync(join(folder, 'data.csv'), 'utf8')).toBe('a,b\n1,2\n')
      expect(existsSync(join(folder, 'other'))).toBe(false)
    }, 90_000)

    it('does not let a symlink inside the folder reach the host outside it', async () => {
      const folder = ownedDir('corral-folder-link-')
      symlinkSync(join(outside, 'secret.txt'), join(folder, 'absolute-link'))
      symlinkSync(`../${outside.split('/').pop()}/secret.txt`, join(folder, 'relative-link'))
      const { engine, client } = await open(['cat absolute-link relative-link; echo exit=$?; ln -sfn / root-link; ls root-link/ | head -50'])
      const out = await bashOutputs(engine, client, { env: envId, resources: [{ type: 'host_folder', host_path: folder }] })
      expect(out[0].text).not.toContain('host secret')
      expect(out[0].text).toMatch(/absolute-link: No such file or directory/)
      expect(out[0].text).toMatch(/relative-link: No such file or directory/)
      expect(out[0].text).toMatch(/exit=1/)
      // the link the agent made points at the sandbox's root, not the host's: no data dir, no outside dir
      expect(out[0].text).not.toContain(outside.split('/').pop())
      expect(readFileSync(join(outside, 'secret.txt'), 'utf8')).toBe('host secret outside the folder\n')
    }, 90_000)

    it('refuses at create, naming the resource and the rule, a folder that is a system directory, the home directory, the data directory or resolves into one', async () => {
      const { client } = await open([])
      const link = mkdtempSync(join(tmpdir(), 'corral-folder-sneaky-'))
      symlinkSync('/etc', join(link, 'etc-link'))
      symlinkSync(dataDir, join(link, 'data-link'))
      const project = ownedDir('corral-folder-ok-')
      // the keychain's files (gnome-keyring keeps them in $XDG_DATA_HOME/keyrings)
      const xdg = mkdtempSync(join(tmpdir(), 'corral-folder-xdg-'))
      mkdirSync(join(xdg, 'keyrings'))
      const savedXdg = process.env.XDG_DATA_HOME
      process.env.XDG_DATA_HOME = xdg
      const cases: [string, RegExp][] = [
        ['/', /resources\[1\]\.host_path: "\/" cannot be mounted: it is the root of the file system/],
        ['/proc/self', /resources\[1\]\.host_path: "\/proc\/self" \(resolves to "\/proc\/\d+"\) cannot be mounted: it is inside the system directory \/proc/],
        ['/sys', /inside the system directory \/sys/],
        ['/dev', /inside the system directory \/dev/],
        [homedir(), /it is your home directory itself/],
        [dataDir, /it is inside Corral's data directory/],
        [join(dataDir, '..'), /it is the system directory \/tmp itself|it contains Corral's data directory/],
        [join(link, 'etc-link'), /resolves to "\/etc"\) cannot be mounted: it is inside the system directory \/etc/],
        [join(link, 'data-link'), /it is inside Corral's data directory/],
        [join(link, 'missing'), /does not exist on this machine/],
        [join(xdg, 'keyrings'), /it is inside a keychain or credential folder/],
        [xdg, /it contains a keychain or credential folder/],
      ]
      const agent = await client.beta.agents.create({ name: 'folder', model: 'claude-sonnet-5-5', tools: [{ type: 'agent_toolset_20260401' }] })
      const before = (await client.beta.sessions.list()).data.length
      for (const [path, message] of cases) {
        const err = await client.beta.sessions.create({ agent: agent.id, environment_id: envId, resources: [{ type: 'host_folder', host_path: project }, { type: 'host_folder', host_path: path, mount_path: '/workspace/other' }] as never }).catch((e: unknown) => e)
        expect(err, path).toBeInstanceOf(Anthropic.BadRequestError)
        expect(messageOf(err), path).toMatch(message)
      }
      const clash = await client.beta.sessions.create({ agent: agent.id, environment_id: envId, resources: [{ type: 'host_folder', host_path: project }, { type: 'host_folder', host_path: project, mount_path: '/workspace/sub' }] as never }).catch((e: unknown) => e)
      expect(messageOf(clash)).toMatch(/resources\[1\]\.mount_path: \/workspace\/sub overlaps resources\[0\]'s mount at \/workspace/)
      const bad = await client.beta.sessions.create({ agent: agent.id, environment_id: envId, resources: [{ type: 'host_folder', host_path: 'relative/path' }] as never }).catch((e: unknown) => e)
      expect(messageOf(bad)).toMatch(/resources\.0\.host_path|resources\[0\]\.host_path/)
      expect((await client.beta.sessions.list()).data.length).toBe(before)
      if (savedXdg === undefined) delete process.env.XDG_DATA_HOME
      else process.env.XDG_DATA_HOME = savedXdg
      rmSync(link, { recursive: true, force: true })
      rmSync(xdg, { recursive: true, force: true })
      chmodSync(project, 0o755)
    }, 60_000)
  })
}
