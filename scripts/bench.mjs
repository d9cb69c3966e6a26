#!/usr/bin/env node
// `npm run bench [-- name ...] [-- --out file.json]`: builds the benches and the engine they drive
// into out/bench/ with esbuild (bundled, dependencies external: what the desktop's Vite build
// ships, one module per bench), then runs them there with plain node. The engine is measured as it
// runs for a user: the tsx loader that runs sources keeps every function's name (esbuild's
// keepNames: a `__name(fn, …)` call on every named closure, ≈ 8 % of what a workflow run's event
// loop allocates) and compiles modules on first load.
// CORRAL_BENCH_SOURCE=1 runs bench/run.ts through tsx instead (no build), as before.
// Node flags for the benches' process go in NODE_OPTIONS or after `node` by hand:
//   node scripts/bench.mjs --build-only && node --cpu-prof out/bench/run.js workflows
import { spawnSync } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { bundleForNode } from './bundle-node.mjs'

const root = join(fileURLToPath(import.meta.url), '../..')
const args = process.argv.slice(2)
const buildOnly = args[0] === '--build-only'

function run(cmd, argv) {
  const r = spawnSync(cmd, argv, { cwd: root, stdio: 'inherit' })
  if (r.error) throw r.error
  return r.status ?? 1
}

if (process.env.CORRAL_BENCH_SOURCE === '1') process.exit(run(join(root, 'node_modules/.bin/tsx'), ['bench/run.ts', ...args]))

const outdir = join(root, 'out/bench')
const entryPoints = {
  run: 'bench/run.ts',
  // the processes the benches fork (the scripted models) and the model client's worker thread
  // (harness/model-thread.ts starts model-worker.js beside the module that asks for it)
  'threads-model': 'bench/threads-model.ts',
  'tool-use-model': 'bench/tool-use-model.ts',
  'workflow-model-process': 'test/support/workflow-model-process.ts',
  'model-server-process': 'test/support/model-server-process.ts',
  'model-worker': 'src/main/harness/model-worker.ts',
}
for (const f of readdirSync(join(root, 'bench'))) if (f.endsWith('.bench.ts')) entryPoints[f.replace(/\.ts$/, '')] = `bench/${f}`
const { ms } = await bundleForNode(root, entryPoints, outdir)
console.error(`[bench] built ${Object.keys(entryPoints).length} modules into out/bench in ${ms} ms`)
if (!buildOnly) process.exit(run(process.execPath, [join(outdir, 'run.js'), ...args]))
