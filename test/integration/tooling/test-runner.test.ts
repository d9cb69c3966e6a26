import { afterAll, describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { requirement } from '../../support/requirements'

// `npm test` (scripts/test.mjs) must run the vault and red-team suites on a machine that has the
// keychain tools without any set-up by hand, say loudly when it cannot, and CI must fail when any
// of those tests was skipped (scripts/keychain-suites.mjs, called by .ci/run).
const keyringTools = requirement('dbus-run-session and gnome-keyring-daemon', () =>
  spawnSync('/bin/sh', ['-c', 'command -v dbus-run-session && command -v gnome-keyring-daemon']).status === 0 ? undefined : 'not installed (apt-get install gnome-keyring dbus dbus-x11)',
)
const VAULT_FILE = 'test/integration/vault/keychain.test.ts'
const scratch = mkdtempSync(join(tmpdir(), 'corral-runner-test-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

/** Runs `node scripts/test.mjs <file>` with no session bus given, as a plain local `npm test -- <file>` would. */
function runTests(path: string | undefined) {
  const env: NodeJS.ProcessEnv = { ...process.env }
  for (const k of ['DBUS_SESSION_BUS_ADDRESS', 'CORRAL_TEST_KEYRING', 'CI', 'XDG_DATA_HOME']) delete env[k]
  if (path !== undefined) env.PATH = path
  const r = spawnSync(process.execPath, ['scripts/test.mjs', VAULT_FILE], { env, encoding: 'utf8', timeout: 240_000 })
  return { status: r.status, out: `${r.stdout}${r.stderr}` }
}

describe('the npm test runner and the keychain suites', () => {
  it.skipIf(!keyringTools.ok)('starts a private D-Bus session with an unlocked keyring when none is given, so no vault test skips', () => {
    const r = runTests(undefined)
    expect(r.out).toMatch(/starting a private one with an unlocked gnome-keyring/)
    expect(r.out).toMatch(/\[test\] ran in a private D-Bus session/)
    expect(r.out).toMatch(/^tests: [1-9]\d* passed, 0 failed$/m)
    expect(r.out).not.toMatch(/SKIPPED|skipped/)
    expect(r.status).toBe(0)
  })

  it('says loudly at the start and in the summary which suites it skipped when the keychain tools are missing', () => {
    const bin = join(scratch, 'bin')
    spawnSync('mkdir', ['-p', bin])
    for (const tool of ['node', 'sh', 'env']) {
      const where = spawnSync('/bin/sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim()
      symlinkSync(where, join(bin, tool))
    }
    const r = runTests(bin)
    const [start, end] = [r.out.indexOf('$ node_modules/.bin/vitest'), r.out.lastIndexOf('tests: ')]
    expect(r.out.slice(0, start)).toMatch(/!!! No D-Bus session and no way to start one: dbus-run-session, gnome-keyring-daemon not installed/)
    expect(r.out.slice(0, start)).toMatch(/apt-get install gnome-keyring dbus dbus-x11/)
    expect(r.out.slice(start, end + 1)).toMatch(new RegExp(`!!!   ${VAULT_FILE.replace(/\./g, '\\.')}: \\d+ skipped`))
    expect(r.out.slice(end)).toMatch(/^tests: \d+ passed, 0 failed, \d+ skipped$/m)
  })

  it('fails CI on a skipped vault or red-team test and counts it as failed in the closing line', () => {
    const report = join(scratch, 'vitest.json')
    const file = (name: string, statuses: string[]) => ({ name: join(process.cwd(), name), assertionResults: statuses.map((status) => ({ status })) })
    writeFileSync(
      report,
      JSON.stringify({
        testResults: [
          file('test/integration/vault/keychain.test.ts', ['passed', 'skipped', 'pending']),
          file('test/integration/hands/red-team-sandbox.test.ts', ['todo']),
          file('test/integration/hands/docker-backend.test.ts', ['skipped']),
        ],
      }),
    )
    const failing = spawnSync(process.execPath, ['scripts/keychain-suites.mjs', report, 'tests: 10 passed, 1 failed'], { encoding: 'utf8' })
    expect(failing.status).toBe(1)
    expect(failing.stdout.trim()).toBe('tests: 10 passed, 4 failed')
    expect(failing.stderr).toMatch(/3 vault\/red-team tests were skipped/)
    expect(failing.stderr).toMatch(/test\/integration\/vault\/keychain\.test\.ts: 2 skipped/)
    expect(failing.stderr).toMatch(/red-team-sandbox\.test\.ts: 1 skipped/)
    expect(failing.stderr).not.toMatch(/docker-backend/)

    writeFileSync(report, JSON.stringify({ testResults: [file('test/integration/vault/keychain.test.ts', ['passed'])] }))
    const passing = spawnSync(process.execPath, ['scripts/keychain-suites.mjs', report, 'tests: 10 passed, 0 failed'], { encoding: 'utf8' })
    expect(passing.status).toBe(0)
    expect(passing.stdout.trim()).toBe('tests: 10 passed, 0 failed')
  })

  it('counts a skipped test of the MCP hands (test/integration/hands/mcp/, keychain credentials) as a keychain suite', () => {
    const report = join(scratch, 'vitest-mcp.json')
    const file = (name: string, statuses: string[]) => ({ name: join(process.cwd(), name), assertionResults: statuses.map((status) => ({ status })) })
    writeFileSync(report, JSON.stringify({ testResults: [file('test/integration/hands/mcp/router.test.ts', ['passed', 'skipped'])] }))
    const failing = spawnSync(process.execPath, ['scripts/keychain-suites.mjs', report, 'tests: 10 passed, 0 failed'], { encoding: 'utf8' })
    expect(failing.status).toBe(1)
    expect(failing.stdout.trim()).toBe('tests: 10 passed, 1 failed')
    expect(failing.stderr).toMatch(/test\/integration\/hands\/mcp\/router\.test\.ts: 1 skipped/)
  })
})
