/**
 * CORRAL_BENCH_PROFILE=<file.cpuprofile>: a V8 CPU profile of one bench's measured window only
 * (not module loading or set-up), written when the window closes; open it in Chrome DevTools or
 * summarise its self time. Without the variable, `profileWindow` costs nothing.
 */
import { writeFileSync } from 'node:fs'
import { Session } from 'node:inspector/promises'

/** Starts profiling when CORRAL_BENCH_PROFILE is set; the returned function stops and writes it. */
export async function profileWindow(): Promise<() => Promise<void>> {
  const file = process.env.CORRAL_BENCH_PROFILE
  if (!file) return async () => {}
  const session = new Session()
  session.connect()
  await session.post('Profiler.enable')
  await session.post('Profiler.setSamplingInterval', { interval: Number(process.env.CORRAL_BENCH_PROFILE_US ?? 200) })
  await session.post('Profiler.start')
  return async () => {
    const { profile } = await session.post('Profiler.stop')
    writeFileSync(file, JSON.stringify(profile))
    session.disconnect()
  }
}
