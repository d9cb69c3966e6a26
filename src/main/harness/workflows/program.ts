/**
 * The workflow program runner (issue #12): an agent-written program, the body of an async
 * function, run in QuickJS compiled to WebAssembly (quickjs-emscripten), never in Node's `vm`.
 *
 * The program sees only `agent(spec, prompt, options?)`, `phase(name, fn)`, `log(...values)` and
 * `args`: no `Date`, no `Math.random`, no timers, no `fetch`, no imports, no I/O, so the same
 * answers to its calls give the same calls (what replay after a crash relies on, replay.ts). A
 * memory cap and an instruction budget (QuickJS's interrupt handler, which it calls every few
 * thousand bytecode operations: deterministic for the same program) stop a runaway program with
 * a `program_error`.
 *
 * The runner acts on nothing: every call out of the program is handed to `hooks.onCall` with its
 * call index (the order of invocation, agent and phase calls alike), synchronously, and an
 * `agent()` call waits until its owner `settle`s it. Dispose with `dispose()`.
 */
import { getQuickJS, type QuickJSContext, type QuickJSHandle, type QuickJSRuntime, type QuickJSWASMModule } from 'quickjs-emscripten'

/** Who an `agent()` call asks: a name (a predefined agent, or "self") or an inline definition. */
export type AgentSpec = string | { name: string; system: string; description: string | null }

/** A call out of the program, with its call index. */
export type ProgramCall =
  | { kind: 'agent'; index: number; spec: AgentSpec; prompt: string; label: string | null }
  | { kind: 'phase_start'; index: number; name: string }
  | { kind: 'phase_end'; index: number; startIndex: number }

export type CallOutcome = { ok: true; value: string } | { ok: false; message: string }

/** How a program ended: returned (with its JSON output) or failed (threw, broke a rule, hit a limit). */
export type ProgramEnd = { type: 'returned'; output: unknown } | { type: 'failed'; message: string }

export interface ProgramHooks {
  /** Every call out of the program, in invocation order (synchronous; an agent call is answered later with `settle`). */
  onCall(call: ProgramCall): void
  /** A `log(...)` line (values joined by spaces, non-strings as JSON), in program order. */
  onLog(line: string): void
  /** Once, when the program's function settles or the program fails. */
  onEnd(end: ProgramEnd): void
}

export interface ProgramLimits {
  /** The QuickJS heap cap (default 64 MiB). */
  memoryBytes?: number
  /** Interrupt-handler ticks the program may use over its life (default 20,000: one tick is QuickJS's interrupt check, every 10,000 bytecode operations or so; 20,000 ticks is about ten seconds of pure CPU here). */
  instructionTicks?: number
  /** The interpreter's stack (default 512 KiB). */
  stackBytes?: number
}

export interface WorkflowProgramParams {
  source: string
  args: unknown
  hooks: ProgramHooks
  limits?: ProgramLimits
}

/** Where a syntax error is, in the program's own lines and columns (1-based). */
export interface ProgramSyntaxError {
  message: string
  line: number
  column: number
}

const FILE = 'workflow.js'
/** The program is the body of an async function; its first line is the file's second line. */
const PREFIX = '(async function (args, agent, phase, log) {\n'
const SUFFIX = '\n})'
const MAX_LOG_LINE = 4096
const OUT_OF_MEMORY = 'the program ran out of memory (its heap cap)'
/** Calls the program's function and reports how it settles (a value that is not JSON fails the run). */
const START = `(function (json, g, main, host) {
  const why = (e) => e instanceof Error ? e.name + ': ' + e.message : 'the program threw ' + (() => { try { return JSON.stringify(e) } catch (x) { return String(e) } })();
  main(JSON.parse(json), g.agent, g.phase, g.log).then((v) => {
    let s;
    try { s = JSON.stringify(v === undefined ? null : v) } catch (e) { host.fail('the program returned a value that is not JSON: ' + why(e)); return }
    host.done(s === undefined ? 'null' : s);
  }, (e) => host.fail(why(e)));
})`

