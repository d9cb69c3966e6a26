#!/usr/bin/env node
// The keychain suites: every test file under test/integration/vault/ and test/integration/hands/mcp/
// (the MCP hands read credentials from the keychain) and every *red-team* file.
// They need a D-Bus session with an unlocked keyring (scripts/test.mjs starts one), and CI runs
// all of them: `node scripts/keychain-suites.mjs <vitest.json> "<tests: N passed, N failed line>"`
// prints that line with each skipped keychain test counted as failed, names the files on stderr,
// and exits 1 when there is any (0 otherwise, also when the report is missing: the run's own
// failure says why).
import { existsSync, readFileSync } from 'node:fs'
import { pathToFileURL } from 'node:url'

export const KEYCHAIN_SUITES = /(^|\/)test\/integration\/(vault|hands\/mcp)\/|red-team/

/** The skipped (or todo) tests of the keychain suites in a vitest JSON report, by relative file path. */
export function skippedKeychainTests(report, cwd = process.cwd()) {
  const out = new Map()
  for (const f of report.testResults ?? []) {
    const file = String(f.name ?? '').replace(`${cwd}/`, '')
    if (!KEYCHAIN_SUITES.test(file)) continue
    const n = (f.assertionResults ?? []).filter((a) => a.status !== 'passed' && a.status !== 'failed').length
    if (n > 0) out.set(file, n)
  }
  return out
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [reportPath = 'test-results/vitest.json', summary = ''] = process.argv.slice(2)
  const skips = existsSync(reportPath) ? skippedKeychainTests(JSON.parse(readFileSync(reportPath, 'utf8'))) : new Map()
  const total = [...skips.values()].reduce((a, b) => a + b, 0)
  if (total === 0) {
    console.log(summary)
    process.exit(0)
  }
  console.error(`CI: ${total} vault/red-team test${total === 1 ? ' was' : 's were'} skipped; CI must run every one (is the D-Bus session with gnome-keyring up?):`)
  for (const [file, n] of skips) console.error(`CI:   ${file}: ${n} skipped`)
  console.log(summary.replace(/(\d+) failed/, (_, f) => `${Number(f) + total} failed`))
  process.exit(1)
}
