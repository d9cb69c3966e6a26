/** Percentile of a sample (nearest-rank on a sorted copy). */
export function percentile(sample: readonly number[], p: number): number {
  if (sample.length === 0) return NaN
  const sorted = [...sample].sort((a, b) => a - b)
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  return sorted[rank]
}

export function summary(sampleMs: readonly number[]): { n: number; p50_ms: number; p95_ms: number; p99_ms: number; max_ms: number } {
  const r = (x: number) => Math.round(x * 1000) / 1000
  return {
    n: sampleMs.length,
    p50_ms: r(percentile(sampleMs, 50)),
    p95_ms: r(percentile(sampleMs, 95)),
    p99_ms: r(percentile(sampleMs, 99)),
    max_ms: r(Math.max(...sampleMs)),
  }
}
