/**
 * An incremental parser for text/event-stream (the WHATWG rules that matter here): feed it
 * chunks as they arrive; it returns each complete message. Comments (`: keep-alive`) are
 * skipped, `data:` lines are joined with '\n', CR, LF and CRLF all end a line.
 */
export interface SseMessage {
  event: string
  data: string
  id?: string
}

export class SseParser {
  private buffer = ''
  private event = ''
  private data: string[] = []
  private id: string | undefined

  /** Feeds a chunk; returns the messages it completed (possibly none). */
  push(chunk: string): SseMessage[] {
    this.buffer += chunk
    const out: SseMessage[] = []
    let start = 0
    for (let i = 0; i < this.buffer.length; i++) {
      const ch = this.buffer.charCodeAt(i)
      if (ch !== 10 && ch !== 13) continue
      // A CR at the very end may be the first half of a CRLF: wait for the next chunk.
      if (ch === 13 && i === this.buffer.length - 1) break
      const line = this.buffer.slice(start, i)
      if (ch === 13 && this.buffer.charCodeAt(i + 1) === 10) i++
      start = i + 1
      const msg = this.line(line)
      if (msg) out.push(msg)
    }
    this.buffer = this.buffer.slice(start)
    return out
  }

  private line(line: string): SseMessage | undefined {
    if (line === '') {
      if (this.data.length === 0) {
        this.event = ''
        return undefined
      }
      const msg: SseMessage = { event: this.event || 'message', data: this.data.join('\n'), ...(this.id !== undefined ? { id: this.id } : {}) }
      this.event = ''
      this.data = []
      return msg
    }
    if (line.startsWith(':')) return undefined
    const colon = line.indexOf(':')
    const field = colon === -1 ? line : line.slice(0, colon)
    let value = colon === -1 ? '' : line.slice(colon + 1)
    if (value.startsWith(' ')) value = value.slice(1)
    if (field === 'event') this.event = value
    else if (field === 'data') this.data.push(value)
    else if (field === 'id' && !value.includes('\0')) this.id = value
    return undefined
  }
}
