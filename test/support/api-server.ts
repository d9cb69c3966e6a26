import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { Engine, type EngineConfig } from '../../src/main/engine'
import type { ListeningServer } from '../../src/main/api/server'

export interface TestApiServer {
  engine: Engine
  server: ListeningServer
  url: string
  token: string
  dataDir: string
  /** The official SDK pointed at this server (no retries, so errors surface at once). */
  client: Anthropic
  /** A raw fetch against the server with the bearer token (unless `headers` overrides it). */
  fetch(path: string, init?: RequestInit): Promise<Response>
  close(): Promise<void>
}

/**
 * Starts a real engine (SQLite file in a fresh temp dir) and its HTTP API on 127.0.0.1:<free port>.
 * The caller must `close()` it; that stops the server, closes the database and removes the dir.
 */
export async function startApiServer(config: Partial<EngineConfig> = {}): Promise<TestApiServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-api-'))
  const token = `test_${Math.random().toString(36).slice(2)}`
  const engine = Engine.open({ dataDir, token, env: {}, log: () => {}, ...config })
  const server = await engine.listen(0)
  const client = new Anthropic({ baseURL: server.url, apiKey: token, maxRetries: 0, timeout: 20_000 })
  return {
    engine,
    server,
    url: server.url,
    token,
    dataDir,
    client,
    fetch: (path, init = {}) =>
      fetch(server.url + path, { ...init, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...(init.headers as Record<string, string>) } }),
    async close() {
      await engine.close()
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}
