import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { keychainProbe, requirement } from '../../support/requirements'
import { KeyringKeychain } from '../../../src/main/vault/keyring-keychain'
import { keychainAccount } from '../../../src/main/vault/keychain'
import { resolveEngineSecrets } from '../../../src/main/vault/vault-services'

const keychain = requirement('keychain', keychainProbe)

describe.skipIf(!keychain.ok)('corral secrets (CLI, real keychain)', () => {
  const service = `corral-test-cli-${process.pid}-${Date.now()}`
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-cli-'))
  const env = { ...process.env, CORRAL_KEYCHAIN_SERVICE: service, CORRAL_DATA_DIR: dataDir, ANTHROPIC_API_KEY: '', CORRAL_TOKEN: '' }
  const cli = (args: string[], input?: string) =>
    execFileSync(join(process.cwd(), 'node_modules/.bin/tsx'), ['src/main/cli/main.ts', ...args], { env, input, encoding: 'utf8', timeout: 30_000 })
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }))

  it('stores the API key from stdin, never prints it, and the engine resolves it from the keychain', async () => {
    const CANARY = 'sk-ant-canary-cli-0b5e'
    const setOut = cli(['secrets', 'set', 'anthropic-api-key'], `${CANARY}\n`)
    const statusOut = cli(['secrets', 'status'])
    expect(setOut).toMatch(/anthropic-api-key: stored in the keychain/)
    expect(statusOut).toMatch(/anthropic-api-key: from the keychain \(keyring\)/)
    expect(statusOut).toMatch(/api-token: not set/)
    expect(setOut + statusOut).not.toContain(CANARY)
    const k = new KeyringKeychain({ service })
    expect((await resolveEngineSecrets(k, {})).anthropicApiKey).toBe(CANARY)
    expect((await resolveEngineSecrets(k, { ANTHROPIC_API_KEY: 'sk-env-wins' })).anthropicApiKey).toBe('sk-env-wins')
    for (const f of readdirSync(dataDir)) expect(readFileSync(join(dataDir, f), 'latin1')).not.toContain(CANARY)
    expect(cli(['secrets', 'delete', 'anthropic-api-key'])).toMatch(/removed from the keychain/)
    expect(await k.get(keychainAccount.anthropicApiKey)).toBeUndefined()
  })

  it('rejects an unknown secret name, naming the allowed ones', () => {
    let message = ''
    try {
      cli(['secrets', 'set', 'github-token'], 'x\n')
    } catch (err) {
      message = String((err as { stderr?: string }).stderr)
    }
    expect(message).toMatch(/<name> must be one of anthropic-api-key, api-token/)
  })
})
