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

/**
 * A fetch that sends every request with the given Host header (undici's fetch silently
 * drops a Host header), through node:http. For the DNS-rebinding guard's tests.
 */
export function fetchWithHost(host: string): typeof fetch {
  return async (input, init = {}) => {
    const { request } = await import('node:http')
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url)
    const headers: Record<string, string> = {}
    new Headers(init.headers).forEach((v, k) => (headers[k] = v))
    headers.host = host
    const body = typeof init.body === 'string' ? init.body : undefined
    return new Promise<Response>((resolve, reject) => {
      const req = request({ hostname: url.hostname, port: url.port, path: url.pathname + url.search, method: init.method ?? 'GET', headers }, (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () => {
          const h = new Headers()
          for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') h.set(k, v)
          resolve(new Response(Buffer.concat(chunks), { status: res.statusCode, headers: h }))
        })
      })
      req.on('error', reject)
      if (body) req.write(body)
      req.end()
    })
  }
}
