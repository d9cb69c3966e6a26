import { describe, expect, it } from 'vitest'
import { hasIdShape, newId, primaryThreadId } from '../../../src/shared/api/ids'

describe('ids', () => {
  it('makes ids of prefix, 10 time characters and 16 random ones, all distinct across many refills of the random pool', () => {
    const ids = Array.from({ length: 5000 }, () => newId('event', 1_700_000_000_000))
    expect(new Set(ids).size).toBe(5000)
    for (const id of ids.slice(0, 50)) {
      expect(id).toMatch(/^sevt_[0-9A-HJKMNP-TV-Z]{26}$/)
      expect(hasIdShape('event', id)).toBe(true)
    }
    // the random part is not one pool's bytes repeated: the last ids differ from the first ones
    expect(ids.slice(-256).some((id) => ids.slice(0, 256).includes(id))).toBe(false)
  })

  it('sorts ids by creation time, and names the primary thread after the session', () => {
    const a = newId('session', 1_700_000_000_000)
    const b = newId('session', 1_700_000_000_001)
    expect([b, a].sort()).toEqual([a, b])
    expect(primaryThreadId(a)).toBe('sthr_' + a.slice('sesn_'.length))
  })
})
