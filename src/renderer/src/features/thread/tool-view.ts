/**
 * What a tool card shows, as pure functions of the folded call (no DOM, no React): its state,
 * the one-line summary, and the terminal text a person reads. The stored result is written for
 * the model (notes in brackets about exit codes, kills, where the full output is saved inside the
 * sandbox); the card shows the output and says the rest with its own pills.
 */
import { toolsetEntry } from '../../../../shared/tools/toolset'
import type { TextRanges } from '../../ui/ansi'
import type { ToolItem, TimelineItem } from './timeline'

export type ToolState = 'awaiting' | 'denied' | 'running' | 'error' | 'done' | 'interrupted' | 'stale'

export const STATE_LABEL: Record<ToolState, string> = {
  awaiting: 'Waiting for you',
  denied: 'Denied',
  running: 'Running',
  error: 'Error',
  done: 'Done',
  interrupted: 'Interrupted',
  stale: 'No result',
}

/** The call's state: an interrupted call is `interrupted`, never an error; no result on an idle session is `stale`. */
export function toolState(t: ToolItem, sessionIdle: boolean): ToolState {
  if (t.confirmation?.result === 'deny') return 'denied'
  if (t.result) return t.result.interrupted ? 'interrupted' : t.result.isError ? 'error' : 'done'
  if ((t.permission === 'ask' && !t.confirmation) || t.source === 'custom') return 'awaiting'
  return sessionIdle ? 'stale' : 'running'
}

/** One line that says what the call does: the command, the file, the pattern (the toolset table's summary), else its input as JSON. */
export function toolSummary(t: ToolItem): string {
  const entry = toolsetEntry(t.name)
  if (entry) return entry.summary(t.input)
  const s = JSON.stringify(t.input)
  return s.length > 120 ? `${s.slice(0, 117)}…` : s
}

/** The runner's notes for the model: one bracketed line each at the end of a bash result. */
const NOTE_LINE = /^\[(?:timed out after|interrupted|stopped:|killed by|exit code|the shell (?:did not return|exited)|Interrupted by the user|Corral shut down)[^\n]*\]$/
const TRUNCATION = /\n*\[\.\.\. output truncated: (\d+) bytes in total, showing the first (\d+) and the last (\d+) bytes;[^\n]*\.\.\.\]\n*/g
/** The shell's notice that a job of the call was killed, naming the runner's script file. */
const JOB_NOTICE = /^\/\S*\/cmd-\d+\.sh: line \d+: +\d+ (?:Killed|Terminated|Hangup|Interrupt|Quit|Aborted)\b.*$/
const HARNESS_NOTES = [/^Interrupted by the user while running; it may have partly run\.$/, /^Not run: the user (?:interrupted the turn|sent a new message)[^\n]*$/]

/** A note line's parts: split at '; ' outside parentheses. */
function splitNotes(line: string): string[] {
  const parts: string[] = []
  let depth = 0
  let from = 0
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]
    if (ch === '(') depth++
    else if (ch === ')') depth = Math.max(0, depth - 1)
    else if (ch === ';' && depth === 0 && line[i + 1] === ' ') {
      parts.push(line.slice(from, i))
      from = i + 2
    }
  }
  parts.push(line.slice(from))
  return parts
}

export interface TerminalView {
  /** The output as the command wrote it. */
  text: string
  /** The parts of `text` the command wrote to stderr ([from, to), ascending); absent when none. */
  stderr?: [number, number][]
  /** What the notes said, for a person (exit codes and interrupts are shown as pills instead). */
  notes: string[]
}

/**
 * The part of a bash result a person reads in the terminal: the output without the model-facing
 * notes (exit code, kill reason, the shell restarted), and a truncation note without the path
 * inside the sandbox. Notes other than the exit code and an interrupt are kept, reworded.
 */
export function terminalView(text: string, stderr: TextRanges = []): TerminalView {
  const notes: string[] = []
  const lines = text.split('\n')
  while (lines.length > 0) {
    const last = lines[lines.length - 1]
    if (NOTE_LINE.test(last)) {
      lines.pop()
      for (const part of splitNotes(last.slice(1, -1))) {
        if (/^(exit code \d+|interrupted: .*|Interrupted by the user.*)$/.test(part)) continue
        notes.unshift(part.replace(/\s*\(exit \d+[^)]*\)/, '').replace(/: the command's processes were killed$/, ''))
      }
    } else if (HARNESS_NOTES.some((re) => re.test(last)) || JOB_NOTICE.test(last)) lines.pop()
    else break
  }
  const kept = lines.join('\n')
  // The body is the kept text with each truncation note reworded; a stderr range moves with the
  // text around it, and what falls in a note is no longer stderr.
  let body = ''
  let from = 0
  const moved: [number, number][] = []
  const carry = (a: number, b: number) => {
    for (const [s, e] of stderr) {
      const x = Math.max(s, a)
      const y = Math.min(e, b)
      if (y > x) moved.push([body.length + x - a, body.length + y - a])
    }
  }
  for (const m of kept.matchAll(TRUNCATION)) {
    const at = m.index ?? 0
    carry(from, at)
    body += kept.slice(from, at)
    body += `\n… ${Number(m[1]) - Number(m[2]) - Number(m[3])} bytes not shown (${m[1]} in total) …\n`
    from = at + m[0].length
  }
  carry(from, kept.length)
  body += kept.slice(from)
  return moved.length ? { text: body, notes, stderr: moved } : { text: body, notes }
}

/**
 * Which turn each tool call belongs to (the id of the user message or turn divider before it),
 * and for the first call of a turn with more than one, how many the turn has: the card that
 * carries the turn's "expand all" control.
 */
export function toolTurns(items: readonly TimelineItem[]): Map<string, { turn: string; first: boolean; count: number }> {
  const out = new Map<string, { turn: string; first: boolean; count: number }>()
  let turn = ''
  let group: { turn: string; first: boolean; count: number }[] = []
  const close = () => {
    for (const g of group) g.count = group.length
    group = []
  }
  for (const it of items) {
    if (it.kind === 'user' || it.kind === 'turn') {
      close()
      turn = it.id
    } else if (it.kind === 'tool') {
      const entry = { turn: turn || `start:${it.id}`, first: group.length === 0, count: 0 }
      if (!turn) turn = entry.turn
      group.push(entry)
      out.set(it.id, entry)
    }
  }
  close()
  return out
}

/** The text of a timeline row that find-in-session searches: what the row shows. */
export function rowText(item: TimelineItem): string {
  switch (item.kind) {
    case 'user':
    case 'agent':
    case 'thinking':
    case 'thread_message':
      return item.text
    case 'tool':
      return `${item.name} ${toolSummary(item)} ${item.result?.text ?? item.live ?? ''}`
    case 'delegation':
      return `${item.agentName} ${item.task ?? ''}`
    case 'report':
      return `${item.agentName} ${item.text}`
    case 'note':
      return `${item.label} ${item.text}`
    case 'error':
      return `${item.errorType} ${item.message}`
    default:
      return ''
  }
}

/** Indexes of the rows whose text contains `query` (case-insensitive), oldest first; none for an empty query. */
export function findRows(items: readonly TimelineItem[], query: string): number[] {
  const q = query.trim().toLowerCase()
  if (!q) return []
  const out: number[] = []
  items.forEach((it, i) => {
    if (rowText(it).toLowerCase().includes(q)) out.push(i)
  })
  return out
}
