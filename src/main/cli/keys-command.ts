import { join } from 'node:path'
import type { Command } from 'commander'
import { resolveDataDir } from '../config'
import { openStoresAt } from '../session/stores'

/**
 * `corral keys create|list|revoke --environment env_…`: a self_hosted environment's worker keys
 * from the command line, on this machine's data directory (the same store as the API's
 * `/v1/corral/environments/{id}/keys`; a running Corral sees the change on the worker's next request).
 */
export function registerKeysCommand(program: Command): void {
  const keys = program.command('keys').description("a self_hosted environment's worker keys (shown once when created)")
  const withStores = async <T>(opts: { dataDir?: string; environment: string }, fn: (s: ReturnType<typeof openStoresAt>) => T): Promise<T> => {
    if (!/^env_[A-Za-z0-9_]+$/.test(opts.environment)) throw new Error(`--environment must be an environment id (env_…), got ${JSON.stringify(opts.environment)}`)
    const stores = openStoresAt(join(opts.dataDir ?? resolveDataDir(), 'corral.db'))
    try {
      const env = stores.environments.retrieve(opts.environment)
      if (env.config.type !== 'self_hosted') throw new Error(`environment ${env.id} is a ${env.config.type} environment; only a self_hosted environment has workers`)
      return fn(stores)
    } finally {
      stores.close()
    }
  }
  keys
    .command('create')
    .description('mint a key for a worker and print it (once; save it to a file only you can read)')
    .requiredOption('--environment <id>', 'the self_hosted environment')
    .option('--data-dir <dir>', 'data directory (default: $CORRAL_DATA_DIR or the XDG data home)')
    .action(async (opts: { environment: string; dataDir?: string }) => {
      const k = await withStores(opts, (s) => s.work.createKey(opts.environment))
      console.log(k.key)
      console.error(`key ${k.id} for ${opts.environment}; serve the queue with: corral worker --url http://127.0.0.1:4610 --environment ${opts.environment} --key-file FILE`)
    })
  keys
    .command('list')
    .description("list the environment's keys (never the keys themselves)")
    .requiredOption('--environment <id>', 'the self_hosted environment')
    .option('--data-dir <dir>', 'data directory')
    .action(async (opts: { environment: string; dataDir?: string }) => {
      const list = await withStores(opts, (s) => s.work.listKeys(opts.environment))
      for (const k of list) console.log(`${k.id}  ${k.prefix}…  created ${k.created_at}  ${k.revoked_at ? `revoked ${k.revoked_at}` : k.last_used_at ? `last used ${k.last_used_at}` : 'never used'}`)
      if (list.length === 0) console.log('no keys')
    })
  keys
    .command('revoke <keyId>')
    .description('revoke a key: its worker stops at its next request')
    .requiredOption('--environment <id>', 'the self_hosted environment')
    .option('--data-dir <dir>', 'data directory')
    .action(async (keyId: string, opts: { environment: string; dataDir?: string }) => {
      const k = await withStores(opts, (s) => s.work.revokeKey(opts.environment, keyId))
      console.log(`${k.id} revoked at ${k.revoked_at}`)
    })
}
