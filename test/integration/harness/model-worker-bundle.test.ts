import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { Worker } from 'node:worker_threads'
import { afterAll, describe, expect, it } from 'vitest'
import { ModelThread, ThreadedModelClient } from '../../../src/main/harness/model-thread'
import { ScriptedModelServer, callTool } from '../../support/model-server'
import { requirement } from '../../support/requirements'

// The desktop runs the bundle (electron-vite build); with the model client on its own thread
// (harness.modelThread 'worker', an option) that thread is out/main/model-worker.js beside
// out/main/index.js; tsx and vitest run the TypeScript source instead.
const bundled = join(__dirname, '../../../out/main/model-worker.js')
const build = requirement('the electron-vite build (out/main/model-worker.js)', () => (existsSync(bundled) ? undefined : 'run `npx electron-vite build` first'))

describe.skipIf(!build.ok)("the desktop bundle's model thread", () => {
  let server: ScriptedModelServer | undefined
  const thread = new ModelThread(() => new Worker(bundled))
  afterAll(async () => {
    await server?.close()
    await thread.dispose()
  })

  it('answers a streamed request with the tool call the model made, as the source does', async () => {
    server = await ScriptedModelServer.start([callTool('bash', { command: 'ls -la' }, 'looking')])
    const client = new ThreadedModelClient({ baseURL: server.url, apiKey: 'k' }, thread)
    const r = await client.stream(
      { model: 'claude-sonnet-5-5', max_tokens: 100, tools: [{ name: 'bash', input_schema: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } }], messages: [{ role: 'user', content: 'list' }] },
      { signal: new AbortController().signal },
    )
    expect(r.stopReason).toBe('tool_use')
    expect(r.blocks).toEqual([{ type: 'text', text: 'looking' }, { type: 'tool_use', id: expect.stringMatching(/^toolu_/), name: 'bash', input: { command: 'ls -la' } }])
  })
})
