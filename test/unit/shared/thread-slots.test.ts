import { describe, expect, it } from 'vitest'
import { countChildSlots, holdsChildSlot, MAX_LIVE_CHILD_THREADS } from '../../../src/shared/api/thread-slots'

describe('the child-thread slot rule', () => {
  it('gives a slot to every child not terminated, idle ones included, and the limit is 25', () => {
    expect(MAX_LIVE_CHILD_THREADS).toBe(25)
    expect(holdsChildSlot({ parentThreadId: 'sthr_p', status: 'running', agentType: 'agent' })).toBe(true)
    expect(holdsChildSlot({ parentThreadId: 'sthr_p', status: 'idle', agentType: 'inline', workflowRunId: null })).toBe(true)
  })

  it('gives none to the primary, a terminated (archived) child, an advisor consultation or a workflow-run thread', () => {
    expect(holdsChildSlot({ parentThreadId: null, status: 'running' })).toBe(false)
    expect(holdsChildSlot({ parentThreadId: 'sthr_p', status: 'terminated' })).toBe(false)
    expect(holdsChildSlot({ parentThreadId: 'sthr_p', status: 'idle', agentType: 'advisor' })).toBe(false)
    expect(holdsChildSlot({ parentThreadId: 'sthr_p', status: 'idle', workflowRunId: 'wrun_1' })).toBe(false)
    expect(countChildSlots([{ parentThreadId: null, status: 'idle' }, { parentThreadId: 'sthr_p', status: 'idle' }, { parentThreadId: 'sthr_p', status: 'terminated' }])).toBe(1)
  })
})
