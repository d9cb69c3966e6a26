import type { Engine } from '../src/main/engine'

/**
 * Counts the statements the engine's database runs until `stop()` (which puts the driver back as
 * it was). `stop()` returns the count; `top(k)` the k statements run most, with their counts
 * (CORRAL_BENCH_SQL=top prints them in the benches that count).
 */
export function countStatements(engine: Engine): { stop: () => number; top: (k: number) => { sql: string; n: number }[] } {
  const proto = Object.getPrototypeOf(engine.stores.db.prepare('SELECT 1')) as Record<string, (...a: unknown[]) => unknown>
  const methods = ['run', 'get', 'all', 'iterate'] as const
  const originals = methods.map((m) => proto[m])
  const bySql = new Map<string, number>()
  let n = 0
  methods.forEach((m, i) => {
    proto[m] = function (this: { source?: string }, ...a: unknown[]) {
      n++
      const sql = this.source ?? ''
      bySql.set(sql, (bySql.get(sql) ?? 0) + 1)
      return originals[i].apply(this, a)
    }
  })
  return {
    stop: () => {
      methods.forEach((m, i) => (proto[m] = originals[i]))
      return n
    },
    top: (k) =>
      [...bySql]
        .sort((a, b) => b[1] - a[1])
        .slice(0, k)
        .map(([sql, count]) => ({ sql: sql.replace(/\s+/g, ' ').slice(0, 160), n: count })),
  }
}
