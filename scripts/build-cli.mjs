#!/usr/bin/env node
// Builds the CLI (`corral serve`, `run`, `doctor`, `secrets`, `worker`) into out/cli/corral.js for
// plain node: `npm run serve` and `npm run cli` run it, so the engine they start is the bundle the
// desktop's Vite build ships too, not the sources through tsx (which transforms every module on
// first load: ≈ 1.6–2.4 s from start to serving against ≈ 0.9 s here). The model client's worker
// (harness.modelThread 'worker', an option) goes beside it, where model-thread.ts looks for it.
// A bundle that is current is kept: out/cli/inputs.json records when the last build started and
// every file it read; when none of them (nor this script, its helper or package-lock.json) has
// changed since, nothing is built (`--force` builds anyway). Silent unless the build fails.
import { readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { bundleForNode } from './bundle-node.mjs'

const root = join(fileURLToPath(import.meta.url), '../..')
const outdir = join(root, 'out/cli')
const entryPoints = { corral: 'src/main/cli/main.ts', 'model-worker': 'src/main/harness/model-worker.ts' }
const stamp = join(outdir, 'inputs.json')

/** Whether the bundle in out/cli was built after every file it was built from last changed. */
function current() {
  try {
    const { startedAt, inputs } = JSON.parse(readFileSync(stamp, 'utf8'))
    for (const name of Object.keys(entryPoints)) statSync(join(outdir, `${name}.js`))
    const sources = [...inputs, 'scripts/build-cli.mjs', 'scripts/bundle-node.mjs', 'package-lock.json']
    return typeof startedAt === 'number' && sources.every((f) => statSync(join(root, f)).mtimeMs < startedAt)
  } catch {
    // no record, a file gone, an unreadable record: build
    return false
  }
}

if (process.argv.includes('--force') || !current()) {
  try {
    const startedAt = Date.now()
    const { inputs } = await bundleForNode(root, entryPoints, outdir)
    writeFileSync(stamp, JSON.stringify({ startedAt, inputs }))
  } catch (err) {
    console.error(`[build-cli] the CLI did not build: ${err instanceof Error ? err.message : String(err)}`)
    process.exit(1)
  }
}
