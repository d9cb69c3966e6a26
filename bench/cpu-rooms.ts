/**
 * Where an engine's CPU goes, by the part of Corral that spent it: a V8 CPU profile of a window,
 * each sample charged to the innermost frame that is Corral's own code (or a library that acts for
 * one part: QuickJS for the workflow program, the SDK for the model client), walking up from the
 * sampled frame past Node's internals and native calls (a SQLite statement is charged to the code
 * that ran it, an fsync to the log that asked for it). Frames of a bundle are mapped back to their
 * source file with its source map (the benches run built: scripts/bench.mjs).
 *
 * The workflows bench reports this for one extra run (the profiler's own cost stays out of the timed
 * runs): issue #12 names "scheduler and journal overhead per agent call", which is the
 * `workflow_driver_and_journal` and `scheduler` rooms here.
 */
import { readFileSync } from 'node:fs'
import { SourceMap } from 'node:module'
import { fileURLToPath } from 'node:url'
import { Session } from 'node:inspector/promises'

export type Room = 'workflow_program' | 'workflow_driver_and_journal' | 'scheduler' | 'log' | 'harness' | 'model_client' | 'node_io' | 'v8_gc_and_compiler' | 'other'

/** What the rooms are (each bench says what it profiled and per what). */
export const ROOMS_DEFINITION =
  "the engine's event-loop CPU time by the part of Corral that spent it: V8's sampling profiler (1 ms) gives each part's share of the thread's busy samples (idle excluded), and the shares split the thread's CPU time over the window (from /proc on Linux; `cpu_over_sampled` is that CPU time over the sampled busy time, below 1 when the thread waited for a core on a busy machine; elsewhere the sampled time is used as it is); each sample charged to the innermost frame of Corral's own code (SQLite statements and fsyncs to the code that ran them): `workflow_program` (the workflow's program running in QuickJS: the WebAssembly interpreter, its glue and harness/workflows/program.ts, which hands it its answers), `workflow_driver_and_journal` (orchestrator/workflow-runs.ts, harness/workflows/execution.ts and tools.ts, session/workflow-store.ts), `scheduler` (orchestrator/scheduler.ts, brains.ts, lease-fence.ts, session/lease-store.ts), `log` (session/log/ and the log's stores), `harness` (the brains' loop, context views, folds), `model_client` (harness/model-client.ts and model-transport.ts with the official SDK), `node_io` (Node's sockets, streams and timers with no Corral frame on the stack: mostly the model requests' HTTP), `v8_gc_and_compiler`"

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number }
  children?: number[]
}
export interface CpuProfile {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

/** Linux: this process's event-loop thread's CPU time in ms (user + system), from /proc; undefined elsewhere. */
export function eventLoopThreadCpuMs(): number | undefined {
  try {
    const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    // utime and stime (fields 14 and 15 of stat(5)) in clock ticks of 1/100 s
    return (Number(fields[11]) + Number(fields[12])) * 10
  } catch {
    return undefined
  }
}

/** Starts V8's CPU profiler on this thread; the returned function stops it and gives the profile. */
export async function startCpuProfile(intervalUs = 1000): Promise<() => Promise<CpuProfile>> {
  const session = new Session()
  session.connect()
  await session.post('Profiler.enable')
  await session.post('Profiler.setSamplingInterval', { interval: intervalUs })
  await session.post('Profiler.start')
  return async () => {
    const { profile } = await session.post('Profiler.stop')
    session.disconnect()
    return profile as unknown as CpuProfile
  }
}

/** The event loop's CPU by room over a window (cpuByRoom scaled by scaleToCpu); `cpuOverSampled` null where the thread's CPU time cannot be read. */
export type RoomSplit = ReturnType<typeof scaleToCpu>

/**
 * Opens a window: V8's profiler on and the event-loop thread's CPU time read. The returned
 * function closes it and gives the window's split by room, scaled to that CPU time.
 */
export async function startRoomsWindow(): Promise<() => Promise<RoomSplit>> {
  const stop = await startCpuProfile()
  const cpu0 = eventLoopThreadCpuMs()
  return async () => {
    const profile = await stop()
    const cpu1 = eventLoopThreadCpuMs()
    return scaleToCpu(cpuByRoom(profile), cpu0 !== undefined && cpu1 !== undefined ? cpu1 - cpu0 : undefined)
  }
}

/** The room of a source path (relative to the repository, or a node_modules path), or undefined when it is none of Corral's. */
export function roomOf(path: string): Room | undefined {
  if (/node_modules\/(quickjs-emscripten|@jitl\/)/.test(path)) return 'workflow_program'
  if (/node_modules\/@anthropic-ai\/sdk\//.test(path)) return 'model_client'
  if (path.includes('node_modules/')) return undefined
  const m = /(?:^|\/)(src\/(?:main|shared)\/.+\.ts)$/.exec(path)
  if (!m) return /(?:^|\/)(bench|test)\//.test(path) ? 'other' : undefined
  const src = m[1]
  if (src === 'src/main/harness/workflows/program.ts') return 'workflow_program'
  if (/^src\/main\/(orchestrator\/workflow-runs|session\/workflow-store)\.ts$/.test(src) || src.startsWith('src/main/harness/workflows/')) return 'workflow_driver_and_journal'
  if (/^src\/main\/(orchestrator\/(scheduler|brains|lease-fence)|session\/lease-store)\.ts$/.test(src)) return 'scheduler'
  if (/^src\/main\/harness\/model-(client|transport|thread)\.ts$/.test(src)) return 'model_client'
  if (src.startsWith('src/main/session/')) return 'log'
  if (src.startsWith('src/main/harness/') || src.startsWith('src/shared/')) return 'harness'
  return 'other'
}

/** Maps a profile frame to its source path: through the bundle's source map when there is one. */
function sourceResolver(): (frame: ProfileNode['callFrame']) => string {
  const maps = new Map<string, SourceMap | null>()
  const mapOf = (url: string): SourceMap | null => {
    let m = maps.get(url)
    if (m !== undefined) return m
    m = null
    try {
      const file = url.startsWith('file:') ? fileURLToPath(url) : url
      if (file.endsWith('.js')) m = new SourceMap(JSON.parse(readFileSync(`${file}.map`, 'utf8')))
    } catch {
      m = null
    }
    maps.set(url, m)
    return m
  }
  return (frame) => {
    if (!frame.url || frame.url.startsWith('node:')) return ''
    const map = mapOf(frame.url)
    if (!map) return frame.url
    const entry = map.findEntry(frame.lineNumber, frame.columnNumber) as { originalSource?: string }
    return entry.originalSource ?? frame.url
  }
}

/**
 * Splits the thread's CPU time (ms) over the rooms in the proportions of their samples: the
 * profiler samples wall time, so a thread switched out in a room's code (a syscall that wakes
 * another process, on a busy machine) would charge that room time it did not spend. Without the
 * CPU time (not Linux), the sampled times as they are.
 */
export function scaleToCpu(byRoom: Record<Room, number>, cpuMs: number | undefined): { byRoom: Record<Room, number>; cpuOverSampled: number | null } {
  const sampled = Object.values(byRoom).reduce((a, b) => a + b, 0)
  if (cpuMs === undefined || !(sampled > 0)) return { byRoom, cpuOverSampled: null }
  const k = cpuMs / sampled
  return { byRoom: Object.fromEntries(Object.entries(byRoom).map(([r, ms]) => [r, ms * k])) as Record<Room, number>, cpuOverSampled: k }
}

/** A profile's sampled time in ms by room (idle excluded). */
export function cpuByRoom(profile: CpuProfile): Record<Room, number> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const parent = new Map<number, number>()
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
  const source = sourceResolver()
  const roomOfNode = new Map<number, Room | null>()
  const ownRoom = (id: number): Room | null => {
    let r = roomOfNode.get(id)
    if (r === undefined) {
      r = roomOf(source(byId.get(id)!.callFrame)) ?? null
      roomOfNode.set(id, r)
    }
    return r
  }
  const out: Record<Room, number> = { workflow_program: 0, workflow_driver_and_journal: 0, scheduler: 0, log: 0, harness: 0, model_client: 0, node_io: 0, v8_gc_and_compiler: 0, other: 0 }
  const deltas = profile.timeDeltas
  for (let i = 0; i < profile.samples.length; i++) {
    const us = deltas[i + 1] ?? 0
    const leaf = profile.samples[i]
    const name = byId.get(leaf)!.callFrame.functionName
    if (name === '(idle)' || name === '(root)') continue
    if (name === '(garbage collector)' || name === '(program)') {
      out.v8_gc_and_compiler += us / 1000
      continue
    }
    let room: Room | null = null
    for (let id: number | undefined = leaf; id !== undefined && room === null; id = parent.get(id)) room = ownRoom(id)
    out[room ?? 'node_io'] += us / 1000
  }
  return out
}
