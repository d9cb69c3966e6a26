import type { Context, Hono } from 'hono'
import { readFileSync, statSync } from 'node:fs'
import { extname, join, normalize, resolve, sep } from 'node:path'
import { SESSION_COOKIE } from '../api/server'
import { browserRequestRefusal } from '../api/auth'
import { readJson } from '../api/routes/common'
import { CorralError } from '../../shared/errors'
import { CONTENT_TYPES, RENDERER_CSP } from '../api/renderer-headers'

const SECURITY_HEADERS = {
  'content-security-policy': RENDERER_CSP,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
}

/** A month: the browser stays signed in across restarts of `corral serve` (the token is stable). */
const COOKIE_MAX_AGE_S = 30 * 24 * 3600

function sessionCookie(token: string, maxAge: number): string {
  return `${SESSION_COOKIE}=${encodeURIComponent(token)}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAge}`
}

/** The sign-in body is `{"token": "…"}`: 8 KiB is far more than it needs. */
export const SIGN_IN_MAX_BODY_BYTES = 8 * 1024

/** The browser rules on the sign-in routes (403 permission_error). */
function refuseForeignBrowserRequest(c: Context): void {
  const refusal = browserRequestRefusal(c.req.raw, { fetchMetadata: 'when-sent' })
  if (refusal) throw new CorralError('permission_error', refusal)
}

/**
 * Whether a token is the API's, asked of the API itself (an in-process request through the same
 * auth middleware), so this file never needs to hold or compare the token.
 */
async function tokenAccepted(app: Hono, token: string): Promise<boolean> {
  const res = await app.request('http://127.0.0.1/v1/agents?limit=1', { headers: { host: '127.0.0.1', authorization: `Bearer ${token}` } })
  return res.status === 200
}

function signInFailed(c: Context) {
  return c.html(
    '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Corral: sign-in failed</title></head><body>' +
      '<h1>That token was not accepted</h1><p>Open the address <code>corral serve</code> printed, with the token from your data directory ' +
      '(<code>&lt;data-dir&gt;/token</code>, or <code>$CORRAL_TOKEN</code>).</p></body></html>',
    401,
    { ...SECURITY_HEADERS, 'cache-control': 'no-store' },
  )
}

/**
 * Browser mode: serves the built renderer (out/renderer) and signs the browser in.
 *
 * - `GET /<anything>?token=<token>`: when the API accepts the token, sets it as an HttpOnly,
 *   SameSite=Strict cookie (which the API reads) and redirects to the same address without the
 *   token, so it leaves the address bar and the history. A wrong token gets a 401 page.
 * - `POST /auth/session` `{ "token": "…" }`: the same, from the renderer's sign-in form. Only as
 *   `application/json` with `X-Corral-CSRF: 1` and never cross-site (the browser rules of
 *   `browserRequestRefusal`; the API's own-Origin guard runs first), body capped at 8 KiB.
 * - `POST /auth/sign-out`: clears the cookie (same rules).
 * - every file with the strict CSP and security headers; unknown paths fall through to the API.
 */
export function serveRenderer(app: Hono, root = resolve(process.cwd(), 'out/renderer')): void {
  app.post('/auth/session', async (c) => {
    refuseForeignBrowserRequest(c)
    let token: unknown
    try {
      token = ((await readJson(c, { limit: SIGN_IN_MAX_BODY_BYTES })) as { token?: unknown } | null)?.token
    } catch (err) {
      if (err instanceof CorralError && err.code === 'request_too_large') throw err
      return c.json({ type: 'error', error: { type: 'invalid_request_error', message: 'body: expected JSON {"token": "..."}' } }, 400)
    }
    if (typeof token !== 'string' || token.length === 0 || token.length > 512) {
      return c.json({ type: 'error', error: { type: 'invalid_request_error', message: 'token: a non-empty string of at most 512 characters is required' } }, 400)
    }
    if (!(await tokenAccepted(app, token))) return c.json({ type: 'error', error: { type: 'authentication_error', message: 'invalid API token' } }, 401)
    return c.json({ ok: true }, 200, { 'set-cookie': sessionCookie(token, COOKIE_MAX_AGE_S), 'cache-control': 'no-store' })
  })
  app.post('/auth/sign-out', (c) => {
    refuseForeignBrowserRequest(c)
    return c.json({ ok: true }, 200, { 'set-cookie': sessionCookie('', 0), 'cache-control': 'no-store' })
  })

  app.get('*', async (c, next) => {
    const url = new URL(c.req.url)
    if (url.pathname.startsWith('/v1/')) return next()
    const token = url.searchParams.get('token')
    if (token !== null) {
      if (!(await tokenAccepted(app, token))) return signInFailed(c)
      url.searchParams.delete('token')
      const location = url.pathname + (url.searchParams.size ? `?${url.searchParams}` : '')
      return c.body(null, 303, { location, 'set-cookie': sessionCookie(token, COOKIE_MAX_AGE_S), 'cache-control': 'no-store', 'referrer-policy': 'no-referrer' })
    }
    const rel = url.pathname === '/' ? 'index.html' : normalize(decodeURIComponent(url.pathname)).replace(/^([/\\])+/, '')
    const file = join(root, rel)
    if (!file.startsWith(root + sep) || !statSync(file, { throwIfNoEntry: false })?.isFile()) return next()
    const isHtml = extname(file) === '.html'
    return c.body(readFileSync(file), 200, {
      'content-type': CONTENT_TYPES[extname(file)] ?? 'application/octet-stream',
      ...SECURITY_HEADERS,
      // Hashed asset names never change content; the page itself must always be fresh.
      'cache-control': isHtml ? 'no-store' : 'public, max-age=31536000, immutable',
    })
  })
}
