/**
 * CORRAL_BENCH_PROFILE=<file.cpuprofile>: a V8 CPU profile of one bench's measured window only
 * (not module loading or set-up), written when the window closes; open it in Chrome DevTools or
 * summarise its self time. CORRAL_BENCH_HEAP=<file.heapprofile>: a sampling profile of every
 * allocation the event loop's thread made in the window, including what the GC has freed since
 * (where the young generation's churn comes from, which is what the scavenges cost). Without the
 * variables, `profileWindow` costs nothing.
 */
import { writeFileSync } from 'node:fs'
import { Session } from 'node:inspector/promises'

/** Starts profiling when CORRAL_BENCH_PROFILE or CORRAL_BENCH_HEAP is set; the returned function stops and writes them. */
export async function profileWindow(): Promise<() => Promise<void>> {
  const cpuFile = process.env.CORRAL_BENCH_PROFILE
  const heapFile = process.env.CORRAL_BENCH_HEAP
  if (!cpuFile && !heapFile) return async () => {}
  const session = new Session()
  session.connect()
  if (cpuFile) {
    await session.post('Profiler.enable')
    await session.post('Profiler.setSamplingInterval', { interval: Number(process.env.CORRAL_BENCH_PROFILE_US ?? 200) })
    await session.post('Profiler.start')
  }
  if (heapFile) {
    await session.post('HeapProfiler.enable')
    await session.post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true } as never)
  }
  return async () => {
    if (cpuFile) writeFileSync(cpuFile, JSON.stringify((await session.post('Profiler.stop')).profile))
    if (heapFile) writeFileSync(heapFile, JSON.stringify((await session.post('HeapProfiler.stopSampling')).profile))
    session.disconnect()
  }
}
