import { beforeAll, describe, expect, it } from 'vitest'
import type { QuickJSWASMModule } from 'quickjs-emscripten'
import { checkProgramSyntax, quickJS, WorkflowProgram, type CallOutcome, type ProgramCall, type ProgramEnd, type ProgramLimits } from '../../../../src/main/harness/workflows/program'

let qjs: QuickJSWASMModule
beforeAll(async () => {
  qjs = await quickJS()
})

interface Trace {
  calls: ProgramCall[]
  logs: string[]
  end?: ProgramEnd
  program: WorkflowProgram
}

/** Starts a program that records what it does. */
function run(source: string, args: unknown = null, limits?: ProgramLimits): Trace {
  const t = { calls: [], logs: [] } as unknown as Trace
  t.program = new WorkflowProgram(qjs, {
    source,
    args,
    limits,
    hooks: { onCall: (c) => t.calls.push(c), onLog: (l) => t.logs.push(l), onEnd: (e) => (t.end = e) },
  })
  t.program.start()
  return t
}

/** Answers the program's open agent calls one at a time, in the order `pick` chooses, until it ends. */
function drive(t: Trace, answer: (c: Extract<ProgramCall, { kind: 'agent' }>) => CallOutcome, pick: (open: number[]) => number = (open) => open[0]): number[] {
  const settled = new Set<number>()
  const order: number[] = []
  while (!t.end) {
    const open = t.calls.filter((c): c is Extract<ProgramCall, { kind: 'agent' }> => c.kind === 'agent' && !settled.has(c.index)).map((c) => c.index)
    if (!open.length) break
    const i = pick(open)
    settled.add(i)
    order.push(i)
    t.program.settle(i, answer(t.calls[i] as Extract<ProgramCall, { kind: 'agent' }>))
  }
  return order
}

const FAN_OUT = `
  const files = args.files
  const reviews = await phase('review', () => Promise.all(files.map((f) => agent('reviewer', 'review ' + f, { label: f }))))
  log('reviewed', reviews.length, { first: reviews[0] })
  const summary = await phase('summarise', () => agent({ name: 'writer', system: 'You summarise.' }, 'summarise: ' + reviews.join(' | ')))
  return { summary, count: reviews.length }
`

