/**
 * What the workflow crash and lease tests share (test/integration/orchestrator/workflow-*.test.ts):
 * a lead that starts one workflow run of `2 × n` agents in phases (a map phase, a combine phase
 * fed with the map's answers, a reduce in the program), the scripted workers' answers (a pure
 * function of the prompt, so an uncrashed run's output is known), a session set up through a
 * parent engine that runs no brain, and reads of that session's log from the parent.
 */
import type { Engine } from '../../src/main/engine'
import type { LoggedEvent } from '../../src/main/session/event-log'
import { say, systemOf, toolCall, type RecordedRequest, type ScriptStep } from './model-server'

export const LEAD = 'You are the lead.'
export const WORKER = 'You are a worker.'

/** The run's program: `args.n` map agents, then `args.n` combine agents each given two map answers, then a reduce in the program. */
export const PROGRAM = `
  const n = args.n
  const mapped = await phase('map', () => Promise.all(Array.from({ length: n }, (_, i) => agent('worker', 'map ' + i, { label: 'map ' + i }))))
  log('mapped', mapped.length)
  const combined = await phase('combine', () => Promise.all(mapped.map((a, i) => agent('worker', 'combine ' + a + ' ' + mapped[(i + 1) % n], { label: 'combine ' + i }))))
  return await phase('reduce', async () => ({ count: combined.length, sum: combined.reduce((s, x) => s + Number(x), 0), combined }))
`

/** A run thread's task: the text of its first user turn. */
export const promptOf = (req: RecordedRequest): string => {
  const c = req.body.messages[0]?.content
  return typeof c === 'string' ? c : ((c as { text?: string }[] | undefined) ?? []).map((b) => b.text ?? '').join('')
}

/** A worker's answer to its prompt: pure, so every run of the program has the same output. */
export function workerAnswer(prompt: string): string {
  const [verb, a, b] = prompt.split(' ')
  if (verb === 'map') return String((Number(a) * 7919) % 1000)
  if (verb === 'combine') return String(Number(a) * 3 + Number(b))
  throw new Error(`scripted worker: unexpected prompt ${JSON.stringify(prompt)}`)
}

/** The output the program must return for `n` (computed here, not read from any run). */
export function expectedOutput(n: number): { count: number; sum: number; combined: string[] } {
  const mapped = Array.from({ length: n }, (_, i) => workerAnswer(`map ${i}`))
  const combined = mapped.map((a, i) => workerAnswer(`combine ${a} ${mapped[(i + 1) % n]}`))
  return { count: n, sum: combined.reduce((s, x) => s + Number(x), 0), combined }
}

/**
 * The scripted model for such a session: the lead starts the run with the start tool as the
 * request offers it (field names from its `tools`), then answers 'done' (its reading turn
 * included); a worker answers its prompt after `delayMs(prompt)`.
 */
export function runResponder(params: { n: number; delayMs: (prompt: string) => number; onWorker?: (prompt: string, req: RecordedRequest) => void }): (req: RecordedRequest) => ScriptStep {
  return (req) => {
    if (systemOf(req) === LEAD) {
      if (req.body.messages.length === 1) return toolCall(req, 'ant__workflow_run_start', { name: 'map-combine', phases: [{ name: 'map' }, { name: 'combine' }, { name: 'reduce' }], args: { n: params.n }, program: PROGRAM })
      return say(JSON.stringify(req.body.messages).includes('<workflow_run') ? 'Read the result.' : 'Started.')
    }
    const prompt = promptOf(req)
    params.onWorker?.(prompt, req)
    return say(workerAnswer(prompt), { delayMs: params.delayMs(prompt) })
  }
}

/** Creates the worker and the lead (workflows enabled with the worker predefined) and a session given 'go'; returns its id. */
export async function createRunSession(parent: Engine): Promise<string> {
  const worker = parent.services.agents.create({ name: 'worker', model: 'claude-sonnet-4-6', system: WORKER } as never)
  const lead = parent.services.agents.create({
    name: 'lead',
    model: 'claude-sonnet-4-6',
    system: LEAD,
    multiagent: { type: 'multiagent_20261001', workflows: { type: 'enabled', predefined_agents: [worker.id] } },
  } as never)
  const env = parent.services.environments.create({ name: 'wf-crash', config: { type: 'cloud' } })
  const s = await parent.services.sessions.create({ agent: lead.id, environment_id: env.id, initial_events: [{ type: 'user.message', content: [{ type: 'text', text: 'go' }] }] } as never)
  return s.id
}

/** Every event of a session, in order (read from the parent's handle on the shared file). */
export function eventsOf(parent: Engine, sessionId: string): LoggedEvent[] {
  const out: LoggedEvent[] = []
  for (;;) {
    const page = parent.services.log.read(sessionId, { after: out.length, limit: 1000 })
    out.push(...page.map((p) => p.event))
    if (page.length < 1000) return out
  }
}

export const field = <T>(e: LoggedEvent, k: string): T => (e as unknown as Record<string, T>)[k]

/** The session's work is done: its run ended and the lead, having read it, idled with end_turn. */
export function runFinished(events: readonly LoggedEvent[]): boolean {
  const last = events.at(-1) as (LoggedEvent & { stop_reason?: { type: string } }) | undefined
  return events.some((e) => e.type === 'workflow_run.status_ended') && last?.type === 'session.status_idle' && last.stop_reason?.type === 'end_turn'
}

/** The prompts whose agent is done in the log: its thread's idle with end_turn (a thread's task is its first thread_message_received). */
export function donePrompts(events: readonly LoggedEvent[]): Set<string> {
  const promptOfThread = new Map<string, string>()
  const done = new Set<string>()
  for (const e of events) {
    const tid = e.session_thread_id
    if (!tid) continue
    if (e.type === 'agent.thread_message_received' && !promptOfThread.has(tid)) promptOfThread.set(tid, field<{ text: string }[]>(e, 'content').map((b) => b.text).join(''))
    if (e.type === 'session.thread_status_idle' && field<{ type: string }>(e, 'stop_reason')?.type === 'end_turn' && promptOfThread.has(tid)) done.add(promptOfThread.get(tid)!)
  }
  return done
}
