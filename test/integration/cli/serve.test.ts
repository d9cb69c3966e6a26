import { afterEach, beforeAll, describe, expect, it } from 'vitest'
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, statSync, readFileSync, existsSync, utimesSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { openDatabase } from '../../../src/main/session/database'
import { MIGRATIONS } from '../../../src/main/session/migrations'
import { openStores } from '../../../src/main/session/stores'

const children: ChildProcess[] = []
const dirs: string[] = []

// `npm run serve` runs the CLI as built (scripts/build-cli.mjs → out/cli/corral.js, plain node),
// so that is what these tests start; the other CLI tests run the sources through tsx.
const CLI = join(process.cwd(), 'out/cli/corral.js')
const buildCli = () => execFileSync(process.execPath, ['scripts/build-cli.mjs'], { stdio: 'inherit', timeout: 60_000 })
beforeAll(() => void buildCli(), 90_000)

afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL')
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})

/** Starts `corral serve --port 0` (the built CLI) and resolves with its printed URL. */
function startServe(env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; url: string; output: () => string }> {
  const child = spawn(process.execPath, [CLI, 'serve', '--port', '0'], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  children.push(child)
  let out = ''
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not print its URL in time; output:\n${out}`)), 30_000)
    const onData = (b: Buffer) => {
      out += b.toString()
      const m = out.match(/serving on (http:\/\/127\.0\.0\.1:\d+)/)
      if (m) {
        clearTimeout(timer)
        resolve({ child, url: m[1], output: () => out })
      }
    }
    child.stdout!.on('data', onData)
    child.stderr!.on('data', onData)
    child.on('exit', (code) => reject(new Error(`serve exited with ${code}:\n${out}`)))
  })
}

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'corral-serve-'))
  dirs.push(d)
  return d
}

describe('corral serve', () => {
  it('generates a token at first start, keeps it with mode 0600, and accepts it', async () => {
    const dataDir = tempDir()
    const { url } = await startServe({ CORRAL_DATA_DIR: dataDir, CORRAL_TOKEN: '' })
    const tokenFile = join(dataDir, 'token')
    expect(existsSync(tokenFile)).toBe(true)
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600)
    const token = readFileSync(tokenFile, 'utf8').trim()
    const client = new Anthropic({ baseURL: url, apiKey: token })
    const env = await client.beta.environments.create({ name: 'first' })
    expect(env.id).toMatch(/^env_/)
    expect(existsSync(join(dataDir, 'corral.db'))).toBe(true)
  })

  it('prints the full sign-in address with the token, and that address signs a browser in', async () => {
    const dataDir = tempDir()
    const { url, output } = await startServe({ CORRAL_DATA_DIR: dataDir, CORRAL_TOKEN: '' })
    const token = readFileSync(join(dataDir, 'token'), 'utf8').trim()
    await expect.poll(() => output()).toContain(`${url}/?token=${encodeURIComponent(token)}`)
    const res = await fetch(`${url}/?token=${encodeURIComponent(token)}`, { redirect: 'manual' })
    expect(res.status).toBe(303)
    expect(res.headers.get('set-cookie') ?? '').toMatch(/HttpOnly/i)
  })

  it('honours CORRAL_TOKEN and refuses any other token', async () => {
    const dataDir = tempDir()
    const { url } = await startServe({ CORRAL_DATA_DIR: dataDir, CORRAL_TOKEN: 'serve-test-token' })
    await expect(new Anthropic({ baseURL: url, apiKey: 'nope' }).beta.agents.list()).rejects.toBeInstanceOf(Anthropic.AuthenticationError)
    const page = await new Anthropic({ baseURL: url, apiKey: 'serve-test-token' }).beta.agents.list()
    expect(page.data).toEqual([])
  })

  it('shuts down cleanly on SIGTERM and keeps what it acknowledged', async () => {
    const dataDir = tempDir()
    const first = await startServe({ CORRAL_DATA_DIR: dataDir, CORRAL_TOKEN: 't' })
    const client = new Anthropic({ baseURL: first.url, apiKey: 't' })
    const agent = await client.beta.agents.create({ name: 'kept', model: 'claude-sonnet-4-6' })
    const exit = new Promise<number | null>((r) => first.child.on('exit', (code) => r(code)))
    first.child.kill('SIGTERM')
    expect(await exit).toBe(0)
    expect(first.output()).toContain('shutting down')

    const second = await startServe({ CORRAL_DATA_DIR: dataDir, CORRAL_TOKEN: 't' })
    const again = await new Anthropic({ baseURL: second.url, apiKey: 't' }).beta.agents.retrieve(agent.id)
    expect(again.name).toBe('kept')
  })

  it('upgrades an older data directory before it serves, printing the progress of the event log copy, and serves its sessions as before', async () => {
    const dataDir = tempDir()
    // a data directory as the release before the rowid event log left it (schema version 13)
    const stores = openStores(openDatabase({ path: join(dataDir, 'corral.db'), migrations: MIGRATIONS.filter((m) => m.version <= 13) }), {
      filesDir: join(dataDir, 'files'),
      skillsDir: join(dataDir, 'skills'),
    })
    const agent = stores.agents.create({ name: 'before', model: 'claude-sonnet-4-6' })
    const env = stores.environments.create({ name: 'before' })
    const session = await stores.sessions.create({ agent: agent.id, environment_id: env.id })
    const texts = Array.from({ length: 30_000 }, (_, i) => `note ${i}`)
    for (let i = 0; i < texts.length; i += 1000) {
      await stores.log.append(session.id, texts.slice(i, i + 1000).map((text) => ({ type: 'user.message', content: [{ type: 'text', text }] })))
    }
    const events = stores.db.prepare('SELECT COUNT(*) FROM events').pluck().get() as number
    stores.close()

    const { url, output } = await startServe({ CORRAL_DATA_DIR: dataDir, CORRAL_TOKEN: 'upgrade-token' })
    const printed = output()
    const n = events.toLocaleString('en-US')
    const lines = printed.split('\n').filter((l) => l.startsWith("Upgrading Corral's data"))
    expect(lines[0]).toBe(`Upgrading Corral's data (migration 14: event log: a rowid table, appended at its end): copying the event log, 0 of ${n} events (0%)`)
    expect(lines).toContain(`Upgrading Corral's data (migration 14: event log: a rowid table, appended at its end): copying the event log, ${n} of ${n} events (100%)`)
    expect(lines.at(-1)).toBe(`Upgrading Corral's data (migration 14: event log: a rowid table, appended at its end): indexing the event log, ${n} of ${n} events (100%)`)
    expect(printed.indexOf('indexing the event log')).toBeLessThan(printed.indexOf('serving on'))

    const client = new Anthropic({ baseURL: url, apiKey: 'upgrade-token' })
    const listed = []
    for await (const e of client.beta.sessions.events.list(session.id, { limit: 1000 })) listed.push(e)
    const notes = listed.filter((e) => e.type === 'user.message').map((e) => (e as { content: { text: string }[] }).content[0].text)
    expect(notes).toEqual(texts)
    // and the log goes on where it was
    await client.beta.sessions.events.send(session.id, { events: [{ type: 'user.interrupt' }] })
    const last = (await client.beta.sessions.events.list(session.id, { limit: 1, order: 'desc' })).data[0]
    expect(last.type).toBe('user.interrupt')
  }, 120_000)

  it('refuses a port that is not a number with a message naming the option', async () => {
    const child = spawn(process.execPath, [CLI, 'serve', '--port', 'abc'], { stdio: ['ignore', 'pipe', 'pipe'] })
    children.push(child)
    let err = ''
    child.stderr!.on('data', (b: Buffer) => (err += b.toString()))
    const code = await new Promise<number | null>((r) => child.on('exit', (c) => r(c)))
    expect(code).not.toBe(0)
    expect(err).toContain('--port')
  })
})

