import { describe, expect, it } from 'vitest'
import { cpuByRoom, roomOf, scaleToCpu, type CpuProfile } from '../../../bench/cpu-rooms'

// The benches' split of the engine's time by the part of Corral that spent it (bench/cpu-rooms.ts):
// issue #12's "scheduler and journal overhead" is read from it, so its charging rules are pinned here.
describe('the CPU split by room', () => {
  it('names the room of each source file', () => {
    const rooms: [string, string | undefined][] = [
      ['/w/src/main/orchestrator/workflow-runs.ts', 'workflow_driver_and_journal'],
      ['../../src/main/harness/workflows/execution.ts', 'workflow_driver_and_journal'],
      ['src/main/harness/workflows/tools.ts', 'workflow_driver_and_journal'],
      ['src/main/session/workflow-store.ts', 'workflow_driver_and_journal'],
      ['../../src/main/harness/workflows/program.ts', 'workflow_program'],
      ['/w/node_modules/quickjs-emscripten-core/dist/index.js', 'workflow_program'],
      ['/w/node_modules/@jitl/quickjs-wasmfile-release-sync/dist/emscripten-module.cjs', 'workflow_program'],
      ['wasm://wasm/001eb57a', undefined],
      ['src/main/orchestrator/scheduler.ts', 'scheduler'],
      ['src/main/orchestrator/brains.ts', 'scheduler'],
      ['src/main/session/lease-store.ts', 'scheduler'],
      ['src/main/session/log/append.ts', 'log'],
      ['src/main/session/sqlite-event-log.ts', 'log'],
      ['src/main/harness/harness.ts', 'harness'],
      ['src/shared/api/fold.ts', 'harness'],
      ['src/main/harness/model-transport.ts', 'model_client'],
      ['/w/node_modules/@anthropic-ai/sdk/core/streaming.js', 'model_client'],
      ['/w/node_modules/better-sqlite3/lib/methods/transaction.js', undefined],
      ['bench/workflows.bench.ts', 'other'],
      ['', undefined],
    ]
    for (const [path, room] of rooms) expect(roomOf(path), path).toBe(room)
  })

  it("charges a sample to the innermost frame of Corral's own code, past Node's and native frames", () => {
    const frame = (id: number, functionName: string, url: string, children: number[] = []) => ({ id, callFrame: { functionName, url, lineNumber: 0, columnNumber: 0 }, children })
    const profile: CpuProfile = {
      nodes: [
        frame(1, '(root)', '', [2, 8, 9, 10, 11, 12]),
        frame(2, 'flushGroup', 'file:///w/src/main/session/log/append.ts', [3, 5]),
        frame(3, 'project', 'file:///w/src/main/orchestrator/workflow-runs.ts', [4]),
        frame(4, 'run', ''), // a SQLite statement the driver ran (native)
        frame(5, 'insertAll', 'file:///w/src/main/session/log/append.ts', [6]),
        frame(6, 'run', '', [7]),
        frame(7, 'stringify', 'node:internal/x'),
        frame(8, 'onStreamRead', 'node:internal/stream_base_commons'),
        frame(9, '(garbage collector)', ''),
        frame(10, '(idle)', ''),
        frame(11, 'wake', 'file:///w/src/main/orchestrator/brains.ts'),
        // the driver settles a call: the program's interpreter (WebAssembly) runs under QuickJS's glue
        frame(12, 'complete', 'file:///w/src/main/harness/workflows/execution.ts', [13]),
        frame(13, 'executePendingJobs', 'file:///w/node_modules/quickjs-emscripten-core/dist/index.js', [14]),
        frame(14, 'wasm-function[221]', 'wasm://wasm/001eb57a'),
      ],
      // samples and the time after each (the first delta is before the first sample)
      samples: [4, 7, 7, 8, 9, 10, 11, 2, 14, 12],
      timeDeltas: [0, 1000, 2000, 1000, 500, 250, 4000, 3000, 1500, 2000, 500],
    }
    expect(cpuByRoom(profile)).toEqual({ workflow_program: 2, workflow_driver_and_journal: 1.5, scheduler: 3, log: 4.5, harness: 0, model_client: 0, node_io: 0.5, v8_gc_and_compiler: 0.25, other: 0 })
  })

  it("splits the thread's CPU time over the rooms in their samples' proportions, or leaves the sampled times without it", () => {
    const sampled = { workflow_program: 0, workflow_driver_and_journal: 1, scheduler: 3, log: 4, harness: 0, model_client: 0, node_io: 1.5, v8_gc_and_compiler: 0.5, other: 0 }
    const { byRoom, cpuOverSampled } = scaleToCpu(sampled, 8)
    expect(cpuOverSampled).toBe(0.8)
    expect(byRoom.scheduler).toBeCloseTo(2.4)
    expect(byRoom.log).toBeCloseTo(3.2)
    expect(Object.values(byRoom).reduce((a, b) => a + b, 0)).toBeCloseTo(8)
    expect(scaleToCpu(sampled, undefined)).toEqual({ byRoom: sampled, cpuOverSampled: null })
  })
})
