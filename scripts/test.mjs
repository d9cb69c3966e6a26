#!/usr/bin/env node
// `npm test`: the unit, integration and conformance suites (vitest), then the browser
// end-to-end suite (Playwright with Debian's Chromium). Runs both even when the first fails,
// and ends with one line: `tests: N passed, N failed` (N skipped when any).
// `npm test -- <vitest args>` runs only vitest with those arguments.
//
// The vault and red-team suites need the OS keychain (Secret Service over a D-Bus session).
// When no session bus is given (DBUS_SESSION_BUS_ADDRESS unset) and dbus-run-session and
// gnome-keyring-daemon are installed, this runner re-runs itself inside a private D-Bus session
// with an unlocked gnome-keyring in a temporary XDG_DATA_HOME (removed afterwards), so a plain
// `npm test` runs them. When the tools are missing it says so at the start and in the summary.
import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { skippedKeychainTests } from './keychain-suites.mjs'

const args = process.argv.slice(2)
const KEYRING_TOOLS = ['dbus-run-session', 'gnome-keyring-daemon']
const KEYRING_INSTALL = 'apt-get install gnome-keyring dbus dbus-x11'

const onPath = (cmd) => spawnSync('/bin/sh', ['-c', 'command -v "$1" >/dev/null', 'sh', cmd]).status === 0
let keyringNote
if (process.env.CORRAL_TEST_KEYRING === 'private') {
  keyringNote = 'in a private D-Bus session with a temporary, unlocked gnome-keyring'
} else if (process.env.DBUS_SESSION_BUS_ADDRESS) {
  keyringNote = `in the D-Bus session given by DBUS_SESSION_BUS_ADDRESS (${process.env.DBUS_SESSION_BUS_ADDRESS.split(',')[0]})`
} else {
  const missing = KEYRING_TOOLS.filter((t) => !onPath(t))
  if (missing.length === 0) {
    const home = mkdtempSync(join(tmpdir(), 'corral-test-keyring-'))
    console.log(`[test] no D-Bus session given: starting a private one with an unlocked gnome-keyring (XDG_DATA_HOME=${home})`)
    const inner = 'printf %s "$CORRAL_TEST_KEYRING_PASSWORD" | gnome-keyring-daemon --unlock --components=secrets >/dev/null; unset CORRAL_TEST_KEYRING_PASSWORD; exec "$@"'
    const r = spawnSync('dbus-run-session', ['--', 'sh', '-c', inner, 'sh', process.execPath, ...process.argv.slice(1)], {
      stdio: 'inherit',
      env: { ...process.env, XDG_DATA_HOME: home, CORRAL_TEST_KEYRING: 'private', CORRAL_TEST_KEYRING_PASSWORD: randomBytes(16).toString('hex') },
    })
    rmSync(home, { recursive: true, force: true })
    if (r.error) console.error(`[test] could not start dbus-run-session: ${r.error.message}`)
    process.exit(r.status ?? 1)
  }
  keyringNote = `WITHOUT a keychain: ${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} not installed`
  console.log(
    [
      '',
      '!!! ================================================================================',
      `!!! No D-Bus session and no way to start one: ${missing.join(', ')} not installed.`,
      '!!! Every vault, MCP and red-team test (test/integration/vault/, test/integration/hands/mcp/, *red-team*) will be SKIPPED.',
      `!!! Install them to run those suites:  ${KEYRING_INSTALL}`,
      '!!! ================================================================================',
      '',
    ].join('\n'),
  )
}
const bin = (name) => `node_modules/.bin/${name}`
mkdirSync('test-results', { recursive: true })

function run(cmd, cmdArgs, env = {}) {
  console.log(`\n$ ${cmd} ${cmdArgs.join(' ')}`)
  const r = spawnSync(cmd, cmdArgs, { stdio: 'inherit', env: { ...process.env, ...env } })
  return r.status ?? 1
}

let passed = 0
let failed = 0
let skipped = 0
let exit = 0
/** @type {Map<string, number>} keychain test file → its skipped tests */
let keychainSkips = new Map()

rmSync('test-results/vitest.json', { force: true })
const vitestStatus = run(bin('vitest'), ['run', '--reporter=default', '--reporter=json', '--outputFile.json=test-results/vitest.json', ...args])
if (existsSync('test-results/vitest.json')) {
  const r = JSON.parse(readFileSync('test-results/vitest.json', 'utf8'))
  passed += r.numPassedTests
  failed += r.numFailedTests
  skipped += (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0)
  // A file that failed to load has no tests counted: count it as a failure.
  for (const f of r.testResults ?? []) if (f.status === 'failed' && (f.assertionResults ?? []).length === 0) failed++
  keychainSkips = skippedKeychainTests(r)
} else if (vitestStatus !== 0) failed++
if (vitestStatus !== 0) exit = 1

if (args.length === 0 && existsSync('playwright.config.ts') && process.env.CORRAL_SKIP_E2E !== '1') {
  rmSync('test-results/playwright.json', { force: true })
  const pwStatus = run(bin('playwright'), ['test', '--reporter=list,json'], { PLAYWRIGHT_JSON_OUTPUT_NAME: 'test-results/playwright.json' })
  if (existsSync('test-results/playwright.json')) {
    const r = JSON.parse(readFileSync('test-results/playwright.json', 'utf8'))
    passed += r.stats?.expected ?? 0
    failed += (r.stats?.unexpected ?? 0) + (r.stats?.flaky ?? 0)
    skipped += r.stats?.skipped ?? 0
  } else if (pwStatus !== 0) failed++
  if (pwStatus !== 0) exit = 1
}

console.log(`\n[test] ran ${keyringNote}`)
if (keychainSkips.size > 0) {
  const total = [...keychainSkips.values()].reduce((a, b) => a + b, 0)
  console.log(`!!! ${total} vault/red-team test${total === 1 ? ' was' : 's were'} SKIPPED:`)
  for (const [file, n] of keychainSkips) console.log(`!!!   ${file}: ${n} skipped`)
  if (!keyringNote.startsWith('in ')) console.log(`!!! Install the keychain tools to run them:  ${KEYRING_INSTALL}`)
}
console.log(`tests: ${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`)
if (passed === 0) exit = 1
process.exit(exit)