describe('corral serve on a machine without an OS keychain (no D-Bus session bus)', () => {
  const noBus = { DBUS_SESSION_BUS_ADDRESS: 'unix:path=/nonexistent/corral-test-bus', CORRAL_TOKEN: 'nokc', CORRAL_KEYCHAIN_SERVICE: 'corral-test-nokc' }

  it('answers a credential create with a 503 naming the missing keychain and its fix, and stores no credential', async () => {
    const { url } = await startServe({ ...noBus, CORRAL_DATA_DIR: tempDir() })
    const client = new Anthropic({ baseURL: url, apiKey: 'nokc', maxRetries: 0 })
    const vault = await client.beta.vaults.create({ display_name: 'v' })
    const err = await client.beta.vaults.credentials
      .create(vault.id, { display_name: 'c', auth: { type: 'static_bearer', token: 'canary-nokc-token', mcp_server_url: 'https://mcp.example.com/mcp' } })
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(Anthropic.InternalServerError)
    expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(503)
    const message = (err as Error).message
    expect(message).toContain('no OS keychain is available')
    expect(message).toContain('gnome-keyring')
    expect(message).not.toContain('canary-nokc-token')
    expect((await client.beta.vaults.credentials.list(vault.id)).data).toEqual([])
  })

  it('saves the model endpoint, refuses only the key with what is missing, and says so in the settings', async () => {
    const { url } = await startServe({ ...noBus, CORRAL_DATA_DIR: tempDir() })
    const call = async (method: string, body?: unknown) => {
      const res = await fetch(`${url}/v1/corral/settings`, { method, headers: { authorization: 'Bearer nokc', 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) })
      return { status: res.status, body: (await res.json()) as Record<string, any> }
    }
    const r = await call('POST', { model: { base_url: 'http://127.0.0.1:9' }, api_key: 'sk-canary-nokc-key' })
    expect(r.status).toBe(503)
    expect(r.body.error.message).toMatch(/^api_key: not saved/)
    expect(r.body.error.message).toContain('no OS keychain is available')
    expect(JSON.stringify(r.body)).not.toContain('sk-canary-nokc-key')
    const view = await call('GET')
    expect(view.body.model.base_url).toBe('http://127.0.0.1:9')
    expect(view.body.api_key).toEqual({ set: false, source: null })
    expect(view.body.keychain).toMatchObject({ available: false, backend: 'keyring', problem: expect.stringContaining('dbus-run-session') })
  })
})

describe('scripts/build-cli.mjs (what `npm run serve` and `npm run cli` run first)', () => {
  it('keeps the built CLI while none of its sources changed, and builds it again once one did', () => {
    const built = statSync(CLI).mtimeMs
    buildCli()
    expect(statSync(CLI).mtimeMs).toBe(built)
    // a source of the bundle changed since (its mtime, as an edit or a checkout leaves it)
    const now = new Date()
    utimesSync(join(process.cwd(), 'src/main/cli/main.ts'), now, now)
    buildCli()
    expect(statSync(CLI).mtimeMs).toBeGreaterThan(built)
    // and the record it keeps lists what it was built from
    const record = JSON.parse(readFileSync(join(process.cwd(), 'out/cli/inputs.json'), 'utf8')) as { startedAt: number; inputs: string[] }
    expect(record.inputs).toEqual(expect.arrayContaining(['src/main/cli/main.ts', 'src/main/engine.ts']))
    expect(record.startedAt).toBeLessThanOrEqual(statSync(CLI).mtimeMs)
  }, 120_000)
})
