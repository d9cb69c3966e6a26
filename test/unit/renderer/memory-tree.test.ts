import { describe, expect, it } from 'vitest'
import { actorLabel, memoryTree } from '../../../src/renderer/src/features/memory/memory-tree'

describe('memoryTree', () => {
  it('lists each folder once before what it holds, in path order, with depths', () => {
    const rows = memoryTree([
      { id: 'mem_3', path: '/todo.md' },
      { id: 'mem_1', path: '/projects/corral/decisions.md' },
      { id: 'mem_2', path: '/projects/corral/api.md' },
      { id: 'mem_4', path: '/projects/other.md' },
    ])
    expect(rows.map((r) => `${'  '.repeat(r.depth)}${r.name}${r.kind === 'folder' ? '/' : ''}`)).toEqual(['projects/', '  corral/', '    api.md', '    decisions.md', '  other.md', 'todo.md'])
  })
})

describe('actorLabel', () => {
  it('names a session writer and links to its session, and the local API token as you', () => {
    expect(actorLabel({ type: 'session_actor', session_id: 'sesn_1' })).toEqual({ text: 'session sesn_1', sessionId: 'sesn_1' })
    expect(actorLabel({ type: 'api_actor', api_key_id: 'apikey_corral_local' })).toEqual({ text: 'you (Corral API token)' })
    expect(actorLabel(null)).toEqual({ text: 'unknown' })
  })
})
