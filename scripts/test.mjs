#!/usr/bin/env node
// `npm test`: the unit, integration and conformance suites (vitest), then the browser
// end-to-end suite (Playwright with Debian's Chromium). Runs both even when the first fails,
// and ends with one line: `tests: N passed, N failed` (N skipped when any).
// `npm test -- <vitest args>` runs only vitest with those arguments.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs'

const args = process.argv.slice(2)
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

rmSync('test-results/vitest.json', { force: true })
const vitestStatus = run(bin('vitest'), ['run', '--reporter=default', '--reporter=json', '--outputFile.json=test-results/vitest.json', ...args])
if (existsSync('test-results/vitest.json')) {
  const r = JSON.parse(readFileSync('test-results/vitest.json', 'utf8'))
  passed += r.numPassedTests
  failed += r.numFailedTests
  skipped += (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0)
  // A file that failed to load has no tests counted: count it as a failure.
  for (const f of r.testResults ?? []) if (f.status === 'failed' && (f.assertionResults ?? []).length === 0) failed++
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

console.log(`tests: ${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`)
if (passed === 0) exit = 1
process.exit(exit)
