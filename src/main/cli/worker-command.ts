import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Command } from 'commander'
import { resolveDataDir } from '../config'
import { runCorralWorker, WORKER_BACKENDS, type WorkerBackend } from './worker'

/** `corral worker --url URL --environment env_… --key-file FILE [--backend docker|bubblewrap|vm]` (see worker.ts). */
export function registerWorkerCommand(program: Command): void {
  program
    .command('worker')
    .description("serve a self_hosted environment's work queue from this machine: run its sessions' tool calls in local sandboxes")
    .requiredOption('--url <url>', 'the Corral to serve, e.g. http://127.0.0.1:4610')
    .requiredOption('--environment <id>', 'the self_hosted environment (env_…)')
    .requiredOption('--key-file <file>', 'a file holding the environment key (Settings → the environment → Add a worker)')
    .option('--backend <backend>', 'docker, bubblewrap or vm (a QEMU VM per session)', 'docker')
    .option('--data-dir <dir>', "where this worker keeps its sandboxes' workspaces (default: <Corral data dir>/worker)")
    .option('--max-idle <ms>', 'let an item go this long after its session went idle (default 60000)')
    .action(async (opts: { url: string; environment: string; keyFile: string; backend: string; dataDir?: string; maxIdle?: string }) => {
      if (!(WORKER_BACKENDS as readonly string[]).includes(opts.backend)) throw new Error(`--backend must be ${WORKER_BACKENDS.slice(0, -1).join(', ')} or ${WORKER_BACKENDS.at(-1)}, got ${JSON.stringify(opts.backend)}`)
      if (!/^env_[A-Za-z0-9_]+$/.test(opts.environment)) throw new Error(`--environment must be an environment id (env_…), got ${JSON.stringify(opts.environment)}`)
      let key: string
      try {
        key = readFileSync(opts.keyFile, 'utf8').trim()
      } catch (err) {
        throw new Error(`--key-file ${opts.keyFile}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`)
      }
      if (!key) throw new Error(`--key-file ${opts.keyFile} is empty`)
      const maxIdleMs = opts.maxIdle === undefined ? undefined : Number(opts.maxIdle)
      if (maxIdleMs !== undefined && (!Number.isInteger(maxIdleMs) || maxIdleMs < 0)) throw new Error(`--max-idle must be a whole number of milliseconds, got ${JSON.stringify(opts.maxIdle)}`)
      const stop = new AbortController()
      const onSignal = (name: string) => {
        if (stop.signal.aborted) return
        console.log(`corral worker: ${name} received, stopping its items`)
        stop.abort()
      }
      process.on('SIGTERM', () => onSignal('SIGTERM'))
      process.on('SIGINT', () => onSignal('SIGINT'))
      await runCorralWorker({
        url: opts.url.replace(/\/+$/, ''),
        environmentId: opts.environment,
        environmentKey: key,
        backend: opts.backend as WorkerBackend,
        dataDir: opts.dataDir ?? join(resolveDataDir(), 'worker'),
        log: (line) => console.log(`[corral worker ${new Date().toISOString()}] ${line}`),
        signal: stop.signal,
        maxIdleMs,
      })
    })
}