/** Makes the global scope deterministic and defines the program's globals on top of the host's. */
const PRELUDE = `(function (host) {
  'use strict';
  delete globalThis.Date;
  Object.defineProperty(Math, 'random', { value: function random() { throw new Error('Math.random is not available in a workflow program: it must be deterministic'); } });
  const show = (v) => { if (typeof v === 'string') return v; try { const s = JSON.stringify(v); return s === undefined ? String(v) : s } catch (e) { return String(v) } };
  // An agent call crosses to the host once, its arguments as one JSON text; the promise it returns
  // lives here and is settled by the host through settle (a promise made by the host per call, and
  // each argument read separately, cost most of a call's time: 500 calls at every phase's start).
  const waiting = new Map();
  const agent = (spec, prompt, options) => {
    let json;
    try { json = JSON.stringify([spec === undefined ? null : spec, prompt === undefined ? null : prompt, options === undefined ? null : options]); }
    catch (e) { throw new TypeError('agent(spec, prompt, options): the arguments must be JSON values (' + e.message + ')'); }
    const index = host.agent(json);
    return new Promise((resolve, reject) => { waiting.set(index, [resolve, reject]); });
  };
  const settle = (index, ok, value) => {
    const w = waiting.get(index);
    if (!w) return;
    waiting.delete(index);
    if (ok) w[0](value);
    else { const e = new Error(value); e.name = 'AgentError'; w[1](e); }
  };
  const phase = async (name, fn) => {
    if (typeof fn !== 'function') throw new TypeError('phase(name, fn): fn must be a function');
    const i = host.phaseStart(String(name));
    try { return await fn(); } finally { host.phaseEnd(i); }
  };
  const log = (...values) => { host.log(values.map(show).join(' ')); };
  return { agent, phase, log, settle };
})`

let modulePromise: Promise<QuickJSWASMModule> | undefined
/** The shared QuickJS WebAssembly module (loaded once per process). */
export function quickJS(): Promise<QuickJSWASMModule> {
  return (modulePromise ??= getQuickJS())
}

/**
 * Checks that `source` parses as a program body, without running it: undefined, or the
 * syntax error with its line and column in the program's own text.
 */
export function checkProgramSyntax(module: QuickJSWASMModule, source: string): ProgramSyntaxError | undefined {
  const rt = module.newRuntime()
  const ctx = rt.newContext()
  try {
    // compiled, not called: the function expression's body is parsed but nothing in it runs
    const r = ctx.evalCode(PREFIX + source + SUFFIX, FILE)
    if (!r.error) {
      r.value.dispose()
      return undefined
    }
    const e = ctx.dump(r.error) as { name?: string; message?: string; stack?: string; lineNumber?: number }
    r.error.dispose()
    const at = positionOf(e)
    // an error found only at the closing brace Corral adds (an unclosed bracket) is at the program's end
    const lines = source.split('\n')
    if (at.line > lines.length) return { message: `${e.name ?? 'SyntaxError'}: ${e.message ?? 'the program does not parse'} (at the end of the program)`, line: lines.length, column: lines[lines.length - 1].length + 1 }
    return { message: `${e.name ?? 'SyntaxError'}: ${e.message ?? 'the program does not parse'}`, ...at }
  } finally {
    ctx.dispose()
    rt.dispose()
  }
}

function positionOf(e: { stack?: string; lineNumber?: number }): { line: number; column: number } {
  const m = /workflow\.js:(\d+):(\d+)/.exec(e.stack ?? '')
  const line = (m ? Number(m[1]) : (e.lineNumber ?? 2)) - 1
  return { line: Math.max(1, line), column: m ? Number(m[2]) : 1 }
}

/**
 * One program, one QuickJS runtime. `start()` runs it up to its first wait; each `settle`
 * answers an agent call and runs the program on up to its next wait. After `onEnd` every call
 * is a no-op.
 */
export class WorkflowProgram {
  private readonly rt: QuickJSRuntime
  private readonly ctx: QuickJSContext
  /** The prelude's `settle(index, ok, value)`: answers an agent call's promise, which lives in the VM (an index not waiting there is ignored). */
  private settleFn: QuickJSHandle | undefined
  private nextIndex = 0
  private ticks = 0
  private readonly maxTicks: number
  private endedWith: ProgramEnd | undefined
  private disposed = false
  /** Why the interpreter was stopped from outside (a limit or `abort`): the error the program fails with. */
  private stopReason: string | undefined

