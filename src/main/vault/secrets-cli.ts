import type { Command } from 'commander'
import { InvalidArgumentError } from 'commander'
import { resolveDataDir } from '../config'
import { keychainAccount, type Keychain } from './keychain'
import { openKeychain } from './vault-services'

/** The settings secrets the CLI manages, their keychain accounts and the variables that override them. */
export const SETTINGS_SECRETS = {
  'anthropic-api-key': { account: keychainAccount.anthropicApiKey, env: 'ANTHROPIC_API_KEY', what: 'the Anthropic API key the harness calls the model with' },
  'api-token': { account: keychainAccount.apiToken, env: 'CORRAL_TOKEN', what: 'the bearer token of the local Managed Agents API' },
} as const
export type SettingsSecretName = keyof typeof SETTINGS_SECRETS

function parseName(v: string): SettingsSecretName {
  if (v in SETTINGS_SECRETS) return v as SettingsSecretName
  throw new InvalidArgumentError(`<name> must be one of ${Object.keys(SETTINGS_SECRETS).join(', ')}, got ${JSON.stringify(v)}`)
}

async function readSecretFromStdin(stdin: NodeJS.ReadableStream & { isTTY?: boolean }, prompt: (s: string) => void): Promise<string> {
  if (stdin.isTTY) prompt('Paste the value and press Enter (it is not echoed to any log): ')
  let data = ''
  for await (const chunk of stdin) {
    data += String(chunk)
    if (stdin.isTTY && data.includes('\n')) break
  }
  return data.split(/\r?\n/)[0]!.trim()
}

export interface SecretsCommandDeps {
  keychain?: (dataDir: string) => Keychain
  stdin?: NodeJS.ReadableStream & { isTTY?: boolean }
  out?: (line: string) => void
  env?: NodeJS.ProcessEnv
}

/**
 * `corral secrets set|delete|status <name>`: keeps the Anthropic API key and the local API token
 * in the OS keychain. A value is read from stdin, never from an argument (arguments land in
 * shell history and `ps`), and never printed.
 */
export function registerSecretsCommand(program: Command, deps: SecretsCommandDeps = {}): Command {
  const env = deps.env ?? process.env
  const out = deps.out ?? ((l: string) => console.log(l))
  const keychainFor = (opts: { dataDir?: string }) => (deps.keychain ?? ((dir: string) => openKeychain({ dataDir: dir, env })))(opts.dataDir ?? resolveDataDir(env))
  const secrets = program.command('secrets').description('keep the Anthropic API key and the local API token in the OS keychain (values are read from stdin, never printed)')

  secrets
    .command('set')
    .argument('<name>', Object.keys(SETTINGS_SECRETS).join(' | '), parseName)
    .option('--data-dir <dir>', 'data directory')
    .description('store a secret read from stdin')
    .action(async (name: SettingsSecretName, opts: { dataDir?: string }) => {
      const spec = SETTINGS_SECRETS[name]
      const value = await readSecretFromStdin(deps.stdin ?? process.stdin, (s) => process.stderr.write(s))
      if (!value) throw new InvalidArgumentError(`no value on stdin for ${name}: pipe it in, e.g. \`printenv MY_KEY | corral secrets set ${name}\``)
      await keychainFor(opts).set(spec.account, value)
      out(`${name}: stored in the keychain (${spec.what}).${env[spec.env] ? ` Note: ${spec.env} is set and overrides it.` : ''}`)
    })

  secrets
    .command('delete')
    .argument('<name>', Object.keys(SETTINGS_SECRETS).join(' | '), parseName)
    .option('--data-dir <dir>', 'data directory')
    .description('remove a secret from the keychain')
    .action(async (name: SettingsSecretName, opts: { dataDir?: string }) => {
      const removed = await keychainFor(opts).delete(SETTINGS_SECRETS[name].account)
      out(`${name}: ${removed ? 'removed from the keychain' : 'was not in the keychain'}`)
    })

  secrets
    .command('status')
    .option('--data-dir <dir>', 'data directory')
    .description('say which secrets are set and where from (never their values)')
    .action(async (opts: { dataDir?: string }) => {
      const keychain = keychainFor(opts)
      for (const [name, spec] of Object.entries(SETTINGS_SECRETS)) {
        const stored = (await keychain.get(spec.account)) !== undefined
        const from = env[spec.env] ? `from ${spec.env} (overrides the keychain${stored ? ', which also has one' : ''})` : stored ? `from the keychain (${keychain.backend})` : 'not set'
        out(`${name}: ${from}`)
      }
    })
  return secrets
}
