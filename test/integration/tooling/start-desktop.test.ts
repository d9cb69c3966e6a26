import { afterAll, describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

// `npm start` (scripts/start-desktop.mjs) on a machine where the Electron binary was never
// fetched: it fetches it with the electron package's own install.js; when that download fails,
// a newcomer reads one line saying why and what to do instead, not the download's stack trace.
const SCRIPT = resolve('scripts/start-desktop.mjs')
const scratch = mkdtempSync(join(tmpdir(), 'corral-start-test-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

/** A checkout whose electron package has no binary and an install.js that does `install`. */
function checkout(name: string, install: string): string {
  const dir = join(scratch, name)
  mkdirSync(join(dir, 'node_modules', 'electron'), { recursive: true })
  writeFileSync(join(dir, 'node_modules', 'electron', 'install.js'), install)
  return dir
}

function start(cwd: string) {
  const env: NodeJS.ProcessEnv = { ...process.env, ELECTRON_MIRROR: 'http://127.0.0.1:9/' }
  delete env.ELECTRON_SKIP_BINARY_DOWNLOAD
  const r = spawnSync(process.execPath, [SCRIPT], { cwd, env, encoding: 'utf8', timeout: 60_000 })
  return { status: r.status, out: `${r.stdout}${r.stderr}` }
}

describe('npm start without the Electron binary', () => {
  it('says in one line why the download failed, then how to fetch it or use browser mode, without the stack trace', () => {
    const dir = checkout(
      'offline',
      `const e = new TypeError('fetch failed'); e.stack = 'TypeError: fetch failed\\n    at node:internal/deps/undici/undici:14976:13\\n    at async FetchDownloader.download (file:///x/FetchDownloader.js:46:30)'; console.error(e); process.exit(1)`,
    )
    const r = start(dir)
    expect(r.status).toBe(1)
    expect(r.out).toMatch(/corral: fetching the Electron binary \(first start\)/)
    expect(r.out).toMatch(/^corral: the download from http:\/\/127\.0\.0\.1:9\/ failed: TypeError: fetch failed$/m)
    expect(r.out).toMatch(/npm run serve/)
    expect(r.out).not.toMatch(/^\s+at /m)
  })

  it('starts the binary the download put in place', () => {
    // install.js writes path.txt and a "binary" (a script that prints what it was started with)
    const dir = checkout(
      'online',
      `const fs = require('fs'); fs.mkdirSync(__dirname + '/dist'); fs.writeFileSync(__dirname + '/dist/electron', '#!/bin/sh\\necho "electron started with $*"\\n', { mode: 0o755 }); fs.writeFileSync(__dirname + '/path.txt', 'electron')`,
    )
    const r = start(dir)
    expect(r.out).not.toMatch(/download .* failed/)
    expect(r.out).toMatch(/electron started with \./)
    expect(r.status).toBe(0)
  })
})
