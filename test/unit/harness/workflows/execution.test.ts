import { createHash } from 'node:crypto'
import { beforeAll, describe, expect, it } from 'vitest'
import type { QuickJSWASMModule } from 'quickjs-emscripten'
import { quickJS } from '../../../../src/main/harness/workflows/program'
import { WorkflowExecution, type AgentCall, type ExecutionEnd, type ExecutionHost, type JournalRow } from '../../../../src/main/harness/workflows/execution'

let qjs: QuickJSWASMModule
beforeAll(async () => {
  qjs = await quickJS()
})

/**
 * A host that keeps a journal the way the orchestrator does: a row per started agent (its
 * thread), per phase start and end; a result and completion order once an agent is done.
 */
class RecordingHost implements ExecutionHost {
  readonly journal = new Map<number, JournalRow>()
  readonly started: AgentCall[] = []
  readonly attached: number[] = []
  readonly phaseEvents: string[] = []
  readonly logs: string[] = []
  end?: { end: ExecutionEnd; open: string[] }
  private seq = 0
  private phaseNo = 0

  startAgent(call: AgentCall, argsHash: string): void {
    this.started.push(call)
    this.journal.set(call.index, { index: call.index, kind: 'agent', argsHash, threadId: `sthr_${call.index}`, phaseId: null, outcome: null, resolvedSeq: null })
  }
  attachAgent(call: AgentCall): void {
    this.attached.push(call.index)
  }
  phaseStarted(call: { index: number; name: string }, argsHash: string): string {
    const id = `wrph_${++this.phaseNo}`
    this.phaseEvents.push(`started ${call.name} ${id}`)
    this.journal.set(call.index, { index: call.index, kind: 'phase_start', argsHash, threadId: null, phaseId: id, outcome: null, resolvedSeq: null })
    return id
  }
  phaseEnded(call: { index: number }, phaseId: string, argsHash: string): void {
    this.phaseEvents.push(`ended ${phaseId}`)
    this.journal.set(call.index, { index: call.index, kind: 'phase_end', argsHash, threadId: null, phaseId: null, outcome: null, resolvedSeq: null })
  }
  log(line: string): void {
    this.logs.push(line)
  }
  ended(end: ExecutionEnd, open: string[]): void {
    this.end = { end, open }
  }
  /** The agent's thread finished: the row gets its result and completion order, then the run hears of it. */
  finish(x: WorkflowExecution, index: number, value: string): void {
    const row = this.journal.get(index)!
    row.outcome = { ok: true, value }
    row.resolvedSeq = ++this.seq
    x.complete(index, row.outcome)
  }
  rows(): JournalRow[] {
    return [...this.journal.values()].map((r) => ({ ...r }))
  }
}

function execution(source: string, host: ExecutionHost, opts: { journal?: JournalRow[]; maxConcurrent?: number; maxAgents?: number; args?: unknown; ticks?: number } = {}): WorkflowExecution {
  const x = new WorkflowExecution({ module: qjs, source, args: opts.args ?? null, journal: opts.journal ?? [], host, maxConcurrent: opts.maxConcurrent, maxAgents: opts.maxAgents, program: opts.ticks ? { instructionTicks: opts.ticks } : undefined })
  x.start()
  return x
}

const FAN_OUT = `
  const answers = await phase('work', () => Promise.all(args.items.map((i) => agent('worker', 'do ' + i))))
  const first = await Promise.race([agent('a', 'x'), agent('b', 'y')])
  return { answers, first }
`

