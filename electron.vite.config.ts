import { resolve } from 'node:path'
import { defineConfig, externalizeDepsPlugin } from 'electron-vite'
import react from '@vitejs/plugin-react'
import type { Plugin } from 'vite'

/**
 * Development only (`electron-vite dev`): the dev server injects an inline React Refresh preamble,
 * adds CSS as <style> elements and opens a websocket for hot reload, all of which the production
 * CSP rightly refuses. Builds keep the strict policy untouched.
 */
function devServerCsp(): Plugin {
  return {
    name: 'corral-dev-csp',
    apply: 'serve',
    transformIndexHtml: (html) => html.replace("script-src 'self'", "script-src 'self' 'unsafe-inline'").replace("style-src 'self'", "style-src 'self' 'unsafe-inline'").replace("connect-src 'self'", "connect-src 'self' ws: http://localhost:*"),
  }
}

export default defineConfig({
  main: {
    plugins: [externalizeDepsPlugin()],
    // the model client's worker thread (harness/model-thread.ts starts out/main/model-worker.js)
    build: { rollupOptions: { input: { index: resolve(__dirname, 'src/main/index.ts'), 'model-worker': resolve(__dirname, 'src/main/harness/model-worker.ts') } } },
  },
  preload: {
    plugins: [externalizeDepsPlugin()],
    build: { rollupOptions: { input: { index: resolve(__dirname, 'src/preload/index.ts') } } },
  },
  renderer: {
    root: resolve(__dirname, 'src/renderer'),
    plugins: [react(), devServerCsp()],
    // Minified: in browser mode the bundle crosses a socket on every cold load. One chunk of
    // ≈ 0.75 MB (React, react-markdown, the views), read from the app's folder or over loopback
    // and parsed once: the bundler's 500 kB advice is for pages fetched over a network, and its
    // warning was the first thing a newcomer's `npm start` printed.
    build: { minify: true, chunkSizeWarningLimit: 1024, rollupOptions: { input: { index: resolve(__dirname, 'src/renderer/index.html') } } },
  },
})
