/** Percentile of a sample (nearest-rank on a sorted copy). */
export function percentile(sample: readonly number[], p: number): number {
  if (sample.length === 0) return NaN
  const sorted = [...sample].sort((a, b) => a - b)
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  return sorted[rank]
}

/** Milliseconds to the microsecond, as the benches' JSON gives them. */
export const round3 = (x: number): number => Math.round(x * 1000) / 1000

/** The p50 of a sample, to the microsecond. */
export const p50ms = (sample: readonly number[]): number => round3(percentile(sample, 50))

export function summary(sampleMs: readonly number[]): { n: number; p50_ms: number; p95_ms: number; p99_ms: number; max_ms: number } {
  const r = round3
  return {
    n: sampleMs.length,
    p50_ms: r(percentile(sampleMs, 50)),
    p95_ms: r(percentile(sampleMs, 95)),
    p99_ms: r(percentile(sampleMs, 99)),
    max_ms: r(Math.max(...sampleMs)),
  }
}
