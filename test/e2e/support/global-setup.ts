import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'

/** Builds, once, what `npm run serve` runs: the renderer (out/renderer) and the CLI (out/cli/corral.js). */
export default function globalSetup(): void {
  const root = join(__dirname, '..', '..', '..')
  if (process.env.CORRAL_E2E_SKIP_BUILD && existsSync(join(root, 'out/renderer/index.html')) && existsSync(join(root, 'out/cli/corral.js'))) return
  execFileSync(process.execPath, [join(root, 'node_modules/electron-vite/bin/electron-vite.js'), 'build', '--logLevel', 'warn'], { cwd: root, stdio: 'inherit' })
  execFileSync(process.execPath, [join(root, 'scripts/build-cli.mjs')], { cwd: root, stdio: 'inherit' })
}
