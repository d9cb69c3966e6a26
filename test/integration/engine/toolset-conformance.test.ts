import { createServer, type Server } from 'node:http'
import { mkdtempSync, rmSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Engine } from '../../../src/main/engine'
import { KeyringKeychain } from '../../../src/main/vault/keyring-keychain'
import { keychainAccount } from '../../../src/main/vault/keychain'
import { say, ScriptedModelServer, toolCall, toolResultsOf, type RecordedRequest, type ScriptStep } from '../../support/model-server'
import { keychainProbe, requirement } from '../../support/requirements'
import { bwrapReq, dockerReq } from '../hands/support'
import { fakeDialer, fakeResolver } from '../vault/egress-helpers'
import { waitForIdle } from './support'

/*
 * DESIGN invariant 7, end to end: a scripted model that, like a real one, calls every toolset
 * tool with exactly the schema Corral offers it (toolCall validates each call against the request's
 * `tools`, and the server records any violation), through the official SDK, the API, the harness,
 * the hands' router and the real runner in Docker and in bubblewrap; web_fetch through the real
 * egress proxy (the resolver and dialer injected: "public" documentation addresses map to a
 * loopback page server). Output over the cap lands in a file the result names.
 */

const CAP = 8192
const PAGE = `<!doctype html><html><head><title>Corral docs</title><style>body{color:red}</style><script>var secret = 1</script></head>
<body><nav>menu menu menu</nav><h1>Getting started</h1><p>Install <b>Corral</b>, then run <a href="/serve">corral serve</a>.</p><ul><li>first step</li><li>second step</li></ul></body></html>`
const LONG = `<html><body>${Array.from({ length: 1200 }, (_, i) => `<p>paragraph ${i + 1} of the long page</p>`).join('')}</body></html>`

async function pageServer(): Promise<{ server: Server; port: number; seen: string[] }> {
  const seen: string[] = []
  const server = createServer((req, res) => {
    seen.push(`${req.headers.host}${req.url}`)
    if (req.url === '/page') return res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE)
    if (req.url === '/long') return res.writeHead(200, { 'content-type': 'text/html' }).end(LONG)
    if (req.url === '/moved') return res.writeHead(302, { location: '/page' }).end()
    if (req.url === '/big') {
      res.writeHead(200, { 'content-type': 'text/plain' })
      const chunk = 'x'.repeat(64 * 1024)
      let sent = 0
      const pump = () => {
        while (sent < 6 * 1024 * 1024) {
          sent += chunk.length
          if (!res.write(chunk)) return void res.once('drain', pump)
        }
        res.end()
      }
      return pump()
    }
    res.writeHead(404).end('not here')
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return { server, port: (server.address() as AddressInfo).port, seen }
}

/** The model's side: one call per turn step, each built from the schema the request offers. */
function script(): (req: RecordedRequest) => ScriptStep {
  return (req) => {
    const results = toolResultsOf(req)
    const last = results.at(-1)?.text ?? ''
    const saved = /saved in the sandbox at (\S+?)(?: |\)|$)/.exec(last)?.[1] ?? 'missing'
    const steps: (() => ScriptStep)[] = [
      () => toolCall(req, 'write', { file_path: 'notes/a.txt', content: 'alpha\nbeta\ngamma\n' }),
      () => toolCall(req, 'read', { file_path: '/workspace/notes/a.txt', offset: 2, limit: 1 }),
      () => toolCall(req, 'edit', { file_path: 'notes/a.txt', old_string: 'beta', new_string: 'BETA' }),
      () => toolCall(req, 'glob', { pattern: '**/*.txt', path: 'notes' }),
      () => toolCall(req, 'grep', { pattern: 'beta', path: 'notes', '-i': true }),
      () => toolCall(req, 'bash', { command: 'cat notes/a.txt; seq 1 5000', timeout: 20_000 }),
      () => toolCall(req, 'read', { file_path: saved, offset: 5003, limit: 1 }),
      () => toolCall(req, 'web_fetch', { url: 'http://docs.example.test/moved' }),
      () => toolCall(req, 'web_fetch', { url: 'http://other.example.test/page' }),
      () => toolCall(req, 'web_fetch', { url: 'http://intranet.example.test/page' }),
      () => toolCall(req, 'web_fetch', { url: 'http://docs.example.test/big' }),
      () => toolCall(req, 'web_fetch', { url: 'http://docs.example.test/long' }),
      () => toolCall(req, 'grep', { pattern: 'paragraph 1200 of', path: saved }),
    ]
    return results.length < steps.length ? steps[results.length]!() : say('All tools worked.')
  }
}

const keychainReq = requirement('keychain', keychainProbe)

