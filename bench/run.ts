/**
 * `npm run bench [-- name ...]`: runs every bench/*.bench.ts (or the named ones) one after the
 * other and prints one JSON document: { machine, results: { <name>: <figures> } }.
 * Each bench module exports `run(log: (msg: string) => void): Promise<Record<string, unknown>>`.
 * Progress goes to stderr so stdout stays JSON; `--out FILE` also writes it to a file.
 */
import { readdirSync, writeFileSync, mkdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { cpus, totalmem } from 'node:os'
import { pathToFileURL } from 'node:url'
import { BUILT } from './child'

async function main(): Promise<void> {
  const args = process.argv.slice(2)
  const outIdx = args.indexOf('--out')
  const out = outIdx >= 0 ? args.splice(outIdx, 2)[1] : undefined
  const dir = __dirname
  // built (scripts/bench.mjs: out/bench/<name>.bench.js) or the sources through tsx
  const suffix = BUILT ? '.bench.js' : '.bench.ts'
  const all = readdirSync(dir).filter((f) => f.endsWith(suffix)).sort()
  const chosen = args.length ? all.filter((f) => args.some((a) => f.startsWith(a))) : all
  if (args.length && chosen.length === 0) {
    console.error(`no benchmark matches ${args.join(', ')}; available: ${all.map((f) => f.replace(suffix, '')).join(', ')}`)
    process.exit(2)
  }
  const results: Record<string, unknown> = {}
  for (const file of chosen) {
    const name = file.replace(suffix, '')
    const log = (msg: string) => console.error(`[bench ${name}] ${msg}`)
    log('starting')
    const started = Date.now()
    try {
      const mod = (await import(pathToFileURL(join(dir, file)).href)) as { run: (log: (m: string) => void) => Promise<Record<string, unknown>> }
      results[name] = { ...(await mod.run(log)), wall_seconds: (Date.now() - started) / 1000 }
    } catch (err) {
      results[name] = { error: (err as Error).stack ?? String(err) }
      log(`failed: ${(err as Error).message}`)
    }
  }
  const doc = {
    machine: { cpus: cpus().length, cpu_model: cpus()[0]?.model, memory_gib: Math.round(totalmem() / 2 ** 30), node: process.version },
    at: new Date().toISOString(),
    results,
  }
  const json = JSON.stringify(doc, null, 2)
  process.stdout.write(json + '\n')
  if (out) {
    mkdirSync(dirname(out), { recursive: true })
    writeFileSync(out, json)
  }
}

void main()
