/**
 * The least a thread's tool turn can cost on this machine with the official SDK, measured beside
 * the threads bench's figures so its turn overhead can be read against it: a bare loop, no engine,
 * against the bench's own model process. Per turn it does what invariant 1 needs and nothing
 * more: the SDK streams the response (over the model client's transport, on the event loop), the
 * response is one row committed to a WAL database (synchronous=NORMAL) whose WAL is fdatasynced
 * before the tool runs, the tool appends a line to a file, its result is one more row, and the
 * next request is the conversation so far with the tools the engine offers. Turns are timed the
 * way the bench times the engine's: from the response's last byte leaving the model server to the
 * next request arriving there, minus the tool's own time. One chain at a time (uncontended):
 * it is the floor under the engine's one-child figure, not under 25 children sharing two cores.
 */
import Anthropic from '@anthropic-ai/sdk'
import Database from 'better-sqlite3'
import { appendFileSync, closeSync, fdatasync, mkdtempSync, openSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { modelTools } from '../src/main/harness/tools'
import { nodeFetch } from '../src/main/harness/model-transport'
import { p50ms } from './stats'

export const TURN_FLOOR_DEFINITION =
  "a bare loop beside the engine (no engine: the official SDK on the event loop over the model client's transport, one WAL row per response and per tool result, the WAL's fdatasync before the tool, the engine's tool schemas), against the same model process, one chain at a time: p50 ms from a response's last byte to the next request's arrival minus the tool's time, with and without the fdatasync; the engine's one-child turn overhead (CORRAL_BENCH_CHILDREN=1) is held against it"

export interface TurnFloor {
  p50_ms: number
  without_fsync_p50_ms: number
  turns: number
}

/**
 * Hands `stream`'s events to `onEvent` up to its message_stop and resolves there, reading the rest
 * of the body behind, as the engine's model client does: leaving the SDK's iterator early aborts
 * the request, and its connection would not go back to the keep-alive pool (every request of a
 * floor would then open a connection the engine's do not).
 */
export async function untilMessageStop(stream: AsyncIterable<Anthropic.RawMessageStreamEvent>, onEvent: (ev: Anthropic.RawMessageStreamEvent) => void): Promise<void> {
  const it = stream[Symbol.asyncIterator]()
  for (;;) {
    const r = await it.next()
    if (r.done) return
    onEvent(r.value)
    if (r.value.type !== 'message_stop') continue
    void (async () => {
      while (!(await it.next()).done);
    })().catch(() => {})
    return
  }
}

/** The model process's record of one request (bench/threads-model.ts), in CLOCK_MONOTONIC ms. */
interface Timed {
  task?: string
  lastToolResultId?: string
  arrivedAt: number
  endedAt?: number
}

/**
 * Runs `chains` chains of the scripted worker (each a new conversation whose first text is
 * `floor <i>`, which the model answers with `calls` bash calls then a final text) one after the
 * other, half with the fdatasync and half without, alternating; `collect` fetches the model's
 * request records. Takes ≈ chains × (calls + 1) × the first-token delay.
 */
export async function measureTurnFloor(params: { url: string; system: string; chains: number; collect: () => Promise<Timed[]> }): Promise<TurnFloor> {
  const dir = mkdtempSync(join(tmpdir(), 'corral-bench-floor-'))
  const db = new Database(join(dir, 'floor.db'))
  const client = new Anthropic({ apiKey: 'bench', baseURL: params.url, maxRetries: 0, fetch: nodeFetch as unknown as typeof fetch })
  const tools = modelTools([{ type: 'agent_toolset_20260401' }] as never)
  const toolMs = new Map<string, number>()
  const synced = new Set<string>()
  let walFd = -1
  try {
    db.pragma('journal_mode = WAL')
    db.pragma('synchronous = NORMAL')
    db.exec('CREATE TABLE e (seq INTEGER PRIMARY KEY, thread TEXT, type TEXT, body TEXT); CREATE INDEX e_thread ON e (thread, seq)')
    const insert = db.prepare('INSERT INTO e (thread, type, body) VALUES (?, ?, ?)')
    const sync = () =>
      new Promise<void>((resolve, reject) => {
        if (walFd < 0) walFd = openSync(join(dir, 'floor.db-wal'), 'r')
        fdatasync(walFd, (err) => (err ? reject(err) : resolve()))
      })
    const chain = async (task: string, fsync: boolean): Promise<void> => {
      if (fsync) synced.add(task)
      const messages: Anthropic.MessageParam[] = [{ role: 'user', content: [{ type: 'text', text: task }] }]
      for (;;) {
        const stream = await client.messages.create({ model: 'claude-sonnet-5-5', max_tokens: 4096, system: [{ type: 'text', text: params.system }], messages, tools: tools as never, stream: true })
        const blocks: Record<string, unknown>[] = []
        let json = ''
        await untilMessageStop(stream, (ev) => {
          if (ev.type === 'content_block_start') {
            blocks[ev.index] = { ...ev.content_block }
            json = ''
          } else if (ev.type === 'content_block_delta') {
            if (ev.delta.type === 'text_delta') blocks[ev.index].text = String(blocks[ev.index].text ?? '') + ev.delta.text
            else if (ev.delta.type === 'input_json_delta') json += ev.delta.partial_json
          } else if (ev.type === 'content_block_stop') {
            if (blocks[ev.index].type === 'tool_use') blocks[ev.index].input = json ? JSON.parse(json) : {}
          }
        })
        insert.run(task, 'agent.message', JSON.stringify(blocks))
        const use = blocks.find((b) => b.type === 'tool_use') as { id: string; input: { command?: string } } | undefined
        if (!use) return
        if (fsync) await sync()
        const t = performance.now()
        appendFileSync(join(dir, 'effects.log'), `effect ${use.id} ran bash: ${String(use.input.command)}\n`)
        toolMs.set(use.id, performance.now() - t)
        insert.run(task, 'agent.tool_result', JSON.stringify({ tool_use_id: use.id, content: 'ok' }))
        messages.push({ role: 'assistant', content: blocks as never }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'ok' }] })
      }
    }
    const start = Number(process.hrtime.bigint()) / 1e6
    for (let i = 0; i < params.chains; i++) await chain(`floor ${i}`, i % 2 === 0)
    const byTask = new Map<string, Timed[]>()
    for (const r of await params.collect()) if (r.arrivedAt >= start && r.task?.startsWith('floor ')) byTask.set(r.task, [...(byTask.get(r.task) ?? []), r])
    const withSync: number[] = []
    const without: number[] = []
    for (const [task, reqs] of byTask) {
      // the first chain of each kind warms the SDK and the statements
      if (task === 'floor 0' || task === 'floor 1') continue
      reqs.sort((a, b) => a.arrivedAt - b.arrivedAt)
      for (let k = 0; k + 1 < reqs.length; k++) {
        const ended = reqs[k].endedAt
        if (ended === undefined) continue
        const turn = reqs[k + 1].arrivedAt - ended - (toolMs.get(reqs[k + 1].lastToolResultId ?? '') ?? 0)
        ;(synced.has(task) ? withSync : without).push(turn)
      }
    }
    return { p50_ms: p50ms(withSync), without_fsync_p50_ms: p50ms(without), turns: withSync.length + without.length }
  } finally {
    if (walFd >= 0) closeSync(walFd)
    db.close()
    rmSync(dir, { recursive: true, force: true })
  }
}
