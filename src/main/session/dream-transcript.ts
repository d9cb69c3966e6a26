import type { Session } from '../../shared/api/types'
import type { LoggedEvent } from './event-log'

/** A transcript's largest size: past it, the rest of the session is left out and the cut said. */
export const MAX_TRANSCRIPT_BYTES = 2_000_000
/** A tool call's input or result longer than this is shortened (what it did matters, not every byte). */
const MAX_TOOL_TEXT = 2_000

/** The event types a transcript shows: what was said and what was done. */
export const TRANSCRIPT_EVENT_TYPES = [
  'user.message',
  'agent.message',
  'agent.tool_use',
  'agent.tool_result',
  'agent.mcp_tool_use',
  'agent.mcp_tool_result',
  'agent.custom_tool_use',
  'user.custom_tool_result',
  'agent.thread_message_sent',
  'agent.thread_message_received',
  'session.thread_created',
] as const

interface Block {
  type?: string
  text?: string
  content?: unknown
}

function blocksText(content: unknown): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  return (content as Block[])
    .map((b) => (b?.type === 'text' && typeof b.text === 'string' ? b.text : b?.type ? `[${b.type}]` : ''))
    .filter(Boolean)
    .join('\n')
}

function shorten(text: string, max = MAX_TOOL_TEXT): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${(text.length - max).toLocaleString('en-US')} more characters)`
}

/** One event as transcript lines, or undefined for an event a transcript does not show. */
function eventLines(e: Record<string, unknown>): string | undefined {
  const thread = typeof e.session_thread_id === 'string' ? ` [thread ${e.session_thread_id}]` : ''
  const at = typeof e.processed_at === 'string' ? ` (${e.processed_at})` : ''
  switch (e.type) {
    case 'user.message':
      return `## User${thread}${at}\n\n${blocksText(e.content)}`
    case 'agent.message':
      return `## Agent${thread}${at}\n\n${blocksText(e.content)}`
    case 'agent.tool_use':
    case 'agent.mcp_tool_use':
    case 'agent.custom_tool_use': {
      const server = typeof e.mcp_server_name === 'string' ? ` on ${e.mcp_server_name}` : ''
      return `### Tool call${thread}: ${String(e.name)}${server}\n\n${shorten(JSON.stringify(e.input ?? {}))}`
    }
    case 'agent.tool_result':
    case 'agent.mcp_tool_result':
    case 'user.custom_tool_result':
      return `### Tool result${thread}${e.is_error === true ? ' (error)' : ''}\n\n${shorten(blocksText(e.content))}`
    case 'agent.thread_message_sent':
      return `### Message to thread ${String(e.to_session_thread_id ?? '')}${thread}\n\n${blocksText(e.content)}`
    case 'agent.thread_message_received':
      return `### Message from thread ${String(e.from_session_thread_id ?? '')}${thread}\n\n${blocksText(e.content)}`
    case 'session.thread_created':
      return `### Thread ${String(e.session_thread_id)} started (agent ${String(e.agent_name ?? '')})`
    default:
      return undefined
  }
}

/**
 * A session's transcript as Markdown, for a dream to read: its messages, tool calls and their
 * results (shortened), in order; at most `maxBytes`, the cut said where it falls.
 */
export function renderTranscript(session: Session, events: Iterable<LoggedEvent>, maxBytes = MAX_TRANSCRIPT_BYTES): string {
  const head = [`# Session ${session.id}${session.title ? `: ${session.title}` : ''}`, '', `Agent: ${session.agent.name}. Created ${session.created_at}.`].join('\n')
  const parts = [head]
  let bytes = Buffer.byteLength(head)
  let left = 0
  for (const event of events) {
    const lines = eventLines(event as unknown as Record<string, unknown>)
    if (lines === undefined) continue
    if (left > 0) {
      left++
      continue
    }
    const size = Buffer.byteLength(lines) + 2
    if (bytes + size > maxBytes) {
      left = 1
      continue
    }
    parts.push(lines)
    bytes += size
  }
  if (left > 0) parts.push(`(The transcript is cut here: ${left.toLocaleString('en-US')} more entries are not shown.)`)
  return `${parts.join('\n\n')}\n`
}
