import { afterEach, describe, expect, it } from 'vitest'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { openHarnessFixture, type HarnessFixture } from '../../support/harness-fixture'
import { callTool, say, ScriptedModelServer } from '../../support/model-server'
import { runTask, ensureDefaults } from '../../../src/main/cli/run'

let fx: HarnessFixture | undefined
const dirs: string[] = []
afterEach(async () => {
  await fx?.close()
  fx = undefined
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})

describe('corral run', () => {
  it('creates the default agent and environment, streams the answer, asks for a confirmation and reports end_turn', async () => {
    fx = await openHarnessFixture({ script: [callTool('bash', { command: 'ls' }, 'Looking around.'), say('There is one file.')] })
    let out = ''
    const questions: string[] = []
    const r = await runTask({
      engine: fx.engine,
      task: 'what is here?',
      out: { write: (s: string) => (out += s) },
      ask: async (q) => {
        questions.push(q)
        return 'y'
      },
    })
    expect(r.stopReason).toBe('end_turn')
    expect(questions).toEqual(['Allow bash {"command":"ls"}? [y/N/reason to deny] '])
    expect(out).toContain('Looking around.')
    expect(out).toContain('> bash {"command":"ls"}  [needs confirmation]')
    expect(out).toContain('< ran bash: ls')
    expect(out).toContain('There is one file.')
    expect(out.trim().endsWith('[end_turn]')).toBe(true)
    // defaults are reused, not duplicated
    const again = ensureDefaults(fx.engine)
    expect(fx.engine.services.sessions.retrieve(r.sessionId).agent.id).toBe(again.agentId)
    expect(fx.engine.services.agents.list({ limit: 100 } as never).data.filter((a) => a.name === 'corral-default')).toHaveLength(1)
  })

  it('passes a typed reason as the deny_message', async () => {
    fx = await openHarnessFixture({ script: [callTool('bash', { command: 'rm -rf /' }), say('Understood.')] })
    await runTask({ engine: fx.engine, task: 'clean', out: { write: () => true }, ask: async () => 'too dangerous' })
    expect(fx.model.requests[1].body.messages.at(-1)).toMatchObject({ content: [{ type: 'tool_result', is_error: true, content: [{ type: 'text', text: 'The user denied this call: too dangerous' }] }] })
    expect(fx.router.calls).toHaveLength(0)
  })

  it('runs as `npm run cli -- run` against a model endpoint from ANTHROPIC_BASE_URL', async () => {
    const model = await ScriptedModelServer.start([say('Hello from the scripted model.')])
    const dir = mkdtempSync(join(tmpdir(), 'corral-cli-run-'))
    dirs.push(dir)
    try {
      const child = spawn(process.execPath, ['--import', 'tsx', 'src/main/cli/main.ts', 'run', 'say hello', '--data-dir', dir, '--yes'], {
        cwd: resolve(__dirname, '../../..'),
        env: { ...process.env, ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'test', CORRAL_TOKEN: 't', DBUS_SESSION_BUS_ADDRESS: '' },
        stdio: ['pipe', 'pipe', 'pipe'],
      })
      let stdout = ''
      let stderr = ''
      child.stdout.on('data', (b: Buffer) => (stdout += b.toString()))
      child.stderr.on('data', (b: Buffer) => (stderr += b.toString()))
      const code = await new Promise<number | null>((res) => child.on('exit', (c) => res(c)))
      expect({ code, stdout }).toMatchObject({ code: 0 })
      expect(stdout).toMatch(/^session sesn_/)
      expect(stdout).toContain('Hello from the scripted model.')
      expect(stdout).toContain('[end_turn]')
      expect(model.requests).toHaveLength(1)
      expect(stderr).not.toContain('internal error')
    } finally {
      await model.close()
    }
  }, 60_000)
})
