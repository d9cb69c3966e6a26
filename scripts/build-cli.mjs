#!/usr/bin/env node
// Builds the CLI (`corral serve`, `run`, `doctor`, `secrets`, `worker`) into out/cli/corral.js for
// plain node: `npm run serve` and `npm run cli` run it, so the engine they start is the bundle the
// desktop's Vite build ships too, not the sources through tsx (which transforms every module on
// first load: ≈ 1.6–2.4 s from start to serving against ≈ 0.9 s here). The model client's worker
// (harness.modelThread 'worker', an option) goes beside it, where model-thread.ts looks for it.
// Silent unless the build fails.
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { bundleForNode } from './bundle-node.mjs'

const root = join(fileURLToPath(import.meta.url), '../..')
try {
  await bundleForNode(root, { corral: 'src/main/cli/main.ts', 'model-worker': 'src/main/harness/model-worker.ts' }, join(root, 'out/cli'))
} catch (err) {
  console.error(`[build-cli] the CLI did not build: ${err instanceof Error ? err.message : String(err)}`)
  process.exit(1)
}