for (const backend of ['docker', 'bubblewrap'] as const) {
  const ready = backend === 'docker' ? dockerReq() : bwrapReq()
  describe.skipIf(!ready.ok || !keychainReq.ok)(`the toolset on ${backend}, driven with exactly the offered schemas`, () => {
    const dataDir = mkdtempSync(join(tmpdir(), `corral-toolset-${backend}-`))
    const keychain = new KeyringKeychain({ service: `corral-test-toolset-${backend}-${process.pid}-${Date.now()}` })
    let pages: Awaited<ReturnType<typeof pageServer>>
    let model: ScriptedModelServer
    let engine: Engine
    let results: { text: string; is_error: boolean }[] = []
    let uses: { name: string; input: Record<string, unknown> }[] = []

    beforeAll(async () => {
      pages = await pageServer()
      model = await ScriptedModelServer.start(script())
      engine = Engine.open({
        dataDir,
        token: 'test-token',
        keychain,
        env: { PATH: process.env.PATH, ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'k' },
        egress: {
          resolver: fakeResolver({ 'docs.example.test': ['203.0.113.20'], 'other.example.test': ['203.0.113.21'], 'intranet.example.test': ['10.1.2.3'] }),
          dialer: fakeDialer({ '203.0.113.20:80': pages.port, '203.0.113.21:80': pages.port }),
        },
        harness: { backoffBaseMs: 5, backoffMaxMs: 40 },
        log: () => {},
      })
      const client = new Anthropic({ baseURL: (await engine.listen(0)).url, apiKey: 'test-token', maxRetries: 0 })
      const agent = await client.beta.agents.create({ name: 'toolset', model: 'claude-sonnet-5-5', tools: [{ type: 'agent_toolset_20260401' }] })
      const environment = await client.beta.environments.create({
        name: `toolset-${backend}`,
        config: { type: 'cloud', networking: { type: 'limited', allowed_hosts: ['docs.example.test', 'intranet.example.test'] }, corral: { backend, output_cap_bytes: CAP, pool_size: 0 } } as unknown as Anthropic.Beta.BetaCloudConfigParams,
      })
      const session = await client.beta.sessions.create({ agent: agent.id, environment_id: environment.id })
      await client.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'use every tool' }] }] })
      const events = await waitForIdle(engine, session.id)
      results = (events.filter((e) => e.type === 'agent.tool_result') as unknown as { content: { text: string }[]; is_error: boolean }[]).map((r) => ({ text: r.content.map((c) => c.text).join(''), is_error: r.is_error }))
      uses = events.filter((e) => e.type === 'agent.tool_use') as unknown as typeof uses
    }, 240_000)

    afterAll(async () => {
      await engine?.close()
      await model?.close()
      await new Promise<void>((r) => (pages ? pages.server.close(() => r()) : r()))
      await keychain.delete(keychainAccount.egressCaKey).catch(() => false)
      rmSync(dataDir, { recursive: true, force: true })
    })

    it('offers each toolset tool with the schema the calls were built from, and no call broke it', () => {
      expect(model.violations).toEqual([])
      expect(model.requests[0]!.body.tools!.map((t) => t.name)).toEqual(expect.arrayContaining(['bash', 'read', 'write', 'edit', 'glob', 'grep', 'web_fetch']))
      expect(uses.map((u) => u.name)).toEqual(['write', 'read', 'edit', 'glob', 'grep', 'bash', 'read', 'web_fetch', 'web_fetch', 'web_fetch', 'web_fetch', 'web_fetch', 'grep'])
      expect(results).toHaveLength(13)
    })

    it('writes, reads a line window, edits, globs and greps files with the Claude Code field names', () => {
      expect(results[0]).toEqual({ text: 'wrote 17 bytes to /workspace/notes/a.txt', is_error: false })
      expect(results[1]).toEqual({ text: '     2\tbeta', is_error: false })
      expect(results[2]).toEqual({ text: 'edited /workspace/notes/a.txt: 1 replacement', is_error: false })
      expect(results[3]).toEqual({ text: '/workspace/notes/a.txt', is_error: false })
      expect(results[4]).toEqual({ text: expect.stringMatching(/^\/workspace\/notes\/a\.txt:2:BETA$/), is_error: false })
    })

    it('cuts bash output over the cap, names the file that holds all of it, and the model reads it back', () => {
      expect(results[5]!.is_error).toBe(false)
      expect(Buffer.byteLength(results[5]!.text)).toBeLessThan(CAP + 1024)
      expect(results[5]!.text).toMatch(/^alpha\nBETA\ngamma\n1\n2\n/)
      expect(results[5]!.text).toMatch(/saved in the sandbox at \/workspace\/\.corral\/outputs\/\S+\.log/)
      expect(results[6]).toEqual({ text: '  5003\t5000', is_error: false })
    })

    it('fetches an allowed page through the egress proxy, follows its redirect, and returns readable text', () => {
      const r = results[7]!
      expect(r.is_error).toBe(false)
      expect(r.text).toMatch(/^http:\/\/docs\.example\.test\/page \(text\/html, HTTP 200\)/)
      expect(r.text).toMatch(/GETTING STARTED/i)
      expect(r.text).toContain('Install Corral, then run corral serve [/serve].')
      expect(r.text).toMatch(/\* first step\n \* second step/)
      expect(r.text).not.toMatch(/<|secret|color:red|menu menu/)
      expect(pages.seen).toContain('docs.example.test/page')
    })

    it('refuses a host the environment does not allow, a private address and an oversize body, naming the rule', () => {
      expect(results[8]).toEqual({ text: expect.stringMatching(/^web_fetch: refused by the environment's networking policy \(allowed_hosts\): other\.example\.test is not among the hosts/), is_error: true })
      expect(results[9]).toEqual({ text: expect.stringMatching(/^web_fetch: refused by the egress address policy .*intranet\.example\.test resolves to a destination sandboxes may not reach/), is_error: true })
      expect(results[10]).toEqual({ text: expect.stringMatching(/^web_fetch: the body is over the 5242880-byte limit/), is_error: true })
      expect(pages.seen.some((s) => s.startsWith('other.example.test') || s.startsWith('intranet'))).toBe(false)
    })

    it('cuts a fetched page over the cap and saves the whole text in the sandbox, where the model reads it', () => {
      const r = results[11]!
      expect(r.is_error).toBe(false)
      expect(Buffer.byteLength(r.text)).toBeLessThanOrEqual(CAP)
      expect(r.text).toMatch(/paragraph 1 of the long page/)
      expect(r.text).toMatch(/page truncated: \d+ bytes of text, showing the first \d+; the whole text is saved in the sandbox at \/workspace\/\.corral\/outputs\/\S+\.txt/)
      expect(results[12]!.text).toMatch(/paragraph 1200 of the long page/)
    })
  })
}
