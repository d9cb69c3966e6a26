import { PassThrough } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { RunnerClosedError, RunnerConnection, RunnerMalformedError } from '../../../src/main/hands/runner/connection'

/** A scripted runner on the far end of two in-memory streams. */
function fakeRunner(answer: (req: Record<string, unknown>, reply: (msg: Record<string, unknown>) => void) => void) {
  const toRunner = new PassThrough()
  const fromRunner = new PassThrough()
  const requests: Record<string, unknown>[] = []
  let buf = ''
  toRunner.on('data', (d: Buffer) => {
    buf += d.toString()
    let i
    while ((i = buf.indexOf('\n')) >= 0) {
      const req = JSON.parse(buf.slice(0, i)) as Record<string, unknown>
      buf = buf.slice(i + 1)
      requests.push(req)
      answer(req, (msg) => fromRunner.write(JSON.stringify(msg) + '\n'))
    }
  })
  const connection = new RunnerConnection({ input: toRunner, output: fromRunner })
  return { connection, requests, fromRunner }
}

describe('RunnerConnection', () => {
  it('ignores torn lines from an earlier host and answers hello only with the matching nonce', async () => {
    const { connection, fromRunner } = fakeRunner((req, reply) => {
      if (req.op === 'hello') reply({ rid: req.rid, type: 'hello', nonce: req.nonce, pid: 7, version: 1, workspace: '/workspace' })
    })
    fromRunner.write('{"rid":"r1","type":"resu') // half a line a previous attach left behind
    fromRunner.write('\n')
    await expect(connection.hello()).resolves.toMatchObject({ pid: 7, workspace: '/workspace' })
  })

  it('streams a call\'s output to onOutput and resolves with its result', async () => {
    const { connection, requests } = fakeRunner((req, reply) => {
      if (req.op !== 'call') return
      reply({ rid: req.id, type: 'output', data: 'par' })
      reply({ rid: req.id, type: 'output', data: 'tial' })
      reply({ rid: req.id, type: 'result', result: { content: 'partial', isError: false, exitCode: 0 } })
    })
    const chunks: string[] = []
    const result = await connection.call({ toolUseId: 'toolu_1', name: 'bash', input: { command: 'x' }, cap: 1024, onOutput: (c) => chunks.push(c) })
    expect(result).toEqual({ content: 'partial', isError: false, exitCode: 0 })
    expect(chunks).toEqual(['par', 'tial'])
    expect(requests[0]).toMatchObject({ op: 'call', id: 'toolu_1', name: 'bash', cap: 1024, stream: true })
  })

  it('tells each streamed chunk\'s stream to onOutput and passes the result\'s stderr ranges on', async () => {
    const { connection } = fakeRunner((req, reply) => {
      if (req.op !== 'call') return
      reply({ rid: req.id, type: 'output', data: 'out\n' })
      reply({ rid: req.id, type: 'output', data: 'err\n', stream: 'stderr' })
      reply({ rid: req.id, type: 'result', result: { content: 'out\nerr', isError: false, exitCode: 0, stderr: [[4, 7]] } })
    })
    const chunks: [string, string | undefined][] = []
    const result = await connection.call({ toolUseId: 'toolu_s', name: 'bash', input: { command: 'x' }, cap: 1024, onOutput: (c, s) => chunks.push([c, s]) })
    expect(chunks).toEqual([
      ['out\n', 'stdout'],
      ['err\n', 'stderr'],
    ])
    expect(result.stderr).toEqual([[4, 7]])
  })

  it('passes no more streamed output to onOutput than the call\'s cap, whatever the runner sends', async () => {
    const { connection } = fakeRunner((req, reply) => {
      if (req.op !== 'call') return
      for (let i = 0; i < 10; i++) reply({ rid: req.id, type: 'output', data: 'x'.repeat(40) })
      reply({ rid: req.id, type: 'result', result: { content: '', isError: false } })
    })
    let streamed = ''
    await connection.call({ toolUseId: 'toolu_f', name: 'bash', input: {}, cap: 100, onOutput: (c) => (streamed += c) })
    expect(streamed.length).toBe(100)
  })

  it('sends cancel for the call when its AbortSignal fires', async () => {
    const { connection, requests } = fakeRunner((req, reply) => {
      if (req.op === 'cancel') reply({ rid: req.id, type: 'result', result: { content: 'interrupted', isError: true } })
    })
    const ctl = new AbortController()
    const pending = connection.call({ toolUseId: 'toolu_2', name: 'bash', input: {}, signal: ctl.signal })
    ctl.abort()
    await expect(pending).resolves.toMatchObject({ isError: true, content: 'interrupted' })
    expect(requests.map((r) => r.op)).toEqual(['call', 'cancel'])
  })

  it('fails every pending call with RunnerClosedError when the runner\'s output ends', async () => {
    const { connection, fromRunner } = fakeRunner(() => {})
    const a = connection.call({ toolUseId: 'toolu_a', name: 'bash', input: {} })
    const b = connection.call({ toolUseId: 'toolu_b', name: 'read', input: {} })
    fromRunner.end()
    await expect(a).rejects.toBeInstanceOf(RunnerClosedError)
    await expect(b).rejects.toThrow(/connection closed/)
    expect(connection.open).toBe(false)
    await expect(connection.call({ toolUseId: 'toolu_c', name: 'bash', input: {} })).rejects.toBeInstanceOf(RunnerClosedError)
  })

  it('maps a recovery reply to finished, running or unknown', async () => {
    const { connection } = fakeRunner((req, reply) => {
      if (req.op !== 'recover') return
      if (req.id === 'done') reply({ rid: req.rid, type: 'recovery', state: 'finished', result: { content: 'ok', isError: false } })
      else if (req.id === 'busy') reply({ rid: req.rid, type: 'recovery', state: 'running' })
      else reply({ rid: req.rid, type: 'recovery', state: 'unknown' })
    })
    expect(await connection.recover('done')).toEqual({ state: 'finished', result: { content: 'ok', isError: false } })
    expect(await connection.recover('busy')).toEqual({ state: 'running' })
    expect(await connection.recover('lost')).toEqual({ state: 'unknown' })
  })

  it('turns a runner error reply into a sandbox_error', async () => {
    const { connection } = fakeRunner((req, reply) => reply({ rid: req.rid, type: 'error', message: 'path is outside the workspace' }))
    await expect(connection.place({ path: '/etc/x', contentBase64: '' })).rejects.toMatchObject({ code: 'sandbox_error', message: expect.stringContaining('outside the workspace') })
  })

  it('gives up on a request the runner never answers', async () => {
    const { connection } = fakeRunner(() => {})
    await expect(connection.exists('/workspace/x', 30)).rejects.toThrow(/did not answer exists within 30 ms/)
  })

  describe('replies it does not believe (red-team issue #15, finding 9)', () => {
    const malformed: [string, (rid: string) => unknown, RegExp][] = [
      ['an object where the result text belongs', (rid) => ({ rid, type: 'result', result: { content: { text: 'x' }, isError: false } }), /result\.content/],
      ['isError "yes"', (rid) => ({ rid, type: 'result', result: { content: 'x', isError: 'yes' } }), /result\.isError/],
      ['a result past the cap', (rid) => ({ rid, type: 'result', result: { content: 'x'.repeat(64 * 1024), isError: false } }), /a result of 65536 bytes, over the 1024-byte cap/],
      ['a reply of another request\'s type', (rid) => ({ rid, type: 'placed', existed: true }), /a placed reply where result was asked for/],
      ['an unknown reply type', (rid) => ({ rid, type: 'surprise' }), /type/],
      ['a stderr range past the end of its text', (rid) => ({ rid, type: 'result', result: { content: 'abc', isError: false, stderr: [[1, 9]] } }), /result\.stderr\.0/],
      ['stderr ranges out of order', (rid) => ({ rid, type: 'result', result: { content: 'abcdef', isError: false, stderr: [[3, 4], [0, 1]] } }), /result\.stderr\.1/],
      ['an output chunk of an unknown stream', (rid) => ({ rid, type: 'output', data: 'x', stream: 'stdin' }), /stream/],
    ]
    for (const [what, reply, detail] of malformed) {
      it(`closes the connection as malformed when a call is answered with ${what}`, async () => {
        const { connection } = fakeRunner((req, send) => {
          if (req.op === 'call') send(reply(String(req.id)) as Record<string, unknown>)
        })
        const err = await connection.call({ toolUseId: 'toolu_m', name: 'bash', input: {}, cap: 1024 }).catch((e: unknown) => e)
        expect(err).toBeInstanceOf(RunnerMalformedError)
        expect((err as RunnerMalformedError).detail).toMatch(detail)
        expect(connection.open).toBe(false)
        expect(connection.malformedReply).toMatch(detail)
      })
    }

    it('passes on only the protocol\'s fields of a result, never extra ones', async () => {
      const { connection } = fakeRunner((req, send) => {
        if (req.op === 'call') send({ rid: req.id, type: 'result', result: { content: 'ok', isError: false, exitCode: 0, injected: { big: true } } })
      })
      expect(await connection.call({ toolUseId: 'toolu_x', name: 'bash', input: {} })).toEqual({ content: 'ok', isError: false, exitCode: 0 })
    })

    it('holds a recovered result to the same cap as a call\'s', async () => {
      const { connection } = fakeRunner((req, send) => {
        if (req.op === 'recover') send({ rid: req.rid, type: 'recovery', state: 'finished', result: { content: 'y'.repeat(40_000), isError: false } })
      })
      await expect(connection.recover('toolu_r', { cap: 1024 })).rejects.toBeInstanceOf(RunnerMalformedError)
      expect(connection.open).toBe(false)
    })

    it('treats a line that is not JSON after the hello as malformed, but not before it', async () => {
      const { connection, fromRunner } = fakeRunner((req, send) => {
        if (req.op === 'hello') send({ rid: req.rid, type: 'hello', nonce: req.nonce, pid: 1, version: 1, workspace: '/workspace' })
      })
      fromRunner.write('torn half line\n')
      await connection.hello()
      expect(connection.open).toBe(true)
      const pending = connection.call({ toolUseId: 'toolu_j', name: 'bash', input: {} })
      fromRunner.write('not json at all\n')
      await expect(pending).rejects.toBeInstanceOf(RunnerMalformedError)
    })
  })
})
