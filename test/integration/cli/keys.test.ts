import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, describe, expect, it } from 'vitest'
import { openStoresAt } from '../../../src/main/session/stores'

const run = promisify(execFile)
const cli = (args: string[]) => run(process.execPath, ['--import', 'tsx', 'src/main/cli/main.ts', ...args], { env: { ...process.env, ANTHROPIC_API_KEY: '' } }).then(
  (r) => ({ code: 0, out: r.stdout, err: r.stderr }),
  (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout, err: e.stderr }),
)

// `corral keys` on a data directory: a key minted on the command line authenticates as the
// environment's worker, is listed without itself, and is dead once revoked.
describe('corral keys', () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-keys-cli-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('creates, lists and revokes a worker key of a self_hosted environment, and refuses a cloud one', async () => {
    const setup = openStoresAt(join(dir, 'corral.db'))
    const env = setup.environments.create({ name: 'w', config: { type: 'self_hosted' } } as never).id
    const cloud = setup.environments.create({ name: 'c', config: { type: 'cloud' } } as never).id
    setup.close()
    const created = await cli(['keys', 'create', '--environment', env, '--data-dir', dir])
    expect(created.code).toBe(0)
    const key = created.out.trim()
    expect(key).toMatch(/^corral_envkey_/)
    const check = openStoresAt(join(dir, 'corral.db'))
    expect(check.work.authenticate(key)).toMatchObject({ kind: 'environment', environmentId: env })
    check.close()
    const listed = await cli(['keys', 'list', '--environment', env, '--data-dir', dir])
    expect(listed.out).toContain('last used') // the authenticate above used it
    expect(listed.out).not.toContain(key)
    const keyId = listed.out.split(/\s+/)[0]
    expect((await cli(['keys', 'revoke', keyId, '--environment', env, '--data-dir', dir])).out).toContain('revoked at')
    const after = openStoresAt(join(dir, 'corral.db'))
    expect(after.work.authenticate(key)).toBeUndefined()
    after.close()
    const refused = await cli(['keys', 'create', '--environment', cloud, '--data-dir', dir])
    expect(refused.code).toBe(1)
    expect(refused.err).toContain('only a self_hosted environment has workers')
  }, 60_000)
})
