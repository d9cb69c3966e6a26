/**
 * Where a process a bench forks (a scripted model in a process of its own) is, and how to start
 * it: built beside the bench in out/bench (`npm run bench`, scripts/bench.mjs) it is `<name>.js`
 * run by plain node; run from the sources (CORRAL_BENCH_SOURCE=1) it is the TypeScript file at
 * `source` (relative to the repository) through tsx.
 */
import { fork } from 'node:child_process'
import { join } from 'node:path'

/** Whether this bench runs from its build (out/bench) rather than from bench/*.ts through tsx. */
export const BUILT = __filename.endsWith('.js')

export function benchChild(name: string, source: string): { path: string; execArgv: string[] } {
  if (BUILT) return { path: join(__dirname, `${name}.js`), execArgv: [] }
  return { path: join(__dirname, '..', source), execArgv: ['--import', 'tsx'] }
}

/** A scripted model forked by a bench: its URL, questions over IPC, its CPU time, and its end. */
export interface ModelChild {
  url: string
  /** Sends `question` and resolves with the next message that carries `answerKey`. */
  ask<T>(question: Record<string, unknown>, answerKey: string): Promise<T>
  /** The process's CPU time so far (user + system, ms): it answers `{ cpu: true }` with `{ cpuMs }`. */
  cpuMs(): Promise<number>
  /** Disconnects it (it closes its server and exits) and waits for its exit. */
  close(): Promise<void>
}

/**
 * Forks the model process `name` (benchChild) with `argv` and waits for its `{ url }`;
 * `onMessage` hears every message it sends (for what it reports unasked).
 */
export async function forkModel(name: string, source: string, argv: string[], onMessage?: (m: Record<string, unknown>) => void): Promise<ModelChild> {
  const script = benchChild(name, source)
  const child = fork(script.path, argv, { execArgv: script.execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const waiting = new Map<string, (m: Record<string, unknown>) => void>()
  const url = await new Promise<string>((resolve, reject) => {
    child.on('message', (m: Record<string, unknown>) => {
      if (typeof m.url === 'string') resolve(m.url)
      onMessage?.(m)
      for (const key of Object.keys(m)) {
        const answer = waiting.get(key)
        if (!answer) continue
        waiting.delete(key)
        answer(m)
      }
    })
    child.once('exit', (code) => reject(new Error(`the scripted model process (${name}) exited (${code})`)))
  })
  const ask = <T>(question: Record<string, unknown>, answerKey: string) =>
    new Promise<T>((resolve) => {
      waiting.set(answerKey, (m) => resolve(m as T))
      child.send(question)
    })
  return {
    url,
    ask,
    cpuMs: () => ask<{ cpuMs: number }>({ cpu: true }, 'cpuMs').then((m) => m.cpuMs),
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || !child.connected) return resolve()
        child.once('exit', () => resolve())
        child.disconnect()
      }),
  }
}
