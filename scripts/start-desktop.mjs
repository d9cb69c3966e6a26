#!/usr/bin/env node
// `npm start`: launches the built desktop app with the Electron binary when it is installed.
// Where it is not (no binary could be downloaded), says so and how to use browser mode instead.
import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

// Read the binary's location the way the electron package records it (path.txt + dist/),
// without require('electron'), which would try to download the binary.
const pkg = join(process.cwd(), 'node_modules', 'electron')
const pathFile = join(pkg, 'path.txt')
const electronPath = existsSync(pathFile) ? join(pkg, 'dist', readFileSync(pathFile, 'utf8').trim()) : undefined
if (!electronPath || !existsSync(electronPath)) {
  console.error(
    'corral: the Electron binary is not installed on this machine, so the desktop window cannot open.\n' +
      '  Install it with:   npm install electron   (with network access to the Electron download server)\n' +
      '  Or use browser mode now:   npm run serve   and open the URL it prints.',
  )
  process.exit(1)
}
const child = spawn(electronPath, ['.'], { stdio: 'inherit' })
child.on('exit', (code) => process.exit(code ?? 0))
