import { describe, expect, it } from 'vitest'
import type { Session } from '../../../src/shared/api/types'
import type { LoggedEvent } from '../../../src/main/session/event-log'
import { renderTranscript } from '../../../src/main/session/dream-transcript'

const session = { id: 'sesn_1', title: 'Fix the build', created_at: '2026-12-01T10:00:00.000Z', agent: { name: 'coder' } } as unknown as Session
const ev = (e: Record<string, unknown>) => ({ processed_at: '2026-12-01T10:00:01.000Z', ...e }) as unknown as LoggedEvent

describe('a session transcript for a dream', () => {
  it('shows messages, tool calls and results in order, names threads, leaves other events out, and shortens long tool text', () => {
    const text = renderTranscript(session, [
      ev({ type: 'user.message', content: [{ type: 'text', text: 'make it pass' }, { type: 'image', source: {} }] }),
      ev({ type: 'span.model_request_start' }),
      ev({ type: 'agent.tool_use', name: 'bash', input: { command: 'npm test' } }),
      ev({ type: 'agent.tool_result', is_error: true, content: [{ type: 'text', text: 'x'.repeat(2500) }] }),
      ev({ type: 'agent.message', session_thread_id: 'sthr_c', content: [{ type: 'text', text: 'done' }] }),
    ])
    expect(text).toBe(
      [
        '# Session sesn_1: Fix the build',
        '',
        'Agent: coder. Created 2026-12-01T10:00:00.000Z.',
        '',
        '## User (2026-12-01T10:00:01.000Z)',
        '',
        'make it pass\n[image]',
        '',
        '### Tool call: bash',
        '',
        '{"command":"npm test"}',
        '',
        '### Tool result (error)',
        '',
        `${'x'.repeat(2000)}… (500 more characters)`,
        '',
        '## Agent [thread sthr_c] (2026-12-01T10:00:01.000Z)',
        '',
        'done',
        '',
      ].join('\n'),
    )
  })

  it('stops at its size and says how many entries were left out', () => {
    const events = Array.from({ length: 50 }, (_, i) => ev({ type: 'user.message', content: [{ type: 'text', text: `message ${i} ${'y'.repeat(80)}` }] }))
    const text = renderTranscript(session, events, 1_000)
    expect(Buffer.byteLength(text)).toBeLessThan(1_100)
    const shown = text.match(/## User/g)!.length
    expect(shown).toBeGreaterThan(3)
    expect(text).toContain(`(The transcript is cut here: ${50 - shown} more entries are not shown.)`)
  })
})
