/**
 * The scripted model of a workflow run (test/support/workflow-crash-fixture.ts: a lead that
 * starts the map–combine run, workers that answer their prompt) in a process of its own, for the
 * workflows bench: its CPU does not count as the engine's. Over IPC it sends `{url}` once
 * listening; asked `{cpu: true}` it answers `{cpuMs}` (its CPU time so far); asked `{stats: true}` it answers `{stats: {workers: [{prompt, arrivedAbs, endedAbs}], lead}}`
 * (times in ms since the epoch, as performance.timeOrigin + performance.now() in this process).
 * Usage: fork with argv [JSON.stringify({ n, delayMs })] (n agents per phase; delayMs before each response's first byte).
 */
import { ScriptedModelServer, systemOf } from './model-server'
import { LEAD, promptOf, runResponder } from './workflow-crash-fixture'

const opts = JSON.parse(process.argv[2] ?? '{}') as { n?: number; delayMs?: number }

async function main(): Promise<void> {
  const server = await ScriptedModelServer.start(runResponder({ n: opts.n ?? 500, delayMs: () => opts.delayMs ?? 200 }))
  server.keepRequests = 100_000
  process.on('message', (m: { stats?: boolean; cpu?: boolean }) => {
    // this process's CPU time so far (user + system, ms): the bench takes it before and after the run
    if (m.cpu) return void process.send?.({ cpuMs: ((u) => (u.user + u.system) / 1000)(process.cpuUsage()) })
    if (!m.stats) return
    const abs = (t: number | undefined) => (t === undefined ? null : performance.timeOrigin + t)
    const workers = server.requests.filter((r) => systemOf(r) !== LEAD).map((r) => ({ prompt: promptOf(r), arrivedAbs: abs(r.arrivedAt), endedAbs: abs(r.endedAt) }))
    process.send?.({ stats: { workers, lead: server.requests.length - workers.length } })
  })
  process.send?.({ url: server.url })
  process.on('disconnect', () => void server.close().then(() => process.exit(0)))
}
void main()
