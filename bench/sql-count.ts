import type { Engine } from '../src/main/engine'

/**
 * Counts the statements the engine's database runs until `stop()` (which puts the driver back as
 * it was). `stop()` returns the count; `top(k)` the k statements that took the most time, with their counts and total milliseconds (the driver's call, start to return)
 * (CORRAL_BENCH_SQL=top prints them in the benches that count).
 */
export function countStatements(engine: Engine): { stop: () => number; top: (k: number) => { sql: string; n: number; ms: number }[] } {
  const proto = Object.getPrototypeOf(engine.stores.db.prepare('SELECT 1')) as Record<string, (...a: unknown[]) => unknown>
  const methods = ['run', 'get', 'all', 'iterate'] as const
  const originals = methods.map((m) => proto[m])
  const bySql = new Map<string, { n: number; ns: bigint }>()
  let n = 0
  methods.forEach((m, i) => {
    proto[m] = function (this: { source?: string }, ...a: unknown[]) {
      n++
      const sql = this.source ?? ''
      let c = bySql.get(sql)
      if (!c) bySql.set(sql, (c = { n: 0, ns: 0n }))
      c.n++
      const t0 = process.hrtime.bigint()
      try {
        return originals[i].apply(this, a)
      } finally {
        c.ns += process.hrtime.bigint() - t0
      }
    }
  })
  return {
    stop: () => {
      methods.forEach((m, i) => (proto[m] = originals[i]))
      return n
    },
    top: (k) =>
      [...bySql]
        .sort((a, b) => Number(b[1].ns - a[1].ns))
        .slice(0, k)
        .map(([sql, c]) => ({ sql: sql.replace(/\s+/g, ' ').slice(0, 160), n: c.n, ms: Number(c.ns) / 1e6 })),
  }
}
