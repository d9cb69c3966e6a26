// The engine bundled for plain node with esbuild, as scripts/bench.mjs and scripts/build-cli.mjs
// ship it: one CommonJS module per entry point, dependencies left external (node_modules, native
// addons included), source maps beside them. Relative asset paths (resources/, native/) resolve
// from out/<dir>/ as they do from src/main/<dir>/ (hands/paths.ts, vault/peer-credentials.ts).
import { rmSync } from 'node:fs'

/**
 * Bundles `entryPoints` ({ name: source }) into `outdir` (emptied first); resolves with the ms it
 * took and the files it read (paths relative to `root`: what the bundle must be rebuilt after).
 */
export async function bundleForNode(root, entryPoints, outdir) {
  const { build } = await import('esbuild')
  rmSync(outdir, { recursive: true, force: true })
  const started = Date.now()
  const result = await build({
    absWorkingDir: root,
    entryPoints,
    outdir,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    packages: 'external',
    sourcemap: 'linked',
    logLevel: 'warning',
    metafile: true,
  })
  return { ms: Date.now() - started, inputs: Object.keys(result.metafile.inputs) }
}
