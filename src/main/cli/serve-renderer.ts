import type { Hono } from 'hono'
import { existsSync, readFileSync } from 'node:fs'
import { extname, join, normalize, resolve } from 'node:path'

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
}

/**
 * Serves the built renderer (out/renderer) to a browser. The full browser sign-in (token →
 * HttpOnly cookie) lives with the desktop issue; this serves the files with a strict CSP.
 */
export function serveRenderer(app: Hono, root = resolve(process.cwd(), 'out/renderer')): void {
  app.get('*', async (c, next) => {
    const path = new URL(c.req.url).pathname
    if (path.startsWith('/v1/')) return next()
    const rel = path === '/' ? 'index.html' : normalize(decodeURIComponent(path)).replace(/^([/\\])+/, '')
    const file = join(root, rel)
    if (!file.startsWith(root) || !existsSync(file)) return next()
    return c.body(readFileSync(file), 200, {
      'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
      'content-security-policy': "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
      'x-content-type-options': 'nosniff',
    })
  })
}
