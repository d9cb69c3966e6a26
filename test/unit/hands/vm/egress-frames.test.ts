import { createRequire } from 'node:module'
import { describe, expect, it } from 'vitest'
import { EGRESS_FRAME, egressPortArgs } from '../../../../src/main/hands/vm/egress-bridge'

const guest = createRequire(import.meta.url)('../../../../src/main/hands/vm/guest/egress-bridge.js') as {
  HEADER: number
  MAX_PAYLOAD: number
  WINDOW: number
  VERSION: number
  TYPES: Record<string, number>
  frame: (type: number, id: number, payload?: Buffer) => Buffer
  FrameReader: new () => { push(chunk: Buffer): { type: number; id: number; payload: Buffer }[] }
}

describe('the egress frame protocol', () => {
  it('has the same header size, payload cap, window, version and frame types on the guest and the host', () => {
    expect({ HEADER: guest.HEADER, MAX_PAYLOAD: guest.MAX_PAYLOAD, WINDOW: guest.WINDOW, VERSION: guest.VERSION, TYPES: guest.TYPES }).toEqual(EGRESS_FRAME)
  })

  it('reassembles frames split at any byte, in the guest reader', () => {
    const bytes = Buffer.concat([guest.frame(2, 7), guest.frame(3, 7, Buffer.from('hello')), guest.frame(6, 7, Buffer.from('why'))])
    const reader = new guest.FrameReader()
    const frames = [...bytes].flatMap((b) => reader.push(Buffer.from([b])))
    expect(frames.map((f) => [f.type, f.id, f.payload.toString()])).toEqual([
      [2, 7, ''],
      [3, 7, 'hello'],
      [6, 7, 'why'],
    ])
  })

  it('refuses in the guest reader a frame type it does not know and a payload over the cap', () => {
    expect(() => new guest.FrameReader().push(Buffer.from([42, 0, 0, 0, 1, 0, 0, 0, 0]))).toThrow(/unknown frame type 42/)
    expect(() => new guest.FrameReader().push(Buffer.from([3, 0, 0, 0, 1, 0, 1, 0, 1]))).toThrow(/over 65536/)
  })

  it('wires the egress port as a QEMU chardev socket on a virtserialport named corral.egress', () => {
    expect(egressPortArgs('/run/x/egress.sock')).toEqual(['-chardev', 'socket,id=corral_egress,path=/run/x/egress.sock,server=on,wait=off', '-device', 'virtserialport,chardev=corral_egress,name=corral.egress'])
    expect(() => egressPortArgs('/run/a,b/egress.sock')).toThrow(/may not contain a comma/)
  })
})
