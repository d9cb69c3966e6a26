/**
 * Memory stores through the official SDK against `corral serve`'s HTTP API: create throughput
 * (sequential, and 8 in flight), listing a 2,000-memory store (basic, limit 100, every page)
 * and a depth-1 listing with rollups; then the sandbox mount of that store (MemoryMounts, the
 * host folder a sandbox binds): first mount (bytes written), a sync with nothing changed (files are
 * re-read only when their inode, size or times moved), a sync after one file changed (bytes pushed). `npm run bench -- memory`.
 */
import { appendFileSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { Engine } from '../src/main/engine'
import { MemoryMounts } from '../src/main/hands'
import { summary } from './stats'

const MEMORIES = 2000
const CONTENT = 'A line a memory might hold about a project or a preference.\n'.repeat(16)

export async function run(log: (msg: string) => void): Promise<Record<string, unknown>> {
  const dir = mkdtempSync(join(tmpdir(), 'corral-memory-bench-'))
  const token = 'bench-token'
  const engine = Engine.open({ dataDir: dir, token, env: {}, log: () => {} })
  const server = await engine.listen(0)
  const client = new Anthropic({ baseURL: server.url, apiKey: token, maxRetries: 0 })
  const out: Record<string, unknown> = {}
  try {
    const store = await client.beta.memoryStores.create({ name: 'bench' })
    // --- create, one at a time
    const sequential: number[] = []
    const half = MEMORIES / 2
    let t0 = performance.now()
    for (let i = 0; i < half; i++) {
      const s = performance.now()
      await client.beta.memoryStores.memories.create(store.id, { path: `/dir${i % 20}/sub${i % 7}/m${i}.md`, content: CONTENT + i })
      sequential.push(performance.now() - s)
    }
    out.create_sequential = { ...summary(sequential), per_second: Math.round(half / ((performance.now() - t0) / 1000)) }
    log(`created ${half} sequentially`)
    // --- create, 8 in flight
    t0 = performance.now()
    let next = half
    const worker = async () => {
      while (next < MEMORIES) {
        const i = next++
        await client.beta.memoryStores.memories.create(store.id, { path: `/dir${i % 20}/sub${i % 7}/m${i}.md`, content: CONTENT + i })
      }
    }
    await Promise.all(Array.from({ length: 8 }, worker))
    out.create_concurrent_8 = { n: half, per_second: Math.round(half / ((performance.now() - t0) / 1000)) }
    log(`created ${half} with 8 in flight`)
    // --- list the whole store the way the sync worker does (basic, limit 100)
    const listRuns: number[] = []
    let count = 0
    for (let r = 0; r < 5; r++) {
      const s = performance.now()
      count = 0
      for await (const _ of client.beta.memoryStores.memories.list(store.id, { view: 'basic', limit: 100 })) count++
      listRuns.push(performance.now() - s)
    }
    out.list_all_basic_limit_100 = { memories: count, ...summary(listRuns), memories_per_second: Math.round(count / (summary(listRuns).p50_ms / 1000)) }
    // --- depth-1 listing of the root (20 rollups) and of one folder
    const depthRuns: number[] = []
    for (let r = 0; r < 20; r++) {
      const s = performance.now()
      await client.beta.memoryStores.memories.list(store.id, { depth: 1, limit: 100 })
      await client.beta.memoryStores.memories.list(store.id, { path_prefix: '/dir3/', depth: 1, limit: 100 })
      depthRuns.push((performance.now() - s) / 2)
    }
    out.list_depth_1 = summary(depthRuns)
    // --- the version history (one per create)
    const vs = performance.now()
    let versions = 0
    for await (const _ of client.beta.memoryStores.memoryVersions.list(store.id, { limit: 100 })) versions++
    out.list_versions_all = { versions, ms: Math.round(performance.now() - vs) }

    // --- the mount: 2,000 memories written to a host folder, then synced
    const mounts = new MemoryMounts({ store: () => engine.services.memory, root: join(dir, 'memory-mounts') })
    const resources = [{ type: 'memory_store', memory_store_id: store.id, access: 'read_write', mount_path: '/mnt/memory/bench' }]
    let m0 = performance.now()
    const binds = await mounts.prepare('sesn_bench', resources)
    const bytes = engine.services.memory.snapshot(store.id).reduce((n, m) => n + Buffer.byteLength(m.content), 0)
    out.mount_first = { memories: MEMORIES, bytes_written: bytes, ms: Math.round(performance.now() - m0) }
    m0 = performance.now()
    const idle = await mounts.sync('sesn_bench')
    out.sync_nothing_changed = { ms: Math.round(performance.now() - m0), pushed: idle.pushed, pulled: idle.pulled }
    appendFileSync(join(binds[0].source, 'dir3', 'sub3', 'm3.md'), 'one more line\n')
    m0 = performance.now()
    const one = await mounts.sync('sesn_bench')
    out.sync_one_change = { ms: Math.round(performance.now() - m0), bytes_pushed: Buffer.byteLength(engine.services.memory.snapshot(store.id).find((m) => m.path === '/dir3/sub3/m3.md')!.content), pushed: one.pushed, pulled: one.pulled }
    await mounts.release('sesn_bench')
    log(`mount ${JSON.stringify(out.mount_first)}, idle sync ${JSON.stringify(out.sync_nothing_changed)}, one change ${JSON.stringify(out.sync_one_change)}`)
  } finally {
    await server.close()
    await engine.close()
    rmSync(dir, { recursive: true, force: true })
  }
  return out
}