describe('the workflow program runner (QuickJS in WebAssembly)', () => {
  it('hands every agent and phase call out with its call index, and ends with the JSON the function returns', () => {
    const t = run(FAN_OUT, { files: ['a.ts', 'b.ts'] })
    expect(t.calls).toEqual([
      { kind: 'phase_start', index: 0, name: 'review' },
      { kind: 'agent', index: 1, spec: 'reviewer', prompt: 'review a.ts', label: 'a.ts' },
      { kind: 'agent', index: 2, spec: 'reviewer', prompt: 'review b.ts', label: 'b.ts' },
    ])
    drive(t, (c) => ({ ok: true, value: `ok:${c.prompt}` }))
    expect(t.calls.slice(3)).toEqual([
      { kind: 'phase_end', index: 3, startIndex: 0 },
      { kind: 'phase_start', index: 4, name: 'summarise' },
      { kind: 'agent', index: 5, spec: { name: 'writer', system: 'You summarise.', description: null }, prompt: 'summarise: ok:review a.ts | ok:review b.ts', label: null },
      { kind: 'phase_end', index: 6, startIndex: 4 },
    ])
    expect(t.logs).toEqual(['reviewed 2 {"first":"ok:review a.ts"}'])
    expect(t.end).toEqual({ type: 'returned', output: { summary: 'ok:summarise: ok:review a.ts | ok:review b.ts', count: 2 } })
    t.program.dispose()
  })

  it('makes the same calls and the same output when the same answers arrive in the same completion order (replay)', () => {
    const source = `
      const first = await Promise.race([agent('a', 'one'), agent('b', 'two'), agent('c', 'three')])
      const next = await agent('d', 'after ' + first)
      return [first, next]
    `
    const answer = (c: Extract<ProgramCall, { kind: 'agent' }>): CallOutcome => ({ ok: true, value: String(c.spec) })
    const original = run(source)
    const order = drive(original, answer, (open) => open[open.length - 1]) // c finishes first
    const replay = run(source)
    let k = 0
    drive(replay, answer, (open) => {
      const next = order[k++]
      expect(open).toContain(next)
      return next
    })
    expect(replay.calls).toEqual(original.calls)
    expect(replay.end).toEqual(original.end)
    expect(original.end).toEqual({ type: 'returned', output: ['c', 'd'] })
    expect(original.calls[3]).toMatchObject({ spec: 'd', prompt: 'after c' })
    // another completion order is another run: the program branches on it
    const other = run(source)
    drive(other, answer)
    expect(other.calls[3]).toMatchObject({ spec: 'd', prompt: 'after a' })
    for (const t of [original, replay, other]) t.program.dispose()
  })

  it('reports a syntax error with the line and column of the program itself', () => {
    expect(checkProgramSyntax(qjs, 'const a = 1\nconst b = (2 +\n')).toEqual({ line: 3, column: 1, message: "SyntaxError: unexpected token in expression: '}' (at the end of the program)" })
    expect(checkProgramSyntax(qjs, 'let x = 1\n  foo( ;')).toEqual({ message: "SyntaxError: unexpected token in expression: ';'", line: 2, column: 8 })
    expect(checkProgramSyntax(qjs, 'return await agent("self", "hi")')).toBeUndefined()
  })

  it('gives the program no clock, no randomness, no timers, no fetch and no imports', () => {
    const t = run(`return [typeof Date, typeof setTimeout, typeof setInterval, typeof fetch, typeof require, typeof process]`)
    expect(t.end).toEqual({ type: 'returned', output: ['undefined', 'undefined', 'undefined', 'undefined', 'undefined', 'undefined'] })
    const r = run(`return Math.random()`)
    expect(r.end).toEqual({ type: 'failed', message: 'Error: Math.random is not available in a workflow program: it must be deterministic' })
    const i = run(`return await import('node:fs')`)
    expect(i.end?.type).toBe('failed')
    expect((i.end as { message: string }).message).toContain('cannot import')
    for (const x of [t, r, i]) x.program.dispose()
  })

  it('stops a program that runs past its instruction budget with a program error', () => {
    const t = run(`let n = 0; for (;;) n++`, null, { instructionTicks: 50 })
    expect(t.end).toEqual({ type: 'failed', message: 'the program ran past its instruction budget (50 ticks)' })
    // the budget counts over the program's life, across its waits
    const w = run(`await agent('a', 'x'); let n = 0; for (;;) n++`, null, { instructionTicks: 50 })
    expect(w.end).toBeUndefined()
    w.program.settle(0, { ok: true, value: 'done' })
    expect(w.end).toEqual({ type: 'failed', message: 'the program ran past its instruction budget (50 ticks)' })
    t.program.dispose()
    w.program.dispose()
  })

  it('stops a program that grows past its memory cap with a program error', () => {
    const t = run(`const a = []; for (;;) a.push('x'.repeat(1000) + a.length)`, null, { memoryBytes: 4 * 1024 * 1024 })
    expect(t.end).toEqual({ type: 'failed', message: 'the program ran out of memory (its heap cap)' })
    t.program.dispose()
  })

  it('rejects an agent call with an Error naming why, which the program may catch or let end the run', () => {
    const caught = run(`try { await agent('a', 'x') } catch (e) { return 'caught ' + e.name + ': ' + e.message }`)
    caught.program.settle(0, { ok: false, message: 'thread sthr_1 failed: model retries exhausted' })
    expect(caught.end).toEqual({ type: 'returned', output: 'caught AgentError: thread sthr_1 failed: model retries exhausted' })
    const uncaught = run(`return await agent('a', 'x')`)
    uncaught.program.settle(0, { ok: false, message: 'thread sthr_1 failed: refusal' })
    expect(uncaught.end).toEqual({ type: 'failed', message: 'AgentError: thread sthr_1 failed: refusal' })
    caught.program.dispose()
    uncaught.program.dispose()
  })

  it('throws a TypeError into the program for an agent call with a bad spec, prompt or options', () => {
    const t = run(`
      const out = []
      for (const [s, p, o] of [[42, 'x'], ['a', ''], [{ name: 'n' }, 'x'], ['a', 'x', { label: 3 }]]) {
        try { agent(s, p, o) } catch (e) { out.push(e.name + ': ' + e.message) }
      }
      const loop = { name: 'n', system: 's' }
      loop.self = loop
      try { agent(loop, 'x') } catch (e) { out.push(e.name + ': ' + e.message.split(' (')[0]) }
      return out
    `)
    expect(t.calls).toEqual([])
    expect(t.end).toEqual({
      type: 'returned',
      output: [
        'TypeError: agent(spec, prompt, options): spec must be an agent name (a predefined agent or "self") or { name, system, description? }',
        'TypeError: agent(spec, prompt, options): prompt must be a non-empty string',
        'TypeError: agent(spec, prompt, options): spec must be an agent name (a predefined agent or "self") or { name, system, description? }',
        'TypeError: agent(spec, prompt, options): options.label must be a string',
        'TypeError: agent(spec, prompt, options): the arguments must be JSON values',
      ],
    })
    t.program.dispose()
  })

  it('fails a program that throws, or returns a value that is not JSON, naming what happened', () => {
    const thrown = run(`throw new RangeError('no files')`)
    expect(thrown.end).toEqual({ type: 'failed', message: 'RangeError: no files' })
    const cyclic = run(`const a = {}; a.a = a; return a`)
    expect(cyclic.end?.type).toBe('failed')
    expect((cyclic.end as { message: string }).message).toContain('not JSON')
    const nothing = run(`log('only a log line')`)
    expect(nothing.end).toEqual({ type: 'returned', output: null })
    expect(nothing.logs).toEqual(['only a log line'])
    for (const x of [thrown, cyclic, nothing]) x.program.dispose()
  })

  it('ends the program from outside with the host\'s message, after which no call and no answer is taken', () => {
    const t = run(`await agent('a', 'x'); await agent('b', 'y')`)
    t.program.fail('the run asked for more than 1000 agents')
    t.program.settle(0, { ok: true, value: 'late' })
    expect(t.end).toEqual({ type: 'failed', message: 'the run asked for more than 1000 agents' })
    expect(t.calls.map((c) => c.index)).toEqual([0])
    t.program.dispose()
  })
})
