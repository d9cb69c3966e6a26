import type { Readable, Writable } from 'node:stream'
import { CorralError } from '../../../shared/errors'
import { RunnerConnection } from './connection'

/** How much of a runner's stderr is kept to explain a failure. */
const STDERR_TAIL_CHARS = 2000

export interface RunnerStartParams {
  /** The runner's stdin. */
  input: Writable
  /** The runner's stdout (demultiplexed by the caller when it comes from Docker). */
  output: Readable
  /** The runner's stderr (or its launcher's: bwrap's); its last characters go into a start failure. */
  stderr: Readable
  /**
   * Runs once the connection listens, before the hello is awaited: starts the runner (Docker's
   * container start) or ties the process's own failure to the connection (bwrap). What it throws
   * is thrown as is.
   */
  start?: (connection: RunnerConnection) => Promise<void> | void
  helloTimeoutMs: number
  /** The error's opening when no hello comes: "the sandbox runner did not start". */
  failure: string
  /** How the stderr tail is introduced in that error: "its stderr", "bwrap said". */
  stderrLabel: string
  /** Ends what was started when no hello comes (bwrap: kill it); the connection is closed already. */
  abort?: () => void
}

export interface StartedRunner {
  connection: RunnerConnection
  /** The last characters the runner wrote to stderr (for a later diagnosis). */
  stderr: () => string
  /** What the runner said in its hello (its pid is the sandbox's own, e.g. the guest's in a VM). */
  hello: { pid: number; version: number; workspace: string }
}

/**
 * Connects to a runner, starts it and waits for its hello: the one way both backends bring a
 * runner up. A runner that does not say hello within `helloTimeoutMs` is a CorralError
 * sandbox_error that carries the tail of its stderr.
 */
export async function startRunner(p: RunnerStartParams): Promise<StartedRunner> {
  let stderrTail = ''
  p.stderr.on('data', (d: Buffer) => {
    stderrTail = (stderrTail + d.toString()).slice(-STDERR_TAIL_CHARS)
  })
  const connection = new RunnerConnection({ input: p.input, output: p.output })
  await p.start?.(connection)
  let hello: StartedRunner['hello']
  try {
    hello = await connection.hello(p.helloTimeoutMs)
  } catch (err) {
    connection.close('no hello')
    p.abort?.()
    throw new CorralError('sandbox_error', `${p.failure}: ${(err as Error).message}${stderrTail ? `; ${p.stderrLabel}: ${stderrTail.trim()}` : ''}`, { cause: err })
  }
  return { connection, stderr: () => stderrTail, hello }
}
