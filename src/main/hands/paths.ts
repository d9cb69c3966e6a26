import { existsSync, readFileSync } from 'node:fs'
import { createHash } from 'node:crypto'
import { join, resolve } from 'node:path'
import { CorralError } from '../../shared/errors'

/**
 * Where the sandbox recipe and runner live (resources/sandbox). Looked up from
 * CORRAL_SANDBOX_RESOURCES, then next to the source tree, the built bundle and the cwd.
 */
export function sandboxResourcesDir(): string {
  const candidates = [
    process.env.CORRAL_SANDBOX_RESOURCES,
    typeof __dirname === 'string' ? resolve(__dirname, '../../../resources/sandbox') : undefined,
    typeof __dirname === 'string' ? resolve(__dirname, '../../resources/sandbox') : undefined,
    resolve(process.cwd(), 'resources/sandbox'),
  ]
  for (const dir of candidates) if (dir && existsSync(join(dir, 'runner.js'))) return dir
  throw new CorralError('sandbox_error', `the sandbox runner (resources/sandbox/runner.js) was not found; looked in ${candidates.filter(Boolean).join(', ')}`)
}

export const runnerPath = (): string => join(sandboxResourcesDir(), 'runner.js')

/**
 * The default image's tag: a hash of the image recipe and the runner, computed exactly as
 * resources/sandbox/build-image.sh does (`cat build-image.sh runner.js | sha256sum`, 12 hex digits),
 * in the repository `$CORRAL_SANDBOX_IMAGE_REPO` (default `corral-sandbox`).
 */
export function defaultImage(): string {
  const dir = sandboxResourcesDir()
  const hash = createHash('sha256')
  hash.update(readFileSync(join(dir, 'build-image.sh')))
  hash.update(readFileSync(join(dir, 'runner.js')))
  // CORRAL_SANDBOX_IMAGE_REPO: the same variable the recipe honours (a throwaway name for tests).
  return `${process.env.CORRAL_SANDBOX_IMAGE_REPO || 'corral-sandbox'}:${hash.digest('hex').slice(0, 12)}`
}
