#!/usr/bin/env node
import { upgradeProgressLines } from '../session/stores'
import { Command, InvalidArgumentError } from 'commander'
import { DEFAULT_PORT, resolveDataDir } from '../config'
import { Engine } from '../engine'
import { serveRenderer } from './serve-renderer'
import { registerSecretsCommand } from '../vault/secrets-cli'
import { registerRunCommand } from './run'
import { registerDoctorCommand } from './doctor'
import { registerWorkerCommand } from './worker-command'
import { registerKeysCommand } from './keys-command'

function parsePort(v: string): number {
  const n = Number(v)
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError(`--port must be an integer 0..65535, got ${JSON.stringify(v)}`)
  return n
}

const program = new Command()
program.name('corral').description('Claude Managed Agents on your own machine')

program
  .command('serve')
  .description('run the engine, the local Managed Agents API and the renderer (browser mode) on 127.0.0.1')
  .option('-p, --port <port>', 'port on 127.0.0.1', parsePort, DEFAULT_PORT)
  .option('--data-dir <dir>', 'data directory (default: $CORRAL_DATA_DIR or the XDG data home)')
  .action(async (opts: { port: number; dataDir?: string }) => {
    const dataDir = opts.dataDir ?? resolveDataDir()
    const engine = await Engine.openWithKeychain({ dataDir, extendApp: (app) => serveRenderer(app), onUpgrade: upgradeProgressLines((line) => process.stderr.write(`${line}\n`)) })
    const server = await engine.listen(opts.port)
    console.log(`Corral is serving on ${server.url}  (data: ${dataDir})`)
    // Like Jupyter: the full sign-in address, so the first run is one click (the token stays on this machine's terminal).
    console.log(`To sign in, open this address in a browser:\n    ${server.url}/?token=${encodeURIComponent(engine.token)}`)
    let stopping = false
    const stop = async (signal: string) => {
      if (stopping) return
      stopping = true
      console.log(`Corral: ${signal} received, shutting down`)
      await engine.close()
      process.exit(0)
    }
    process.on('SIGTERM', () => void stop('SIGTERM'))
    process.on('SIGINT', () => void stop('SIGINT'))
  })

registerSecretsCommand(program)
registerRunCommand(program)

registerDoctorCommand(program)
registerWorkerCommand(program)
registerKeysCommand(program)

program.parseAsync(process.argv).catch((err: unknown) => {
  console.error(`corral: ${(err as Error).message}`)
  process.exit(1)
})
