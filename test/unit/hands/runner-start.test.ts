import { PassThrough } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { CorralError } from '../../../src/shared/errors'
import { startRunner } from '../../../src/main/hands/runner/start'

/** A runner's three streams in memory; `hello` answers the host's hello on stdout. */
function streams(options: { hello: boolean }) {
  const input = new PassThrough()
  const output = new PassThrough()
  const stderr = new PassThrough()
  input.on('data', (d: Buffer) => {
    for (const line of d.toString().split('\n').filter(Boolean)) {
      const req = JSON.parse(line) as { rid: string; op: string; nonce?: string }
      if (options.hello && req.op === 'hello') output.write(JSON.stringify({ rid: req.rid, type: 'hello', nonce: req.nonce, pid: 42, version: 1, workspace: '/workspace' }) + '\n')
    }
  })
  return { input, output, stderr }
}

describe('startRunner: start a runner, wait for its hello', () => {
  it('runs the start step once the connection listens and resolves with an open connection after the hello', async () => {
    const s = streams({ hello: true })
    const steps: string[] = []
    const started = await startRunner({ ...s, start: (c) => void steps.push(c.open ? 'start: connection open' : 'start: closed'), helloTimeoutMs: 5000, failure: 'the sandbox runner did not start', stderrLabel: 'its stderr' })
    expect(steps).toEqual(['start: connection open'])
    expect(started.connection.open).toBe(true)
    s.stderr.write('a warning\n')
    await new Promise((r) => setImmediate(r))
    expect(started.stderr()).toBe('a warning\n')
    started.connection.close()
  })

  it('fails with the sandbox_error that names what did not start and ends with the tail of its stderr, and aborts it', async () => {
    const s = streams({ hello: false })
    let aborted = 0
    s.stderr.write('x'.repeat(5000) + 'node: not found\n')
    const failed = startRunner({ ...s, helloTimeoutMs: 50, failure: 'the bubblewrap sandbox did not start', stderrLabel: 'bwrap said', abort: () => void aborted++ })
    const err = await failed.catch((e: unknown) => e)
    expect(err).toBeInstanceOf(CorralError)
    expect((err as CorralError).code).toBe('sandbox_error')
    expect((err as Error).message).toMatch(/^the bubblewrap sandbox did not start: the sandbox runner did not answer hello within 50 ms; bwrap said: x+node: not found$/)
    // Only the last 2000 characters of stderr are kept.
    expect((err as Error).message.split('bwrap said: ')[1]).toHaveLength(2000 - 1)
    expect(aborted).toBe(1)
  })

  it('says nothing of stderr when the runner wrote none', async () => {
    const err = await startRunner({ ...streams({ hello: false }), helloTimeoutMs: 50, failure: 'the sandbox runner did not start', stderrLabel: 'its stderr' }).catch((e: unknown) => e)
    expect((err as Error).message).toBe('the sandbox runner did not start: the sandbox runner did not answer hello within 50 ms')
  })

  it('throws what the start step throws, as it is, without waiting for a hello', async () => {
    const refused = new CorralError('sandbox_error', 'docker start failed: no such image')
    const err = await startRunner({
      ...streams({ hello: true }),
      start: () => Promise.reject(refused),
      helloTimeoutMs: 5000,
      failure: 'the sandbox runner did not start',
      stderrLabel: 'its stderr',
    }).catch((e: unknown) => e)
    expect(err).toBe(refused)
  })
})