describe('a workflow run\'s execution: journal, replay and limits', () => {
  it('runs at most maxConcurrent agents at once and starts a waiting call, in call order, when one finishes', () => {
    const host = new RecordingHost()
    const x = execution(FAN_OUT, host, { maxConcurrent: 2, args: { items: [1, 2, 3, 4] } })
    expect(host.started.map((c) => c.index)).toEqual([1, 2])
    expect(x.waiting).toBe(2)
    host.finish(x, 2, 'two')
    expect(host.started.map((c) => c.index)).toEqual([1, 2, 3])
    for (const i of [1, 3]) host.finish(x, i, `r${i}`)
    host.finish(x, 4, 'r4')
    expect(host.phaseEvents).toEqual(['started work wrph_1', 'ended wrph_1'])
    expect(host.started.map((c) => c.prompt)).toEqual(['do 1', 'do 2', 'do 3', 'do 4', 'x', 'y'])
    host.finish(x, 7, 'y first')
    expect(host.end).toEqual({ end: { type: 'completed', output: { answers: ['r1', 'two', 'r3', 'r4'], first: 'y first' } }, open: [] })
    x.dispose()
  })

  it("gives a finished call's slot to the next waiting call at release, before its result reaches the program, and only once", () => {
    const host = new RecordingHost()
    const x = execution(FAN_OUT, host, { maxConcurrent: 2, args: { items: [1, 2, 3, 4] } })
    expect(host.started.map((c) => c.index)).toEqual([1, 2])
    // the orchestrator releases at the commit that records the result: the next thread starts in it
    x.release(1)
    expect(host.started.map((c) => c.index)).toEqual([1, 2, 3])
    expect(x.working).toBe(2)
    x.release(1)
    host.finish(x, 1, 'r1')
    // neither a second release nor the completion frees the slot again
    expect(host.started.map((c) => c.index)).toEqual([1, 2, 3])
    expect(x.working).toBe(2)
    for (const i of [2, 3, 4]) host.finish(x, i, `r${i}`)
    expect(host.started.map((c) => c.prompt)).toEqual(['do 1', 'do 2', 'do 3', 'do 4', 'x', 'y'])
    host.finish(x, 6, 'x first')
    expect(host.end?.end).toEqual({ type: 'completed', output: { answers: ['r1', 'r2', 'r3', 'r4'], first: 'x first' } })
    x.dispose()
  })

  it('replays a crashed run from its journal: finished calls resolve in their recorded order, unfinished ones re-attach, no phase is written again', () => {
    const host = new RecordingHost()
    const x = execution(FAN_OUT, host, { args: { items: [1, 2, 3] } })
    host.finish(x, 3, 'r3')
    host.finish(x, 1, 'r1')
    host.finish(x, 2, 'r2')
    host.finish(x, 6, 'b won') // agent b (index 6) before a (index 5)
    const full = host.rows()
    x.dispose()
    // the same program over the whole journal: nothing starts, nothing is written, the same output
    const again = new RecordingHost()
    const y = execution(FAN_OUT, again, { journal: full, args: { items: [1, 2, 3] } })
    expect(again.started).toEqual([])
    expect(again.phaseEvents).toEqual([])
    expect(again.end).toEqual(host.end)
    expect(host.end?.end).toEqual({ type: 'completed', output: { answers: ['r1', 'r2', 'r3'], first: 'b won' } })
    y.dispose()
    // a crash after two of the three workers: those resolve, the third re-attaches to its living thread
    const partial = full.filter((r) => r.index <= 3).map((r) => (r.index === 2 ? { ...r, outcome: null, resolvedSeq: null } : r))
    const later = new RecordingHost()
    const z = execution(FAN_OUT, later, { journal: partial, args: { items: [1, 2, 3] } })
    expect(later.started).toEqual([])
    expect(later.attached).toEqual([2])
    z.complete(2, { ok: true, value: 'r2' })
    expect(later.phaseEvents).toEqual(['ended wrph_1']) // the phase's end was not journaled yet: written now, its start was not
    expect(later.started.map((c) => c.index)).toEqual([5, 6])
    z.dispose()
  })

  it('delivers recorded completions in completion order, so a program that branches on which finished first takes the same branch', () => {
    const source = `const w = await Promise.race([agent('a', '1'), agent('b', '2')]); return await agent(w, 'next')`
    const host = new RecordingHost()
    const x = execution(source, host)
    host.finish(x, 1, 'b')
    host.finish(x, 0, 'a')
    expect(host.started.map((c) => c.spec)).toEqual(['a', 'b', 'b'])
    const journal = host.rows()
    x.dispose()
    const again = new RecordingHost()
    const y = execution(source, again, { journal })
    expect(again.started).toEqual([])
    expect(again.attached).toEqual([2])
    y.dispose()
  })

  it("journals every call under the same arguments hash whether it started at once or waited for a slot (SHA-256 of its JSON, the first 32 hex digits, as journals written before keep replaying)", () => {
    const sha = (what: unknown) => createHash('sha256').update(JSON.stringify(what)).digest('hex').slice(0, 32)
    const host = new RecordingHost()
    const x = execution(FAN_OUT, host, { maxConcurrent: 1, args: { items: [1, 2] } })
    host.finish(x, 1, 'one')
    const rows = host.rows()
    expect(rows.find((r) => r.index === 0)?.argsHash).toBe(sha({ kind: 'phase_start', name: 'work' }))
    expect(rows.find((r) => r.index === 1)?.argsHash).toBe(sha({ kind: 'agent', spec: 'worker', prompt: 'do 1', label: null }))
    // call 2 waited for call 1's slot: its hash is the same as if it had started at once
    expect(rows.find((r) => r.index === 2)?.argsHash).toBe(sha({ kind: 'agent', spec: 'worker', prompt: 'do 2', label: null }))
    x.dispose()
  })

  it('ends a run whose program diverges from its journal with a program error naming the call', () => {
    const host = new RecordingHost()
    const x = execution(`return await agent('a', 'first prompt')`, host)
    host.finish(x, 0, 'done')
    const journal = host.rows()
    x.dispose()
    const changed = new RecordingHost()
    const y = execution(`return await agent('a', 'another prompt')`, changed, { journal })
    expect(changed.started).toEqual([])
    expect(changed.end?.end).toEqual({ type: 'error', error: { type: 'program_error', message: 'the program diverged from its journal: call 0 is agent("a") but the journal\'s call 0 was an agent call with other arguments' } })
    y.dispose()
    const skipped = new RecordingHost()
    const z = execution(`return 'nothing'`, skipped, { journal })
    expect(skipped.end?.end).toMatchObject({ type: 'error', error: { type: 'program_error', message: expect.stringContaining("the journal's call 0 (an agent on thread sthr_0) finished in the recorded run") } })
    z.dispose()
  })

  it('ends the run with thread_limit_error at the agent call past the limit, which the program cannot catch', () => {
    const host = new RecordingHost()
    const x = execution(`const out = []; for (let i = 0; i < 4; i++) { try { out.push(agent('w', 'job ' + i)) } catch (e) { return 'caught ' + e.message } } return await Promise.all(out)`, host, { maxAgents: 3, maxConcurrent: 2 })
    expect(host.end?.end).toEqual({ type: 'error', error: { type: 'thread_limit_error', message: 'the program asked for more than 3 agents (call 3)' } })
    x.dispose()
  })

  it("ends a run whose return value passes 65,536 characters of JSON with program_error naming the rule, and completes one at the cap", () => {
    const atCap = new RecordingHost()
    const x = execution(`return 'x'.repeat(65534)`, atCap)
    expect(atCap.end?.end).toEqual({ type: 'completed', output: 'x'.repeat(65534) })
    x.dispose()
    const over = new RecordingHost()
    const y = execution(`return { big: 'x'.repeat(70000) }`, over)
    expect(over.end?.end).toEqual({
      type: 'error',
      error: { type: 'program_error', message: "the program returned 70010 characters of JSON; a run's output may be at most 65536 (leave large results in files and return their paths)" },
    })
    y.dispose()
  })

  it('names the phases a failing program left open, so their ends are written before the run ends', () => {
    const host = new RecordingHost()
    const x = execution(`await phase('outer', async () => { await agent('w', 'x'); throw new Error('bad result') })`, host)
    host.finish(x, 1, 'r')
    expect(host.end).toEqual({ end: { type: 'error', error: { type: 'program_error', message: 'Error: bad result' } }, open: [] })
    expect(host.phaseEvents).toEqual(['started outer wrph_1', 'ended wrph_1']) // phase's finally ended it
    x.dispose()
    // ended from outside (the agent limit) inside a phase: the phase is still open
    const stuck = new RecordingHost()
    const y = execution(`await phase('p', async () => { agent('w', '1'); agent('w', '2') })`, stuck, { maxAgents: 1 })
    expect(stuck.end).toEqual({ end: { type: 'error', error: { type: 'thread_limit_error', message: 'the program asked for more than 1 agents (call 2)' } }, open: ['wrph_1'] })
    y.dispose()
  })
})
