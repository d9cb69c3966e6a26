import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { REPLY_TO, replySchema, RUNNER_OPS } from '../../../src/main/hands/runner/protocol'

const RUNNER = readFileSync(new URL('../../../resources/sandbox/runner.js', import.meta.url), 'utf8')

/** The `case 'op':` bodies of runner.js's dispatch(req) switch, by op. */
function dispatchCases(): Map<string, string> {
  const start = RUNNER.indexOf('async function dispatch(req)')
  if (start === -1) throw new Error('runner.js has no dispatch(req)')
  const end = RUNNER.indexOf('default:', start)
  const body = RUNNER.slice(start, end)
  const cases = new Map<string, string>()
  const re = /case '([a-z_]+)':/g
  const found = [...body.matchAll(re)]
  found.forEach((m, i) => cases.set(m[1]!, body.slice(m.index! + m[0].length, found[i + 1]?.index ?? body.length)))
  return cases
}

describe('the runner protocol on the host (hands/runner/protocol.ts)', () => {
  it('has one request variant for each op runner.js serves, and no other', () => {
    expect([...dispatchCases().keys()].sort()).toEqual([...RUNNER_OPS].sort())
  })

  it('expects for each op the reply type runner.js answers it with', () => {
    const cases = dispatchCases()
    for (const [op, expected] of Object.entries(REPLY_TO)) {
      const body = op === 'call' ? RUNNER.slice(RUNNER.indexOf('function startCall(')) : cases.get(op)!
      const sent = /send\(\{ rid: [a-z.]+, type: '([a-z_]+)'/.exec(body)?.[1]
      expect({ op, sent }).toEqual({ op, sent: expected })
    }
    // cancel has no reply of its own: the cancelled call's result answers.
    expect(Object.keys(REPLY_TO)).not.toContain('cancel')
    expect(cases.get('cancel')).not.toMatch(/send\(/)
  })

  it('accepts exactly the reply types runner.js sends', () => {
    const sent = new Set([...RUNNER.matchAll(/send\(\{ rid: [a-z.]+, type: '([a-z_]+)'/g)].map((m) => m[1]))
    const accepted = new Set(replySchema.options.map((o) => o.shape.type.value))
    expect([...accepted].sort()).toEqual([...sent].sort())
  })
})