  constructor(
    module: QuickJSWASMModule,
    private readonly p: WorkflowProgramParams,
  ) {
    this.rt = module.newRuntime()
    this.rt.setMemoryLimit(p.limits?.memoryBytes ?? 64 * 1024 * 1024)
    this.rt.setMaxStackSize(p.limits?.stackBytes ?? 512 * 1024)
    this.maxTicks = p.limits?.instructionTicks ?? 20_000
    this.rt.setInterruptHandler(() => {
      if (this.stopReason) return true
      if (++this.ticks > this.maxTicks) {
        this.stopReason = `the program ran past its instruction budget (${this.maxTicks} ticks)`
        return true
      }
      return false
    })
    // imports resolve nothing: a program has no modules to load
    this.rt.setModuleLoader((name) => ({ error: new Error(`import of ${JSON.stringify(name)}: a workflow program cannot import modules`) }))
    this.ctx = this.rt.newContext()
  }

  /** How the program ended, once it has. */
  get ended(): ProgramEnd | undefined {
    return this.endedWith
  }

  /** The call indexes handed out so far. */
  get callCount(): number {
    return this.nextIndex
  }

  /** Runs the program up to its first wait. */
  start(): void {
    if (this.nextIndex > 0 || this.endedWith || this.disposed) return
    const ctx = this.ctx
    const host = ctx.newObject()
    const fns: [string, QuickJSHandle][] = [
      ['agent', ctx.newFunction('agent', (json) => this.agentCall(json))],
      ['phaseStart', ctx.newFunction('phaseStart', (name) => ctx.newNumber(this.call({ kind: 'phase_start', index: this.nextIndex, name: ctx.getString(name) })))],
      [
        'phaseEnd',
        ctx.newFunction('phaseEnd', (start) => {
          this.call({ kind: 'phase_end', index: this.nextIndex, startIndex: ctx.getNumber(start) })
          return ctx.undefined
        }),
      ],
      [
        'log',
        ctx.newFunction('log', (line) => {
          const text = ctx.getString(line)
          this.p.hooks.onLog(text.length > MAX_LOG_LINE ? `${text.slice(0, MAX_LOG_LINE)}…` : text)
          return ctx.undefined
        }),
      ],
      ['done', ctx.newFunction('done', (json) => (this.finish({ type: 'returned', output: JSON.parse(ctx.getString(json)) }), ctx.undefined))],
      ['fail', ctx.newFunction('fail', (message) => (this.failedInVm(ctx.getString(message)), ctx.undefined))],
    ]
    for (const [name, fn] of fns) {
      ctx.setProp(host, name, fn)
      fn.dispose()
    }
    const free = (...hs: (QuickJSHandle | undefined)[]) => hs.forEach((h) => h?.dispose())
    const prelude = this.evaluate(PRELUDE, 'prelude.js')
    const main = prelude && this.evaluate(PREFIX + this.p.source + SUFFIX, FILE)
    const globals = main && this.callHandle(prelude!, [host])
    if (globals) this.settleFn = ctx.getProp(globals, 'settle')
    const begin = globals && this.evaluate(START, 'start.js')
    const argsJson = ctx.newString(JSON.stringify(this.p.args ?? null) ?? 'null')
    // the function's settlement reaches the host through host.done / host.fail (a `then` in the VM)
    const r = begin && this.callHandle(begin, [argsJson, globals!, main!, host])
    free(r, begin, argsJson, globals, main, prelude, host)
    this.runJobs()
  }

  /** Answers an agent call (its index from `onCall`): resolves with the agent's text or rejects with an Error naming why. */
  settle(index: number, outcome: CallOutcome): void {
    if (!this.settleFn || this.endedWith || this.disposed) return
    const ctx = this.ctx
    const i = ctx.newNumber(index)
    const v = ctx.newString(outcome.ok ? outcome.value : outcome.message)
    const r = this.callHandle(this.settleFn, [i, outcome.ok ? ctx.true : ctx.false, v])
    r?.dispose()
    i.dispose()
    v.dispose()
    this.runJobs()
  }

  /** Ends the program from outside (a limit the host enforces): onEnd with this message, nothing more runs. */
  fail(message: string): void {
    this.finish({ type: 'failed', message })
  }

