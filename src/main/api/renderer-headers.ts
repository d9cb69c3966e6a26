// What the renderer's files are served with, in both places that serve them: `corral serve`'s
// static routes (cli/serve-renderer.ts) and the desktop app's app:// protocol (src/main/index.ts).
// Here, below both, so that the Electron shell does not import the CLI.

export const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
}

/**
 * The renderer's Content-Security-Policy, the same in the browser and in the desktop app: only
 * our own scripts and styles (no inline script or style attribute, no eval), no plugins, no
 * framing, no foreign connections, forms only to ourselves.
 */
export const RENDERER_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "object-src 'none'",
].join('; ')
