import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { serveRenderer } from '../../../src/main/cli/serve-renderer'
import { startApiServer, type TestApiServer } from '../../support/api-server'

describe('browser mode (corral serve serving the renderer)', () => {
  let api: TestApiServer
  let root: string
  const get = (path: string, headers: Record<string, string> = {}) => fetch(api.url + path, { redirect: 'manual', headers })

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'corral-renderer-'))
    mkdirSync(join(root, 'assets'))
    writeFileSync(join(root, 'index.html'), '<!doctype html><title>Corral</title>')
    writeFileSync(join(root, 'assets', 'app.js'), 'console.log(1)')
    api = await startApiServer({ harness: { enabled: false }, extendApp: (app) => serveRenderer(app, root) })
  })
  afterAll(async () => {
    await api?.close()
    rmSync(root, { recursive: true, force: true })
  })

  it('signs in with ?token=: an HttpOnly SameSite=Strict cookie and a redirect without the token', async () => {
    const res = await get(`/?token=${api.token}&view=x`)
    expect(res.status).toBe(303)
    expect(res.headers.get('location')).toBe('/?view=x')
    const cookie = res.headers.get('set-cookie') ?? ''
    expect(cookie).toMatch(/^corral_token=/)
    expect(cookie).toMatch(/HttpOnly/)
    expect(cookie).toMatch(/SameSite=Strict/)
    // The cookie authenticates API calls from the server's own pages (same-origin fetch metadata).
    const value = cookie.split(';')[0]
    expect((await get('/v1/agents', { cookie: value, 'sec-fetch-site': 'same-origin' })).status).toBe(200)
  })

  it('refuses a wrong token with a 401 page and sets no cookie', async () => {
    const res = await get('/?token=wrong')
    expect(res.status).toBe(401)
    expect(res.headers.get('set-cookie')).toBeNull()
  })

  it('signs in from the form with a JSON body and refuses a bad one, naming the field', async () => {
    const form = { 'content-type': 'application/json', 'x-corral-csrf': '1' }
    const ok = await fetch(`${api.url}/auth/session`, { method: 'POST', headers: form, body: JSON.stringify({ token: api.token }) })
    expect(ok.status).toBe(200)
    expect(ok.headers.get('set-cookie')).toMatch(/HttpOnly/)
    const bad = await fetch(`${api.url}/auth/session`, { method: 'POST', headers: form, body: JSON.stringify({ token: 42 }) })
    expect(bad.status).toBe(400)
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/^token:/)
    const foreign = await fetch(`${api.url}/auth/session`, { method: 'POST', headers: { ...form, origin: 'https://evil.example' }, body: JSON.stringify({ token: api.token }) })
    expect(foreign.status).toBe(403)
  })

  it('serves the page with a strict CSP and never a file outside the renderer folder', async () => {
    const page = await get('/')
    expect(page.status).toBe(200)
    const csp = page.headers.get('content-security-policy') ?? ''
    for (const d of ["default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "object-src 'none'"]) expect(csp).toContain(d)
    expect(csp).not.toContain('unsafe-inline')
    expect(page.headers.get('cache-control')).toBe('no-store')
    expect((await get('/assets/app.js')).headers.get('content-type')).toMatch(/javascript/)
    expect((await get('/..%2f..%2fetc%2fpasswd')).status).toBe(404)
    expect((await get('/assets')).status).toBe(404)
  })
})
