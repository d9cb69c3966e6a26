import { describe, expect, it } from 'vitest'
import { SseParser } from '../../../src/renderer/src/api/sse'

describe('SseParser', () => {
  it('parses events split across arbitrary chunk boundaries', () => {
    const wire = 'event: agent.message\nid: 7\ndata: {"a":1}\n\n: keep-alive\n\nevent: event_delta\ndata: {"b":2}\n\n'
    for (let cut = 1; cut < wire.length; cut++) {
      const p = new SseParser()
      const got = [...p.push(wire.slice(0, cut)), ...p.push(wire.slice(cut))]
      expect(got).toEqual([
        { event: 'agent.message', id: '7', data: '{"a":1}' },
        { event: 'event_delta', id: '7', data: '{"b":2}' },
      ])
    }
  })

  it('accepts CRLF and CR line ends, joins multi-line data and skips comments', () => {
    const p = new SseParser()
    expect(p.push('data: one\r\ndata: two\r\r: note\n\nevent: x\rdata:three\n\n')).toEqual([
      { event: 'message', data: 'one\ntwo' },
      { event: 'x', data: 'three' },
    ])
  })

  it('holds a trailing CR until it knows whether an LF follows', () => {
    const p = new SseParser()
    expect(p.push('data: a\r')).toEqual([])
    expect(p.push('\n\r\n')).toEqual([{ event: 'message', data: 'a' }])
  })
})
