/**
 * The confirmation queue's pure parts: where an item comes from (thread and agent), and the answer
 * it posts. No React, no DOM.
 */
import type { ToolItem } from '../thread/timeline'

/** The child thread a pending call comes from (absent: the primary thread, the session's own agent). */
export interface PendingThread {
  id: string
  /** The agent that runs the thread, as its `session.thread_created` / status events name it. */
  agentName: string
}

/** One thing waiting for the person, anywhere: a tool call to approve or a custom tool to answer. */
export interface PendingItem {
  sessionId: string
  sessionTitle: string
  tool: ToolItem
  thread?: PendingThread
}

/** "…a1b2c3": a thread id short enough to read, long enough to tell two apart. */
export function shortThreadId(id: string): string {
  return id.length > 10 ? `…${id.slice(-6)}` : id
}

/**
 * Where the queue says a call comes from: "researcher · thread …a1b2c3" for a child thread's
 * call, undefined for the session's own agent (the primary thread).
 */
export function queueThreadLabel(item: Pick<PendingItem, 'thread'>): string | undefined {
  if (!item.thread) return undefined
  return `${item.thread.agentName} · thread ${shortThreadId(item.thread.id)}`
}

/**
 * The thread a pending call comes from: the call's own `session_thread_id` (the cross-posted
 * copy keeps it), named by the agent its thread events gave; undefined for the primary's calls.
 */
export function pendingThreadOf(tool: Pick<ToolItem, 'threadId'>, agentOf: (threadId: string) => string | undefined): PendingThread | undefined {
  if (!tool.threadId) return undefined
  return { id: tool.threadId, agentName: agentOf(tool.threadId) ?? 'subagent' }
}

/**
 * The event that answers a pending item, for `POST /v1/sessions/{id}/events`: a
 * `user.tool_confirmation` (allow / deny with an optional message; Corral's allow-for-session on
 * a bash call), or for a custom tool its `user.custom_tool_result` (the message is the result, a
 * deny marks it an error). It names only the call: the engine routes the answer to the call's
 * thread by its id, so no `session_thread_id` is sent (the API's params have none).
 */
export function answerEvent(item: Pick<PendingItem, 'tool'>, result: 'allow' | 'deny', denyMessage?: string, scope?: 'session'): Record<string, unknown> {
  if (item.tool.source === 'custom') {
    return { type: 'user.custom_tool_result', custom_tool_use_id: item.tool.id, content: [{ type: 'text', text: denyMessage || (result === 'allow' ? 'ok' : 'declined') }], is_error: result === 'deny' }
  }
  return {
    type: 'user.tool_confirmation',
    tool_use_id: item.tool.id,
    result,
    ...(result === 'deny' && denyMessage ? { deny_message: denyMessage } : {}),
    // Corral addition: this exact command runs without asking for the rest of the session.
    ...(result === 'allow' && scope === 'session' ? { corral_allow_for_session: true } : {}),
  }
}
