/**
 * Model client benchmark (npm run bench -- model-client): the CPU one model request costs the
 * engine's process in harness/model-client.ts, the official SDK and the node:http transport under
 * it (model-transport.ts), with nothing else running: 25 requests in flight at a time (a fan-out's
 * children), each answered at once by an endpoint in a process of its own (bench/tool-use-model.ts:
 * one streamed tool call). It is a fixed cost of every turn of every thread (issue #11's threads
 * bench sees it inside its `model_client` and `node_io` rooms).
 *  - `agent_toolset`: the request a worker of the threads bench sends (the agent toolset's tool
 *    schemas, a short conversation);
 *  - `mcp_sized_tools`: the same with eight times the tools (≈ 60 KB of schemas, as an agent with
 *    a few MCP servers sends every turn).
 * Figures per request, medians of `SAMPLES` windows of `ROUNDS` rounds after a warm-up (the JIT):
 * the process's CPU (user + system, every thread) and the event loop thread's (Linux).
 */
import { AnthropicModelClient, type ModelRequest } from '../src/main/harness/model-client'
import { modelTools, type ModelToolDefinition } from '../src/main/harness/tools'
import { forkModel } from './child'
import { eventLoopThreadCpuMs } from './cpu-rooms'
import { percentile, round3 } from './stats'

type Log = (msg: string) => void

const IN_FLIGHT = 25
const WARM_ROUNDS = 120
const ROUNDS = 60
const SAMPLES = 5

const DEFINITION = `the engine process's CPU per model request through AnthropicModelClient (the official SDK over harness/model-transport.ts), ${IN_FLIGHT} requests in flight, each answered at once by an endpoint in another process with one streamed tool call; medians of ${SAMPLES} windows of ${ROUNDS} rounds (${ROUNDS * IN_FLIGHT} requests) after ${WARM_ROUNDS} rounds of warm-up; \`cpu_ms_per_request\`: the whole process (user + system), \`event_loop_cpu_ms_per_request\`: its event loop's thread (Linux, /proc: 10 ms ticks)`

async function measure(log: Log, url: string, name: string, tools: ModelToolDefinition[]): Promise<Record<string, unknown>> {
  const client = new AnthropicModelClient({ baseURL: url, apiKey: 'bench-key' })
  const messages: ModelRequest['messages'] = [
    { role: 'user', content: [{ type: 'text', text: 'Run the three commands you were given, one at a time, and report what they print.' }] },
    { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'bash', input: { command: 'echo one' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'one\n' }] }] },
  ]
  const request: ModelRequest = { model: 'claude-sonnet-5-5', max_tokens: 4096, system: [{ type: 'text', text: 'You are a worker.' }], tools: tools as ModelRequest['tools'], messages }
  const one = async () => {
    const r = await client.stream(request, { signal: new AbortController().signal })
    if (r.blocks[0]?.type !== 'tool_use') throw new Error(`the endpoint answered ${JSON.stringify(r.blocks)}`)
  }
  const rounds = async (n: number) => {
    for (let i = 0; i < n; i++) await Promise.all(Array.from({ length: IN_FLIGHT }, one))
  }
  await rounds(WARM_ROUNDS)
  const cpu: number[] = []
  const loop: number[] = []
  for (let s = 0; s < SAMPLES; s++) {
    const c0 = process.cpuUsage()
    const l0 = eventLoopThreadCpuMs()
    await rounds(ROUNDS)
    const c = process.cpuUsage(c0)
    const l1 = eventLoopThreadCpuMs()
    const n = ROUNDS * IN_FLIGHT
    cpu.push((c.user + c.system) / 1000 / n)
    if (l0 !== undefined && l1 !== undefined) loop.push((l1 - l0) / n)
  }
  const figures = {
    tools_json_chars: JSON.stringify(tools).length,
    cpu_ms_per_request: round3(percentile(cpu, 50)),
    event_loop_cpu_ms_per_request: loop.length ? round3(percentile(loop, 50)) : null,
    samples_cpu_ms: cpu.map(round3),
  }
  log(`${name}: ${JSON.stringify(figures)}`)
  return figures
}

export async function run(log: Log): Promise<Record<string, unknown>> {
  const model = await forkModel('tool-use-model', 'bench/tool-use-model.ts', [])
  try {
    const toolset = modelTools([{ type: 'agent_toolset_20260401' }])
    // eight copies under other names: the size of what a few MCP servers add
    const mcpSized = Array.from({ length: 8 }, (_, k) => toolset.map((t) => ({ ...t, name: k === 0 ? t.name : `${t.name}_${k}` }))).flat()
    return {
      definition: DEFINITION,
      in_flight: IN_FLIGHT,
      agent_toolset: await measure(log, model.url, 'agent_toolset', toolset),
      mcp_sized_tools: await measure(log, model.url, 'mcp_sized_tools', mcpSized),
    }
  } finally {
    await model.close()
  }
}
