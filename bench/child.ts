/**
 * Where a process a bench forks (a scripted model in a process of its own) is, and how to start
 * it: built beside the bench in out/bench (`npm run bench`, scripts/bench.mjs) it is `<name>.js`
 * run by plain node; run from the sources (CORRAL_BENCH_SOURCE=1) it is the TypeScript file at
 * `source` (relative to the repository) through tsx.
 */
import { join } from 'node:path'

/** Whether this bench runs from its build (out/bench) rather than from bench/*.ts through tsx. */
export const BUILT = __filename.endsWith('.js')

export function benchChild(name: string, source: string): { path: string; execArgv: string[] } {
  if (BUILT) return { path: join(__dirname, `${name}.js`), execArgv: [] }
  return { path: join(__dirname, '..', source), execArgv: ['--import', 'tsx'] }
}
