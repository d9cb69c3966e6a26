import { describe, expect, it } from 'vitest'
import { byLastActivity } from '../../../src/renderer/src/features/sessions/order'
import type { Session } from '../../../src/renderer/src/api/types'

const s = (id: string, created: string, updated: string) => ({ id, created_at: created, updated_at: updated }) as unknown as Session

describe('byLastActivity', () => {
  it('puts the session with the latest activity first, whatever order they were created in', () => {
    const list = [s('new-quiet', '2026-01-03T00:00:00Z', '2026-01-03T00:00:00Z'), s('old-busy', '2026-01-01T00:00:00Z', '2026-01-05T00:00:00Z'), s('mid', '2026-01-02T00:00:00Z', '2026-01-04T00:00:00Z')]
    expect(byLastActivity(list).map((x) => x.id)).toEqual(['old-busy', 'mid', 'new-quiet'])
    expect(list[0].id).toBe('new-quiet') // the input is not reordered
  })

  it('orders sessions with the same last activity newest created first', () => {
    const list = [s('a', '2026-01-01T00:00:00Z', '2026-01-09T00:00:00Z'), s('b', '2026-01-02T00:00:00Z', '2026-01-09T00:00:00Z')]
    expect(byLastActivity(list).map((x) => x.id)).toEqual(['b', 'a'])
  })
})
