#!/usr/bin/env node
// `npm start`: launches the built desktop app with the Electron binary. Electron's package
// fetches its binary on first use (no install script); this does the same, once, and where it
// cannot be fetched (no network to Electron's download server) says so and how to use browser
// mode instead.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

// Read the binary's location the way the electron package records it (path.txt + dist/),
// without require('electron'), which would start a download with no control over its failure.
const pkg = join(process.cwd(), 'node_modules', 'electron')
const binary = () => {
  const pathFile = join(pkg, 'path.txt')
  return existsSync(pathFile) ? join(pkg, 'dist', readFileSync(pathFile, 'utf8').trim()) : undefined
}

/** The first line of a failed download's output that says what went wrong (not its stack frames). */
function downloadError(stderr) {
  const lines = stderr.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('at ') && l !== '^' && !/^node:|^Node\.js v/.test(l))
  const error = lines.find((l) => /error|failed|ENOTFOUND|ECONN|EAI_AGAIN|ETIMEDOUT|HTTPError/i.test(l)) ?? lines[0]
  return error === undefined ? undefined : error.length > 300 ? `${error.slice(0, 300)}…` : error
}

let electronPath = binary()
if ((!electronPath || !existsSync(electronPath)) && existsSync(join(pkg, 'install.js')) && process.env.ELECTRON_SKIP_BINARY_DOWNLOAD !== '1') {
  console.error('corral: fetching the Electron binary (first start)…')
  // its output is a download error's stack trace when it fails: kept back, and its message said in one line
  const fetched = spawnSync(process.execPath, [join(pkg, 'install.js')], { stdio: ['ignore', 'inherit', 'pipe'], encoding: 'utf8' })
  electronPath = binary()
  if (fetched.status !== 0 || !electronPath || !existsSync(electronPath)) {
    const reason = downloadError(fetched.stderr ?? '') ?? (fetched.error ? fetched.error.message : undefined)
    if (reason) console.error(`corral: the download from ${process.env.ELECTRON_MIRROR ?? "Electron's releases on github.com"} failed: ${reason}`)
  }
}
if (!electronPath || !existsSync(electronPath)) {
  console.error(
    'corral: the Electron binary is not installed and could not be fetched, so the desktop window cannot open.\n' +
      '  Fetch it with:     node node_modules/electron/install.js   (needs access to the Electron download server)\n' +
      '  Or use browser mode now:   npm run serve   and open the URL it prints.',
  )
  process.exit(1)
}
const child = spawn(electronPath, ['.'], { stdio: 'inherit' })
child.on('exit', (code) => process.exit(code ?? 0))
