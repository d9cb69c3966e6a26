import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'

/** Builds the renderer once (out/renderer), which `corral serve` serves. */
export default function globalSetup(): void {
  const root = join(__dirname, '..', '..', '..')
  if (process.env.CORRAL_E2E_SKIP_BUILD && existsSync(join(root, 'out/renderer/index.html'))) return
  execFileSync(process.execPath, [join(root, 'node_modules/electron-vite/bin/electron-vite.js'), 'build', '--logLevel', 'warn'], { cwd: root, stdio: 'inherit' })
}