  dispose(): void {
    if (this.disposed) return
    this.disposed = true
    this.settleFn?.dispose()
    this.ctx.dispose()
    this.rt.dispose()
  }

  private call(c: ProgramCall): number {
    if (this.endedWith) throw new Error('the program has ended')
    this.nextIndex = c.index + 1
    this.p.hooks.onCall(c)
    return c.index
  }

  /** `json`: the call's `[spec, prompt, options]` (undefined as null). Returns the call's index; the VM keeps its promise. */
  private agentCall(jsonH: QuickJSHandle): QuickJSHandle {
    const ctx = this.ctx
    const bad = (message: string) => {
      throw ctx.newError({ name: 'TypeError', message: `agent(spec, prompt, options): ${message}` })
    }
    const [spec, prompt, options] = JSON.parse(ctx.getString(jsonH)) as [any, unknown, any]
    let agentSpec: AgentSpec
    if (typeof spec === 'string' && spec.length > 0) agentSpec = spec
    else if (spec && typeof spec === 'object' && typeof spec.name === 'string' && spec.name && typeof spec.system === 'string' && spec.system) {
      if (spec.description !== undefined && spec.description !== null && typeof spec.description !== 'string') bad('spec.description must be a string')
      agentSpec = { name: spec.name, system: spec.system, description: spec.description ?? null }
    } else return bad('spec must be an agent name (a predefined agent or "self") or { name, system, description? }')
    if (typeof prompt !== 'string' || !prompt.trim()) bad('prompt must be a non-empty string')
    if (options !== null && (typeof options !== 'object' || Array.isArray(options))) bad('options must be an object { label? }')
    const label = options?.label ?? null
    if (label !== null && typeof label !== 'string') bad('options.label must be a string')
    const index = this.nextIndex
    this.call({ kind: 'agent', index, spec: agentSpec, prompt: prompt as string, label })
    return ctx.newNumber(index)
  }

  private finish(end: ProgramEnd): void {
    if (this.endedWith) return
    this.endedWith = end
    this.stopReason ??= 'the program has ended'
    this.p.hooks.onEnd(end)
  }

  /** Runs the VM's queued jobs (promise continuations) until none is left or the program fails. */
  private runJobs(): void {
    while (!this.endedWith && !this.disposed) {
      const r = this.rt.executePendingJobs()
      if (r.error) {
        this.failFrom(r.error)
        r.error.dispose()
        return
      }
      if (r.value === 0) return
    }
  }

  private evaluate(code: string, file: string): QuickJSHandle | undefined {
    const r = this.ctx.evalCode(code, file)
    if (r.error) {
      this.failFrom(r.error)
      r.error.dispose()
      return undefined
    }
    return r.value
  }

  private callHandle(fn: QuickJSHandle, args: QuickJSHandle[]): QuickJSHandle | undefined {
    const r = this.ctx.callFunction(fn, this.ctx.undefined, ...args)
    if (r.error) {
      this.failFrom(r.error)
      r.error.dispose()
      return undefined
    }
    return r.value
  }

  /** The program's function rejected: an interrupt or the heap cap surface here too, as the error they raised. */
  private failedInVm(message: string): void {
    if (this.stopReason) return this.finish({ type: 'failed', message: this.stopReason })
    if (message === 'InternalError: out of memory') return this.finish({ type: 'failed', message: OUT_OF_MEMORY })
    this.finish({ type: 'failed', message })
  }

  private failFrom(error: QuickJSHandle): void {
    if (this.endedWith) return
    const e = this.ctx.dump(error) as { name?: string; message?: string; stack?: string } | string
    if (this.stopReason) return this.finish({ type: 'failed', message: this.stopReason })
    if (typeof e === 'object' && e && e.name === 'InternalError' && e.message === 'out of memory') return this.finish({ type: 'failed', message: OUT_OF_MEMORY })
    if (typeof e === 'object' && e && e.name === 'SyntaxError') return this.finish({ type: 'failed', message: `SyntaxError: ${e.message} at line ${positionOf(e).line}, column ${positionOf(e).column}` })
    const text = typeof e === 'object' && e ? `${e.name ?? 'Error'}: ${e.message ?? ''}` : String(e)
    this.finish({ type: 'failed', message: text })
  }
}
