/**
 * What the primary's timeline says of a delegation and of a report: the compact cards that link
 * to the thread. Pure (the Timeline row draws it), so the words are tested without a DOM.
 */
import type { DelegationItem, ReportItem, TimelineItem } from './timeline'

export interface ThreadCardView {
  /** 'delegation' or 'report': the card's look. */
  tone: 'delegation' | 'report'
  /** The card's first line: "Delegated to researcher", "Follow-up to researcher", "Report from researcher", "Consulted the advisor", "Advice from the advisor". */
  title: string
  /** The agent the card is about, as the thread tree names it. */
  agentName: string
  /** The thread the card links to. */
  threadId: string
  /** The task or the report; empty while a delegation's task has not been folded yet. */
  body: string
  /** The link's tooltip: "Open researcher's thread" (its text reads "Open thread" inside the card named by `title`). */
  linkLabel: string
}

/** The card of a delegation or a report (see DelegationItem, ReportItem). */
export function threadCardView(item: DelegationItem | ReportItem): ThreadCardView {
  const base = { agentName: item.agentName, threadId: item.threadId }
  if (item.kind === 'report' && item.from === 'advisor') {
    return { ...base, tone: 'report', title: 'Advice from the advisor', body: item.text, linkLabel: 'Open the advisor consultation' }
  }
  if (item.kind === 'report') {
    return { ...base, tone: 'report', title: `Report from ${item.agentName}`, body: item.text, linkLabel: `Open ${item.agentName}'s thread` }
  }
  if (item.target === 'advisor') {
    return { ...base, tone: 'delegation', title: 'Consulted the advisor', body: item.task ?? '', linkLabel: 'Open the advisor consultation' }
  }
  const title = item.followUp ? `Follow-up to ${item.agentName}` : item.target === 'workflow' ? `Workflow started ${item.agentName}` : `Delegated to ${item.agentName}`
  return { ...base, tone: 'delegation', title, body: item.task ?? '', linkLabel: `Open ${item.agentName}'s thread` }
}

/**
 * On a child's own timeline: the message it received (its task, a follow-up) or sent (its
 * report). The other side is the lead when the event names no agent (the API leaves the
 * primary's name out).
 */
export function threadMessageView(item: Extract<TimelineItem, { kind: 'thread_message' }>): { title: string; linkLabel: string } {
  const other = item.agentName || undefined
  if (item.fromRun && item.direction === 'received') return { title: 'Task from the workflow run', linkLabel: "Open the lead's thread, where the run's card is" }
  if (item.direction === 'received') return { title: other ? `Message from ${other}` : 'Task from the lead', linkLabel: other ? `Open ${other}'s thread` : 'Open the primary thread' }
  return { title: other ? `Message to ${other}` : 'Report to the lead', linkLabel: other ? `Open ${other}'s thread` : 'Open the primary thread' }
}
