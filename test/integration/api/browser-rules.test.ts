import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { request } from 'node:http'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { serveRenderer, SIGN_IN_MAX_BODY_BYTES } from '../../../src/main/cli/serve-renderer'
import { MAX_BODY_BYTES } from '../../../src/main/api/routes/common'
import { startApiServer, type TestApiServer } from '../../support/api-server'

// Red-team issue #15, findings 1 and 11, against a real server on a socket: the sign-in routes'
// browser rules, the cookie-authenticated event stream, and request bodies cut at their cap
// while they are still arriving.

interface ChunkedResult {
  status: number
  body: string
  /** Bytes handed to the socket when the response arrived (or when the write side failed). */
  sentBeforeResponse: number
}

/**
 * POSTs `total` bytes as a chunked body (no Content-Length), 64 KiB at a time with backpressure,
 * and stops writing as soon as the response arrives.
 */
function postChunked(url: string, path: string, headers: Record<string, string>, total: number): Promise<ChunkedResult> {
  const chunk = Buffer.alloc(64 * 1024, 0x61)
  const u = new URL(url)
  return new Promise((resolve, reject) => {
    let sent = 0
    let sentBeforeResponse: number | undefined
    const req = request({ hostname: u.hostname, port: u.port, path, method: 'POST', headers: { ...headers, 'transfer-encoding': 'chunked' } }, (res) => {
      sentBeforeResponse ??= sent
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (d: string) => (body += d))
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, body, sentBeforeResponse: sentBeforeResponse! })
        req.destroy()
      })
    })
    // The server may close the connection once it has answered: a write after that fails here.
    req.on('error', (err) => {
      sentBeforeResponse ??= sent
      if (req.destroyed && sentBeforeResponse !== undefined) return
      reject(err)
    })
    const pump = () => {
      while (sentBeforeResponse === undefined && sent < total) {
        sent += chunk.length
        if (!req.write(chunk)) return void req.once('drain', pump)
      }
      if (sentBeforeResponse === undefined) req.end()
    }
    pump()
  })
}

describe('the browser rules and body caps on a real server', () => {
  let api: TestApiServer
  let root: string

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'corral-renderer-'))
    writeFileSync(join(root, 'index.html'), '<!doctype html><title>Corral</title>')
    api = await startApiServer({ harness: { enabled: false }, extendApp: (app) => serveRenderer(app, root) })
  })
  afterAll(async () => {
    await api?.close()
    rmSync(root, { recursive: true, force: true })
  })

  const signIn = (headers: Record<string, string>, body: string = JSON.stringify({ token: api.token })) => fetch(`${api.url}/auth/session`, { method: 'POST', headers, body })

  it('signs in only with a JSON body and X-Corral-CSRF: 1, never from another site, and sets no cookie when refused', async () => {
    const refused: Record<string, string>[] = [
      { 'content-type': 'text/plain;charset=UTF-8', 'x-corral-csrf': '1' },
      { 'content-type': 'application/json' },
      { 'content-type': 'application/json', 'x-corral-csrf': '1', 'sec-fetch-site': 'same-site' },
      { 'content-type': 'application/json', 'x-corral-csrf': '1', 'sec-fetch-site': 'cross-site' },
    ]
    for (const headers of refused) {
      const res = await signIn(headers)
      expect(res.status).toBe(403)
      expect(((await res.json()) as { error: { type: string } }).error.type).toBe('permission_error')
      expect(res.headers.get('set-cookie')).toBeNull()
    }
    const ok = await signIn({ 'content-type': 'application/json', 'x-corral-csrf': '1', 'sec-fetch-site': 'same-origin' })
    expect(ok.status).toBe(200)
    expect(ok.headers.get('set-cookie')).toMatch(/^corral_token=/)
  })

  it('refuses a blind sign-out from another page, so the browser stays signed in', async () => {
    const res = await fetch(`${api.url}/auth/sign-out`, { method: 'POST', headers: { 'content-type': 'text/plain' } })
    expect(res.status).toBe(403)
    expect(res.headers.get('set-cookie')).toBeNull()
  })

  it('streams a session to a cookie-authenticated same-origin reader without the CSRF header', async () => {
    const agent = await api.client.beta.agents.create({ name: 'streamed', model: 'claude-sonnet-4-5' })
    const env = await api.client.beta.environments.create({ name: 'streamed env' })
    const session = await api.client.beta.sessions.create({ agent: agent.id, environment_id: env.id })
    const controller = new AbortController()
    const res = await fetch(`${api.url}/v1/sessions/${session.id}/events/stream`, {
      headers: { cookie: `corral_token=${api.token}`, 'sec-fetch-site': 'same-origin', accept: 'text/event-stream' },
      signal: controller.signal,
    })
    expect(res.status).toBe(200)
    await api.client.beta.sessions.events.send(session.id, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'over the stream' }] }] })
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader()
    let text = ''
    while (!text.includes('over the stream')) {
      const { value, done } = await reader.read()
      if (done) break
      text += value
    }
    controller.abort()
    expect(text).toMatch(/event: user\.message/)
  })

  it('cuts a chunked sign-in body at 8 KiB with a 413 while the client is still sending, without growing the server by the body', async () => {
    const total = 128 * 1024 * 1024
    const rssBefore = process.memoryUsage().rss
    const r = await postChunked(api.url, '/auth/session', { 'content-type': 'application/json', 'x-corral-csrf': '1' }, total)
    const grown = process.memoryUsage().rss - rssBefore
    expect(r.status).toBe(413)
    expect(JSON.parse(r.body)).toEqual({ type: 'error', error: { type: 'request_too_large', message: `request body is over ${SIGN_IN_MAX_BODY_BYTES} bytes; the limit is ${SIGN_IN_MAX_BODY_BYTES}` } })
    expect(r.sentBeforeResponse).toBeLessThan(total / 4)
    expect(grown).toBeLessThan(total / 4)
  })

  it('cuts a chunked API body at 32 MiB with a 413 while the client is still sending, and creates nothing', async () => {
    const before = (await api.client.beta.agents.list({ limit: 100 })).data.length
    const total = 4 * MAX_BODY_BYTES
    const r = await postChunked(api.url, '/v1/agents', { authorization: `Bearer ${api.token}`, 'content-type': 'application/json' }, total)
    expect(r.status).toBe(413)
    expect((JSON.parse(r.body) as { error: { type: string } }).error.type).toBe('request_too_large')
    expect(r.sentBeforeResponse).toBeLessThan(total / 2)
    expect((await api.client.beta.agents.list({ limit: 100 })).data.length).toBe(before)
  })

  it('refuses a declared Content-Length over the cap before reading the body', async () => {
    const res = await fetch(`${api.url}/auth/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-corral-csrf': '1' },
      body: JSON.stringify({ token: 'x'.repeat(SIGN_IN_MAX_BODY_BYTES) }),
    })
    expect(res.status).toBe(413)
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/the limit is 8192/)
  })
})
